// The agent's browser cannot reach what the SSRF guard refuses (docs/decisions/0087): Debian's Chromium launched as the
// runtime launches it, every connection through the egress proxy. A page served from the one destination this test
// allows tries the ways out a hostile page would: a redirect to a private address, fetch to loopback and to the
// service's own port, an iframe of the metadata service, a name that resolves to loopback, a WebSocket to loopback,
// and file:, chrome: and view-source: URLs. A server on loopback records every connection it gets: none may come.
import http, { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEgressProxy, type EgressProxy } from '@agentplane/lib/net/egress-proxy';
import { launchGuardedChromium } from '@agentplane/runtime/browsers/chromium';
import { chromiumPath, requireChromium } from '../harness/browser.js';

const available = requireChromium() !== null;

/** A server on loopback that counts what reaches it: the targets a page must never get to. */
async function listenCounting(): Promise<{ server: Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.end('secret');
  });
  server.on('connection', () => hits.push('connection'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

describe.skipIf(!available)('the browser egress guard, in Chromium', () => {
  let pages: Server;
  let pagesPort: number;
  let secret: Awaited<ReturnType<typeof listenCounting>>;
  let own: Awaited<ReturnType<typeof listenCounting>>;
  let sockets: WebSocketServer;
  const socketHits: string[] = [];
  let proxy: EgressProxy;
  let browser: Browser;
  const refusals: string[] = [];

  beforeAll(async () => {
    secret = await listenCounting();
    own = await listenCounting();
    sockets = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    sockets.on('connection', () => socketHits.push('websocket'));
    await new Promise((resolve) => sockets.once('listening', resolve));
    const socketPort = (sockets.address() as AddressInfo).port;
    const page = (script: string, body = '') => `<!doctype html><title>t</title><body>${body}<p id="out">pending</p><script>${script}</script></body>`;
    const report = (what: string) => `.then(() => { document.getElementById('out').textContent = 'reached'; }, (e) => { document.getElementById('out').textContent = 'refused: ' + e; })`;
    pages = createServer((req, res) => {
      const routes: Record<string, () => void> = {
        '/': () => res.end(page('', '<h1>Allowed page</h1>')),
        '/redirect-private': () => res.writeHead(302, { Location: `http://127.0.0.1:${secret.port}/after-redirect` }).end(),
        '/redirect-metadata': () => res.writeHead(302, { Location: 'http://169.254.169.254/latest/meta-data/' }).end(),
        '/fetch-loopback': () => res.end(page(`fetch('http://127.0.0.1:${secret.port}/from-fetch')${report('fetch')};`)),
        '/fetch-own-port': () => res.end(page(`fetch('http://127.0.0.1:${own.port}/from-fetch')${report('fetch')};`)),
        '/xhr-localhost': () =>
          res.end(page(`const x = new XMLHttpRequest(); x.open('GET', 'http://localhost:${secret.port}/from-xhr'); x.onload = () => out.textContent = 'reached'; x.onerror = () => out.textContent = 'refused'; x.send();`)),
        '/iframe-metadata': () => res.end(page('', '<iframe id="f" src="http://169.254.169.254/latest/meta-data/"></iframe>')),
        '/iframe-loopback': () => res.end(page('', `<iframe src="http://127.0.0.1:${secret.port}/from-iframe"></iframe><img src="http://127.0.0.1:${secret.port}/from-img">`)),
        '/fetch-rebinding-name': () => res.end(page(`fetch('http://rebind.example:${secret.port}/from-rebinding')${report('fetch')};`)),
        '/websocket-loopback': () =>
          res.end(page(`const ws = new WebSocket('ws://127.0.0.1:${socketPort}/'); ws.onopen = () => out.textContent = 'reached'; ws.onerror = () => out.textContent = 'refused';`)),
      };
      const route = routes[req.url ?? ''];
      if (!route) return void res.writeHead(404).end();
      res.setHeader('Content-Type', 'text/html');
      route();
    });
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    pagesPort = (pages.address() as AddressInfo).port;
    proxy = await startEgressProxy({
      // Private addresses refused, as in production; the page server is the one destination let through.
      policy: { allowPrivate: false, allowHttp: true, resolve: async (host) => (host === 'rebind.example' || host === 'pages.example' ? [{ address: '127.0.0.1', family: 4 }] : []) },
      ownPorts: [own.port],
      allow: [`127.0.0.1:${pagesPort}`, `pages.example:${pagesPort}`],
      onRefused: (destination, reason) => refusals.push(`${destination}: ${reason}`),
    });
    browser = await launchGuardedChromium({ executablePath: chromiumPath, proxy, sandbox: false });
  });
  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    pages?.close();
    secret?.server.close();
    own?.server.close();
    sockets?.close();
  });

  async function visit(path: string, host = `127.0.0.1:${pagesPort}`): Promise<Page> {
    const context = await browser.newContext({ acceptDownloads: false, serviceWorkers: 'block' });
    const page = await context.newPage();
    await page.goto(`http://${host}${path}`);
    return page;
  }

  const outcome = async (page: Page) => {
    await expect.poll(() => page.locator('#out').textContent()).not.toBe('pending');
    return page.locator('#out').textContent();
  };

  it('loads the allowed page, through the proxy, by address and by a name only the proxy resolves', async () => {
    for (const host of [`127.0.0.1:${pagesPort}`, `pages.example:${pagesPort}`]) {
      const page = await visit('/', host);
      expect(await page.locator('h1').textContent()).toBe('Allowed page');
      await page.context().close();
    }
  });

  it('refuses a redirect to loopback or to the metadata service', async () => {
    for (const path of ['/redirect-private', '/redirect-metadata']) {
      const context = await browser.newContext();
      const page = await context.newPage();
      const failure = await page.goto(`http://127.0.0.1:${pagesPort}${path}`).then(
        (response) => `status ${response?.status()}`,
        (error: Error) => error.message,
      );
      expect(failure, path).not.toMatch(/status 200/);
      await context.close();
    }
    expect(secret.hits).toEqual([]);
  });

  it('refuses fetch, XHR, frames and images to loopback, the service’s own port, and a name resolving to loopback', async () => {
    for (const path of ['/fetch-loopback', '/fetch-own-port', '/xhr-localhost', '/fetch-rebinding-name']) {
      const page = await visit(path);
      expect(await outcome(page), path).toMatch(/^refused/);
      await page.context().close();
    }
    for (const path of ['/iframe-loopback', '/iframe-metadata']) {
      const page = await visit(path);
      await page.waitForLoadState('load');
      await page.context().close();
    }
    expect(secret.hits).toEqual([]);
    expect(own.hits).toEqual([]);
    expect(refusals.some((line) => line.includes('169.254.169.254'))).toBe(true);
    expect(refusals.some((line) => line.includes(`rebind.example:${secret.port}`))).toBe(true);
  });

  it('refuses a WebSocket to loopback', async () => {
    const page = await visit('/websocket-loopback');
    expect(await outcome(page)).toBe('refused');
    await page.context().close();
    expect(socketHits).toEqual([]);
  });

  it('never opens file:, chrome: or view-source: URLs from a page', async () => {
    const page = await visit('/');
    for (const url of ['file:///etc/passwd', 'chrome://version', `view-source:http://127.0.0.1:${secret.port}/`]) {
      // A page's own script cannot take itself there: the browser refuses, and the page stays where it was.
      await page.evaluate(`window.location.href = ${JSON.stringify(url)}`);
      await page.waitForTimeout(200);
      expect(page.url(), url).toBe(`http://127.0.0.1:${pagesPort}/`);
    }
    await page.context().close();
    expect(secret.hits).toEqual([]);
  });

  it('serves only the browser it was started for: a client without the credential is refused', async () => {
    const viaProxy = await new Promise<number>((resolve, reject) => {
      const request = http.request({ host: '127.0.0.1', port: Number(new URL(proxy.url).port), method: 'GET', path: `http://127.0.0.1:${pagesPort}/` });
      request.on('response', (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.on('error', reject);
      request.end();
    });
    expect(viaProxy).toBe(407);
  });
});
