// The browser server (the browser Pod's program, docs/decisions/0092) as a real process, and the runtime's pool
// over it: a conversation's page opens a site through the server's own egress guard, the token is the only way in
// and never written anywhere, and a runtime connects again after the server restarts.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EGRESS_REFUSED_HEADER } from '@agentplane/lib/net/egress-proxy';
import { requireChromium } from '@agentplane/test/harness/browser';
import { captureLogs } from '@agentplane/test/harness/logs';
import { freePort, makeTempDir, outputLines, startProcess, typeScriptNodeArgs, type RunningProcess } from '@agentplane/test/harness/process';
import { BrowserPool } from './pool.js';
import { RemoteBrowserSource } from './remote.js';
import { conversationKey } from './tools.js';

const serverMain = fileURLToPath(new URL('./server/main.ts', import.meta.url));

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

describe.skipIf(requireChromium() === null)('the browser server', () => {
  const token = randomBytes(24).toString('base64url');
  let site: Server;
  let siteUrl: string;
  let port: number;
  let server: RunningProcess;
  const logs = captureLogs();
  const logger = logs.logger;
  let serverOutput: string[] = [];

  const startServer = async () => {
    const started = await startProcess({
      name: 'browser-server',
      command: process.execPath,
      args: [...typeScriptNodeArgs, serverMain],
      dir: makeTempDir('browser-server'),
      env: { BROWSER_TOKEN: token, BROWSER_SERVER_PORT: String(port), HOST: '127.0.0.1', BROWSER_ALLOWED_DESTINATIONS: new URL(siteUrl).host, LOG_FORMAT: 'json', },
      ready: () => portOpen(port),
      readyTimeoutMs: 60_000,
    });
    serverOutput = outputLines(started.child);
    return started;
  };

  beforeAll(async () => {
    site = createServer((req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.setHeader('Set-Cookie', 'seen=1');
      res.end(`<!doctype html><title>Served remotely</title><p>${req.headers.cookie ?? 'no cookie'}</p>`);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;
    port = await freePort();
    server = await startServer();
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
    site?.close();
  });

  it("serves the runtime's pool: each conversation its own context, every request through the server's guard", async () => {
    const source = new RemoteBrowserSource({ endpoint: `ws://127.0.0.1:${port}`, token, logger });
    const pool = new BrowserPool(source, { maxContexts: 2, maxPagesPerContext: 3, maxMemoryBytes: 1, idleMs: 600_000, waitMs: 10_000, spare: 0 }, logger);
    try {
      const alice = await pool.hold(conversationKey('t1', 'acme:alice', 'c1'));
      const page = await alice.page();
      await page.goto(siteUrl);
      expect(await page.title()).toBe('Served remotely');
      await page.reload();
      expect(await page.locator('p').textContent()).toBe('seen=1');
      // The server's own port, on loopback: refused by its guard (the proxy's own 403, not a site's).
      const refused = await page.goto(`http://127.0.0.1:${port}/${token}`);
      expect(refused?.status()).toBe(403);
      expect(refused?.headers()[EGRESS_REFUSED_HEADER]).toBeDefined();
      pool.release(alice);

      // Another conversation on the same server: none of the first one's cookies. The memory limit (1 byte) does
      // not apply: the Pod's own limit bounds a remote browser, which the runtime cannot read.
      const bob = await pool.hold(conversationKey('t1', 'acme:bob', 'c2'));
      const other = await bob.page();
      await other.goto(siteUrl);
      expect(await other.locator('p').textContent()).toBe('no cookie');
      pool.release(bob);
    } finally {
      await pool.closeAll();
      await source.close();
    }
  });

  it("tells nobody its Playwright path: every request but a WebSocket with the token is 404, and that WebSocket without it 401", async () => {
    for (const path of ['/json', '/json/version', '/', `/${token}`]) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      expect(response.status, path).toBe(404);
      expect(await response.text()).toBe('not found\n');
    }
    // The old way in (the token as the path) and no token at all: refused before any upgrade.
    for (const headers of [{}, { authorization: `Bearer ${token.slice(1)}` }, { authorization: token }]) {
      const refused = await new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1', () =>
          socket.write(
            `GET /${token} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n${Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`,
          ),
        );
        let answer = '';
        socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
        socket.on('close', () => resolve(answer.split('\r\n')[0]!));
      });
      expect(refused).toBe('HTTP/1.1 401 Unauthorized');
    }
  });

  it("keeps its token and the server's environment out of Chromium's", async () => {
    // The Chromium processes under the server: a renderer without its own sandbox could read their environment.
    const { readdir, readFile } = await import('node:fs/promises');
    const parents = new Map<number, number>();
    const chromium = new Set<number>();
    for (const pid of (await readdir('/proc')).filter((name) => /^\d+$/.test(name))) {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      parents.set(Number(pid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      if (/chrom/i.test(stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')))) chromium.add(Number(pid));
    }
    const under = new Set([server.child.pid!]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const [pid, parent] of parents) if (!under.has(pid) && under.has(parent)) (under.add(pid), (grew = true));
    }
    const environments = await Promise.all([...under].filter((pid) => chromium.has(pid)).map((pid) => readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '')));
    expect(environments.filter((environment) => environment.includes('PATH=')).length).toBeGreaterThan(0);
    for (const environment of environments) {
      expect(environment).not.toContain(token);
      expect(environment).not.toContain('BROWSER_TOKEN');
      expect(environment).not.toContain('BROWSER_ALLOWED_DESTINATIONS');
    }
  });

  it('lets nobody in without its token, and says so without the token', async () => {
    const wrong = `${token.slice(0, -4)}AAAA`;
    const source = new RemoteBrowserSource({ endpoint: `ws://127.0.0.1:${port}`, token: wrong, logger, connectTimeoutMs: 5_000 });
    const refused = await source.browser().then(
      () => null,
      (error: unknown) => error as { code?: string; message: string },
    );
    expect(refused?.code).toBe('browser_unavailable');
    expect(refused?.message).not.toContain(wrong);
    // Nothing this process or the server logged carries either token.
    expect(logs.text()).not.toContain(wrong);
    expect(logs.text()).not.toContain(token);
    expect(serverOutput.join('\n')).not.toContain(token);
  });

  it('is connected to again after the server restarts', async () => {
    const source = new RemoteBrowserSource({ endpoint: `ws://127.0.0.1:${port}`, token, logger });
    const pool = new BrowserPool(source, { maxContexts: 2, maxPagesPerContext: 3, maxMemoryBytes: null, idleMs: 600_000, waitMs: 10_000, spare: 0 }, logger);
    try {
      const first = await pool.hold(conversationKey('t1', 'acme:alice', 'c3'));
      await (await first.page()).goto(siteUrl);
      pool.release(first);
      await server.stop();
      server = await startServer();
      // The conversation's context went with the server; its next use opens a new one on the new server.
      await expect.poll(async () => pool.has(conversationKey('t1', 'acme:alice', 'c3')), { timeout: 10_000 }).toBe(false);
      const again = await pool.hold(conversationKey('t1', 'acme:alice', 'c3'));
      const page = await again.page();
      await page.goto(siteUrl);
      expect(await page.title()).toBe('Served remotely');
      pool.release(again);
    } finally {
      await pool.closeAll();
      await source.close();
    }
  }, 90_000);
});
