// A project's own Pinecone index (docs/decisions/0047), tried before it is stored: one `describe_index_stats` call
// through `@pinecone-database/pinecone`, every connection made by the URL guard's fetch (the host is the customer's
// to choose), answering the index's dimension. Failures become the error family here, in words that never carry
// the key.
import { Pinecone } from '@pinecone-database/pinecone';
import { AppError, invalidArgument } from '@agentplane/lib/errors';
import { originOf, UPSTREAM_TIMEOUT } from '@agentplane/lib/models/openai-client';
import type { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import { guardedFetcher } from '@agentplane/lib/net/guarded-fetch';
import type { UrlPolicy } from '@agentplane/lib/net/url-guard';

export interface IndexTarget {
  /** Already vetted with checkUrl; the guarded fetch vets every connection again. */
  host: string;
  apiKey: string;
}

/** What the retrieval settings ask of a vector index; tests may pass their own. */
export interface VectorIndexUpstream {
  /** The index's dimension: a real call with the key. */
  describe(target: IndexTarget): Promise<{ dimension: number }>;
}

export class PineconeUpstream implements VectorIndexUpstream {
  constructor(private readonly options: { policy: UrlPolicy; timeoutMs: number; connections?: ConnectionPool }) {}

  async describe(target: IndexTarget): Promise<{ dimension: number }> {
    const { policy, timeoutMs, connections } = this.options;
    const client = new Pinecone({ apiKey: target.apiKey, fetchApi: guardedFetcher({ ...policy, timeoutMs }, connections) });
    let stats: { dimension?: number };
    try {
      stats = await client.index({ host: target.host }).describeIndexStats();
    } catch (error) {
      throw indexError(error, target);
    }
    if (typeof stats.dimension !== 'number' || !Number.isInteger(stats.dimension) || stats.dimension < 1) {
      throw new AppError('upstream_failed', `the index at ${originOf(target.host)} answered describe_index_stats without a dimension`);
    }
    return { dimension: stats.dimension };
  }
}

/** Pinecone's failure as the error family: 400 for what the customer must fix (its key, its host), 502 and 504 for the index. */
function indexError(error: unknown, target: IndexTarget): AppError {
  const origin = originOf(target.host);
  const name = (error as { name?: string }).name;
  // The guarded fetch's own failure is somewhere in the cause chain: a refused address, its timeout, no connection.
  for (let cause: unknown = error; cause; cause = (cause as { cause?: unknown }).cause) {
    if (cause instanceof AppError && cause.kind === 'upstream_timeout') return new AppError('upstream_timeout', UPSTREAM_TIMEOUT);
    if (cause instanceof AppError && cause.kind === 'invalid_argument') return invalidArgument(`vector_index.index_host: ${cause.message}`, { code: cause.code });
  }
  if (name === 'PineconeAuthorizationError') return invalidArgument(`the index at ${origin} refused the API key`, { code: 'provider_rejected' });
  if (name === 'PineconeNotFoundError') return invalidArgument(`no index answers at ${origin}: index_host must be the index's host, from describe_index or the console`, { code: 'provider_rejected' });
  if (name === 'PineconeTimeoutError') return new AppError('upstream_timeout', UPSTREAM_TIMEOUT);
  return new AppError('upstream_failed', `could not use the index at ${origin}`);
}
