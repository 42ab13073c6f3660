// fetch for user-supplied URLs: every hop, redirects included, is vetted by the SSRF guard and its socket is
// pinned to the addresses that were vetted, so DNS rebinding between the check and the connection is moot. Given a
// ConnectionPool, connections are kept alive and reused only by requests whose own check vetted the same addresses.

import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { AppError } from '../errors.js';
import type { ConnectionPool } from './connection-pool.js';
import { bareHost, checkUrl, pinnedLookup, type CheckedUrl, type UrlPolicy } from './url-guard.js';

export type GuardedFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

const MAX_REDIRECTS = 5;
const DEFAULT_TIMEOUT_MS = 30_000;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
// Credentials meant for one origin must not follow a redirect to another (the fetch standard drops them too).
const ORIGIN_BOUND_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];
const BODY_HEADERS = ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location'];

/** The policy (and the pool, if any) bound into a `fetch`-compatible function, for clients such as the OpenAI SDK. */
export function guardedFetcher(policy: UrlPolicy, connections?: ConnectionPool): GuardedFetch {
  return (input, init) => guardedFetch(input, init, policy, connections);
}

/**
 * `fetch` that connects only to vetted addresses and follows at most 5 redirects itself, vetting each.
 * Refusals are `invalid_argument`; an unreachable upstream is `upstream_failed`, a silent one `upstream_timeout`.
 * The request body is buffered (so a 307/308 can resend it) and responses are asked for uncompressed.
 * Without `connections`, every request opens a connection of its own and closes it after.
 */
export async function guardedFetch(
  input: string | URL | Request,
  init: RequestInit | undefined,
  policy: UrlPolicy,
  connections?: ConnectionPool,
): Promise<Response> {
  let target = await checkUrl(input instanceof Request ? input.url : input, policy);
  const request = new Request(input, init);
  // The caller's own signal, not `request.signal`: a Request follows it only through a WeakRef, so once the Request
  // is collected (a streamed answer outlives it) an abort would no longer reach the socket.
  const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
  const timeoutMs = policy.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const headers = new Headers(request.headers);
  headers.delete('host');
  // No transparent decompression here; asking for identity keeps the body what the caller reads.
  headers.set('accept-encoding', 'identity');
  let method = request.method;
  let body = method === 'GET' || method === 'HEAD' ? undefined : Buffer.from(await request.arrayBuffer());

  for (let hop = 0; ; hop++) {
    const res = await send(target, method, headers, body, signal ?? undefined, timeoutMs, connections);
    const location = res.headers.location;
    if (!REDIRECT_STATUSES.has(res.statusCode ?? 0) || !location || request.redirect === 'manual') {
      return toResponse(res, target.url, method, hop > 0);
    }
    res.resume();
    if (request.redirect === 'error') throw upstreamFailed(`${target.url.origin} redirected, and redirects were refused`);
    if (hop === MAX_REDIRECTS) throw upstreamFailed(`${target.url.origin} redirected more than ${MAX_REDIRECTS} times`);

    let next: URL;
    try {
      next = new URL(location, target.url);
    } catch {
      throw upstreamFailed(`${target.url.origin} redirected to an invalid location`);
    }
    const status = res.statusCode;
    if ((status === 303 && method !== 'GET' && method !== 'HEAD') || ((status === 301 || status === 302) && method === 'POST')) {
      method = 'GET';
      body = undefined;
      for (const name of BODY_HEADERS) headers.delete(name);
    }
    if (next.origin !== target.url.origin) for (const name of ORIGIN_BOUND_HEADERS) headers.delete(name);
    target = await checkUrl(next, policy, 'redirect target');
  }
}

// A timed-out or aborted request destroys its socket (req.destroy, or the signal doing the same), and a response
// dropped unread keeps its socket until `timeoutMs` of silence destroys it: only a request whose answer was read to
// its end hands its socket back to the pool, where Node's agent also destroys an idle socket that receives anything.
function send(
  target: CheckedUrl,
  method: string,
  headers: Headers,
  body: Buffer | undefined,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  connections: ConnectionPool | undefined,
): Promise<http.IncomingMessage> {
  const { url, addresses } = target;
  return new Promise((resolve, reject) => {
    let response: http.IncomingMessage | undefined;
    const req = (url.protocol === 'https:' ? https : http).request({
      // The original name stays the Host header and the TLS server name; only the address is pinned.
      hostname: bareHost(url.hostname),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method,
      headers: Object.fromEntries(headers),
      // A pooled agent pins its connections to this same address set itself (its lookup wins over this one).
      agent: connections ? connections.agentFor(target) : false,
      lookup: pinnedLookup(addresses),
      ...(signal ? { signal } : {}),
      // Socket idle limit: covers a server that accepts and then goes silent, before or during the body.
      timeout: timeoutMs,
    });
    const timedOut = () => new AppError('upstream_timeout', `${url.origin} did not answer within ${timeoutMs} ms`);
    // A hard deadline for the headers too, so a server trickling bytes cannot hold the caller forever.
    const deadline = setTimeout(() => req.destroy(timedOut()), timeoutMs);
    req.on('timeout', () => (response ? response.destroy(timedOut()) : req.destroy(timedOut())));
    req.on('response', (res) => {
      clearTimeout(deadline);
      response = res;
      resolve(res);
    });
    req.on('error', (err) => {
      clearTimeout(deadline);
      if (signal?.aborted) reject(signal.reason);
      else if (err instanceof AppError) reject(err);
      else reject(upstreamFailed(`could not reach ${url.origin}: ${err.message}`, err));
    });
    req.end(body);
  });
}

function toResponse(res: http.IncomingMessage, url: URL, method: string, redirected: boolean): Response {
  const headers = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
  const status = res.statusCode ?? 0;
  const empty = method === 'HEAD' || NULL_BODY_STATUSES.has(status);
  if (empty) res.resume();
  let response: Response;
  try {
    response = new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
      status,
      statusText: res.statusMessage ?? '',
      headers,
    });
  } catch (err) {
    res.destroy();
    throw upstreamFailed(`${url.origin} answered with an unusable status ${status}`, err);
  }
  // Response's constructor cannot set these; callers use them to see where they ended up.
  Object.defineProperties(response, { url: { value: url.href }, redirected: { value: redirected } });
  return response;
}

function upstreamFailed(message: string, cause?: unknown): AppError {
  return new AppError('upstream_failed', message, cause === undefined ? {} : { cause });
}
