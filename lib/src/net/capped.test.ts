import { describe, expect, it } from 'vitest';
import { cappedBody, cappedText, readUpTo } from './capped.js';

/** A response whose body sends `chunks` chunks of 64 KiB, or never ends when `chunks` is Infinity. */
function streaming(chunks: number): Response {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent++ >= chunks) controller.close();
      else controller.enqueue(new Uint8Array(64 * 1024));
    },
  });
  return new Response(body, { status: 200 });
}

describe('capped answers', () => {
  it('pass an answer within the limit whole', async () => {
    expect((await cappedText(streaming(4), 1024 * 1024, 'the server')).length).toBe(4 * 64 * 1024);
  });

  it('cut off an endless answer at the limit, naming it', async () => {
    await expect(cappedText(streaming(Infinity), 1024 * 1024, 'the MCP server')).rejects.toThrow('the MCP server sent more than 1048576 bytes in one answer');
  });

  it('keep where the answer came from', () => {
    const original = streaming(1);
    Object.defineProperties(original, { url: { value: 'https://example.com/after' }, redirected: { value: true } });
    const capped = cappedBody(original, 1024, 'x');
    expect(capped.url).toBe('https://example.com/after');
    expect(capped.redirected).toBe(true);
  });

  it('read the start of a long answer up to the limit, saying it was cut, and a short one whole', async () => {
    const long = await readUpTo(streaming(Infinity), 100_000);
    expect(long.text.length).toBe(100_000);
    expect(long.cut).toBe(true);
    // Its NUL bytes come back as U+FFFD: storable text.
    expect(await readUpTo(streaming(1), 100_000)).toEqual({ text: '\uFFFD'.repeat(64 * 1024), cut: false });
  });
});
