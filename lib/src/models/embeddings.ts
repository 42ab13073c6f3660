// The one embeddings call every path makes (ingest, retrieval's query, memory and wiki, the control plane's probe).
// It asks for `float`, which every OpenAI-compatible server speaks, and decodes a base64 answer too: some servers and
// gateways ignore `encoding_format` and answer one form whatever was asked. Left to its default, the openai SDK asks
// for base64 and decodes whatever comes back as base64, so a float array became a vector of a quarter the length.
import type OpenAI from 'openai';
import { AppError } from '../errors.js';

export interface EmbeddingsRequest {
  model: string;
  input: string[];
  signal?: AbortSignal;
}

/**
 * The vectors of `input`, in its order. The SDK's errors (`OpenAI.APIError` and its kin) pass through for the caller
 * to word; an answer that holds no usable vectors is `upstream_failed`.
 */
export async function createEmbeddings(client: OpenAI, request: EmbeddingsRequest): Promise<number[][]> {
  // With `encoding_format` named, the SDK hands the body back as the server sent it (openai 6: it decodes only when
  // it chose base64 itself), so both forms reach `vectorsOf`.
  const response = await client.embeddings.create({ model: request.model, input: request.input, encoding_format: 'float' }, request.signal ? { signal: request.signal } : {});
  return vectorsOf(response, request.model, request.input.length);
}

/** The vectors of an embeddings answer, each a float array or a base64 string of little-endian float32, by index. */
export function vectorsOf(answer: unknown, model: string, expected: number): number[][] {
  const data = (answer as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw malformed(model, 'no data');
  const vectors: number[][] = new Array(expected);
  for (const [position, item] of data.entries()) {
    const entry = item as { index?: unknown; embedding?: unknown } | null;
    // A server that leaves `index` out answers in order.
    const index = typeof entry?.index === 'number' ? entry.index : position;
    if (!Number.isInteger(index) || index < 0 || index >= expected || vectors[index] !== undefined) throw malformed(model, `an embedding at index ${String(entry?.index)}`);
    vectors[index] = vectorOf(entry?.embedding, model);
  }
  const found = vectors.filter((vector) => vector !== undefined).length;
  if (found !== expected) throw new AppError('upstream_failed', `the embedding model '${model}' answered ${found} vectors for ${expected} texts`);
  return vectors;
}

function vectorOf(embedding: unknown, model: string): number[] {
  let vector: number[];
  if (typeof embedding === 'string') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(embedding) || embedding.length % 4 !== 0) throw malformed(model, 'an embedding that is neither a float array nor base64');
    const bytes = Buffer.from(embedding, 'base64');
    if (bytes.length % 4 !== 0) throw malformed(model, `a base64 embedding of ${bytes.length} bytes, not a whole number of float32`);
    vector = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
  } else if (Array.isArray(embedding)) {
    vector = embedding as number[];
  } else {
    throw malformed(model, 'an embedding that is neither a float array nor base64');
  }
  if (vector.length === 0) throw malformed(model, 'an empty embedding');
  // pgvector and every index refuse NaN and infinities; they are the provider's fault, not the caller's.
  if (!vector.every((x) => typeof x === 'number' && Number.isFinite(x))) throw malformed(model, 'an embedding with values that are not finite numbers');
  return vector;
}

const malformed = (model: string, what: string) => new AppError('upstream_failed', `the embedding model '${model}' answered ${what}`);
