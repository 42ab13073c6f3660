// Event port: append throughput, read-after-id on a 2,000-frame log, and append-to-tail delivery latency through
// `createEventBus`, against the same work done without our layer: node-redis XADD/XRANGE/XREAD BLOCK on Redis,
// and a plain Map of JSON arrays for the in-process adapter.
import { performance } from 'node:perf_hooks';
import { createClient } from 'redis';
import { createEventBus, type EventBus } from '@agentplane/lib/events';
import { redisServerBinary, startRedis } from '../harness/redis.js';
import {
  Teardown,
  finishTable,
  latencyColumns,
  runCases,
  scaled,
  summarise,
  timeConcurrent,
  timeSequential,
  type BenchReport,
  type Case,
  type LoopOptions,
  type Subject,
  type Table,
  type Timing,
} from './measure.js';

/** A frame shaped like a streamed run event. */
interface Frame {
  type: 'text-delta';
  seq: number;
  text: string;
}

const frame = (seq: number): Frame => ({ type: 'text-delta', seq, text: 'lorem ipsum dolor sit amet '.repeat(4) });

const LOG_FRAMES = 2_000;
const APPEND_SEQUENTIAL = { warmup: 300, ops: 3_000 };
const APPEND_CONCURRENT = { warmup: 320, ops: 3_200 };
const CALLERS = 16;
const READ_ALL = { warmup: 5, ops: 40 };
const READ_RESUME = { warmup: 30, ops: 300 };
const RESUME_AFTER = 1_900;
const DELIVERY = { warmup: 50, ops: 500 };

/** The three things the bench asks of a log; every target stores JSON and hands back parsed frames. */
interface LogTarget extends Subject {
  append(key: string, data: Frame): Promise<unknown>;
  /** Reads every frame after `afterId`; returns how many. */
  read(key: string, afterId: number): Promise<number>;
  /** Follows `key` from its start, calling `onFrame` as frames arrive (warm-up rounds cover the start). Returns the stop. */
  follow(key: string, onFrame: (data: Frame) => void): Promise<() => Promise<void>>;
}

function ours(bus: EventBus, impl: string): LogTarget {
  return {
    impl,
    append: (key, data) => bus.logs.append(key, data),
    read: async (key, afterId) => {
      const page = await bus.logs.read<Frame>(key, afterId);
      return 'events' in page ? page.events.length : 0;
    },
    follow: async (key, onFrame) => {
      const abort = new AbortController();
      const following = (async () => {
        for await (const event of bus.logs.tail<Frame>(key, 0, abort.signal)) onFrame(event.data);
      })();
      // A tail that fails shows as a delivery timeout now and is rethrown by the stop.
      following.catch(() => {});
      return async () => {
        abort.abort();
        await following;
      };
    },
  };
}

/** The least an in-process log can do: JSON text in an array per key, and a wake-up for followers. */
function plainMemoryLog(): LogTarget {
  const frames = new Map<string, string[]>();
  const wakers = new Map<string, Set<() => void>>();
  return {
    impl: 'raw Map+JSON',
    baseline: true,
    append: async (key, data) => {
      const log = frames.get(key) ?? [];
      frames.set(key, log);
      log.push(JSON.stringify(data));
      for (const wake of wakers.get(key) ?? []) wake();
      return log.length;
    },
    read: async (key, afterId) => (frames.get(key) ?? []).slice(afterId).map((json) => JSON.parse(json) as Frame).length,
    follow: async (key, onFrame) => {
      let stopped = false;
      let wake = () => {};
      const set = wakers.get(key) ?? new Set();
      wakers.set(key, set);
      const waker = () => wake();
      set.add(waker);
      const following = (async () => {
        let next = 0;
        while (!stopped) {
          const log = frames.get(key) ?? [];
          while (next < log.length) onFrame(JSON.parse(log[next++]!) as Frame);
          await new Promise<void>((resolve) => {
            wake = resolve;
            if (stopped || next < (frames.get(key)?.length ?? 0)) resolve();
          });
        }
      })();
      return async () => {
        stopped = true;
        set.delete(waker);
        wake();
        await following;
      };
    },
  };
}

const connectRaw = (url: string) => createClient({ url });
type RedisClient = ReturnType<typeof connectRaw>;
type StreamMessage = { id: string; message: Record<string, string> };

/** node-redis alone: XADD with explicit `<n>-0` ids (as our adapter uses), XRANGE, and XREAD BLOCK to follow. */
function rawRedis(client: RedisClient, prefix: string): LogTarget {
  const lastIds = new Map<string, number>();
  return {
    impl: 'raw node-redis',
    baseline: true,
    append: (key, data) => {
      const id = (lastIds.get(key) ?? 0) + 1;
      lastIds.set(key, id);
      return client.xAdd(prefix + key, `${id}-0`, { d: JSON.stringify(data) });
    },
    read: async (key, afterId) => {
      const entries = (await client.xRange(prefix + key, `${afterId + 1}-0`, '+')) as StreamMessage[];
      return entries.map((entry) => JSON.parse(entry.message.d!) as Frame).length;
    },
    follow: async (key, onFrame) => {
      // A blocking read holds its connection, so the follower has its own, as a real consumer would.
      const reader = client.duplicate();
      reader.on('error', () => {});
      await reader.connect();
      let stopped = false;
      const following = (async () => {
        let last = '0-0';
        while (!stopped) {
          const reply = (await reader.xRead({ key: prefix + key, id: last }, { BLOCK: 0, COUNT: 500 })) as
            | Array<{ name: string; messages: StreamMessage[] }>
            | null;
          for (const message of reply?.[0]?.messages ?? []) {
            last = message.id;
            onFrame(JSON.parse(message.message.d!) as Frame);
          }
        }
      })().catch((error: unknown) => {
        if (!stopped) throw error;
      });
      following.catch(() => {});
      return async () => {
        stopped = true;
        reader.destroy();
        await following;
      };
    },
  };
}

/** One frame in flight: append frame n, wait until the follower sees it, repeat. Latency is append call to arrival. */
async function timeDelivery(target: LogTarget, key: string, options: LoopOptions): Promise<Timing> {
  let expect = -1;
  let arrived: (at: number) => void = () => {};
  const stop = await target.follow(key, (data) => {
    if (data.seq === expect) arrived(performance.now());
  });
  try {
    const latencies: number[] = [];
    let measuredFrom = performance.now();
    for (let seq = 0; seq < options.warmup + options.ops; seq++) {
      if (seq === options.warmup) measuredFrom = performance.now();
      expect = seq;
      let timer: NodeJS.Timeout | undefined;
      const delivered = new Promise<number>((resolve, reject) => {
        arrived = resolve;
        timer = setTimeout(() => reject(new Error(`${target.impl}: frame ${seq} not delivered within 5 s`)), 5_000);
      });
      delivered.catch(() => {}); // awaited below; this only keeps a timeout during the append from going unhandled
      const t0 = performance.now();
      try {
        await target.append(key, frame(seq));
        const at = await delivered;
        if (seq >= options.warmup) latencies.push(at - t0);
      } finally {
        clearTimeout(timer);
      }
    }
    return summarise(latencies, performance.now() - measuredFrom);
  } finally {
    await stop();
  }
}

/** `factor` lengthens every loop: the in-process targets finish the Redis-sized loops in milliseconds. */
async function measureTargets(title: string, targets: LogTarget[], factor: number): Promise<Table> {
  for (const target of targets) {
    for (let seq = 1; seq <= LOG_FRAMES; seq++) await target.append('read', frame(seq));
  }
  let seq = 0;
  const framesPerSec = (frames: number) => (timing: Timing) => ({ framesPerSec: timing.opsPerSec * frames });
  const cases: Case<LogTarget>[] = [
    {
      name: 'append, 1 caller',
      loop: scaled(APPEND_SEQUENTIAL, factor),
      time: (target, loop) => timeSequential(() => target.append('append', frame(seq++)), loop),
    },
    {
      name: `append, ${CALLERS} callers (own logs)`,
      loop: scaled(APPEND_CONCURRENT, factor),
      time: (target, loop) =>
        timeConcurrent((caller) => target.append(`append-${caller}`, frame(seq++)), { ...loop, callers: CALLERS }),
    },
    {
      name: `read after 0 (${LOG_FRAMES} frames)`,
      loop: scaled(READ_ALL, factor),
      time: (target, loop) => timeSequential(() => target.read('read', 0), loop),
      extra: framesPerSec(LOG_FRAMES),
    },
    {
      name: `read after ${RESUME_AFTER} (${LOG_FRAMES - RESUME_AFTER} frames)`,
      loop: scaled(READ_RESUME, factor),
      time: (target, loop) => timeSequential(() => target.read('read', RESUME_AFTER), loop),
      extra: framesPerSec(LOG_FRAMES - RESUME_AFTER),
    },
    {
      name: 'append → live tail',
      loop: scaled(DELIVERY, factor),
      // A fresh log per run, so a follower starting from id 0 has nothing to replay.
      time: (target, loop) => timeDelivery(target, `delivery-${seq++}`, loop),
    },
  ];
  return finishTable({
    title,
    columns: [...latencyColumns, { key: 'framesPerSec', label: 'frames/s' }],
    rows: await runCases(cases, targets),
    note: 'append → live tail: one frame in flight; latency runs from the append call to the frame reaching the follower.',
  });
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'events', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    const bus = await createEventBus({ kind: 'memory' });
    teardown.add(() => bus.close());
    const inProcess = [plainMemoryLog(), ours(bus, 'ours (memory bus)')];
    report.tables.push(await measureTargets('events: in-process (embedded default)', inProcess, 10));
    await teardown.run();

    const binary = redisServerBinary();
    if (!binary) {
      report.skipped.push('Redis: redis-server binary not found');
      return report;
    }
    const server = await startRedis(binary);
    teardown.add(() => server.stop());
    const client = connectRaw(server.url);
    client.on('error', () => {});
    await client.connect();
    teardown.add(() => client.close());
    const redisBus = await createEventBus({ kind: 'redis', url: server.url, keyPrefix: 'bench:ours:' });
    teardown.add(() => redisBus.close());
    await redisBus.ping();
    const overRedis = [rawRedis(client, 'bench:raw:'), ours(redisBus, 'ours (redis bus)')];
    report.tables.push(await measureTargets('events: Redis over loopback (scale)', overRedis, 1));
  } finally {
    await teardown.run();
  }
  return report;
}
