// Calls to a customer's provider, through the `openai` SDK with every connection made by the URL guard's fetch
// (pinned to vetted addresses, redirects re-checked): read the model catalog and measure an embedding model's
// dimension. Provider failures become the error family here, in words that never carry the key.
import OpenAI from 'openai';
import { AppError, invalidArgument } from '@agentplane/lib/errors';
import { createEmbeddings } from '@agentplane/lib/models/embeddings';
import { openAIClient, originOf, providerMessage, UPSTREAM_TIMEOUT } from '@agentplane/lib/models/openai-client';
import type { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import type { UrlPolicy } from '@agentplane/lib/net/url-guard';

export interface ProviderTarget {
  /** Already vetted with checkUrl; the guarded fetch vets every connection again. */
  baseUrl: string;
  apiKey: string;
}

/** What the providers service asks of a provider; the real one speaks the OpenAI API, tests may pass their own. */
export interface ProviderUpstream {
  /** Model ids of the catalog (`GET /models`). */
  listModels(target: ProviderTarget): Promise<string[]>;
  /** The length of the vector `model` returns for a short text: a real embeddings call. */
  measureEmbedding(target: ProviderTarget, model: string): Promise<number>;
  /** One small rerank call; throws the provider's refusal (400 `provider_rejected`) or failure. */
  checkRerank(target: ProviderTarget, model: string): Promise<void>;
}

// A catalog larger than this is not a catalog we can show or check against.
const MAX_CATALOG = 10_000;
const PROBE_TEXT = 'agentplane embedding dimension probe';

export class OpenAIUpstream implements ProviderUpstream {
  constructor(private readonly options: { policy: UrlPolicy; timeoutMs: number; connections?: ConnectionPool }) {}

  async listModels(target: ProviderTarget): Promise<string[]> {
    try {
      const ids: string[] = [];
      for await (const model of this.client(target).models.list()) {
        if (typeof model.id === 'string') ids.push(model.id);
        if (ids.length >= MAX_CATALOG) break;
      }
      return ids;
    } catch (error) {
      throw providerError(error, target, 'models');
    }
  }

  async measureEmbedding(target: ProviderTarget, model: string): Promise<number> {
    try {
      // lib's one embeddings call, as ingest makes it: `float` asked for, a base64 answer read too.
      const [vector] = await createEmbeddings(this.client(target), { model, input: [PROBE_TEXT] });
      return vector!.length;
    } catch (error) {
      throw providerError(error, target, 'embeddings');
    }
  }

  /** Makes one small rerank call (`POST /rerank`, the Cohere and Jina shape), so a model that is stored is known to work. */
  async checkRerank(target: ProviderTarget, model: string): Promise<void> {
    let answer: { results?: unknown };
    try {
      answer = await this.client(target).post('/rerank', { body: { model, query: PROBE_TEXT, documents: ['a probe', 'another probe'], top_n: 2 } });
    } catch (error) {
      throw providerError(error, target, 'rerank');
    }
    if (!Array.isArray(answer?.results)) throw new AppError('upstream_failed', `the provider answered the rerank call for '${model}' without results`);
  }

  private client(target: ProviderTarget): OpenAI {
    const { policy, timeoutMs, connections } = this.options;
    return openAIClient(target, { policy, timeoutMs, ...(connections ? { connections } : {}) });
  }
}

/** A provider's failure as the error family: 400 for what the customer must fix, 502 and 504 for the provider. */
function providerError(error: unknown, target: ProviderTarget, call: 'models' | 'embeddings' | 'rerank'): AppError {
  const origin = originOf(target.baseUrl);
  if (error instanceof OpenAI.APIConnectionTimeoutError) return new AppError('upstream_timeout', UPSTREAM_TIMEOUT);
  if (error instanceof OpenAI.APIConnectionError) {
    // The guarded fetch's own failure is the cause: a refused redirect target, its timeout, or no connection.
    const cause = error.cause;
    if (cause instanceof AppError && cause.kind === 'upstream_timeout') return new AppError('upstream_timeout', UPSTREAM_TIMEOUT);
    if (cause instanceof AppError && cause.kind === 'invalid_argument') return invalidArgument(`the provider at ${origin}: ${cause.message}`, { code: cause.code });
    // The connection error stays the cause, for the operator's log (it names no key); the answer does not show it.
    return new AppError('upstream_failed', `could not reach the provider at ${origin}`, cause instanceof AppError ? { cause } : {});
  }
  if (error instanceof OpenAI.APIError && typeof error.status === 'number') {
    const status = error.status;
    const said = providerMessage(error, target.apiKey);
    if (status === 401 || status === 403) return invalidArgument(`the provider refused the API key (${status})${said ? `: ${said}` : ''}`, { code: 'provider_rejected' });
    if (status === 404 && call === 'models') {
      return invalidArgument(`the provider has no model catalog at ${target.baseUrl}/models (404); base_url must be the API root, such as https://api.openai.com/v1`, { code: 'provider_rejected' });
    }
    if (status === 429) return new AppError('upstream_failed', `the provider is rate limiting or out of quota (429)${said ? `: ${said}` : ''}`);
    if (status >= 400 && status < 500) return invalidArgument(`the provider refused the ${call} call (${status})${said ? `: ${said}` : ''}`, { code: 'provider_rejected' });
    return new AppError('upstream_failed', `the provider failed (${status})${said ? `: ${said}` : ''}`);
  }
  if (error instanceof AppError) return error;
  // A body that is not the OpenAI API's (an HTML page, a truncated answer).
  return new AppError('upstream_failed', `the provider at ${origin} did not answer the ${call} call as an OpenAI-compatible API`);
}
