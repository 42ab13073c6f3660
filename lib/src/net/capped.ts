// Answers of servers a customer (or the model) chose, read within a size limit: a server that keeps sending (an
// endless event stream, a huge JSON) is cut off with an error naming the limit, or, where the start of an answer is
// worth having (a page, a tool's result), read up to the limit and the rest left.
import { AppError } from '../errors.js';
import { storableText } from '../http/text.js';

const tooLarge = (what: string, maxBytes: number) => new AppError('upstream_failed', `${what} sent more than ${maxBytes} bytes in one answer`);

/** The response with a body that fails once more than `maxBytes` have come; its url and redirected kept. */
export function cappedBody(response: Response, maxBytes: number, what: string): Response {
  if (!response.body) return response;
  let seen = 0;
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > maxBytes) controller.error(tooLarge(what, maxBytes));
      else controller.enqueue(chunk);
    },
  });
  const capped = new Response(response.body.pipeThrough(counter), { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperties(capped, { url: { value: response.url }, redirected: { value: response.redirected } });
  return capped;
}

/** The body as text, refused once past `maxBytes`. */
export async function cappedText(response: Response, maxBytes: number, what: string): Promise<string> {
  return cappedBody(response, maxBytes, what).text();
}

/** The start of the body as storable text: at most `maxBytes` of it read, `cut` when there was more. */
export async function readUpTo(response: Response, maxBytes: number): Promise<{ text: string; cut: boolean }> {
  if (!response.body) return { text: '', cut: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size <= maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return { text: storableText(new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks).subarray(0, maxBytes))), cut: size > maxBytes };
}
