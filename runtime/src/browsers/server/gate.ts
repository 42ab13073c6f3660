// The browser server's front door (docs/decisions/0092). Playwright's own server listens on loopback only: it
// answers `GET /json` with its secret path to anyone who asks, and any holder of that path can reach every context
// of the browser through the DevTools protocol. This listener is the Pod's port instead: it passes on a WebSocket
// upgrade that carries the token (`Authorization: Bearer`), to Playwright's path, with the Host Playwright expects
// on loopback and the token taken out, and answers everything else 404 (an upgrade without the token, 401).
import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '@agentplane/lib/logging';
import { listen } from '@agentplane/lib/program';

export interface BrowserGateOptions {
  host: string;
  port: number;
  token: string;
  /** Playwright's server on loopback: its port and its path. */
  upstream: { port: number; path: string };
  logger: Logger;
}

export interface BrowserGate {
  close(): Promise<void>;
}

/** Request headers never passed to Playwright's server: the credential, and those this gate writes itself. */
const DROPPED = new Set(['authorization', 'host', 'proxy-authorization']);

export async function startBrowserGate(options: BrowserGateOptions): Promise<BrowserGate> {
  const expected = Buffer.from(`Bearer ${options.token}`);
  const authorized = (req: http.IncomingMessage) => {
    const given = Buffer.from(req.headers.authorization ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const sockets = new Set<Duplex>();
  const server = http.createServer((_req, res) => res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n'));
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (!authorized(req)) {
      options.logger.info({ from: req.socket.remoteAddress }, 'the browser server refused a connection without its token');
      // Closed both ways once written: a half-closed socket would stay open for as long as the client liked.
      socket.write('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () => socket.destroy());
      return;
    }
    const upstream = net.connect(options.upstream.port, '127.0.0.1');
    sockets.add(upstream);
    upstream.once('close', () => (sockets.delete(upstream), socket.destroy()));
    socket.once('close', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
    upstream.once('connect', () => {
      const lines = [`GET ${options.upstream.path} HTTP/1.1`, `Host: 127.0.0.1:${options.upstream.port}`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i]!;
        if (!DROPPED.has(name.toLowerCase())) lines.push(`${name}: ${req.rawHeaders[i + 1]!}`);
      }
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      socket.pipe(upstream);
      upstream.pipe(socket);
    });
  });
  // A client that never finishes its request does not hold a socket for ever, nor do many of them.
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  server.maxConnections = 256;
  await listen(server, options.port, options.host);
  return {
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
