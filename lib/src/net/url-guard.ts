// The SSRF guard every user-supplied URL goes through: it decides whether a URL may be fetched and pins
// connections to the addresses it vetted, so a later DNS answer cannot move them somewhere else.

import type { LookupAddress } from 'node:dns';
import { lookup as systemLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import ipaddr from 'ipaddr.js';
import { AppError, invalidArgument, unavailable } from '../errors.js';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Answers a name lookup; every address it returns must pass the guard. */
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export interface UrlPolicy {
  /**
   * Local development and tests (AGENTPLANE_ALLOW_PRIVATE_URLS): also allow private, loopback, CGNAT and
   * unique-local addresses and the name `localhost`. Cloud metadata and link-local addresses stay refused.
   */
  allowPrivate: boolean;
  /** Allow plain `http:` besides `https:`. */
  allowHttp: boolean;
  /**
   * Replaces the system resolver: how a program keeps answers briefly (cachedResolver), and how tests simulate DNS
   * answers, including DNS rebinding.
   */
  resolve?: Resolver;
  /** guardedFetch: per hop, the limit to connect and receive headers, then the longest silence while the body streams. */
  timeoutMs?: number;
}

export interface CheckedUrl {
  url: URL;
  /** The addresses the host resolved to, every one vetted; connect only to these. */
  addresses: ResolvedAddress[];
}

const ALLOW_PRIVATE_HINT = 'set AGENTPLANE_ALLOW_PRIVATE_URLS=true for local development';

// What allowPrivate opens up: where a developer's own model server or a test double lives.
const RELAXED_BY_ALLOW_PRIVATE = new Set(['private', 'loopback', 'carrierGradeNat', 'uniqueLocal']);

// Credential endpoints that stay refused even with allowPrivate: no tenant, in any deployment, may reach the
// node's cloud identity. Link-local (169.254/16, fe80::/10) is never relaxed at all, which covers IMDS on
// AWS/GCP/Azure/Oracle and the ECS and EKS credential agents; this list names the ones outside it (AWS IMDS
// and EKS Pod Identity over IPv6 sit in fd00::/8, Alibaba Cloud's metadata in CGNAT space) and 169.254.169.254
// so its refusal says what it is.
const METADATA_ADDRESSES = new Set(
  ['169.254.169.254', 'fd00:ec2::254', 'fd00:ec2::23', '100.100.100.200'].map((a) => ipaddr.parse(a).toNormalizedString()),
);

// Names refused before any lookup, because resolvers may answer them locally without asking DNS.
const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata.goog', 'instance-data.ec2.internal']);

const RANGE_LABELS: Record<string, string> = {
  private: 'a private address',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address',
  uniqueLocal: 'a private (unique local) address',
  linkLocal: 'a link-local address',
  metadata: 'a cloud metadata address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  reserved: 'a reserved or documentation address',
};

const NAT64_PREFIX = ipaddr.parseCIDR('64:ff9b::/96');
const IPV4_COMPATIBLE_PREFIX = ipaddr.parseCIDR('::/96');

/** Parses and vets a URL: scheme, credentials, host name and every address the host resolves to. */
export async function checkUrl(input: string | URL, policy: UrlPolicy, what = 'url'): Promise<CheckedUrl> {
  let url: URL;
  try {
    url = new URL(String(input));
  } catch {
    throw refused(`${what} is not a valid absolute URL`);
  }
  const schemes = policy.allowHttp ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    throw refused(`${what} must use ${policy.allowHttp ? 'https or http' : 'https'}, not ${url.protocol.slice(0, -1)}`);
  }
  if (url.username || url.password) {
    throw refused(`${what} must not contain a user name or password; pass credentials separately`);
  }
  return { url, addresses: await vetHost(bareHost(url.hostname), policy, what) };
}

/** A `lookup` for `net.connect`, `http.request` or an Agent that resolves and refuses any address the guard would. */
export function guardedLookup(policy: UrlPolicy): LookupFunction {
  return (hostname, options, callback) => {
    vetHost(hostname, policy).then(
      (addresses) => answerLookup(addresses, options, callback),
      (err: AppError) => callback(err, ''),
    );
  };
}

/** A `lookup` that answers only with addresses already vetted by checkUrl, so the connection cannot be rebound. */
export function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => answerLookup(addresses, options, callback);
}

/**
 * A keep-alive Agent that vets every connection it opens: what an SDK client (or any `http.request` caller)
 * is given so it can only reach addresses the guard allows. It does not check schemes or credentials; run
 * the URL through checkUrl where it is accepted.
 */
export function guardedAgent(policy: UrlPolicy, protocol: 'http:' | 'https:' = 'https:'): http.Agent {
  const options = { keepAlive: true, lookup: guardedLookup(policy) };
  const agent = protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
  // net.connect never calls `lookup` for an IP literal, so a literal host is vetted here instead.
  const connect = agent.createConnection.bind(agent);
  agent.createConnection = (connectOptions, callback) => {
    const host = bareHost(connectOptions.host ?? connectOptions.hostname ?? '');
    if (net.isIP(host)) {
      const refusal = addressRefusal(host, policy, true);
      if (refusal) {
        callback?.(refused(`url points to ${refusal}`), undefined as unknown as Duplex);
        return undefined;
      }
    }
    return connect(connectOptions, callback);
  };
  return agent;
}

async function vetHost(host: string, policy: UrlPolicy, what = 'url'): Promise<ResolvedAddress[]> {
  const family = net.isIP(host);
  if (family) {
    const refusal = addressRefusal(host, policy, true);
    if (refusal) throw refused(`${what} points to ${refusal}`);
    return [{ address: host, family }];
  }
  const name = host.toLowerCase().replace(/\.$/, '');
  if (METADATA_NAMES.has(name)) throw refused(`${what} names a cloud metadata host (${name}), which is never allowed`);
  if (!policy.allowPrivate && (name === 'localhost' || name.endsWith('.localhost'))) {
    throw refused(`${what} names the local machine (${name}); ${ALLOW_PRIVATE_HINT}`);
  }
  const addresses = await resolve(host, policy, what);
  for (const { address } of addresses) {
    // The resolved address is left out of the message: echoing it would turn the guard into a way to map
    // internal DNS names to internal addresses.
    const refusal = addressRefusal(address, policy, false);
    if (refusal) throw refused(`${what} host ${name} resolves to ${refusal}`);
  }
  return addresses;
}

/** The operating system's answer (getaddrinfo: hosts file, then DNS), every address in the order it gave them. */
export const systemResolver: Resolver = (host) => systemLookup(host, { all: true, verbatim: true });

async function resolve(host: string, policy: UrlPolicy, what: string): Promise<ResolvedAddress[]> {
  let addresses: ResolvedAddress[];
  try {
    addresses = await (policy.resolve ?? systemResolver)(host);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw refused(`${what} host ${host} could not be resolved`);
    throw unavailable(`${what} host ${host} could not be resolved right now; try again`, { cause: err });
  }
  if (addresses.length === 0) throw refused(`${what} host ${host} does not resolve to any address`);
  return addresses;
}

/** Why an address is refused under the policy (a phrase like "a loopback address; set ..."), or undefined. */
function addressRefusal(address: string, policy: UrlPolicy, showAddress: boolean): string | undefined {
  const range = ipaddr.isValid(address) ? rangeOf(ipaddr.parse(address)) : 'invalid';
  if (range === 'unicast' || (policy.allowPrivate && RELAXED_BY_ALLOW_PRIVATE.has(range))) return undefined;
  const label = `${RANGE_LABELS[range] ?? 'a special-purpose address'}${showAddress ? ` (${address})` : ''}`;
  return RELAXED_BY_ALLOW_PRIVATE.has(range) ? `${label}; ${ALLOW_PRIVATE_HINT}` : `${label}, which is never allowed`;
}

// Only ipaddr.js's 'unicast' (ordinary public space) passes; every special range is refused. IPv6 forms whose
// packets go to an embedded IPv4 address are judged by that address instead: IPv4-mapped (::ffff:a.b.c.d),
// IPv4-translated (::ffff:0:a.b.c.d), the deprecated IPv4-compatible form (::a.b.c.d) and NAT64's well-known
// prefix (64:ff9b::a.b.c.d, which DNS64 hands out for every IPv4-only host on an IPv6-only network).
function rangeOf(ip: ipaddr.IPv4 | ipaddr.IPv6): string {
  if (ip.kind() === 'ipv6') {
    const v6 = ip as ipaddr.IPv6;
    const range = v6.range();
    const embedsIPv4 =
      range === 'ipv4Mapped' ||
      range === 'rfc6145' ||
      v6.match(NAT64_PREFIX) ||
      (range === 'unicast' && v6.match(IPV4_COMPATIBLE_PREFIX));
    if (embedsIPv4) {
      const [high = 0, low = 0] = v6.parts.slice(6);
      return rangeOf(new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]));
    }
  }
  return METADATA_ADDRESSES.has(ip.toNormalizedString()) ? 'metadata' : ip.range();
}

function answerLookup(
  addresses: ResolvedAddress[],
  options: { family?: number | string | undefined; all?: boolean | undefined },
  callback: Parameters<LookupFunction>[2],
): void {
  const wanted = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0);
  const matching: LookupAddress[] = addresses.filter((a) => !wanted || a.family === wanted);
  const first = matching[0];
  if (!first) {
    const err: NodeJS.ErrnoException = new Error(`no vetted IPv${wanted} address`);
    err.code = 'ENOTFOUND';
    callback(err, '');
  } else if (options.all) {
    callback(null, matching);
  } else {
    callback(null, first.address, first.family);
  }
}

/** `[::1]` (as URL.hostname spells an IPv6 literal) → `::1`. */
export function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

function refused(message: string): AppError {
  return invalidArgument(message, { code: 'url_refused' });
}
