// The agent's browser (decisions 0087, 0088), on Debian's Chromium: a conversation's context made ready from a warm
// browser (the pool's hold and its page; on demand, and taken from the one made ahead), a navigation of a local page through the egress proxy, and memory per
// context with BENCH_BROWSER_CONTEXTS (20) open on a page each. Baselines in the same run: the same Chromium launched
// bare (no proxy, no pool), doing the same. Then the hand-off (browser-handoff.ts): the screencast's frames a second
// and bytes a frame through our SSE route, a slow viewer, and input to the new frame, each against bare Chromium.
// The same context and navigation rows through the browser server (the browser Pod's program, decision 0092) run as
// a process on loopback, as the runtime's pool reaches it on Kubernetes (`BROWSER_HOST=remote`).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { chromium, type Browser, type Page } from 'playwright-core';
import { silentLogger } from '@agentplane/lib/logging';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { descendantsMemory, LocalBrowserSource } from '@agentplane/runtime/browsers/local';
import { BrowserPool, type ConversationBrowser } from '@agentplane/runtime/browsers/pool';
import { RemoteBrowserSource } from '@agentplane/runtime/browsers/remote';
import { chromiumPath } from '../harness/browser.js';
import { freePort, makeTempDir, startProcess, typeScriptNodeArgs } from '../harness/process.js';
import { handoffTables } from './browser-handoff.js';
import { finishTable, latencyColumns, summarise, Teardown, timingRow, type BenchReport, type Row } from './measure.js';

const CONTEXTS = Number(process.env.BENCH_BROWSER_CONTEXTS ?? 20);
const ROUNDS = Number(process.env.BENCH_BROWSER_ROUNDS ?? 40);

async function timed(rounds: number, warmup: number, op: (round: number) => Promise<unknown>) {
  const latencies: number[] = [];
  const started = performance.now();
  for (let round = 0; round < rounds + warmup; round++) {
    const t0 = performance.now();
    await op(round);
    if (round >= warmup) latencies.push(performance.now() - t0);
  }
  return summarise(latencies, performance.now() - started);
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'browser', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    // A local page of some weight: text, a form and a few styled boxes.
    const pages = createServer((_req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(`<!doctype html><title>Bench</title><style>div{padding:4px;border:1px solid #ccc}</style><h1>Bench page</h1>${'<div><p>Lorem ipsum dolor sit amet.</p><input><button>Go</button></div>'.repeat(40)}`);
    });
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    teardown.add(() => pages.close());
    const pageUrl = `http://127.0.0.1:${(pages.address() as AddressInfo).port}/`;

    const bare: Browser = await chromium.launch({ executablePath: chromiumPath, headless: true, chromiumSandbox: false, args: ['--disable-gpu', '--no-first-run'] });
    teardown.add(() => bare.close());
    const source = new LocalBrowserSource({
      executablePath: chromiumPath,
      sandbox: false,
      egress: { policy: { allowPrivate: false, allowHttp: true }, ownPorts: [], allow: [new URL(pageUrl).host] },
      logger: silentLogger(),
    });
    teardown.add(() => source.close());
    const poolLimits = { maxContexts: CONTEXTS + 2, maxPagesPerContext: 3, maxMemoryBytes: null, idleMs: 600_000, waitMs: 10_000 };
    const pool = new BrowserPool(source, { ...poolLimits, spare: 1 }, silentLogger());
    teardown.add(() => pool.closeAll());
    const onDemand = new BrowserPool(source, { ...poolLimits, spare: 0 }, silentLogger());
    teardown.add(() => onDemand.closeAll());
    // Warm: the browser started and one context made and closed.
    const warm = await pool.hold('bench/warm/0');
    await warm.page();
    pool.release(warm);
    await pool.closeMatching('bench/warm/');

    // A context ready: made, with its page, then closed outside the timing.
    const readyRows: Row[] = [];
    readyRows.push(
      timingRow(
        'context ready',
        { impl: 'bare Chromium: newContext + newPage', baseline: true },
        await timed(ROUNDS, 3, async () => {
          const context = await bare.newContext();
          await context.newPage();
          void context.close();
        }),
      ),
    );
    const waitForSpare = async () => {
      while (pool.spareCount === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    readyRows.push(
      timingRow(
        'context ready',
        { impl: 'BrowserPool.hold + page, made on demand (BROWSER_SPARE=0)' },
        await timed(ROUNDS, 3, async (round) => {
          const held = await onDemand.hold(`bench/ready/${round}`);
          await held.page();
          onDemand.release(held);
          void onDemand.closeMatching(`bench/ready/${round}`);
        }),
      ),
    );
    // Conversations a moment apart find the spare the one before left: each round waits for it, untimed.
    const ready: number[] = [];
    for (let round = 0; round < ROUNDS + 3; round++) {
      await waitForSpare();
      const t0 = performance.now();
      const held = await pool.hold(`bench/ready/${round}`);
      await held.page();
      if (round >= 3) ready.push(performance.now() - t0);
      pool.release(held);
      await pool.closeMatching(`bench/ready/${round}`);
    }
    readyRows.push(timingRow('context ready', { impl: 'BrowserPool.hold + page, one made ahead (ours, the default)' }, summarise(ready, ready.reduce((a, b) => a + b, 0))));

    // A navigation of the local page, in a context already open.
    const bareContext = await bare.newContext();
    const barePage = await bareContext.newPage();
    const held = await pool.hold('bench/navigate/0');
    const ourPage = await held.page();
    const navigate = (page: Page) => page.goto(pageUrl, { waitUntil: 'load' });
    readyRows.push(timingRow('navigate to a local page', { impl: 'bare Chromium, direct', baseline: true }, await timed(ROUNDS, 3, () => navigate(barePage))));
    readyRows.push(timingRow('navigate to a local page', { impl: 'through the egress proxy (ours)' }, await timed(ROUNDS, 3, () => navigate(ourPage))));
    pool.release(held);
    await bareContext.close();
    await pool.closeMatching('bench/navigate/');

    // The same through the browser server, a process of its own on loopback (stopped before memory is read).
    const token = randomBytes(32).toString('base64url');
    const port = await freePort();
    const server = await startProcess({
      name: 'browser-server',
      command: process.execPath,
      args: [...typeScriptNodeArgs, fileURLToPath(new URL('../../runtime/src/browsers/server/main.ts', import.meta.url))],
      dir: makeTempDir('bench-browser-server'),
      env: { BROWSER_TOKEN: token, BROWSER_SERVER_PORT: String(port), HOST: '127.0.0.1', BROWSER_ALLOWED_DESTINATIONS: new URL(pageUrl).host, LOG_LEVEL: 'warn' },
      ready: () =>
        new Promise<boolean>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.once('connect', () => (socket.destroy(), resolve(true)));
          socket.once('error', () => resolve(false));
        }),
      readyTimeoutMs: 60_000,
    });
    const remote = new RemoteBrowserSource({ endpoint: `ws://127.0.0.1:${port}`, token, logger: silentLogger() });
    const remotePool = new BrowserPool(remote, { ...poolLimits, spare: 0 }, silentLogger());
    try {
      const first = await remotePool.hold('bench/remote/warm');
      await first.page();
      remotePool.release(first);
      await remotePool.closeMatching('bench/remote/warm');
      readyRows.push(
        timingRow(
          'context ready',
          { impl: 'through the browser server, made on demand (BROWSER_HOST=remote)' },
          await timed(ROUNDS, 3, async (round) => {
            const remoteHeld = await remotePool.hold(`bench/remote/${round}`);
            await remoteHeld.page();
            remotePool.release(remoteHeld);
            void remotePool.closeMatching(`bench/remote/${round}`);
          }),
        ),
      );
      const remoteHeld = await remotePool.hold('bench/remote/navigate');
      const remotePage = await remoteHeld.page();
      readyRows.push(timingRow('navigate to a local page', { impl: "through the browser server and its egress proxy" }, await timed(ROUNDS, 3, () => navigate(remotePage))));
      remotePool.release(remoteHeld);
    } finally {
      await remotePool.closeAll();
      await remote.close();
      await server.stop();
    }
    report.tables.push(
      finishTable({
        title: 'The browser: a context ready from a warm browser, and a navigation (p50 targets: context ≤ 300 ms)',
        columns: latencyColumns,
        rows: readyRows,
        note: `Debian's Chromium, headless; ${ROUNDS} rounds each after 3 warm-up rounds; the page is ~4 KB of HTML served on loopback.`,
      }),
    );

    // The hand-off, on a runtime of its own (stopped before memory is read).
    report.tables.push(...(await handoffTables(bare)));

    // Memory per context with many open, each on the page: Chromium's PSS before and after, divided.
    const memoryRows: Row[] = [];
    const perContext = async (open: () => Promise<void>, close: () => Promise<void>) => {
      const before = (await descendantsMemory(process.pid)) ?? 0;
      await open();
      const after = (await descendantsMemory(process.pid)) ?? 0;
      await close();
      return { totalMiB: after / 2 ** 20, perContextMiB: (after - before) / CONTEXTS / 2 ** 20 };
    };
    const bareContexts: Awaited<ReturnType<Browser['newContext']>>[] = [];
    const bareMemory = await perContext(
      async () => {
        for (let i = 0; i < CONTEXTS; i++) {
          const context = await bare.newContext();
          bareContexts.push(context);
          await (await context.newPage()).goto(pageUrl);
        }
      },
      async () => void (await Promise.all(bareContexts.map((context) => context.close()))),
    );
    memoryRows.push({ case: `${CONTEXTS} contexts open`, impl: 'bare Chromium', baseline: true, figures: bareMemory });
    const ours: ConversationBrowser[] = [];
    const ourMemory = await perContext(
      async () => {
        for (let i = 0; i < CONTEXTS; i++) {
          const browser = await pool.hold(`bench/memory/${i}`);
          ours.push(browser);
          await (await browser.page()).goto(pageUrl);
        }
      },
      async () => {
        for (const browser of ours) pool.release(browser);
        await pool.closeMatching('bench/memory/');
      },
    );
    memoryRows.push({ case: `${CONTEXTS} contexts open`, impl: 'BrowserPool, through the proxy (ours)', figures: ourMemory });
    report.tables.push(
      finishTable({
        title: `Memory with ${CONTEXTS} contexts open, each on the page (PSS of both Chromiums' processes, read from /proc)`,
        columns: [
          { key: 'totalMiB', label: 'all Chromium MiB' },
          { key: 'perContextMiB', label: 'MiB per context', ratio: true },
        ],
        rows: memoryRows,
        note: 'Both browsers run at once, so "all Chromium" counts both; per context is what opening them added, divided by their number.',
      }),
    );
  } finally {
    await teardown.run();
  }
  return report;
}
