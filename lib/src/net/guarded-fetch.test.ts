import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedFetch } from './guarded-fetch.js';
import type { Resolver, UrlPolicy } from './url-guard.js';

// One real server on loopback; names are mapped to it by an injected resolver, with allowPrivate on so that
// loopback is a permitted destination. What stays refused under allowPrivate (metadata, link-local, bad
// schemes) is what the redirect tests aim at.
interface Seen {
  path: string;
  method: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
let server: http.Server;
let port: number;
let seen: Seen[] = [];
let dripClosed = Promise.withResolvers<void>();
let silentClosed = Promise.withResolvers<void>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', method: req.method ?? '', headers: req.headers, body });
      const [path, query] = (req.url ?? '').split('?');
      const redirect = (status: number, location: string) => res.writeHead(status, { location }).end();
      switch (path) {
        case '/echo':
          return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, body }));
        case '/to': // /to?<status>&<location>
          return redirect(Number(query?.split('&')[0]), decodeURIComponent(query?.split('&').slice(1).join('&') ?? ''));
        case '/loop':
          return redirect(302, '/loop');
        case '/silent':
          // Accepts, reads the request, never answers; says when the client let go of the connection.
          res.once('close', () => silentClosed.resolve());
          return;
        case '/drip': {
          // Streams a line every 10 ms until the client goes; says when its connection closed.
          res.writeHead(200, { 'content-type': 'text/plain' });
          const timer = setInterval(() => res.write('more\n'), 10);
          res.once('close', () => {
            clearInterval(timer);
            dripClosed.resolve();
          });
          return;
        }
        default:
          return res.writeHead(404).end('no such path');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

// A full collection on demand, without starting the test process with --expose-gc.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const toLoopback: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
const dev: UrlPolicy = { allowPrivate: true, allowHttp: true, resolve: toLoopback };
const redirectTo = (status: number, location: string) => `http://model.test:${port}/to?${status}&${encodeURIComponent(location)}`;

describe('guardedFetch', () => {
  it('sends the request and streams the answer back as a fetch Response', async () => {
    const res = await guardedFetch(`http://model.test:${port}/echo?x=1`, { method: 'POST', body: '{"a":1}' }, dev);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual({ method: 'POST', body: '{"a":1}' });
    expect(res.url).toBe(`http://model.test:${port}/echo?x=1`);
    expect(seen.at(-1)?.headers.host).toBe(`model.test:${port}`);
  });

  it('connects to the address it vetted: one lookup per fetch, so a rebound answer never reaches the socket', async () => {
    const answers = ['127.0.0.1', '169.254.169.254'];
    let lookups = 0;
    const rebinding: Resolver = async () => [{ address: answers[Math.min(lookups++, 1)]!, family: 4 }];
    const policy = { ...dev, resolve: rebinding };

    const first = await guardedFetch(`http://rebind.test:${port}/echo`, undefined, policy);
    expect(first.status).toBe(200);
    await first.text();
    expect(lookups).toBe(1);
    await expect(guardedFetch(`http://rebind.test:${port}/echo`, undefined, policy)).rejects.toMatchObject({
      kind: 'invalid_argument',
      message: 'url host rebind.test resolves to a cloud metadata address, which is never allowed',
    });
  });

  it('follows redirects itself and reports where it ended up', async () => {
    const res = await guardedFetch(redirectTo(301, redirectTo(307, '/echo')), undefined, dev);
    expect(res.status).toBe(200);
    expect(res.redirected).toBe(true);
    expect(res.url).toBe(`http://model.test:${port}/echo`);
  });

  it.each([
    ['http://169.254.169.254/latest/meta-data/iam/', /redirect target points to a cloud metadata address/],
    ['http://[::ffff:169.254.169.254]/', /cloud metadata address/],
    ['http://metadata.google.internal/', /cloud metadata host/],
    ['file:///etc/passwd', /redirect target must use https or http, not file/],
    ['gopher://127.0.0.1:6379/_FLUSHALL', /not gopher/],
  ])('refuses a redirect to %s', async (location, message) => {
    await expect(guardedFetch(redirectTo(302, location), undefined, dev)).rejects.toMatchObject({
      kind: 'invalid_argument',
      message: expect.stringMatching(message),
    });
  });

  it('stops after 5 redirects', async () => {
    seen = [];
    await expect(guardedFetch(`http://model.test:${port}/loop`, undefined, dev)).rejects.toMatchObject({
      kind: 'upstream_failed',
      message: expect.stringMatching(/more than 5 times/),
    });
    expect(seen).toHaveLength(6);
  });

  it('turns a POST into a GET on 303 and keeps it on 307', async () => {
    const init = { method: 'POST', body: 'payload' };
    expect(await (await guardedFetch(redirectTo(303, '/echo'), init, dev)).json()).toEqual({ method: 'GET', body: '' });
    expect(await (await guardedFetch(redirectTo(307, '/echo'), init, dev)).json()).toEqual({ method: 'POST', body: 'payload' });
  });

  it('drops credentials when a redirect leaves the origin', async () => {
    const init = { headers: { authorization: 'Bearer sk-secret', 'x-trace': 't' } };
    seen = [];
    await (await guardedFetch(redirectTo(302, '/echo'), init, dev)).text();
    expect(seen.at(-1)?.headers.authorization).toBe('Bearer sk-secret');

    seen = [];
    await (await guardedFetch(redirectTo(302, `http://elsewhere.test:${port}/echo`), init, dev)).text();
    expect(seen.at(-1)?.headers.authorization).toBeUndefined();
    expect(seen.at(-1)?.headers['x-trace']).toBe('t');
  });

  it('gives up on a server that never answers, and lets go of its connection', async () => {
    silentClosed = Promise.withResolvers<void>();
    await expect(guardedFetch(`http://model.test:${port}/silent`, undefined, { ...dev, timeoutMs: 300 })).rejects.toMatchObject({
      kind: 'upstream_timeout',
    });
    // The socket is destroyed, not left open to a server that may never answer.
    await silentClosed.promise;
  });

  it("stops when the caller's signal aborts", async () => {
    const controller = new AbortController();
    const pending = guardedFetch(`http://model.test:${port}/silent`, { signal: controller.signal }, dev);
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });

  it("stops a streamed answer when the caller's signal aborts, after the request was garbage collected", async () => {
    // fetch's Request follows the caller's signal through a WeakRef: once the Request is collected (a long stream
    // outlives it), an abort no longer reaches it. The caller's own signal must be the one the socket listens to.
    dripClosed = Promise.withResolvers<void>();
    const controller = new AbortController();
    const res = await guardedFetch(`http://model.test:${port}/drip`, { signal: controller.signal }, dev);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('more');
    for (let i = 0; i < 3; i++) {
      collectGarbage();
      await new Promise((resolve) => setImmediate(resolve));
    }
    controller.abort();
    await dripClosed.promise;
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return 'ended quietly';
    })()).rejects.toBeDefined();
  });

  it('keeps the original name for TLS while connecting to the pinned address, and still verifies the certificate', async () => {
    const serverNames: string[] = [];
    const tlsServer = https.createServer({
      key: TEST_KEY,
      cert: TEST_CERT,
      SNICallback: (name, done) => {
        serverNames.push(name);
        done(null, undefined);
      },
    });
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    const tlsPort = (tlsServer.address() as AddressInfo).port;
    try {
      // The certificate is self-signed, so an honest client must refuse it: pinning never skips verification.
      await expect(guardedFetch(`https://model.test:${tlsPort}/`, undefined, dev)).rejects.toMatchObject({
        kind: 'upstream_failed',
        message: expect.stringMatching(/self-signed certificate/),
      });
      expect(serverNames).toEqual(['model.test']);
    } finally {
      tlsServer.closeAllConnections();
      await new Promise((resolve) => tlsServer.close(resolve));
    }
  });

  it('refuses a loopback URL without allowPrivate, before connecting', async () => {
    await expect(
      guardedFetch(`http://127.0.0.1:${port}/echo`, undefined, { allowPrivate: false, allowHttp: true }),
    ).rejects.toMatchObject({ kind: 'invalid_argument', message: expect.stringMatching(/loopback address/) });
  });
});

// A self-signed P-256 certificate for model.test, valid until 2126; only ever served on loopback by this test.
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgRCaPCCeFE8fZWmZO
gtk/swnLIP0cC5gpnj02olAKSwahRANCAAQBQ7Z98tE/xw4MPETN5DqbrMFvDXbi
rQadFgbK3fpy3bMyPDp8jjiDxDSrKbHRBYIgNC8uIsASlI0eESymr5BO
-----END PRIVATE KEY-----
`;
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBmDCCAT6gAwIBAgIUMK5QRaABUM9v/rbYRuY2saVKoXcwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKbW9kZWwudGVzdDAgFw0yNjExMjIwNDI1NDlaGA8yMTI2MTAy
OTA0MjU0OVowFTETMBEGA1UEAwwKbW9kZWwudGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABAFDtn3y0T/HDgw8RM3kOpuswW8NduKtBp0WBsrd+nLdszI8OnyO
OIPENKspsdEFgiA0Ly4iwBKUjR4RLKavkE6jajBoMB0GA1UdDgQWBBStvQdQa5C/
Zwji83VgO1lfiA8XgzAfBgNVHSMEGDAWgBStvQdQa5C/Zwji83VgO1lfiA8XgzAP
BgNVHRMBAf8EBTADAQH/MBUGA1UdEQQOMAyCCm1vZGVsLnRlc3QwCgYIKoZIzj0E
AwIDSAAwRQIgJx6RlKSZzIje/O7zVARc+DaBGF9j7ESOBXaZnsL2WMYCIQDrR/Pj
qsXrzX3swEw58+HvcOQi0w/IbZoStKY6IVYnyQ==
-----END CERTIFICATE-----
`;
