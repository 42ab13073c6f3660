// Embeds texts with the project's own embedding model, through the same URL-guarded, pooled connections as its
// chat models: in batches, a bounded number of batches at once, and with the openai SDK's backoff on 429 and 5xx
// (it honours Retry-After). Ingest, retrieval's query and memory all embed through here, and the call itself is
// lib's `createEmbeddings` (float asked for, base64 read too). A vector of another dimension than the configured one
// fails the call: it could not be compared with the rest of its space.
import type OpenAI from 'openai';
import { AppError } from '@agentplane/lib/errors';
import { createEmbeddings } from '@agentplane/lib/models/embeddings';
import { openAIClient, providerMessage } from '@agentplane/lib/models/openai-client';
import type { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import type { GuardedFetch } from '@agentplane/lib/net/guarded-fetch';
import type { UrlPolicy } from '@agentplane/lib/net/url-guard';
import type { EmbeddingTarget } from '../../tenants/configuration.js';

/** Texts per request: far inside every provider's limit (OpenAI's is 2,048 inputs and 300,000 tokens). */
export const EMBEDDING_BATCH = 64;
/** Requests in flight for one document. */
export const EMBEDDING_CONCURRENCY = 2;
/** The SDK's own retries, with exponential backoff and jitter, on 408, 409, 429 and 5xx. */
const EMBEDDING_RETRIES = 4;

export type Embed = (target: EmbeddingTarget, texts: string[], signal?: AbortSignal) => Promise<number[][]>;

export interface EmbedderOptions {
  urlPolicy: UrlPolicy;
  timeoutMs: number;
  connections?: ConnectionPool;
  /** Replaces the guarded fetch; tests only. */
  fetch?: GuardedFetch;
}

export function createEmbedder(options: EmbedderOptions): Embed {
  const clients = new Map<string, OpenAI>();
  const clientFor = (target: EmbeddingTarget) => {
    const key = `${target.baseUrl}\n${target.apiKey}`;
    let client = clients.get(key);
    if (!client) {
      client = openAIClient(target, {
        policy: options.urlPolicy,
        timeoutMs: options.timeoutMs,
        ...(options.connections ? { connections: options.connections } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      }).withOptions({ maxRetries: EMBEDDING_RETRIES });
      if (clients.size >= 256) clients.delete(clients.keys().next().value!);
      clients.set(key, client);
    }
    return client;
  };

  return async (target, texts, signal) => {
    const client = clientFor(target);
    const batches: string[][] = [];
    for (let i = 0; i < texts.length; i += EMBEDDING_BATCH) batches.push(texts.slice(i, i + EMBEDDING_BATCH));
    const results: number[][][] = new Array(batches.length);
    let next = 0;
    const worker = async () => {
      while (next < batches.length) {
        const index = next++;
        results[index] = await embedBatch(client, target, batches[index]!, signal);
      }
    };
    await Promise.all(Array.from({ length: Math.min(EMBEDDING_CONCURRENCY, batches.length) }, worker));
    return results.flat();
  };
}

async function embedBatch(client: OpenAI, target: EmbeddingTarget, input: string[], signal: AbortSignal | undefined): Promise<number[][]> {
  let vectors: number[][];
  try {
    vectors = await createEmbeddings(client, { model: target.model, input, ...(signal ? { signal } : {}) });
  } catch (error) {
    if (error instanceof AppError) throw error;
    const api = error as InstanceType<typeof OpenAI.APIError>;
    if (typeof api?.status === 'number') {
      throw new AppError(api.status === 429 || api.status >= 500 ? 'upstream_failed' : 'invalid_argument', `the embedding model '${target.model}' answered ${api.status}: ${providerMessage(api, target.apiKey)}`, {
        cause: error,
      });
    }
    throw new AppError('upstream_failed', `the embedding model '${target.model}' could not be reached: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const wrong = vectors.find((vector) => vector.length !== target.dimensions);
  if (wrong) {
    throw new AppError('invalid_argument', `the embedding model '${target.model}' answered vectors of ${wrong.length} dimensions, not the ${target.dimensions} configured: measure it again on the control plane`);
  }
  return vectors;
}
