// Turn engine: what a turn through the runtime costs over calling the fake provider directly with the `openai` SDK,
// both measured in this run. Cases: blocking-turn latency at 1, 16 and 64 clients, time to first token, frames per
// second on one long stream, memory per open stream (in child processes), and replaying a 2,000-frame run against
// reading its log from the event port. Fake provider, runtime and clients share one process, as in the chat tests.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8';
import { fileURLToPath, pathToFileURL } from 'node:url';
import OpenAI from 'openai';
import { startHeapRelease, type HeapRelease } from '@agentplane/lib/heap-release';
import { silentLogger } from '@agentplane/lib/logging';
import { runLogKey } from '@agentplane/runtime/chat/runs';
import { CHAT_CAPABILITIES, chatRuntime, chatWorld, MODEL, OTHER_MODEL, providerSection, type ChatWorld } from '../chat/fixture.js';
import { FakeOpenAIServer, type ScriptedAnswer } from '../fakes/openai-server.js';
import { makeTempDir, typeScriptNodeArgs } from '../harness/process.js';
import { availableSetups, configuredTenant, ScaleServices } from '../harness/runtime.js';
import { sseEvents } from '../harness/sse.js';
import { processCpuMs, runJsonChild, startProviderProcess, startRuntimeProcess, type ProviderProcess } from './children.js';
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
  // A thousand samples: the p99 of 160 was their second largest, and one collection's pause moved it by 10 ms.
  1: { warmup: 20, ops: 1_000 },
  16: { warmup: 32, ops: 384 },
  64: { warmup: 64, ops: 640 },
};
const FIRST_TOKEN = { warmup: 10, ops: 400 };
const LONG_REPLY_WORDS = 5_000;
const LONG_STREAM = { warmup: 1, ops: 4 };
/** start + 1,998 tokens + done. */
const REPLAY_FRAMES = 2_000;
const REPLAY = { warmup: 3, ops: 20 };
const OPEN_STREAMS = [500, 5_000];
/** Turns answered at each memory reading of the retention probe. */
const RETENTION_CHECKPOINTS = [1_000, 10_000, 20_000];
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
  /** One streamed answer to `PROMPT`, read to its end: a stream start, as a chat UI makes one. */
  streamed(): Promise<void>;
  /**
   * CPU ms used so far by the processes that serve this target (outside layout: the fake provider's, plus the
   * runtime's for ours); when set, a row's cpu ms/op is theirs instead of the bench process's.
   */
  serverCpuMs?: () => number;
}

function direct(fake: Pick<FakeOpenAIServer, 'url' | 'apiKey'>): ChatTarget {
  const client = new OpenAI({ baseURL: fake.url, apiKey: fake.apiKey, maxRetries: 0 });
  // The runtime asks a stream for its usage (a turn's cost); asked the same, the provider sends the same chunks.
  const usage = { stream_options: { include_usage: true } };
  return {
    impl: 'openai SDK → fake',
    baseline: true,
    async blocking() {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] });
    },
    async firstToken() {
      const t0 = performance.now();
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: LONG_PROMPT }], stream: true, ...usage });
      let at: number | undefined;
      for await (const chunk of stream) if (at === undefined && chunk.choices[0]?.delta.content) at = performance.now();
      if (at === undefined) throw new Error('the fake streamed no text');
      return at - t0;
    },
    async streamAll() {
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'go' }], stream: true, ...usage });
      let pieces = 0;
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) pieces++;
      return pieces;
    },
    async streamed() {
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], stream: true, ...usage });
      for await (const _chunk of stream);
    },
  };
}

async function ours(world: Pick<ChatWorld, 'token' | 'chat' | 'stream'>, impl: string): Promise<ChatTarget> {
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
    async streamed() {
      for await (const frame of streamFrames(PROMPT)) {
        if (frame.event === 'error') throw new Error(`the run failed: ${JSON.stringify(frame.data)}`);
      }
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

/** A timing whose cpu ms/op is the serving processes' when the target can tell (the outside layout). */
async function servedBy(target: ChatTarget, time: () => Promise<Timing>): Promise<Timing> {
  const before = target.serverCpuMs?.();
  const timing = await time();
  if (before === undefined) return timing;
  return { ...timing, cpuMsPerOp: (target.serverCpuMs!() - before) / timing.ops };
}

/**
 * Turns made and discarded before a latency table, on every target. A process fresh from start runs its turn path
 * in V8's interpreter and compiles it on other threads meanwhile, for the first thousand turns or so; a deployed
 * runtime is long past that, and a table that begins with it measures the compiler (2026-11-27: the first case,
 * one client, measured 8-10 ms of server CPU per turn where the warm 16-client case measured 4-5).
 */
const WARM_UP = { blocking: 1_200, streamed: 300, callers: 4 };

async function warmUp(target: ChatTarget): Promise<void> {
  await timeConcurrent(() => target.blocking(), { warmup: 0, ops: WARM_UP.blocking, callers: WARM_UP.callers });
  await timeConcurrent(() => target.streamed(), { warmup: 0, ops: WARM_UP.streamed, callers: WARM_UP.callers });
}

async function latencyTable(setup: string, fake: Pick<FakeOpenAIServer, 'clearScripts'> | undefined, targets: ChatTarget[]): Promise<Table> {
  fake?.clearScripts();
  for (const target of targets) await warmUp(target);
  const outside = targets.some((target) => target.serverCpuMs);
  const cases: Case<ChatTarget>[] = CLIENTS.map((clients) => ({
    name: `blocking turn, ${clients} client${clients === 1 ? '' : 's'}`,
    loop: BLOCKING[clients],
    time: (target, loop) => servedBy(target, () => timeConcurrent(() => target.blocking(), { ...loop, callers: clients })),
  }));
  cases.push({
    name: 'streamed turn, 16 clients',
    loop: BLOCKING[16],
    time: (target, loop) => servedBy(target, () => timeConcurrent(() => target.streamed(), { ...loop, callers: 16 })),
  });
  cases.push({
    name: 'first token (48-word answer)',
    loop: FIRST_TOKEN,
    time: (target, loop) => timeSamples(() => target.firstToken(), loop),
  });
  if (outside) {
    return withAdded({
      title: `chat: turn latency, runtime and fake provider each in a process of its own (${setup})`,
      columns: [...latencyColumns, ...addedColumns, { key: 'cpuMsPerOp', label: 'server cpu ms/op', ratio: true }],
      rows: await runCases(cases, targets),
      note:
        'as a client sees it: the compiled runtime as its own process, the fake provider in another, clients in the bench process. ' +
        'server cpu ms/op: CPU of the fake provider process per call (SDK), of the runtime and fake processes per turn (ours), from /proc.',
    });
  }
  return withAdded({
    title: `chat: turn latency over the fake provider (${setup})`,
    columns: [...latencyColumns, ...addedColumns, { key: 'cpuMsPerOp', label: 'cpu ms/op', ratio: true }],
    rows: await runCases(cases, targets),
    note:
      'blocking: POST /chat vs one non-streamed SDK call (the runtime streams from the provider either way); each turn a new session. ' +
      'streamed: POST /chat/stream read to its end vs an SDK stream read to its end (stream starts per second). ' +
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

// ---- memory, in fresh child processes: per open stream, and what turns leave behind ----

interface Provider {
  url: string;
  apiKey: string;
}

type ProbeSpec =
  | { probe: 'open-streams'; subject: 'sdk' | 'runtime' | 'runtime-alone'; streams: number; provider: Provider }
  | {
      probe: 'retention';
      provider: Provider;
      checkpoints: number[];
      clients: number;
      env: Record<string, string>;
      /** The turns' clients in another process, so what is read is the runtime's alone, as it is deployed. */
      clientsElsewhere: boolean;
    };

interface StreamsResult {
  open: number;
  openMs: number;
  /** Runs the engine held when memory was read (runtime only). */
  heldRuns: number;
  before: NodeJS.MemoryUsage;
  after: NodeJS.MemoryUsage;
}

interface RetentionResult {
  /** Memory after a settled GC once `turns` turns had been answered, for each checkpoint. */
  readings: Array<{ turns: number; memory: NodeJS.MemoryUsage; released: boolean; v8: { mallocedMiB: number; peakMallocedMiB: number; codeMiB: number } }>;
  statementsPerTurn: number;
}

const SELF = fileURLToPath(import.meta.url);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const KiB = 1024;
const MiB = 1024 * 1024;
const PROVIDER_KEY = 'sk-test-provider-key-0001';

const runProbe = <T>(spec: ProbeSpec, nodeArgs: string[] = []) =>
  runJsonChild<T>(SELF, ['probe', JSON.stringify(spec)], { nodeArgs: ['--expose-gc', ...nodeArgs], what: `${spec.probe} probe` });

/** With `BENCH_HEAP_SNAPSHOTS=dir`, a probe writes a heap snapshot at each reading there, to compare by constructor. */
function snapshot(name: string): void {
  const dir = process.env.BENCH_HEAP_SNAPSHOTS;
  if (dir) writeHeapSnapshot(join(dir, `${process.pid}-${name}.heapsnapshot`));
}

/** Several collections, so garbage from starting up or opening does not count. */
function settled(): NodeJS.MemoryUsage {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the memory probes need node --expose-gc');
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage();
}

/**
 * In the child: (the runtime in front of) the provider process, one warm-up stream, memory, then `streams` streams
 * opened at once, each read past its first text while its answer drips a word a second, and memory again. The
 * provider serves from its own process, so the figures are the client's (and the runtime's) alone, and the sockets
 * of 5,000 streams fit this process's descriptor limit.
 */
async function openStreamsProbe(spec: Extract<ProbeSpec, { probe: 'open-streams' }>): Promise<StreamsResult> {
  let world: Awaited<ReturnType<typeof chatRuntime>> | undefined;
  try {
    let openOne: () => Promise<() => void>;
    if (spec.subject === 'sdk') {
      const client = new OpenAI({ baseURL: spec.provider.url, apiKey: spec.provider.apiKey, maxRetries: 0, timeout: 600_000 });
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
    } else if (spec.subject === 'runtime-alone') {
      // The runtime alone in this process, as it is deployed: the streams' clients are another process, so what is
      // read here is what the runtime holds per stream (its provider calls included), not its clients' share too.
      const opened = await chatRuntime(spec.provider, { PROVIDER_TIMEOUT_MS: '600000' });
      world = opened;
      const token = await opened.token();
      // Warm-up through the same client program, one stream.
      await streamClients(opened.rt.url, token, 1).then((clients) => clients.stop());
      await new Promise((resolve) => setTimeout(resolve, 500));
      const before = settled();
      snapshot('before');
      const started = performance.now();
      const clients = await streamClients(opened.rt.url, token, spec.streams);
      const openMs = performance.now() - started;
      const after = settled();
      snapshot('after');
      const heldRuns = opened.rt.runtime.engine.heldRuns;
      await clients.stop();
      return { open: clients.open, openMs, heldRuns, before, after };
    } else {
      const opened = await chatRuntime(spec.provider, { PROVIDER_TIMEOUT_MS: '600000' });
      world = opened;
      const token = await opened.token();
      openOne = async () => {
        const controller = await openRuntimeStream(opened.rt.url, token);
        return () => controller.abort();
      };
    }
    // Warm-up: every module and code path a stream uses is loaded before the first reading.
    (await openOne())();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = settled();
    snapshot('before');
    const started = performance.now();
    const closers = await Promise.all(Array.from({ length: spec.streams }, () => openOne()));
    const openMs = performance.now() - started;
    const after = settled();
    snapshot('after');
    const heldRuns = world?.rt.runtime.engine.heldRuns ?? 0;
    for (const close of closers) close();
    return { open: closers.length, openMs, heldRuns, before, after };
  } finally {
    await world?.stop();
  }
}

/** A child of this script (`stream-clients` or `turn-clients`) serving the runtime's clients, spoken to by lines. */
interface ClientsProcess {
  /** Writes `command` and resolves with the first line after it that matches `answer`. */
  ask(command: string | undefined, answer: RegExp): Promise<RegExpExecArray>;
  stop(): Promise<void>;
}

function clientsProcess(mode: 'stream-clients' | 'turn-clients', spec: Record<string, unknown>): ClientsProcess {
  const child = spawn(process.execPath, [...typeScriptNodeArgs, SELF, mode, JSON.stringify(spec)], { cwd: REPO, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    ask(command, answer) {
      stdout = '';
      if (command) child.stdin.write(`${command}\n`);
      return new Promise((resolve, reject) => {
        const onData = () => {
          const line = answer.exec(stdout);
          if (!line) return;
          child.stdout.off('data', onData);
          child.off('exit', onExit);
          resolve(line);
        };
        const onExit = (code: number | null) => reject(new Error(`the ${mode} exited ${code}:\n${stderr}`));
        child.stdout.on('data', onData);
        child.once('exit', onExit);
        onData();
      });
    },
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}

/**
 * Another process that opens `streams` streams to the runtime at `url` (POST /chat/stream, each read past its first
 * token), says so, and holds them until told to stop.
 */
async function streamClients(url: string, token: string, streams: number): Promise<{ open: number; stop: () => Promise<void> }> {
  const clients = clientsProcess('stream-clients', { url, token, streams });
  const open = Number((await clients.ask(undefined, /open (\d+)\n/))[1]);
  return { open, stop: () => clients.stop() };
}

/** One stream opened on the runtime at `url` and read past its first token; aborting its controller closes it. */
async function openRuntimeStream(url: string, token: string): Promise<AbortController> {
  const controller = new AbortController();
  const response = await fetch(`${url}/chat/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ message: 'go' }),
    signal: controller.signal,
  });
  if (response.status !== 200) throw new Error(`POST /chat/stream answered ${response.status}: ${await response.text()}`);
  const frames = sseEvents(response);
  for (;;) {
    const next = await frames.next();
    if (next.done) throw new Error('the stream ended before its first token');
    if (next.value.event === 'token') break;
  }
  return controller;
}

/** In the stream-clients process: the streams opened, `open <n>` written, then held until stdin closes. */
async function holdStreams(spec: { url: string; token: string; streams: number }): Promise<void> {
  const controllers = await Promise.all(Array.from({ length: spec.streams }, () => openRuntimeStream(spec.url, spec.token)));
  process.stdout.write(`open ${controllers.length}\n`);
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.once('end', resolve));
  for (const controller of controllers) controller.abort();
}

/** One blocking turn in a new session on the runtime at `url`, read to its end. */
async function blockingTurn(url: string, token: string): Promise<void> {
  const response = await fetch(`${url}/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ message: PROMPT }),
  });
  if (response.status !== 200) throw new Error(`POST /chat answered ${response.status}: ${await response.text()}`);
  await response.json();
}

/**
 * Blocking turns from `clients` clients at once, `from` turns having been answered, until `target` have been;
 * resolves to `target`.
 */
async function turnsUntil(url: string, token: string, clients: number, from: number, target: number): Promise<number> {
  let started = from;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (started < target) {
        started++;
        await blockingTurn(url, token);
      }
    }),
  );
  return target;
}

/**
 * In the turn-clients process: for each `until <n>` line, blocking turns (each in a new session) from `clients`
 * clients until `n` have been answered since it started, then `answered <n>`; ends when stdin closes.
 */
async function sendTurns(spec: { url: string; token: string; clients: number }): Promise<void> {
  let answered = 0;
  for await (const line of createInterface({ input: process.stdin })) {
    const target = Number(/^until (\d+)$/.exec(line)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(target)) throw new Error(`turn-clients: unknown command ${line}`);
    answered = await turnsUntil(spec.url, spec.token, spec.clients, answered, target);
    process.stdout.write(`answered ${answered}\n`);
  }
}

/**
 * In the child: blocking turns from `clients` clients, each in a new session, and memory after a settled GC at each
 * checkpoint (turns answered so far). What grows between checkpoints is what each turn leaves behind.
 */
async function retentionProbe(spec: Extract<ProbeSpec, { probe: 'retention' }>): Promise<RetentionResult> {
  const world = await chatRuntime(spec.provider, { ...spec.env, PROVIDER_TIMEOUT_MS: '60000' });
  let elsewhere: ClientsProcess | undefined;
  let heapRelease: HeapRelease | undefined;
  try {
    const token = await world.token();
    let answered = 0;
    // The turns' clients, in this process or in the turn-clients one: both answer how many turns are answered.
    let answerUntil = (target: number) => turnsUntil(world.rt.url, token, spec.clients, answered, target);
    if (spec.clientsElsewhere) {
      const clients = clientsProcess('turn-clients', { url: world.rt.url, token, clients: spec.clients });
      elsewhere = clients;
      answerUntil = async (target) => Number((await clients.ask(`until ${target}`, /answered (\d+)\n/))[1]);
      // As runtime/src/main.ts does; its timer's look is taken by hand below, once the turns have stopped.
      heapRelease = startHeapRelease({ logger: silentLogger(), intervalMs: 3_600_000 });
    }
    const statementsBefore = world.rt.runtime.database.statements();
    const readings: RetentionResult['readings'] = [];
    for (const checkpoint of spec.checkpoints) {
      answered = await answerUntil(checkpoint);
      // Let detached work (run ends, log closes) finish before reading.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      // The releaser's looks, a second apart instead of its ten: the first saw the turns (busy: nothing asked); the
      // next ones ask once a second has been quiet.
      let released = false;
      heapRelease?.check();
      for (let look = 0; heapRelease && !released && look < 5; look++) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        released = heapRelease.check();
      }
      const memory = settled();
      const heap = getHeapStatistics();
      const code = getHeapSpaceStatistics().find((space) => space.space_name === 'code_space')?.space_used_size ?? 0;
      readings.push({ turns: answered, memory, released, v8: { mallocedMiB: heap.malloced_memory / MiB, peakMallocedMiB: heap.peak_malloced_memory / MiB, codeMiB: code / MiB } });
      snapshot(`turns-${answered}`);
    }
    return { readings, statementsPerTurn: (world.rt.runtime.database.statements() - statementsBefore) / answered };
  } finally {
    heapRelease?.stop();
    await elsewhere?.stop();
    await world.stop();
  }
}

export async function openStreamsTable(): Promise<Table> {
  const rows: Row[] = [];
  for (const streams of OPEN_STREAMS) {
    // Every stream is still open when the last one has opened: the answer outlasts the time to open them all.
    const provider = await startProviderProcess({
      apiKey: PROVIDER_KEY,
      chatModels: [MODEL, OTHER_MODEL],
      defaultReply: { text: words(Math.max(90, Math.ceil(streams / 20))), dripMs: OPEN_STREAM_DRIP_MS },
    });
    try {
      for (const subject of ['sdk', 'runtime', 'runtime-alone'] as const) {
        const result = await runProbe<StreamsResult>({ probe: 'open-streams', subject, streams, provider });
        const perStream = (bytes: number) => bytes / streams / KiB;
        rows.push({
          case: `${streams.toLocaleString('en-US')} open streams`,
          impl: subject === 'sdk' ? 'openai SDK → fake' : subject === 'runtime' ? 'POST /chat/stream, clients in-process' : 'POST /chat/stream, runtime alone',
          baseline: subject === 'sdk',
          figures: {
            open: result.open,
            heldRuns: result.heldRuns,
            openSec: result.openMs / 1000,
            opensPerSec: result.open / (result.openMs / 1000),
            rssDeltaMiB: (result.after.rss - result.before.rss) / MiB,
            rssPerStreamKiB: perStream(result.after.rss - result.before.rss),
            heapPerStreamKiB: perStream(result.after.heapUsed - result.before.heapUsed),
            externalPerStreamKiB: perStream(result.after.external + result.after.arrayBuffers - result.before.external - result.before.arrayBuffers),
          },
        });
      }
    } finally {
      await provider.stop();
    }
  }
  for (const row of rows) {
    const base = rows.find((candidate) => candidate.case === row.case && candidate.baseline);
    if (base && row !== base) row.figures.addedRssPerStreamKiB = row.figures.rssPerStreamKiB! - base.figures.rssPerStreamKiB!;
  }
  return finishTable({
    title: 'chat: open streams held by one process, and memory per stream (fresh process each, embedded; `runtime alone`: its clients in another process)',
    columns: [
      { key: 'open', label: 'open' },
      { key: 'heldRuns', label: 'runs held' },
      { key: 'openSec', label: 'open s', ratio: true },
      { key: 'opensPerSec', label: 'opened/s', ratio: true },
      { key: 'rssDeltaMiB', label: 'ΔRSS MiB' },
      { key: 'rssPerStreamKiB', label: 'RSS KiB/stream', ratio: true },
      { key: 'addedRssPerStreamKiB', label: '+RSS KiB/stream' },
      { key: 'heapPerStreamKiB', label: 'heap KiB/stream', ratio: true },
      { key: 'externalPerStreamKiB', label: 'buffers KiB/stream' },
    ],
    rows,
    note:
      `each stream's answer drips a word every ${OPEN_STREAM_DRIP_MS} ms and is open past its first text; Δ = after opening all minus after one warm-up stream; ` +
      'the fake provider runs in its own process, so per stream counts the client and (ours) the runtime.',
  });
}

/** The runtime's V8 flags in the image (hack/entrypoint.sh), for the probe that stands for the deployed runtime. */
const RUNTIME_V8_FLAGS = ['--max-semi-space-size=8'];

export async function retentionTable(setup: string, env: Record<string, string>): Promise<Table> {
  const provider = await startProviderProcess({ apiKey: PROVIDER_KEY, chatModels: [MODEL, OTHER_MODEL] });
  try {
    const rows: Row[] = [];
    for (const clientsElsewhere of [false, true]) {
      const spec = { probe: 'retention', provider, checkpoints: RETENTION_CHECKPOINTS, clients: 16, env, clientsElsewhere } as const;
      const result = await runProbe<RetentionResult>(spec, clientsElsewhere ? RUNTIME_V8_FLAGS : []);
      const first = result.readings[0]!;
      for (const reading of result.readings) {
        rows.push({
          case: clientsElsewhere ? 'runtime alone (its flags), 16 clients in another process' : 'blocking turns, 16 clients in-process, new session each',
          impl: `after ${reading.turns.toLocaleString('en-US')} turns`,
          baseline: reading === first,
          figures: {
            turns: reading.turns,
            rssMiB: reading.memory.rss / MiB,
            heapMiB: reading.memory.heapUsed / MiB,
            heapTotalMiB: reading.memory.heapTotal / MiB,
            externalMiB: (reading.memory.external + reading.memory.arrayBuffers) / MiB,
            heapPerTurnBytes: reading === first ? 0 : (reading.memory.heapUsed - first.memory.heapUsed) / (reading.turns - first.turns),
            statementsPerTurn: result.statementsPerTurn,
            released: reading.released ? 1 : 0,
          },
        });
      }
    }
    return finishTable({
      title: `chat: memory after many turns (fresh process, ${setup}, after a forced GC)`,
      columns: [
        { key: 'turns', label: 'turns' },
        { key: 'rssMiB', label: 'RSS MiB', ratio: true },
        { key: 'heapMiB', label: 'heap MiB', ratio: true },
        { key: 'heapTotalMiB', label: 'heap committed MiB' },
        { key: 'externalMiB', label: 'buffers MiB' },
        { key: 'heapPerTurnBytes', label: 'heap B/turn since first' },
        { key: 'statementsPerTurn', label: 'SQL/turn' },
        { key: 'released', label: 'pages given back' },
      ],
      rows,
      note:
        'the fake provider in its own process; in-process: the clients and the runtime in the probe process; runtime alone: the runtime in the probe process with the V8 flags the image gives it and its heap releaser (decision 0067), ' +
        'the clients in another, as deployed; pages given back: 1 when the releaser, looking every second for 5 s after the turns stopped (every 10 s when deployed), asked V8 to give back its idle pages. ×base = against the first checkpoint (target: RSS within 1.15×). ' +
        'heap = V8 heap used after the GC, heap committed = what V8 keeps reserved (its pages become resident as collections reuse them).',
    });
  } finally {
    await provider.stop();
  }
}

// ---- the bench ----

/** Blocking latency, first token and replay on one setup; the long stream and open streams only on embedded. */
/**
 * Which tables run: all by default; `BENCH_CHAT_TABLES=latency,outside` (of latency, stream, replay, streams,
 * retention, outside, paced) runs only those, on every setup, while working on one of them.
 */
const chosenTables = process.env.BENCH_CHAT_TABLES?.split(',').map((name) => name.trim());
const wanted = (table: string) => !chosenTables || chosenTables.includes(table);

async function measureSetup(report: BenchReport, setup: string, env: Record<string, string>, full: boolean): Promise<void> {
  if (!wanted('latency') && !(full && wanted('stream')) && !wanted('replay')) return;
  const teardown = new Teardown();
  try {
    const fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL], record: false });
    teardown.add(() => fake.stop());
    const world = await chatWorld({ ...env, PROVIDER_TIMEOUT_MS: '60000' }, { fake });
    teardown.add(() => world.stop());
    const targets = [direct(fake), await ours(world, `ours (${setup})`)];
    if (wanted('latency')) report.tables.push(await latencyTable(setup, fake, targets));
    if (full && wanted('stream')) report.tables.push(await longStreamTable(setup, fake, targets));
    if (wanted('replay')) report.tables.push(await replayTable(setup, world));
  } finally {
    await teardown.run();
  }
}

/**
 * Another build to measure beside this one, round by round in the same table (`BENCH_CHAT_COMPARE`, a directory
 * from hack/bench-build-at.sh): two runs of this machine differ by more than a small change does.
 */
const compareBuild = process.env.BENCH_CHAT_COMPARE;

/** A runtime process of a build (this checkout's by default) on `env`'s stores, its tenant pointed at `provider`. */
async function runtimeTarget(
  teardown: Teardown,
  env: Record<string, string>,
  provider: ProviderProcess,
  impl: string,
  build?: string,
): Promise<ChatTarget> {
  const dataDir = makeTempDir('bench-outside');
  teardown.add(() => rmSync(dataDir, { recursive: true, force: true }));
  const runtime = await startRuntimeProcess({ dataDir, env, ...(build ? { build } : {}) });
  teardown.add(() => runtime.stop());
  const tenant = await configuredTenant({ admin: runtime.admin }, { ceiling: { capabilities: CHAT_CAPABILITIES, registeredModels: [MODEL, OTHER_MODEL] } });
  const pushed = await tenant.reconfigure({ providers: providerSection(provider), default_model: MODEL });
  if (pushed.status !== 200) throw new Error(`pushing providers answered ${pushed.status}: ${await pushed.text()}`);
  const post = (path: string) => (token: string, body: Record<string, unknown>) =>
    fetch(`${runtime.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
  const world = { token: () => tenant.mint({ capabilities: CHAT_CAPABILITIES }), chat: post('/chat'), stream: post('/chat/stream') };
  return { ...(await ours(world, impl)), serverCpuMs: () => runtime.cpuMs() + processCpuMs(provider.pid) };
}

/**
 * The latency table again with every party in a process of its own, as a client of a deployed runtime sees it: the
 * compiled runtime (on `env`'s stores), the fake provider, and the clients in this process.
 */
export async function outsideTable(setup: string, env: Record<string, string>): Promise<Table> {
  const teardown = new Teardown();
  try {
    const provider = await startProviderProcess({ apiKey: PROVIDER_KEY, chatModels: [MODEL, OTHER_MODEL] });
    teardown.add(() => provider.stop());
    const targets: ChatTarget[] = [
      { ...direct(provider), serverCpuMs: () => processCpuMs(provider.pid) },
      await runtimeTarget(teardown, env, provider, `ours (${setup}, own process)`),
    ];
    if (compareBuild) targets.push(await runtimeTarget(teardown, env, provider, `ours (${setup}, ${basename(compareBuild)})`, compareBuild));
    return await latencyTable(`${setup}, outside`, undefined, targets);
  } finally {
    await teardown.run();
  }
}

/** A provider that takes its time: a 10-word answer, streamed a chunk every 25 ms (about a third of a second). */
const PACED_REPLY = { text: words(10), dripMs: 25 };
const PACED_CLIENTS = [16, 64, 256] as const;

/**
 * Turns per second against a provider that takes real time to answer, runtime in its own process: what bounds them
 * then is how many are under way at once, not the CPU a turn costs. The baseline reads the same paced stream with
 * the SDK, so both sides wait on the provider alike.
 */
export async function pacedTable(setup: string, env: Record<string, string>): Promise<Table> {
  const teardown = new Teardown();
  try {
    const provider = await startProviderProcess({ apiKey: PROVIDER_KEY, chatModels: [MODEL, OTHER_MODEL], defaultReply: PACED_REPLY });
    teardown.add(() => provider.stop());
    const sdk: ChatTarget = { ...direct(provider), serverCpuMs: () => processCpuMs(provider.pid) };
    const runtime = await runtimeTarget(teardown, env, provider, `ours (${setup}, own process)`);
    for (const target of [sdk, runtime]) await timeConcurrent(() => target.streamed(), { warmup: 0, ops: 1_000, callers: 64 });
    const cases: Case<ChatTarget>[] = PACED_CLIENTS.flatMap((clients) => {
      const loop = { warmup: clients, ops: clients * 6 };
      return [
        {
          name: `blocking turn, ${clients} clients`,
          loop,
          // Ours answers a blocking turn from a streamed provider call; the SDK reads the same stream to its end.
          time: (target: ChatTarget, half: LoopOptions) =>
            servedBy(target, () => timeConcurrent(() => (target.baseline ? target.streamed() : target.blocking()), { ...half, callers: clients })),
        },
        {
          name: `streamed turn, ${clients} clients`,
          loop,
          time: (target: ChatTarget, half: LoopOptions) => servedBy(target, () => timeConcurrent(() => target.streamed(), { ...half, callers: clients })),
        },
      ];
    });
    return withAdded({
      title: `chat: turns per second against a provider that takes ~0.3 s to answer (${setup}, outside)`,
      columns: [...latencyColumns, ...addedColumns, { key: 'cpuMsPerOp', label: 'server cpu ms/op', ratio: true }],
      rows: await runCases(cases, [sdk, runtime]),
      note:
        `the fake provider streams a ${PACED_REPLY.text.split(' ').length}-word answer a chunk every ${PACED_REPLY.dripMs} ms; the SDK reads it to its end, ours makes a turn of it (blocking: POST /chat; streamed: POST /chat/stream read to its end). ` +
        'server cpu ms/op: of the fake provider (SDK), of the runtime and fake (ours).',
    });
  } finally {
    await teardown.run();
  }
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'chat', tables: [], skipped: [] };
  await measureSetup(report, 'embedded', {}, true);
  if (wanted('streams')) report.tables.push(await openStreamsTable());
  if (wanted('retention')) report.tables.push(await retentionTable('embedded', {}));
  if (wanted('outside')) report.tables.push(await outsideTable('embedded', {}));
  if (wanted('paced')) report.tables.push(await pacedTable('embedded', {}));
  if (!availableSetups().includes('scale')) {
    report.skipped.push('scale: PostgreSQL, Redis or MinIO binary not found');
    return report;
  }
  const services = await ScaleServices.start();
  try {
    await measureSetup(report, 'scale', await services.env(), false);
    if (wanted('retention')) report.tables.push(await retentionTable('scale', await services.env()));
    if (wanted('outside')) report.tables.push(await outsideTable('scale', await services.env()));
    if (wanted('paced')) report.tables.push(await pacedTable('scale', await services.env()));
  } finally {
    await services.stop();
  }
  return report;
}

// Run as `node --expose-gc --import tsx chat.bench.ts probe <spec>` by the memory tables (a probe), or with
// `stream-clients` / `turn-clients` as the clients of the runtime-alone probes: not the bench.
const runAs = process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href ? process.argv[2] : undefined;
if (runAs === 'stream-clients') {
  await holdStreams(JSON.parse(process.argv[3] ?? '{}') as { url: string; token: string; streams: number });
  process.exit(0);
}
if (runAs === 'turn-clients') {
  await sendTurns(JSON.parse(process.argv[3] ?? '{}') as { url: string; token: string; clients: number });
  process.exit(0);
}
if (runAs === 'probe') {
  const spec = JSON.parse(process.argv[3] ?? '{}') as ProbeSpec;
  const result = spec.probe === 'open-streams' ? await openStreamsProbe(spec) : await retentionProbe(spec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
