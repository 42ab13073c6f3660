// Calls to a customer's provider, through the `openai` SDK with every connection made by the URL guard's fetch
// (pinned to vetted addresses, redirects re-checked): read the model catalog and measure an embedding model's
// dimension. Provider failures become the error family here, in words that never carry the key.
import OpenAI from 'openai';
import { AppError, invalidArgument } from '../../../lib/src/errors.js';
import { guardedFetcher } from '../../../lib/src/net/guarded-fetch.js';
import type { UrlPolicy } from '../../../lib/src/net/url-guard.js';

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
}

/** SPEC.md 504: the detail says the upstream request timed out, with no status code in the sentence. */
export const UPSTREAM_TIMEOUT = 'the upstream request timed out';

// A catalog larger than this is not a catalog we can show or check against.
const MAX_CATALOG = 10_000;
const PROBE_TEXT = 'agentplane embedding dimension probe';

export class OpenAIUpstream implements ProviderUpstream {
  constructor(private readonly options: { policy: UrlPolicy; timeoutMs: number }) {}

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
    let vector: unknown;
    try {
      // `float` rather than the SDK's default base64: many OpenAI-compatible servers only speak float.
      const response = await this.client(target).embeddings.create({ model, input: PROBE_TEXT, encoding_format: 'float' });
      vector = response.data?.[0]?.embedding;
    } catch (error) {
      throw providerError(error, target, 'embeddings');
    }
    if (!Array.isArray(vector) || vector.length === 0 || !vector.every((x) => typeof x === 'number')) {
      throw new AppError('upstream_failed', `the provider answered the embeddings call for '${model}' without a vector`);
    }
    return vector.length;
  }

  private client(target: ProviderTarget): OpenAI {
    return new OpenAI({
      baseURL: target.baseUrl,
      apiKey: target.apiKey,
      fetch: guardedFetcher({ ...this.options.policy, timeoutMs: this.options.timeoutMs }),
      timeout: this.options.timeoutMs,
      // A person or a script is waiting on the answer; 502 and 504 tell it to retry with backoff.
      maxRetries: 0,
      // Null rather than the SDK's fallback to OPENAI_* variables: one tenant's calls must not pick up the
      // operator's organization or project, and the SDK logs nothing of ours.
      organization: null,
      project: null,
      adminAPIKey: null,
      webhookSecret: null,
      logLevel: 'off',
    });
  }
}

/** A provider's failure as the error family: 400 for what the customer must fix, 502 and 504 for the provider. */
function providerError(error: unknown, target: ProviderTarget, call: 'models' | 'embeddings'): AppError {
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

/**
 * What the provider said, bounded and with the key taken out: some providers echo the key they were given in
 * their error message, and this text reaches the customer and, for a 5xx, the log.
 */
function providerMessage(error: InstanceType<typeof OpenAI.APIError>, apiKey: string): string {
  const body = error.error as { message?: unknown } | undefined;
  const text = typeof body?.message === 'string' ? body.message : '';
  return redactSecrets(text, apiKey).slice(0, 300).trim();
}

/** Removes the key, and anything shaped like a provider key (sk-..., masked or not), from a text. */
export function redactSecrets(text: string, apiKey: string): string {
  // Too short a key would redact ordinary words; such a key is no secret worth the name anyway.
  let redacted = apiKey.length >= 6 ? text.split(apiKey).join('[redacted]') : text;
  redacted = redacted.replace(/\b(?:sk|rk|pk)-[\w*.-]{4,}/g, '[redacted]');
  return redacted;
}

function originOf(baseUrl: string): string {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return 'base_url';
  }
}
