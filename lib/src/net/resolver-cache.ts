// DNS answers kept for a few seconds. Once provider connections are pooled, the lookup checkUrl makes for every
// request is the one round trip left besides the call itself (several queries each under Kubernetes' ndots:5, on
// libuv's four-thread pool); this keeps it to about one per host every few seconds. Only the answer is kept: every
// request still vets it under its own policy and connects only to what it vetted.

import { systemResolver, type ResolvedAddress, type Resolver } from './url-guard.js';

export interface CachedResolverOptions {
  /** How long an answer is used after it arrived (default 5 s): the longest a DNS change goes unseen. */
  ttlMs?: number;
  /** Hosts kept at most (default 1,024); past this the oldest answer goes first. */
  maxHosts?: number;
  /** Asked on a miss (default: the system resolver). */
  resolve?: Resolver;
  /** The clock; tests move it. */
  now?: () => number;
}

export const DEFAULT_DNS_TTL_MS = 5_000;

/**
 * A Resolver answering from a host's last answer while it is fresh. Lookups for a host that run at once share one;
 * a failed lookup is not kept, so the next request asks again.
 */
export function cachedResolver(options: CachedResolverOptions = {}): Resolver {
  const { ttlMs = DEFAULT_DNS_TTL_MS, maxHosts = 1_024, resolve = systemResolver, now = Date.now } = options;
  const answers = new Map<string, { expires: number; addresses: Promise<ResolvedAddress[]> }>();
  return async (host) => {
    let entry = answers.get(host);
    if (!entry || entry.expires <= now()) {
      answers.delete(host);
      // Infinity while the lookup runs, so requests arriving meanwhile wait for it rather than start their own.
      const fresh: { expires: number; addresses: Promise<ResolvedAddress[]> } = { expires: Infinity, addresses: resolve(host) };
      fresh.addresses.then(
        () => (fresh.expires = now() + ttlMs),
        () => answers.get(host) === fresh && answers.delete(host),
      );
      answers.set(host, fresh);
      if (answers.size > maxHosts) answers.delete(answers.keys().next().value!);
      entry = fresh;
    }
    // A copy each: one caller's changes never reach another's answer.
    return (await entry.addresses).map((address) => ({ ...address }));
  };
}
