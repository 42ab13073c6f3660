// The hand-off's figures for `npm run bench -- browser` (issue 31; decision 0088): a runtime on Debian's Chromium
// whose fake model opens a page and hands it over, then
// - the screencast through our SSE route (GET .../browser/stream) on a page that changes every animation frame:
//   frames a second and bytes a frame at STREAM_QUALITY, against bare Chromium's own Page.startScreencast on the same
//   page over playwright-core's CDP session, each frame acknowledged at once (no HTTP in between);
//   and the same stream following one element (?selector=), which has no bare counterpart;
// - a slow viewer: frames the runtime wrote while the stream's client read nothing for 2 s, against the same bare
//   screencast whose acks are withheld as long, and against what a reading viewer gets meanwhile;
// - input to the new frame: POST .../browser/input (one character typed into a focused field) until its answer,
//   which carries the new frame, against the same keystroke and page.screenshot done directly on a bare page; and
//   ours again while a viewer reads the stream, as a person watching what they type.
// Nothing here asserts a time.
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Browser, CDPSession, Page } from 'playwright-core';
import { STREAM_QUALITY } from '@agentplane/runtime/browsers/handoff';
import { VIEWPORT } from '@agentplane/runtime/browsers/pool';
import { MODEL, providerSection } from '../chat/fixture.js';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { configuredTenant, startTestRuntime } from '../harness/runtime.js';
import { latencyColumns, finishTable, summarise, Teardown, timingRow, type Row, type Table } from './measure.js';

/** Seconds of screencast counted per target, in two halves (A B B A), after a second's warm-up each. */
const STREAM_SECONDS = Number(process.env.BENCH_BROWSER_STREAM_SECONDS ?? 6);
const INPUTS = Number(process.env.BENCH_BROWSER_INPUTS ?? 200);
/** How long the slow viewer reads nothing. */
const SLOW_MS = Number(process.env.BENCH_BROWSER_SLOW_MS ?? 2_000);
const CAPABILITIES = ['chat', 'browser', 'browser_handoff'];
/** The input frame's JPEG quality, as the input route takes it. */
const INPUT_QUALITY = 70;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The pages: one that changes every animation frame (a counter and a moving box), with a link to one to type in. */
function pageSite() {
  return createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    const style = 'body{margin:0;font:16px sans-serif} #next{position:absolute;left:10px;top:10px;width:120px;height:30px;display:block}';
    if (req.url === '/type') {
      return res.end(
        `<!doctype html><title>Type</title><style>${style} #f{position:absolute;left:100px;top:100px;width:600px;height:30px} #n{position:absolute;left:100px;top:160px}</style>` +
          `<input id="f" autofocus aria-label="Field" oninput="document.getElementById('n').textContent=this.value.length"><p id="n">0</p>${'<p>Lorem ipsum dolor sit amet.</p>'.repeat(10)}`,
      );
    }
    return res.end(
      `<!doctype html><title>Moving</title><style>${style} #box{position:absolute;left:0;top:200px;width:120px;height:120px;background:#c33} h1{position:absolute;left:200px;top:40px}</style>` +
        `<a id="next" href="/type">Type</a><h1>Frame <span id="n">0</span></h1><div id="box"></div>${'<p style="margin-left:20px">Lorem ipsum dolor sit amet.</p>'.repeat(5)}` +
        `<script>let n = 0; const box = document.getElementById('box'), count = document.getElementById('n');` +
        `(function tick() { n++; count.textContent = String(n); box.style.left = (n * 7 % 1100) + 'px'; requestAnimationFrame(tick); })();</script>`,
    );
  });
}

interface StreamCount {
  frames: number;
  jpegBytes: number;
  wireBytes: number;
}

/** What one side of the screencast comparison does: starts counting frames, and stops. */
interface Screencaster {
  impl: string;
  baseline?: boolean;
  start(count: StreamCount, counting: () => boolean): Promise<() => Promise<void>>;
}

/** Bare Chromium: Page.startScreencast over playwright-core's CDP session, each frame acknowledged as it comes. */
function bareScreencast(page: Page): Screencaster {
  return {
    impl: 'bare Chromium: CDP Page.startScreencast, immediate acks',
    baseline: true,
    async start(count, counting) {
      const cdp: CDPSession = await page.context().newCDPSession(page);
      cdp.on('Page.screencastFrame', (event: { data: string; sessionId: number }) => {
        if (counting()) {
          count.frames++;
          count.jpegBytes += Buffer.byteLength(event.data, 'base64');
          count.wireBytes += event.data.length;
        }
        void cdp.send('Page.screencastFrameAck', { sessionId: event.sessionId }).catch(() => undefined);
      });
      await cdp.send('Page.startScreencast', { format: 'jpeg', quality: STREAM_QUALITY, maxWidth: VIEWPORT.width, maxHeight: VIEWPORT.height, everyNthFrame: 1 });
      return async () => {
        await cdp.send('Page.stopScreencast').catch(() => undefined);
        await cdp.detach().catch(() => undefined);
      };
    },
  };
}

/** An SSE client of our stream over node:http, counting bytes on the wire; `pause`/`resume` for the slow viewer. */
function openStream(url: string, token: string, onFrame: (data: string, wire: number) => void): Promise<{ response: IncomingMessage; close(): void }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (response) => {
      if (response.statusCode !== 200) {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => reject(new Error(`GET ${url} answered ${response.statusCode}: ${body}`)));
        return;
      }
      let buffer = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffer += chunk;
        let boundary: number;
        while ((boundary = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, boundary);
          buffer = buffer.slice(boundary + 2);
          const data = block.split('\n').find((line) => line.startsWith('data: '));
          if (!data || !/^event: frame$/m.test(block)) continue;
          onFrame((JSON.parse(data.slice(6)) as { data: string }).data, block.length + 2);
        }
      });
      response.on('error', () => undefined);
      resolve({ response, close: () => req.destroy() });
    });
    req.on('error', (error) => ((error as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(error)));
    req.end();
  });
}

/** Ours: GET .../browser/stream read as it comes. */
function ourScreencast(url: string, token: string): Screencaster {
  return {
    impl: 'GET .../browser/stream, SSE (ours)',
    async start(count, counting) {
      const stream = await openStream(url, token, (data, wire) => {
        if (!counting()) return;
        count.frames++;
        count.jpegBytes += Buffer.byteLength(data, 'base64');
        count.wireBytes += wire;
      });
      return async () => {
        stream.close();
        // The route stops the screencast once it sees the viewer go.
        await sleep(300);
      };
    },
  };
}

/** Counts `seconds` of frames after a second's warm-up. */
async function countFrames(caster: Screencaster, seconds: number): Promise<StreamCount & { seconds: number }> {
  const count: StreamCount = { frames: 0, jpegBytes: 0, wireBytes: 0 };
  let on = false;
  const stop = await caster.start(count, () => on);
  await sleep(1_000);
  on = true;
  const t0 = performance.now();
  await sleep(seconds * 1000);
  on = false;
  const elapsed = (performance.now() - t0) / 1000;
  await stop();
  return { ...count, seconds: elapsed };
}

/** Frames the runtime writes to stream responses, as they are written: the slow viewer counts what was sent. */
interface WriteLog {
  writes: Array<{ at: number; bytes: number }>;
}

/**
 * Watches the runtime's server from outside: each SSE frame event written to a stream's response, when and how big.
 * It wraps `write` on those responses only; the runtime's code is unchanged.
 */
function logStreamWrites(server: Server): WriteLog {
  const log: WriteLog = { writes: [] };
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!req.url?.includes('/browser/stream')) return;
    const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === 'string' && chunk.includes('event: frame\n')) log.writes.push({ at: performance.now(), bytes: Buffer.byteLength(chunk) });
      return write(chunk, ...rest);
    }) as typeof res.write;
  });
  return log;
}

/**
 * Ours with a slow viewer: the client stops reading once a frame came, for `pauseMs`; the frames the runtime wrote
 * to the response meanwhile, and in the pause's last half second (none once the stream is held back).
 */
async function slowViewer(url: string, token: string, pauseMs: number, log: WriteLog, impl = 'GET .../browser/stream, the client not reading (ours)'): Promise<Row> {
  let read = 0;
  const stream = await openStream(url, token, () => read++);
  while (read < 1) await sleep(5);
  stream.response.pause();
  const from = performance.now();
  await sleep(pauseMs);
  const to = performance.now();
  stream.close();
  await sleep(300);
  const sent = log.writes.filter((write) => write.at > from && write.at <= to);
  return {
    case: `frames sent while nothing is read for ${pauseMs / 1000} s`,
    impl,
    figures: { frames: sent.length, kib: sent.reduce((sum, write) => sum + write.bytes, 0) / 1024, lastHalf: sent.filter((write) => write.at > to - 500).length },
  };
}

export async function handoffTables(bare: Browser): Promise<Table[]> {
  const teardown = new Teardown();
  try {
    const site = pageSite();
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    teardown.add(() => site.close());
    const siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    const fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-bench-handoff-0001', chatModels: [MODEL], record: false });
    teardown.add(() => fake.stop());
    const rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', BROWSER_HOST: 'local', BROWSER_ALLOWED_DESTINATIONS: new URL(siteUrl).host } });
    teardown.add(() => rt.stop());
    const writes = logStreamWrites(rt.server);
    const tenant = await configuredTenant(rt, { ceiling: { capabilities: CAPABILITIES, registeredModels: [MODEL] } });
    const pushed = await tenant.reconfigure({ providers: providerSection(fake, [MODEL]), default_model: MODEL });
    if (pushed.status !== 200) throw new Error(`configuring the tenant answered ${pushed.status}: ${await pushed.text()}`);
    const token = await tenant.mint({ sub: 'acme:alice', capabilities: CAPABILITIES });

    // The agent opens the moving page and hands it over.
    fake.script({ toolCalls: [{ name: 'browser_open', arguments: { url: `${siteUrl}/moving` } }] }, { toolCalls: [{ name: 'browser_handoff', arguments: { instructions: 'Type in the field.' } }] });
    const turn = await fetch(`${rt.url}/chat`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ message: 'Open the page.' }) });
    const done = (await turn.json()) as { session_id?: string; requires_action?: boolean };
    if (turn.status !== 200 || !done.requires_action || !done.session_id) throw new Error(`the turn did not hand the page over: ${turn.status} ${JSON.stringify(done)}`);
    const base = `${rt.url}/chat/sessions/${done.session_id}/browser`;
    const input = async (body: Record<string, unknown>) => {
      const response = await fetch(`${base}/input`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`POST .../browser/input answered ${response.status}: ${text}`);
      return JSON.parse(text) as { data: string; title: string };
    };

    // The same page in bare Chromium, the same viewport; both pages move all along, so each side's figures are taken
    // with the other browser painting too.
    const bareContext = await bare.newContext({ viewport: VIEWPORT });
    teardown.add(() => bareContext.close());
    const barePage = await bareContext.newPage();
    await barePage.goto(`${siteUrl}/moving`, { waitUntil: 'load' });

    // Screencast: A B B A, half the seconds each time, pooled.
    const casters = [bareScreencast(barePage), ourScreencast(`${base}/stream`, token)];
    const counts = new Map<Screencaster, StreamCount & { seconds: number }>();
    for (const caster of [...casters, ...[...casters].reverse()]) {
      const half = await countFrames(caster, STREAM_SECONDS / 2);
      const sofar = counts.get(caster);
      counts.set(caster, sofar ? { frames: sofar.frames + half.frames, jpegBytes: sofar.jpegBytes + half.jpegBytes, wireBytes: sofar.wireBytes + half.wireBytes, seconds: sofar.seconds + half.seconds } : half);
    }
    const streamRows: Row[] = casters.map((caster) => {
      const count = counts.get(caster)!;
      return {
        case: `a page changing every animation frame, JPEG quality ${STREAM_QUALITY}`,
        impl: caster.impl,
        baseline: caster.baseline ?? false,
        figures: {
          frames: count.frames,
          framesPerSec: count.frames / count.seconds,
          jpegKiB: count.jpegBytes / Math.max(1, count.frames) / 1024,
          wireKiB: count.wireBytes / Math.max(1, count.frames) / 1024,
        },
      };
    });

    // One element followed: each painted frame answered with that element's picture (the h1 counter changes every frame).
    const followed = await countFrames(ourScreencast(`${base}/stream?selector=h1`, token), STREAM_SECONDS / 2);
    streamRows.push({
      case: 'the same page, one element followed (?selector=h1)',
      impl: 'GET .../browser/stream?selector=h1, SSE (ours)',
      figures: { frames: followed.frames, framesPerSec: followed.frames / followed.seconds, jpegKiB: followed.jpegBytes / Math.max(1, followed.frames) / 1024, wireKiB: followed.wireBytes / Math.max(1, followed.frames) / 1024 },
    });

    // A slow viewer. Bare: Chromium's screencast, the first frame acknowledged, then none for the pause.
    const slowRows: Row[] = [];
    {
      const cdp = await bareContext.newCDPSession(barePage);
      const frames: Array<{ at: number; bytes: number }> = [];
      let holding = true;
      const held: number[] = [];
      cdp.on('Page.screencastFrame', (event: { data: string; sessionId: number }) => {
        frames.push({ at: performance.now(), bytes: event.data.length });
        if (holding && frames.length > 1) held.push(event.sessionId);
        else void cdp.send('Page.screencastFrameAck', { sessionId: event.sessionId }).catch(() => undefined);
      });
      await cdp.send('Page.startScreencast', { format: 'jpeg', quality: STREAM_QUALITY, maxWidth: VIEWPORT.width, maxHeight: VIEWPORT.height, everyNthFrame: 1 });
      while (frames.length < 1) await sleep(5);
      const from = performance.now();
      await sleep(SLOW_MS);
      const to = performance.now();
      holding = false;
      for (const sessionId of held) await cdp.send('Page.screencastFrameAck', { sessionId }).catch(() => undefined);
      await cdp.send('Page.stopScreencast').catch(() => undefined);
      await cdp.detach().catch(() => undefined);
      const sent = frames.filter((frame) => frame.at > from && frame.at <= to);
      slowRows.push({
        case: `frames sent while nothing is read for ${SLOW_MS / 1000} s`,
        impl: 'bare Chromium: CDP screencast, acks withheld',
        baseline: true,
        figures: { frames: sent.length, kib: sent.reduce((sum, frame) => sum + frame.bytes, 0) / 1024, lastHalf: sent.filter((frame) => frame.at > to - 500).length },
      });
    }
    slowRows.push(await slowViewer(`${base}/stream`, token, SLOW_MS, writes));
    // The typed client's way: the viewer acknowledges each frame it took (`ack=true`); here it takes none.
    slowRows.push(await slowViewer(`${base}/stream?ack=true`, token, SLOW_MS, writes, 'GET .../browser/stream?ack=true, the client acknowledging nothing (ours, as the typed client and the console read it)'));
    const reading = streamRows.find((row) => !row.baseline && !row.case.includes('selector'))!.figures;
    slowRows.push({
      case: `frames sent while nothing is read for ${SLOW_MS / 1000} s`,
      impl: `for scale: what a reading viewer of ours gets in ${SLOW_MS / 1000} s (frames/s above)`,
      figures: { frames: Math.round(reading.framesPerSec! * (SLOW_MS / 1000)), kib: reading.framesPerSec! * (SLOW_MS / 1000) * reading.wireKiB! },
    });

    // Input to the new frame: both pages go to the field (ours by the person's click on the link), and a click in
    // it; then one character at a time, ours and bare in turn, the order swapped each round.
    // A click that navigates may answer 500 (the screenshot races the navigation: see docs/benchmarks.md); the
    // navigation happens all the same, and the clicks below wait for it.
    const linkClick = await fetch(`${base}/input`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ type: 'click', x: 40, y: 25 }) });
    await linkClick.arrayBuffer();
    for (let tries = 0; (await input({ type: 'click', x: 300, y: 115 })).title !== 'Type'; tries++) {
      if (tries > 50) throw new Error('the hand-off page did not reach /type');
      await sleep(100);
    }
    await barePage.click('#next');
    await barePage.waitForURL(`${siteUrl}/type`);
    await barePage.mouse.click(300, 115);
    const targets = [
      {
        impl: 'bare Chromium: keyboard.type + page.screenshot (JPEG 70)',
        baseline: true,
        op: async () => {
          await barePage.keyboard.type('a');
          await barePage.screenshot({ type: 'jpeg', quality: INPUT_QUALITY });
        },
      },
      { impl: 'POST .../browser/input {type: text} (ours)', baseline: false, op: () => input({ type: 'text', text: 'a' }) },
    ];
    const latencies = targets.map(() => [] as number[]);
    for (let round = -10; round < INPUTS; round++) {
      for (let k = 0; k < targets.length; k++) {
        const index = (Math.abs(round) + k) % targets.length;
        const t0 = performance.now();
        await targets[index]!.op();
        if (round >= 0) latencies[index]!.push(performance.now() - t0);
      }
    }
    // Ours again with a viewer reading the stream meanwhile, as a person sees what they type.
    const watched: number[] = [];
    let watchedFrames = 0;
    const viewer = await openStream(`${base}/stream`, token, () => watchedFrames++);
    for (let round = -10; round < INPUTS / 2; round++) {
      const t0 = performance.now();
      await input({ type: 'text', text: 'a' });
      if (round >= 0) watched.push(performance.now() - t0);
    }
    viewer.close();
    await sleep(300);
    const inputRows = targets.map((target, i) => timingRow('one character typed, then the new frame', target, summarise(latencies[i]!, latencies[i]!.reduce((a, b) => a + b, 0))));

    inputRows.push(timingRow('one character typed, then the new frame', { impl: `the same, a viewer reading the stream meanwhile (ours; ${watchedFrames} frames streamed)` }, summarise(watched, watched.reduce((a, b) => a + b, 0))));

    return [
      finishTable({
        title: 'The hand-off: the screencast (targets: ≥ 10 frames/s on a changing page)',
        columns: [
          { key: 'frames', label: 'frames' },
          { key: 'framesPerSec', label: 'frames/s', ratio: true },
          { key: 'jpegKiB', label: 'JPEG KiB/frame', ratio: true },
          { key: 'wireKiB', label: 'wire KiB/frame' },
        ],
        rows: streamRows,
        note: `${STREAM_SECONDS} s each, in two halves (A B B A) after 1 s of warm-up each; 1280×800; both pages move all along. Wire: base64 (bare: the CDP message's data; ours: the SSE event).`,
      }),
      finishTable({
        title: `The hand-off: a slow viewer, frames sent while it reads nothing for ${SLOW_MS / 1000} s (Chromium's own screencast stops at its acks)`,
        columns: [
          { key: 'frames', label: 'frames', ratio: true },
          { key: 'kib', label: 'wire KiB' },
          { key: 'lastHalf', label: 'of them in the last 0.5 s' },
        ],
        rows: slowRows,
        note: 'After one frame read (bare: acknowledged). Ours: SSE frame events the runtime wrote to the response while its client read nothing (the server watched from outside); bare: CDP frames received.',
      }),
      finishTable({
        title: 'The hand-off: input to the new frame, on loopback (target: ≤ 150 ms p50)',
        columns: latencyColumns,
        rows: inputRows,
        note: `${INPUTS} inputs each after 10 warm-up, the first two in turn, then ${INPUTS / 2} with a viewer; the answer carries a 1280×800 JPEG at quality ${INPUT_QUALITY} (ours: base64 in JSON). The click on a link that led there answered ${linkClick.status}.`,
      }),
    ];
  } finally {
    await teardown.run();
  }
}
