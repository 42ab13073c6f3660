// The `openai` SDK client a tenant's provider calls go through, and the words its failures are reported in: every
// connection made by the URL guard, nothing of the operator's OPENAI_* environment, provider text without the key.
// Shared by the control plane (catalog, embedding probe) and the runtime's model adapter.
import OpenAI from 'openai';
import type { ConnectionPool } from '../net/connection-pool.js';
import { guardedFetcher, type GuardedFetch } from '../net/guarded-fetch.js';
import type { UrlPolicy } from '../net/url-guard.js';

/** SPEC.md 504: the detail says the upstream request timed out, with no status code in the sentence. */
export const UPSTREAM_TIMEOUT = 'the upstream request timed out';

/** Longest provider text carried into an error message. */
const MAX_PROVIDER_MESSAGE = 300;

export interface OpenAIClientOptions {
  policy: UrlPolicy;
  /** Waiting for the response headers (the SDK), and the longest silence of a connection (the guarded fetch). */
  timeoutMs: number;
  /** The program's pool of provider connections; without one, every call opens and closes its own. */
  connections?: ConnectionPool;
  /** Replaces `guardedFetcher(policy)`; for tests only, since it bypasses the URL guard. */
  fetch?: GuardedFetch;
}

/** A client bound to one provider target. */
export function openAIClient(target: { baseUrl: string; apiKey: string }, options: OpenAIClientOptions): OpenAI {
  return new OpenAI({
    baseURL: target.baseUrl,
    apiKey: target.apiKey,
    fetch: options.fetch ?? guardedFetcher({ ...options.policy, timeoutMs: options.timeoutMs }, options.connections),
    timeout: options.timeoutMs,
    // A person or a script is waiting on the answer; 502 and 504 tell it to retry with backoff.
    maxRetries: 0,
    // Null rather than the SDK's fallback to OPENAI_* variables: one tenant's calls must not pick up the
    // operator's organization or project, and the SDK logs nothing of ours. OPENAI_CUSTOM_HEADERS is still read
    // by the SDK and must not be set on a deployment.
    organization: null,
    project: null,
    adminAPIKey: null,
    webhookSecret: null,
    logLevel: 'off',
  });
}

/**
 * What the provider said in an error, bounded and with the key taken out: some providers echo the key they were
 * given, and this text reaches the customer and, for a 5xx, the log.
 */
export function providerMessage(error: InstanceType<typeof OpenAI.APIError>, apiKey: string): string {
  const body = error.error as { message?: unknown } | undefined;
  const text = typeof body?.message === 'string' ? body.message : '';
  return redactSecrets(text, apiKey).slice(0, MAX_PROVIDER_MESSAGE).trim();
}

/** Removes the key, and anything shaped like a provider key (sk-..., masked or not), from a text. */
export function redactSecrets(text: string, apiKey: string): string {
  // Too short a key would redact ordinary words; such a key is no secret worth the name anyway.
  const redacted = apiKey.length >= 6 ? text.split(apiKey).join('[redacted]') : text;
  return redacted.replace(/\b(?:sk|rk|pk)-[\w*.-]{4,}/g, '[redacted]');
}

/** The origin of a base URL, for messages that must not show its path or query. */
export function originOf(baseUrl: string): string {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return 'base_url';
  }
}
