// Turn engine: what a turn through the runtime costs over calling the fake provider directly with the `openai` SDK,
// both measured in this run. Cases: blocking-turn latency at 1, 16 and 64 clients, time to first token, frames per
// second on one long stream, memory per open stream (in child processes), and replaying a 2,000-frame run against
// reading its log from the event port. Fake provider, runtime and clients share one process, as in the chat tests.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import OpenAI from 'openai';
import { runLogKey } from '@agentplane/runtime/chat/runs';
import { chatWorld, MODEL, OTHER_MODEL, type ChatWorld } from '../chat/fixture.js';
import { FakeOpenAIServer, type ScriptedAnswer } from '../fakes/openai-server.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { sseEvents } from '../harness/sse.js';
import { typeScriptNodeArgs } from '../harness/process.js';
import {
  Teardown,
  finishTable,
  latencyColumns,
  runCases,
  summarise,
  timeConcurrent,
  type BenchReport,
  type Case,
  type Column,
  type LoopOptions,
  type Row,
  type Subject,
  type Table,
  type Timing,
} from './measure.js';

const PROMPT = 'Tell me in one sentence what a benchmark is for.';
/** The default reply echoes the prompt, so this one yields a 48-word streamed answer. */
const LONG_PROMPT = Array.from({ length: 48 }, (_, i) => `word${i}`).join(' ');
const CLIENTS = [1, 16, 64] as const;
const BLOCKING: Record<(typeof CLIENTS)[number], LoopOptions> = {
  1: { warmup: 20, ops: 160 },
  16: { warmup: 32, ops: 384 },
  64: { warmup: 64, ops: 640 },
};
const FIRST_TOKEN = { warmup: 10, ops: 100 };
const LONG_REPLY_WORDS = 5_000;
const LONG_STREAM = { warmup: 1, ops: 4 };
/** start + 1,998 tokens + done. */
const REPLAY_FRAMES = 2_000;
const REPLAY = { warmup: 3, ops: 20 };
const OPEN_STREAMS = [200, 500];
/** Slow enough that a stream sends a handful of frames while the rest open and memory is read. */
const OPEN_STREAM_DRIP_MS = 1_000;

const words = (count: number) => Array.from({ length: count }, (_, i) => `w${i}`).join(' ');

/** One way of doing the work: the SDK straight to the fake (baseline), or the runtime in front of it. */
interface ChatTarget extends Subject {
  /** One non-streamed answer to `PROMPT`. */
  blocking(): Promise<void>;
  /** Ms from sending a streamed request to its first text; the rest of the stream is read untimed. */
  firstToken(): Promise<number>;
  /** Reads a whole streamed answer (the fake's next scripted reply); returns how many text pieces came. */
  streamAll(): Promise<number>;
}

function direct(fake: FakeOpenAIServer): ChatTarget {
  const client = new OpenAI({ baseURL: fake.url, apiKey: fake.apiKey, maxRetries: 0 });
  return {
    impl: 'openai SDK → fake',
    baseline: true,
    async blocking() {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] });
    },
    async firstToken() {
      const t0 = performance.now();
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: LONG_PROMPT }], stream: true });
      let at: number | undefined;
      for await (const chunk of stream) if (at === undefined && chunk.choices[0]?.delta.content) at = performance.now();
      if (at === undefined) throw new Error('the fake streamed no text');
      return at - t0;
    },
    async streamAll() {
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'go' }], stream: true });
      let pieces = 0;
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) pieces++;
      return pieces;
    },
  };
}

async function ours(world: ChatWorld, impl: string): Promise<ChatTarget> {
  const token = await world.token();
  // No session_id: every turn opens its own session, so no history grows and concurrent clients never share one.
  const streamFrames = async function* (message: string) {
    const response = await world.stream(token, { message });
    if (response.status !== 200) throw new Error(`POST /chat/stream answered ${response.status}: ${await response.text()}`);
    yield* sseEvents(response);
  };
  return {
    impl,
    async blocking() {
      const response = await world.chat(token, { message: PROMPT });
      if (response.status !== 200) throw new Error(`POST /chat answered ${response.status}: ${await response.text()}`);
      await response.json();
    },
    async firstToken() {
      const t0 = performance.now();
      let at: number | undefined;
      for await (const frame of streamFrames(LONG_PROMPT)) {
        if (at === undefined && frame.event === 'token') at = performance.now();
        if (frame.event === 'error') throw new Error(`the run failed: ${JSON.stringify(frame.data)}`);
      }
      if (at === undefined) throw new Error('the run streamed no token');
      return at - t0;
    },
    async streamAll() {
      let tokens = 0;
      for await (const frame of streamFrames('go')) {
        if (frame.event === 'token') tokens++;
        if (frame.event === 'error') throw new Error(`the run failed: ${JSON.stringify(frame.data)}`);
      }
      return tokens;
    },
  };
}

/** `sample` called `ops` times after `warmup`, each returning the ms it measured itself. */
async function timeSamples(sample: () => Promise<number>, options: LoopOptions): Promise<Timing> {
  for (let i = 0; i < options.warmup; i++) await sample();
  const samples: number[] = [];
  const start = performance.now();
  for (let i = 0; i < options.ops; i++) samples.push(await sample());
  return summarise(samples, performance.now() - start);
}

const addedColumns: Column[] = [
  { key: 'addedP50Ms', label: '+p50 ms' },
  { key: 'addedP99Ms', label: '+p99 ms' },
];

/** Each row's p50 and p99 minus its case's baseline's: the milliseconds our layer adds. */
function withAdded(table: Table): Table {
  for (const row of table.rows) {
    const base = table.rows.find((candidate) => candidate.case === row.case && candidate.baseline);
    if (!base || row === base) continue;
    row.figures.addedP50Ms = row.figures.p50Ms! - base.figures.p50Ms!;
    row.figures.addedP99Ms = row.figures.p99Ms! - base.figures.p99Ms!;
  }
  return finishTable(table);
}

async function latencyTable(setup: string, fake: FakeOpenAIServer, targets: ChatTarget[]): Promise<Table> {
  fake.clearScripts();
  const cases: Case<ChatTarget>[] = CLIENTS.map((clients) => ({
    name: `blocking turn, ${clients} client${clients === 1 ? '' : 's'}`,
    loop: BLOCKING[clients],
    time: (target, loop) => timeConcurrent(() => target.blocking(), { ...loop, callers: clients }),
  }));
  cases.push({
    name: 'first token (48-word answer)',
    loop: FIRST_TOKEN,
    time: (target, loop) => timeSamples(() => target.firstToken(), loop),
  });
  return withAdded({
    title: `chat: turn latency over the fake provider (${setup})`,
    columns: [...latencyColumns, ...addedColumns, { key: 'cpuMsPerOp', label: 'cpu ms/op', ratio: true }],
    rows: await runCases(cases, targets),
    note:
      'blocking: POST /chat vs one non-streamed SDK call (the runtime streams from the provider either way); each turn a new session. ' +
      'first token: the first `token` frame of POST /chat/stream vs the first chunk with text from the SDK. ' +
      'cpu ms/op: CPU of the whole bench process per turn (client, runtime and fake for ours; client and fake for the SDK).',
  });
}

async function longStreamTable(setup: string, fake: FakeOpenAIServer, targets: ChatTarget[]): Promise<Table> {
  const reply: ScriptedAnswer = { text: words(LONG_REPLY_WORDS), chunkBy: 'word' };
  const measurement: Case<ChatTarget> = {
    name: `one stream, ${LONG_REPLY_WORDS.toLocaleString('en-US')} tokens`,
    loop: LONG_STREAM,
    time: (target, loop) =>
      timeSamples(async () => {
        fake.script(reply);
        const t0 = performance.now();
        const pieces = await target.streamAll();
        const elapsed = performance.now() - t0;
        if (pieces !== LONG_REPLY_WORDS) throw new Error(`${target.impl}: ${pieces} of ${LONG_REPLY_WORDS} tokens arrived`);
        return elapsed;
      }, loop),
    extra: (timing) => ({ framesPerSec: (LONG_REPLY_WORDS / timing.p50Ms) * 1000 }),
  };
  return finishTable({
    title: `chat: frames relayed per second by one process (${setup})`,
    columns: [
      { key: 'ops', label: 'streams' },
      { key: 'p50Ms', label: 'p50 ms', ratio: true },
      { key: 'framesPerSec', label: 'frames/s', ratio: true },
    ],
    rows: await runCases([measurement], targets),
    note: 'POST /chat/stream read to its end (one `token` frame per provider chunk) vs the same stream read from the fake with the SDK; frames/s at p50.',
  });
}

/** A finished run of `REPLAY_FRAMES` frames, replayed over HTTP and read straight from the event port. */
async function replayTable(setup: string, world: ChatWorld): Promise<Table> {
  const token = await world.token();
  world.fake.script({ text: words(REPLAY_FRAMES - 2), chunkBy: 'word' });
  const response = await world.chat(token, { message: 'a long one' });
  if (response.status !== 200) throw new Error(`POST /chat answered ${response.status}: ${await response.text()}`);
  const { run_id: runId } = (await response.json()) as { run_id: string };
  const key = runLogKey(world.tenant.tenantId, runId);
  const count = (page: Awaited<ReturnType<typeof world.rt.runtime.events.logs.read>>) => ('events' in page ? page.events.length : 0);
  const held = count(await world.rt.runtime.events.logs.read(key, 0));
  if (held !== REPLAY_FRAMES) throw new Error(`the run wrote ${held} frames, expected ${REPLAY_FRAMES}`);

  const targets: Array<Subject & { read(): Promise<number> }> = [
    { impl: 'event port logs.read', baseline: true, read: async () => count(await world.rt.runtime.events.logs.read(key, 0)) },
    {
      impl: 'GET /chat/stream/{run_id}',
      read: async () => {
        const replay = await world.rt.endUser(`/chat/stream/${runId}`, token);
        if (replay.status !== 200) throw new Error(`GET /chat/stream/${runId} answered ${replay.status}`);
        let frames = 0;
        for await (const _frame of sseEvents(replay)) frames++;
        return frames;
      },
    },
  ];
  const measurement: Case<(typeof targets)[number]> = {
    name: `replay a finished run (${REPLAY_FRAMES.toLocaleString('en-US')} frames)`,
    loop: REPLAY,
    time: (target, loop) =>
      timeSamples(async () => {
        const t0 = performance.now();
        const frames = await target.read();
        const elapsed = performance.now() - t0;
        if (frames !== REPLAY_FRAMES) throw new Error(`${target.impl}: read ${frames} of ${REPLAY_FRAMES} frames`);
        return elapsed;
      }, loop),
    extra: (timing) => ({ framesPerSec: (REPLAY_FRAMES / timing.p50Ms) * 1000 }),
  };
  return withAdded({
    title: `chat: resume replay (${setup})`,
    columns: [...latencyColumns, ...addedColumns, { key: 'framesPerSec', label: 'frames/s' }],
    rows: await runCases([measurement], targets),
    note: 'HTTP replay includes auth, the visibility check, SSE writing and the client parsing every frame; the port read parses JSON only.',
  });
}

// ---- memory per open stream, in a fresh child process per measurement ----

interface StreamsSpec {
  subject: 'sdk' | 'runtime';
  streams: number;
}

interface StreamsResult {
  open: number;
  openMs: number;
  /** Runs the engine held when memory was read (runtime only). */
  heldRuns: number;
  before: NodeJS.MemoryUsage;
  after: NodeJS.MemoryUsage;
}

const SELF = fileURLToPath(import.meta.url);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const KiB = 1024;
const MiB = 1024 * 1024;

function runStreamsProbe(spec: StreamsSpec): Promise<StreamsResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', ...typeScriptNodeArgs, SELF, 'open-streams', JSON.stringify(spec)], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const last = stdout.trim().split('\n').pop() ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as StreamsResult);
      else reject(new Error(`open-streams probe ${spec.subject} × ${spec.streams} exited ${code}:\n${stderr.slice(-2000)}`));
    });
  });
}

/** Several collections, so garbage from starting up or opening does not count. */
function settled(): NodeJS.MemoryUsage {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the open-streams probe needs node --expose-gc');
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage();
}

/**
 * In the child: starts the fake (and the runtime in front of it), makes one warm-up stream, reads memory, opens
 * `streams` streams whose answers drip one word a second, waits until each has shown its first text, and reads
 * memory again. Clients, fake and runtime are all in the process, as in the other cases.
 */
async function openStreamsProbe(spec: StreamsSpec): Promise<StreamsResult> {
  const fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL], record: false });
  // 90 words at one a second: every stream is still open when the last one has opened.
  const slow: ScriptedAnswer = { text: words(90), dripMs: OPEN_STREAM_DRIP_MS };
  let world: ChatWorld | undefined;
  try {
    let openOne: () => Promise<() => void>;
    if (spec.subject === 'sdk') {
      const client = new OpenAI({ baseURL: fake.url, apiKey: fake.apiKey, maxRetries: 0, timeout: 600_000 });
      openOne = async () => {
        const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'go' }], stream: true });
        const chunks = stream[Symbol.asyncIterator]();
        for (;;) {
          const next = await chunks.next();
          if (next.done) throw new Error('the stream ended before its first text');
          if (next.value.choices[0]?.delta.content) break;
        }
        return () => stream.controller.abort();
      };
    } else {
      const opened = await chatWorld({ PROVIDER_TIMEOUT_MS: '60000' }, { fake });
      world = opened;
      const token = await opened.token();
      openOne = async () => {
        const controller = new AbortController();
        const response = await opened.rt.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'go' }), signal: controller.signal });
        if (response.status !== 200) throw new Error(`POST /chat/stream answered ${response.status}: ${await response.text()}`);
        const frames = sseEvents(response);
        for (;;) {
          const next = await frames.next();
          if (next.done) throw new Error('the stream ended before its first token');
          if (next.value.event === 'token') break;
        }
        return () => controller.abort();
      };
    }
    // Warm-up: every module and code path a stream uses is loaded before the first reading.
    fake.script({ text: words(3) });
    (await openOne())();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = settled();
    fake.script(...Array.from({ length: spec.streams }, () => slow));
    const started = performance.now();
    const closers = await Promise.all(Array.from({ length: spec.streams }, () => openOne()));
    const openMs = performance.now() - started;
    const after = settled();
    const heldRuns = world?.rt.runtime.engine.heldRuns ?? 0;
    for (const close of closers) close();
    return { open: closers.length, openMs, heldRuns, before, after };
  } finally {
    // The fake stops first: its cut streams end the runs, so the runtime stops without waiting on them.
    await fake.stop();
    await world?.stop();
  }
}

async function openStreamsTable(): Promise<Table> {
  const rows: Row[] = [];
  for (const streams of OPEN_STREAMS) {
    for (const subject of ['sdk', 'runtime'] as const) {
      const result = await runStreamsProbe({ subject, streams });
      const perStream = (bytes: number) => bytes / streams / KiB;
      rows.push({
        case: `${streams} open streams`,
        impl: subject === 'sdk' ? 'openai SDK → fake' : 'POST /chat/stream',
        baseline: subject === 'sdk',
        figures: {
          open: result.open,
          heldRuns: result.heldRuns,
          openSec: result.openMs / 1000,
          rssDeltaMiB: (result.after.rss - result.before.rss) / MiB,
          rssPerStreamKiB: perStream(result.after.rss - result.before.rss),
          heapPerStreamKiB: perStream(result.after.heapUsed - result.before.heapUsed),
          externalPerStreamKiB: perStream(result.after.external + result.after.arrayBuffers - result.before.external - result.before.arrayBuffers),
        },
      });
    }
  }
  for (const row of rows) {
    const base = rows.find((candidate) => candidate.case === row.case && candidate.baseline);
    if (base && row !== base) row.figures.addedRssPerStreamKiB = row.figures.rssPerStreamKiB! - base.figures.rssPerStreamKiB!;
  }
  return finishTable({
    title: 'chat: open streams held by one process, and memory per stream (fresh process each, embedded)',
    columns: [
      { key: 'open', label: 'open' },
      { key: 'heldRuns', label: 'runs held' },
      { key: 'openSec', label: 'open s', ratio: true },
      { key: 'rssDeltaMiB', label: 'ΔRSS MiB' },
      { key: 'rssPerStreamKiB', label: 'RSS KiB/stream', ratio: true },
      { key: 'addedRssPerStreamKiB', label: '+RSS KiB/stream' },
      { key: 'heapPerStreamKiB', label: 'heap KiB/stream', ratio: true },
      { key: 'externalPerStreamKiB', label: 'buffers KiB/stream' },
    ],
    rows,
    note:
      `each stream's answer drips a word every ${OPEN_STREAM_DRIP_MS} ms and is open past its first text; Δ = after opening all minus after one warm-up stream; ` +
      'per stream counts client, fake and (ours) runtime, all in the one process.',
  });
}

// ---- the bench ----

/** Blocking latency, first token and replay on one setup; the long stream and open streams only on embedded. */
async function measureSetup(report: BenchReport, setup: string, env: Record<string, string>, full: boolean): Promise<void> {
  const teardown = new Teardown();
  try {
    const fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL], record: false });
    teardown.add(() => fake.stop());
    const world = await chatWorld({ ...env, PROVIDER_TIMEOUT_MS: '60000' }, { fake });
    teardown.add(() => world.stop());
    const targets = [direct(fake), await ours(world, `ours (${setup})`)];
    report.tables.push(await latencyTable(setup, fake, targets));
    if (full) report.tables.push(await longStreamTable(setup, fake, targets));
    report.tables.push(await replayTable(setup, world));
  } finally {
    await teardown.run();
  }
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'chat', tables: [], skipped: [] };
  await measureSetup(report, 'embedded', {}, true);
  report.tables.push(await openStreamsTable());
  if (!availableSetups().includes('scale')) {
    report.skipped.push('scale: PostgreSQL, Redis or MinIO binary not found');
    return report;
  }
  const services = await ScaleServices.start();
  try {
    await measureSetup(report, 'scale', await services.env(), false);
  } finally {
    await services.stop();
  }
  return report;
}

// Run as `node --expose-gc --import tsx chat.bench.ts open-streams <spec>` by openStreamsTable: the probe, not the bench.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2] === 'open-streams') {
  const result = await openStreamsProbe(JSON.parse(process.argv[3] ?? '{}') as StreamsSpec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
