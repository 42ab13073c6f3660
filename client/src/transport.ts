// The fetch every call goes through: the credential on each attempt, a timeout beside the caller's AbortSignal, one
// replay with a new credential after a 401, and retries with backoff and jitter where another try is safe. Failed
// answers become the error family (errors.ts), so a call either answers or throws.
import { ConnectionError, TimeoutError, errorFromResponse, type AgentplaneError } from './errors.js';

export interface Credential {
  /** The header that carries the credential, fresh enough to send. */
  header(): Promise<[name: string, value: string]>;
  /** After a 401 answered to `rejected` (the value sent): get a new credential. Absent: a 401 is final. */
  renew?(rejected: string): Promise<void>;
}

export interface RetryOptions {
  /** Retries after the first try (default 2); a 500 is retried once at most. */
  maxRetries?: number;
  /** The first backoff, doubled each retry, with jitter (default 500 ms). */
  baseDelayMs?: number;
  /** The longest wait between tries, `Retry-After` included (default 30 s). */
  maxDelayMs?: number;
}

export interface TransportOptions extends RetryOptions {
  /** Absent for the routes that take none (sign-in). */
  credential?: Credential;
  /** The fetch to call (default globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** Milliseconds a call may take before it fails with TimeoutError (default 60 s; 0 for none). */
  timeoutMs?: number;
}

export interface SendOptions {
  /** `headers`: the timeout covers only the wait for the answer's headers (a stream reads on); default `whole`. */
  timeout?: 'whole' | 'headers';
}

/** POSTs the service lets a client repeat: cancel always (SPEC.md Chat), a trigger fire when it carries its event key. */
function idempotentPost(request: Request): boolean {
  const path = new URL(request.url).pathname;
  if (/\/chat\/stream\/[^/]+\/cancel$/.test(path)) return true;
  return /\/triggers\/[^/]+$/.test(path) && (request.headers.has('idempotency-key') || request.headers.has('x-event-id'));
}

/** Whether a request may be sent again after it reached the service. */
export function isIdempotent(request: Request): boolean {
  return ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'].includes(request.method) || (request.method === 'POST' && idempotentPost(request));
}

/** The wait a `Retry-After` header asks for (seconds or an HTTP date), in milliseconds. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff with jitter: between half and all of base·2^(attempt-1), capped. */
export function backoffMs(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Waits, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export type Send = (request: Request, options?: SendOptions) => Promise<Response>;

/** The fetch of a client: answers a 2xx response or throws an AgentplaneError (or the caller's abort reason). */
export function createTransport(options: TransportOptions): Send {
  const fetchImpl = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const { credential, timeoutMs = 60_000, maxRetries = 2, baseDelayMs = 500, maxDelayMs = 30_000 } = options;

  return async function send(request, sendOptions = {}) {
    const callerSignal = request.signal;
    const repeatable = isIdempotent(request);
    let retries = 0;
    let renewed = false;
    for (;;) {
      const attempt = request.clone();
      const [name, value] = credential ? await credential.header() : [undefined, ''];
      if (name) attempt.headers.set(name, value);
      const timeout = new AbortController();
      const timer = timeoutMs > 0 ? setTimeout(() => timeout.abort(new TimeoutError(`no answer within ${timeoutMs} ms`)), timeoutMs) : undefined;
      // The whole call's timer runs on while the caller reads the body; it must not hold a Node process open after.
      if (sendOptions.timeout !== 'headers') (timer as { unref?: () => void } | undefined)?.unref?.();
      let response: Response;
      try {
        response = await fetchImpl(new Request(attempt, { signal: AbortSignal.any([callerSignal, timeout.signal]) }));
      } catch (error) {
        clearTimeout(timer);
        if (callerSignal.aborted) throw callerSignal.reason;
        const failure = timeout.signal.aborted ? (timeout.signal.reason as TimeoutError) : new ConnectionError(`could not reach ${new URL(request.url).origin}`, error);
        // The request may have reached the service: only a call safe to repeat is sent again.
        if (!repeatable || retries >= maxRetries) throw failure;
        retries += 1;
        await sleep(backoffMs(retries, baseDelayMs, maxDelayMs), callerSignal);
        continue;
      }
      if (sendOptions.timeout === 'headers' || !response.ok) clearTimeout(timer);
      if (response.ok) return response;
      if (response.status === 401 && !renewed && credential?.renew) {
        renewed = true;
        await response.body?.cancel();
        await credential.renew(value);
        continue;
      }
      const error = await errorFromResponse(response);
      if (!worthRetrying(error, repeatable, retries, maxRetries)) throw error;
      retries += 1;
      const asked = error.status === 429 ? retryAfterMs(response.headers.get('retry-after')) : undefined;
      await sleep(asked === undefined ? backoffMs(retries, baseDelayMs, maxDelayMs) : Math.min(asked, maxDelayMs), callerSignal);
    }
  };
}

/**
 * Whether a failed answer is tried again: a retryable status (never `no_provider`), 500 only once, and a call not
 * safe to repeat only on 429, which refuses before any work is done (SPEC.md Errors 2).
 */
function worthRetrying(error: AgentplaneError, repeatable: boolean, retries: number, maxRetries: number): boolean {
  if (!error.retryable) return false;
  if (!repeatable && error.status !== 429) return false;
  return retries < (error.status === 500 ? Math.min(1, maxRetries) : maxRetries);
}

