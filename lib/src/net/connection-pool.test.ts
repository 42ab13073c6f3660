import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import tls from 'node:tls';
import { selfSignedCertificate } from '@agentplane/test/harness/tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConnectionPool } from './connection-pool.js';
import { guardedFetch } from './guarded-fetch.js';
import type { Resolver, UrlPolicy } from './url-guard.js';

// Two real servers on one port, at 127.0.0.1 and 127.0.0.2, so a host can "move" between two allowed addresses;
// names reach them through an injected resolver, with allowPrivate on so that loopback is a permitted destination.
// Each server records every connection it accepts and the address the client reached.
const answer: http.RequestListener = (req, res) => {
  req.resume().on('end', () => {
    switch (req.url) {
      case '/echo':
        return res.writeHead(200, { 'content-type': 'text/plain' }).end(`${req.method} ${req.socket.localAddress}`);
      case '/big': // 4 MiB in 64 KiB writes: more than a reader that stops early has taken
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        for (let i = 0; i < 64; i++) res.write(Buffer.alloc(64 * 1024, i));
        return res.end();
      case '/redirect':
        return res.writeHead(302, { location: '/echo' }).end('moved');
      case '/silent':
        return; // never answers
      default:
        return res.writeHead(404).end();
    }
  });
};

const accepted: Socket[] = [];
const servers: http.Server[] = [];
let port = 0;

beforeAll(async () => {
  for (const address of ['127.0.0.1', '127.0.0.2']) {
    const server = http.createServer(answer);
    server.on('connection', (socket) => accepted.push(socket));
    await new Promise<void>((resolve) => server.listen(port, address, resolve));
    port = (server.address() as AddressInfo).port;
    servers.push(server);
  }
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

let pool: ConnectionPool;
afterEach(() => {
  pool?.close();
  accepted.length = 0;
});

/** A resolver answering each lookup with the next address given (the last one for good). */
function answers(...addresses: string[]): Resolver & { lookups: number } {
  const resolver = Object.assign(async () => [{ address: addresses[Math.min(resolver.lookups++, addresses.length - 1)]!, family: 4 }], { lookups: 0 });
  return resolver;
}
const dev = (resolve: Resolver, timeoutMs?: number): UrlPolicy => ({ allowPrivate: true, allowHttp: true, resolve, ...(timeoutMs ? { timeoutMs } : {}) });
const closed = (socket: Socket) => (socket.closed ? Promise.resolve() : new Promise((resolve) => socket.once('close', resolve)));

describe('guardedFetch with a ConnectionPool', () => {
  it('reuses one connection for requests made one after another', async () => {
    pool = new ConnectionPool();
    const policy = dev(answers('127.0.0.1'));
    for (let i = 0; i < 3; i++) {
      expect(await (await guardedFetch(`http://model.test:${port}/echo`, { method: 'POST', body: `${i}` }, policy, pool)).text()).toBe('POST 127.0.0.1');
    }
    expect(await (await guardedFetch(`http://model.test:${port}/echo`, undefined, policy, pool)).text()).toBe('GET 127.0.0.1');
    expect(accepted).toHaveLength(1);
    expect(pool.size).toEqual({ agents: 1, idle: 1 });
  });

  it('checks each redirect hop on its own', async () => {
    pool = new ConnectionPool();
    // The name resolves to loopback for the first hop and to the metadata address for the hop after the redirect.
    const resolver = answers('127.0.0.1', '169.254.169.254');
    await expect(guardedFetch(`http://model.test:${port}/redirect`, undefined, dev(resolver), pool)).rejects.toMatchObject({
      kind: 'invalid_argument',
      message: 'redirect target host model.test resolves to a cloud metadata address, which is never allowed',
    });
    expect(await (await guardedFetch(`http://model.test:${port}/redirect`, undefined, dev(answers('127.0.0.1')), pool)).text()).toBe('GET 127.0.0.1');
  });

  it('checks every request afresh: a host now resolving to a refused address is refused, though a connection to it is pooled', async () => {
    pool = new ConnectionPool();
    const resolver = answers('127.0.0.1', '169.254.169.254');
    await (await guardedFetch(`http://rebind.test:${port}/echo`, undefined, dev(resolver), pool)).text();
    expect(pool.size.idle).toBe(1);

    await expect(guardedFetch(`http://rebind.test:${port}/echo`, undefined, dev(resolver), pool)).rejects.toMatchObject({
      kind: 'invalid_argument',
      message: 'url host rebind.test resolves to a cloud metadata address, which is never allowed',
    });
    expect(resolver.lookups).toBe(2);
    expect(accepted).toHaveLength(1);
  });

  it('connects anew, to the new address, when the host moves to another allowed one', async () => {
    pool = new ConnectionPool();
    const resolver = answers('127.0.0.1', '127.0.0.2');
    const reached = async () => (await (await guardedFetch(`http://moving.test:${port}/echo`, undefined, dev(resolver), pool)).text()).split(' ')[1];

    expect(await reached()).toBe('127.0.0.1');
    expect(await reached()).toBe('127.0.0.2');
    expect(await reached()).toBe('127.0.0.2');
    expect(accepted.map((socket) => socket.localAddress)).toEqual(['127.0.0.1', '127.0.0.2']);
  });

  it('never hands back the connection of an aborted or timed-out request', async () => {
    pool = new ConnectionPool();
    const policy = dev(answers('127.0.0.1'));
    const controller = new AbortController();
    const aborted = guardedFetch(`http://model.test:${port}/silent`, { signal: controller.signal }, policy, pool);
    setTimeout(() => controller.abort(), 50);
    await expect(aborted).rejects.toMatchObject({ name: 'AbortError' });
    await closed(accepted[0]!);

    await expect(guardedFetch(`http://model.test:${port}/silent`, undefined, dev(answers('127.0.0.1'), 200), pool)).rejects.toMatchObject({
      kind: 'upstream_timeout',
    });
    await closed(accepted[1]!);

    expect(await (await guardedFetch(`http://model.test:${port}/echo`, undefined, policy, pool)).text()).toBe('GET 127.0.0.1');
    expect(accepted).toHaveLength(3);
  });

  it('does not reuse a connection whose answer was cancelled half read or is still unread', async () => {
    pool = new ConnectionPool();
    const policy = dev(answers('127.0.0.1'));
    const big = await guardedFetch(`http://model.test:${port}/big`, undefined, policy, pool);
    const reader = big.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    await reader.cancel();
    await closed(accepted[0]!);

    const unread = await guardedFetch(`http://model.test:${port}/big`, undefined, policy, pool);
    // The unread answer holds its connection, so the next request gets another and its own answer.
    expect(await (await guardedFetch(`http://model.test:${port}/echo`, undefined, policy, pool)).text()).toBe('GET 127.0.0.1');
    expect(accepted).toHaveLength(3);
    expect((await unread.arrayBuffer()).byteLength).toBe(4 * 1024 * 1024);
    expect(await (await guardedFetch(`http://model.test:${port}/echo`, undefined, policy, pool)).text()).toBe('GET 127.0.0.1');
    expect(accepted).toHaveLength(3);
  });

  it('closes a connection left idle past the idle limit', async () => {
    pool = new ConnectionPool({ idleTimeoutMs: 100 });
    const policy = dev(answers('127.0.0.1'));
    await (await guardedFetch(`http://model.test:${port}/echo`, undefined, policy, pool)).text();
    await closed(accepted[0]!);
    await (await guardedFetch(`http://model.test:${port}/echo`, undefined, policy, pool)).text();
    expect(accepted).toHaveLength(2);
  });

  it('closes the idle connections of the least recently used agent past the bound', async () => {
    pool = new ConnectionPool({ idleTimeoutMs: 60_000, maxAgents: 1 });
    const policy = dev(answers('127.0.0.1'));
    await (await guardedFetch(`http://first.test:${port}/echo`, undefined, policy, pool)).text();
    await (await guardedFetch(`http://second.test:${port}/echo`, undefined, policy, pool)).text();
    await closed(accepted[0]!);
    expect(pool.size).toEqual({ agents: 1, idle: 1 });
  });
});

describe('guardedFetch with a ConnectionPool over TLS', () => {
  let tlsServer: https.Server;
  let tlsPort: number;
  let handshakes = 0;
  const trusted = tls.getCACertificates('default');

  beforeAll(async () => {
    // A throwaway certificate for model.test, trusted by this process only while these tests run: verification
    // stays on, as in production.
    const certificate = await selfSignedCertificate({ dns: 'model.test' });
    tls.setDefaultCACertificates([...trusted, certificate.cert]);
    tlsServer = https.createServer(certificate, answer);
    tlsServer.on('secureConnection', () => handshakes++);
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    tlsPort = (tlsServer.address() as AddressInfo).port;
  });
  afterAll(async () => {
    tls.setDefaultCACertificates(trusted);
    tlsServer.closeAllConnections();
    await new Promise((resolve) => tlsServer.close(resolve));
  });

  it('makes one TLS handshake for several requests', async () => {
    pool = new ConnectionPool();
    const policy = dev(answers('127.0.0.1'));
    for (let i = 0; i < 4; i++) {
      expect(await (await guardedFetch(`https://model.test:${tlsPort}/echo`, undefined, policy, pool)).text()).toBe('GET 127.0.0.1');
    }
    expect(handshakes).toBe(1);
  });

  it('without a pool, pays a handshake for every request, as before', async () => {
    handshakes = 0;
    const policy = dev(answers('127.0.0.1'));
    for (let i = 0; i < 3; i++) await (await guardedFetch(`https://model.test:${tlsPort}/echo`, undefined, policy)).text();
    expect(handshakes).toBe(3);
  });
});
