// A forward proxy that puts the SSRF guard in front of a program that makes its own connections: the agent's
// Chromium sends every request through it (navigations, each redirect, frames, subresources, fetch and XHR,
// WebSockets), so what a page may reach is decided here, per connection, by the same guard every user-supplied URL
// passes (url-guard.ts), and not by the page. Names are resolved here and the connection is pinned to the vetted
// address, so a DNS answer cannot move it afterwards. Besides the guard's ranges, the service's own ports are
// refused on every local address even where private addresses are allowed.
//
// HTTPS and WebSockets go through CONNECT tunnels (the proxy sees the host and port, not the content); plain HTTP
// through absolute-URI requests, forwarded with their bodies. Only a client with the proxy's credential is served.
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import type { EnvReader } from '../config.js';
import { errorMessage } from '../errors.js';
import { bareHost, checkUrl, type ResolvedAddress, type UrlPolicy } from './url-guard.js';

export interface EgressProxyOptions {
  policy: UrlPolicy;
  /** Ports of this service (its data plane, control plane, admin surface) refused on every local address. */
  ownPorts: number[];
  /**
   * Destinations (`host:port`, as the client names them) allowed even where they resolve to private or loopback
   * addresses: an intranet site the operator lets agents use, a test's page server. Link-local and metadata
   * addresses and the service's own ports stay refused.
   */
  allow?: string[];
  /** Told of each refused destination (for logs and tests); never of what a page sent. */
  onRefused?: (destination: string, reason: string) => void;
  /** How long a connection to a destination may take to open. Default 10 s. */
  connectTimeoutMs?: number;
}

export interface EgressProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The credential a client sends (`Proxy-Authorization: Basic`), as Playwright's `proxy` option takes it. */
  username: string;
  password: string;
  close(): Promise<void>;
}

/**
 * `BROWSER_ALLOWED_DESTINATIONS` (`host:port,...`), as the runtime and the browser Pod's server both read it: the
 * destinations their browser may reach even where they are private.
 */
export function readAllowedDestinations(read: EnvReader, name = 'BROWSER_ALLOWED_DESTINATIONS'): string[] {
  return (read.string(name) ?? '')
    .split(',')
    .map((destination) => destination.trim())
    .filter((destination) => {
      if (destination === '') return false;
      const port = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+):(\d{1,5})$/i.exec(destination)?.[2];
      if (port === undefined || Number(port) < 1 || Number(port) > 65535) read.problem(`${name}: ${JSON.stringify(destination)} is not host:port (a port from 1 to 65535)`);
      return true;
    });
}

/** On the proxy's own 403 for a refused plain-HTTP request: why, URI-encoded. */
export const EGRESS_REFUSED_HEADER = 'x-agentplane-egress-refused';

/** Why a destination was refused: said to the client in the proxy's 403, and to `onRefused`. */
class Refused extends Error {}

export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const username = 'agentplane';
  const password = randomBytes(24).toString('base64url');
  const expected = Buffer.from(`Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`);
  const authorized = (req: http.IncomingMessage) => {
    const given = Buffer.from(req.headers['proxy-authorization'] ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const policy: UrlPolicy = { ...options.policy, allowHttp: true };
  const allowedPolicy: UrlPolicy = { ...policy, allowPrivate: true };
  const allowed = new Set((options.allow ?? []).map((destination) => destination.toLowerCase()));
  const ownPorts = new Set(options.ownPorts);
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;

  /** The vetted addresses of `host:port`, or a Refused saying why not. */
  async function vet(host: string, port: number): Promise<ResolvedAddress[]> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Refused(`port ${port} is not a port`);
    let addresses: ResolvedAddress[];
    try {
      const named = `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
      addresses = (await checkUrl(`http://${named}/`, allowed.has(named.toLowerCase()) ? allowedPolicy : policy, 'the address')).addresses;
    } catch (error) {
      throw new Refused(errorMessage(error));
    }
    if (ownPorts.has(port) && addresses.some(({ address }) => isLocal(address))) throw new Refused(`port ${port} of this machine is the service's own`);
    return addresses;
  }

  function refuse(destination: string, error: unknown): string {
    const reason = error instanceof Refused ? error.message : 'the destination could not be reached';
    if (error instanceof Refused) options.onRefused?.(destination, reason);
    return reason;
  }

  /** Opens a connection to the first vetted address. */
  function open(addresses: ResolvedAddress[], port: number): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: addresses[0]!.address, port, timeout: connectTimeoutMs });
      socket.once('connect', () => {
        socket.setTimeout(0);
        resolve(socket);
      });
      socket.once('timeout', () => socket.destroy(new Error('connect timed out')));
      socket.once('error', reject);
    });
  }

  const server = http.createServer((req, res) => {
    if (!authorized(req)) {
      res.writeHead(407, { 'Proxy-Authenticate': 'Basic realm="agentplane egress"', Connection: 'close' }).end();
      return;
    }
    void forward(req, res);
  });

  /** A plain-HTTP request in absolute form, forwarded to its vetted address with its body. */
  async function forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
      if (target.protocol !== 'http:') throw new Error('not http');
    } catch {
      res.writeHead(400, { Connection: 'close' }).end('a proxy request names an absolute http URL\n');
      return;
    }
    const port = Number(target.port || 80);
    let addresses: ResolvedAddress[];
    try {
      addresses = await vet(bareHost(target.hostname), port);
    } catch (error) {
      // Marked, so the one who asked (the agent's navigation) can tell the guard's refusal from a site's own 403.
      const reason = refuse(target.host, error);
      res.writeHead(403, { 'Content-Type': 'text/plain', Connection: 'close', [EGRESS_REFUSED_HEADER]: encodeURIComponent(reason) }).end(`refused by the egress guard: ${reason}\n`);
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const upstream = http.request({
      host: addresses[0]!.address,
      port,
      method: req.method,
      path: `${target.pathname}${target.search}`,
      headers: { ...headers, host: target.host },
      timeout: connectTimeoutMs,
    });
    upstream.once('timeout', () => upstream.destroy(new Error('timed out')));
    upstream.once('response', (answer) => {
      // A status Node would refuse to write (a server may answer 000) or headers it would refuse must not throw
      // here: this runs in a listener, and a throw would take the process down.
      const status = answer.statusCode;
      try {
        if (status === undefined || status < 100 || status > 999) throw new Error(`status ${status}`);
        res.writeHead(status, answer.rawHeaders);
      } catch {
        answer.destroy();
        if (!res.headersSent) res.writeHead(502, { Connection: 'close' }).end('the destination answered with what is not HTTP\n');
        else res.destroy();
        return;
      }
      pipeline(answer, res).catch(() => undefined);
    });
    upstream.once('error', () => {
      if (!res.headersSent) res.writeHead(502, { Connection: 'close' }).end('the destination could not be reached\n');
      else res.destroy();
    });
    pipeline(req, upstream).catch(() => undefined);
  }

  /** CONNECT host:port: a tunnel to the vetted address (HTTPS, WebSockets). */
  server.on('connect', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
    client.on('error', () => undefined);
    if (!authorized(req)) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="agentplane egress"\r\nConnection: close\r\n\r\n');
      return;
    }
    const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? '');
    if (!match) {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const host = bareHost(match[1]!);
    const port = Number(match[2]);
    vet(host, port)
      .then((addresses) => open(addresses, port))
      .then(
        (upstream) => {
          upstream.on('error', () => client.destroy());
          client.on('error', () => upstream.destroy());
          client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
          if (head.length > 0) upstream.write(head);
          upstream.pipe(client);
          client.pipe(upstream);
        },
        (error: unknown) => {
          const reason = refuse(req.url ?? '', error);
          const status = error instanceof Refused ? '403 Forbidden' : '502 Bad Gateway';
          client.end(`HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nrefused by the egress guard: ${reason}\n`);
        },
      );
  });
  // A WebSocket asked for over plain HTTP without a tunnel: the browser tunnels them, so this is refused.
  server.on('upgrade', (_req, socket: Duplex) => {
    socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n');
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    username,
    password,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Whether an address is this machine's: loopback, unspecified, or one of its interfaces', in any IPv6 spelling. */
function isLocal(address: string): boolean {
  const ip = normalized(address);
  if (ip === undefined) return false;
  const range = ip.range();
  if (range === 'loopback' || range === 'unspecified') return true;
  const spelled = ip.toNormalizedString();
  return Object.values(os.networkInterfaces()).some((entries) => entries?.some((entry) => normalized(entry.address)?.toNormalizedString() === spelled));
}

/** The address parsed, an IPv4-mapped IPv6 address (`::ffff:7f00:1`) as the IPv4 address it carries. */
function normalized(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.isValid(address)) return undefined;
  const ip = ipaddr.parse(address);
  return ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress() ? (ip as ipaddr.IPv6).toIPv4Address() : ip;
}
