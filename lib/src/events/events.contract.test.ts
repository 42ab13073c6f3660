// The event port's contract: what run streams (replay + live, resume on any process), steer/cancel and rate
// limits rely on. One suite, run against the in-process adapter and against a real redis-server.
import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@agentplane/test/harness/process';
import { redisServerBinary, startRedis, type RedisServer } from '@agentplane/test/harness/redis';
import { createEventBus, createMemoryEventBus, type EventBus, type EventLogs, type RetentionOptions } from './index.js';
import { createRedisEventBus } from './redis.js';

interface Backend {
  /** A bus on a key space of its own, as one tenant has. */
  open(retention?: RetentionOptions): EventBus;
  /** Another handle on the same key space as `bus`, as a second runtime process has. */
  peer(bus: EventBus): EventBus;
  closeAll(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Follows a log in the background; `ids` grows as frames arrive, `done` settles when the tail ends. */
function follow(logs: EventLogs, key: string, afterId: number, signal = new AbortController().signal) {
  const ids: number[] = [];
  const done = (async () => {
    for await (const event of logs.tail(key, afterId, signal)) ids.push(event.id);
    return ids;
  })();
  done.catch(() => undefined); // observed by the test that cares
  return { ids, done };
}

/** Fails unless `promise` settles within `ms`: "promptly", not "eventually". */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`${what} did not happen within ${ms} ms`)))]);
}

let keys = 0;
const newKey = (name = 'run') => `${name}-${++keys}`;

function eventBusContract(backend: () => Backend): void {
  afterEach(async () => {
    await backend().closeAll();
  });

  it('numbers frames 1..n in order and reads them back', async () => {
    const bus = backend().open();
    const key = newKey();
    const ids = [];
    for (const n of range(1, 5)) ids.push(await bus.logs.append(key, { type: 'delta', n }));
    expect(ids).toEqual([1, 2, 3, 4, 5]);
    expect(await bus.logs.read(key, 0)).toEqual({
      state: 'live',
      lastId: 5,
      events: range(1, 5).map((n) => ({ id: n, data: { type: 'delta', n } })),
    });
  });

  it('reads the frames after an id, at most limit of them', async () => {
    const bus = backend().open();
    const key = newKey();
    for (const n of range(1, 5)) await bus.logs.append(key, n);
    const ids = async (afterId: number, limit?: number) => {
      const page = await bus.logs.read<number>(key, afterId, limit);
      return page.state === 'live' ? page.events.map((e) => e.id) : page.state;
    };
    expect(await ids(2)).toEqual([3, 4, 5]);
    expect(await ids(1, 2)).toEqual([2, 3]);
    expect(await ids(5)).toEqual([]);
    expect(await ids(9)).toEqual([]);
    await expect(bus.logs.read(key, -1)).rejects.toMatchObject({ kind: 'invalid_argument' });
    await expect(bus.logs.read(key, 0, 0)).rejects.toMatchObject({ kind: 'invalid_argument' });
  });

  it('closes a log once, refuses frames after it, and closes an empty log too', async () => {
    const bus = backend().open();
    const key = newKey();
    await bus.logs.append(key, 'done');
    await bus.logs.close(key);
    await bus.logs.close(key);
    expect(await bus.logs.read(key, 0)).toEqual({ state: 'closed', lastId: 1, events: [{ id: 1, data: 'done' }] });
    await expect(bus.logs.append(key, 'late')).rejects.toMatchObject({ kind: 'conflict', code: 'log_closed' });

    const empty = newKey();
    await bus.logs.close(empty);
    expect(await bus.logs.read(empty, 0)).toEqual({ state: 'closed', lastId: 0, events: [] });
  });

  it('appends a last frame and closes the log in one step, which a tail follows to its end', async () => {
    const bus = backend().open();
    const key = newKey();
    await bus.logs.append(key, 'first');
    const tail = follow(bus.logs, key, 0);
    await waitFor(() => tail.ids.length === 1, 'the first frame');
    expect(await bus.logs.appendLast(key, 'last')).toBe(2);
    expect(await tail.done).toEqual([1, 2]);
    expect(await bus.logs.read(key, 0)).toEqual({ state: 'closed', lastId: 2, events: [{ id: 1, data: 'first' }, { id: 2, data: 'last' }] });
    await expect(bus.logs.appendLast(key, 'again')).rejects.toMatchObject({ kind: 'conflict', code: 'log_closed' });
    await expect(bus.logs.append(key, 'late')).rejects.toMatchObject({ kind: 'conflict', code: 'log_closed' });
    await bus.logs.close(key);
    expect(await bus.logs.read(key, 1)).toEqual({ state: 'closed', lastId: 2, events: [{ id: 2, data: 'last' }] });

    // A log whose only frame is its last.
    const single = newKey();
    expect(await bus.logs.appendLast(single, { done: true })).toBe(1);
    expect(await bus.logs.read(single, 0)).toEqual({ state: 'closed', lastId: 1, events: [{ id: 1, data: { done: true } }] });
    expect(await follow(bus.logs, single, 0).done).toEqual([1]);
  });

  it('gives unique increasing ids to two processes appending at once', async () => {
    const a = backend().open();
    const b = backend().peer(a);
    const key = newKey();
    const appendMany = async (bus: EventBus, who: string) => {
      const ids: number[] = [];
      for (const n of range(1, 100)) ids.push(await bus.logs.append(key, { who, n }));
      return ids;
    };
    const [fromA, fromB] = await Promise.all([appendMany(a, 'a'), appendMany(b, 'b')]);
    for (const ids of [fromA, fromB]) expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect([...fromA, ...fromB].sort((x, y) => x - y)).toEqual(range(1, 200));
    const page = await b.logs.read<{ who: string; n: number }>(key, 0);
    if (page.state !== 'live') throw new Error(page.state);
    for (const event of page.events) {
      const ids = event.data.who === 'a' ? fromA : fromB;
      expect(ids[event.data.n - 1]).toBe(event.id);
    }
  });

  it('tails: replays after the id, follows live frames, ends after close', async () => {
    const bus = backend().open();
    const key = newKey();
    for (const n of range(1, 3)) await bus.logs.append(key, n);
    const tail = follow(bus.logs, key, 1);
    await waitFor(() => tail.ids.length === 2, 'the replay');
    await bus.logs.append(key, 4);
    await waitFor(() => tail.ids.length === 3, 'a live frame');
    await bus.logs.append(key, 5);
    await bus.logs.close(key);
    expect(await tail.done).toEqual([2, 3, 4, 5]);
    // A client resuming after the end gets nothing and is not left waiting.
    expect(await follow(bus.logs, key, 5).done).toEqual([]);
  });

  it('lets a tail on one process follow a log written by another, even before its first frame', async () => {
    const a = backend().open();
    const b = backend().peer(a);
    const key = newKey();
    const tail = follow(b.logs, key, 0);
    await sleep(50);
    for (const n of range(1, 3)) await a.logs.append(key, n);
    await a.logs.close(key);
    expect(await tail.done).toEqual([1, 2, 3]);
  });

  it('loses and repeats nothing when appends race the switch from replay to live', async () => {
    const a = backend().open();
    const b = backend().peer(a);
    const key = newKey();
    const tails: ReturnType<typeof follow>[] = [];
    for (const n of range(1, 300)) {
      await a.logs.append(key, n);
      if (n === 100) tails.push(follow(b.logs, key, 0));
      if (n === 150) tails.push(follow(b.logs, key, 50));
      if (n === 200) tails.push(follow(a.logs, key, 199));
    }
    // Every tail reaches the last frame while the log is still live, not only once close wakes it.
    await waitFor(() => tails.every((t) => t.ids.at(-1) === 300), 'the tails to catch up');
    await a.logs.close(key);
    const [fromStart, fromFifty, fromLate] = await Promise.all(tails.map((t) => t.done));
    expect(fromStart).toEqual(range(1, 300));
    expect(fromFifty).toEqual(range(51, 300));
    expect(fromLate).toEqual(range(200, 300));
  });

  it('ends a tail promptly when its signal aborts or its bus closes', async () => {
    const bus = backend().open();
    const key = newKey();
    await bus.logs.append(key, 1);
    const abort = new AbortController();
    const tail = follow(bus.logs, key, 0, abort.signal);
    await waitFor(() => tail.ids.length === 1, 'the replay');
    await sleep(50);
    abort.abort();
    expect(await within(tail.done, 2000, 'the abort')).toEqual([1]);
    expect(await follow(bus.logs, key, 0, AbortSignal.abort()).done).toEqual([]);

    const other = backend().open();
    await other.logs.append(key, 1);
    const orphan = follow(other.logs, key, 1);
    await sleep(50);
    await other.close();
    expect(await within(orphan.done, 2000, 'the end on close')).toEqual([]);
  });

  it('tells expired from missing, keeping frames for the retention after the last write', async () => {
    const bus = backend().open({ logRetentionSeconds: 2, markerRetentionSeconds: 4 });
    const key = newKey();
    await bus.logs.append(key, 1);
    await sleep(1200);
    await bus.logs.append(key, 2);
    await sleep(1200);
    // 2.4 s after the first write, 1.2 s after the last: still kept.
    expect(await bus.logs.read(key, 0)).toMatchObject({ state: 'live', lastId: 2 });
    await waitFor(async () => (await bus.logs.read(key, 0)).state === 'expired', 'expiry');
    expect(await bus.logs.read(newKey('never-written'), 0)).toEqual({ state: 'missing' });
    await expect(follow(bus.logs, key, 0).done).rejects.toMatchObject({ kind: 'not_found', code: 'log_expired' });
    await waitFor(async () => (await bus.logs.read(key, 0)).state === 'missing', 'the marker to expire', 8000);
  });

  it('continues ids when an expired log is written again', async () => {
    const bus = backend().open({ logRetentionSeconds: 1, markerRetentionSeconds: 60 });
    const key = newKey();
    await bus.logs.append(key, 1);
    await bus.logs.append(key, 2);
    await waitFor(async () => (await bus.logs.read(key, 0)).state === 'expired', 'expiry');
    expect(await bus.logs.append(key, 3)).toBe(3);
    expect(await bus.logs.read(key, 0)).toEqual({ state: 'live', lastId: 3, events: [{ id: 3, data: 3 }] });
  });

  it('delivers pub/sub messages across processes until unsubscribed', async () => {
    const a = backend().open();
    const b = backend().peer(a);
    const first: unknown[] = [];
    const second: unknown[] = [];
    const stopFirst = await a.pubsub.subscribe('steer:run-1', (m) => first.push(m));
    const stopSecond = await a.pubsub.subscribe('steer:run-1', (m) => second.push(m));
    await b.pubsub.publish('steer:run-1', { action: 'steer', text: 'shorter, please' });
    await waitFor(() => first.length === 1 && second.length === 1, 'delivery');
    expect(first).toEqual([{ action: 'steer', text: 'shorter, please' }]);

    await stopFirst();
    await b.pubsub.publish('steer:run-1', { action: 'cancel' });
    await waitFor(() => second.length === 2, 'the second delivery');
    expect(first).toHaveLength(1);
    await stopSecond();
  });

  it('counts every one of many concurrent increments', async () => {
    const a = backend().open();
    const b = backend().peer(a);
    const before = Date.now();
    const results = await Promise.all(range(1, 200).map((n) => (n % 2 ? a : b).counters.increment('rpm', 1, 60)));
    expect(results.map((r) => r.value).sort((x, y) => x - y)).toEqual(range(1, 200));
    const now = await a.counters.get('rpm');
    expect(now.value).toBe(200);
    expect(now.resetAt!.getTime()).toBeGreaterThan(before + 50_000);
    expect(now.resetAt!.getTime()).toBeLessThanOrEqual(Date.now() + 60_000);
    expect((await b.counters.increment('rpm', 150, 60)).value).toBe(350);
  });

  it('keeps a fixed window from the first increment, then starts a new one', async () => {
    const bus = backend().open();
    expect(await bus.counters.get('tpm')).toEqual({ value: 0, resetAt: null });
    const first = await bus.counters.increment('tpm', 10, 1);
    await sleep(300);
    const second = await bus.counters.increment('tpm', 5, 1);
    expect(second.value).toBe(15);
    // Later increments do not push the window's end out.
    expect(Math.abs(second.resetAt.getTime() - first.resetAt.getTime())).toBeLessThan(250);
    await waitFor(async () => (await bus.counters.get('tpm')).value === 0, 'the window to end');
    const next = await bus.counters.increment('tpm', 1, 1);
    expect(next.value).toBe(1);
    expect(next.resetAt.getTime()).toBeGreaterThan(first.resetAt.getTime());
  });

  it('admits concurrent reservations from two processes only against the headroom left', async () => {
    const a = backend().open();
    const b = backend().peer(a);
    const claim = { key: 'spend', amount: 15, limit: 20, windowSeconds: 60 };
    const answers = await Promise.all(range(1, 40).map((n) => (n % 2 ? a : b).counters.reserve([claim])));
    // The first claim leaves 5 of headroom, which admits exactly one more; then the counter is past its limit.
    const admitted = answers.filter((answer) => answer.admitted);
    expect(admitted).toHaveLength(2);
    for (const answer of answers.filter((answer) => !answer.admitted)) {
      expect(answer).toMatchObject({ admitted: false, refused: claim, value: 30 });
      if (!answer.admitted) expect(answer.resetAt!.getTime()).toBeGreaterThan(Date.now());
    }
    expect((await a.counters.get('spend')).value).toBe(30);
  });

  it('refuses a reservation whole: nothing is added when any counter is at its limit, and a claim of 0 only checks', async () => {
    const bus = backend().open();
    await bus.counters.increment('rpm', 2, 60);
    const refused = await bus.counters.reserve([
      { key: 'tpm', amount: 500, limit: 1000, windowSeconds: 60 },
      { key: 'rpm', amount: 1, limit: 2, windowSeconds: 60 },
    ]);
    expect(refused).toMatchObject({ admitted: false, refused: { key: 'rpm' }, value: 2 });
    expect(await bus.counters.get('tpm')).toEqual({ value: 0, resetAt: null });
    expect((await bus.counters.get('rpm')).value).toBe(2);

    const checked = await bus.counters.reserve([{ key: 'tpm', amount: 0, limit: 1000, windowSeconds: 60 }]);
    expect(checked).toEqual({ admitted: true, held: [] });
    expect(await bus.counters.get('tpm')).toEqual({ value: 0, resetAt: null });
    await expect(bus.counters.reserve([{ key: 'tpm', amount: -1, limit: 1, windowSeconds: 60 }])).rejects.toMatchObject({ kind: 'invalid_argument' });
  });

  it('settles a claim to what was used in the window it went into; a window that ended since takes nothing', async () => {
    const bus = backend().open();
    const reserved = await bus.counters.reserve([{ key: 'tpm', amount: 100, limit: 1000, windowSeconds: 60 }]);
    if (!reserved.admitted) throw new Error('refused');
    await bus.counters.increment('tpm', 7, 60);
    await bus.counters.settle([{ held: reserved.held[0]!, used: 30 }]);
    expect((await bus.counters.get('tpm')).value).toBe(37);

    // A claim whose window ends before it is settled (its turn crashed, or ran past the window) went with it.
    const short = await bus.counters.reserve([{ key: 'short', amount: 50, limit: 1000, windowSeconds: 1 }]);
    if (!short.admitted) throw new Error('refused');
    await waitFor(async () => (await bus.counters.get('short')).value === 0, 'the window to end');
    await bus.counters.increment('short', 5, 60);
    await bus.counters.settle([{ held: short.held[0]!, used: 10 }]);
    expect((await bus.counters.get('short')).value).toBe(5);
  });

  it('keeps two tenants apart: logs, counters and channels', async () => {
    const x = backend().open();
    const y = backend().open();
    await x.logs.append('run-shared', 'x');
    await x.counters.increment('rpm', 7, 60);
    expect(await y.logs.read('run-shared', 0)).toEqual({ state: 'missing' });
    expect((await y.counters.get('rpm')).value).toBe(0);

    const seenByY: unknown[] = [];
    const seenByX: unknown[] = [];
    await y.pubsub.subscribe('cancel', (m) => seenByY.push(m));
    await x.pubsub.subscribe('cancel', (m) => seenByX.push(m));
    await x.pubsub.publish('cancel', 'from x');
    await waitFor(() => seenByX.length === 1, 'x to hear itself');
    await y.pubsub.publish('cancel', 'from y');
    await waitFor(() => seenByY.length === 1, 'y to hear itself');
    expect(seenByY).toEqual(['from y']);
  });

  it('erases one prefix only, whatever characters it holds', async () => {
    const x = backend().open();
    const y = backend().open();
    for (const key of ['t1:run-a', 't1:run-b', 't2:run-a', 't*:run', 'tz:run']) await x.logs.append(key, key);
    await x.counters.increment('t1:rpm', 1, 60);
    await x.counters.increment('t2:rpm', 1, 60);
    await y.logs.append('t1:run-a', 'other tenant');
    const followed = follow(x.logs, 't1:run-a', 1);
    await sleep(50);

    expect(await x.deleteByPrefix('t1:')).toBe(3);
    expect(await x.logs.read('t1:run-a', 0)).toEqual({ state: 'missing' });
    expect(await x.logs.read('t1:run-b', 0)).toEqual({ state: 'missing' });
    expect(await x.counters.get('t1:rpm')).toEqual({ value: 0, resetAt: null });
    expect((await x.logs.read('t2:run-a', 0)).state).toBe('live');
    expect((await x.counters.get('t2:rpm')).value).toBe(1);
    expect((await y.logs.read('t1:run-a', 0)).state).toBe('live');
    await expect(within(followed.done, 2000, 'the erased tail to end')).rejects.toMatchObject({ code: 'log_erased' });

    expect(await x.deleteByPrefix('t*')).toBe(1);
    expect((await x.logs.read('tz:run', 0)).state).toBe('live');
  });

  it('keeps keys apart that end the way another key is stored, and erases each on its own', async () => {
    const bus = backend().open();
    // Redis names `a`'s log, marker, counter and channel `a:log`, `a:logmark`, `a:count`, `a:pubsub`: keys like those.
    const lookalikes = ['a', 'a:log', 'a:logmark', 'a:count', 'a:pubsub', 'a:log:log', 'a:logmark:count'];
    for (const [i, key] of lookalikes.entries()) {
      await bus.logs.append(key, key);
      await bus.counters.increment(key, i + 1, 60);
    }
    await bus.logs.close('a');
    await bus.logs.append('a:log', 'second');
    expect(await bus.logs.read('a', 0)).toEqual({ state: 'closed', lastId: 1, events: [{ id: 1, data: 'a' }] });
    expect(await bus.logs.read('a:log', 0)).toMatchObject({ state: 'live', lastId: 2 });
    for (const [i, key] of lookalikes.slice(2).entries()) {
      expect(await bus.logs.read(key, 0)).toEqual({ state: 'live', lastId: 1, events: [{ id: 1, data: key }] });
      expect((await bus.counters.get(key)).value).toBe(i + 3);
    }

    // The four keys starting `a:log` go; `a`, whose own log and marker are stored under names starting so, stays.
    expect(await bus.deleteByPrefix('a:log')).toBe(8);
    for (const key of ['a:log', 'a:log:log', 'a:logmark', 'a:logmark:count']) {
      expect(await bus.logs.read(key, 0)).toEqual({ state: 'missing' });
      expect((await bus.counters.get(key)).value).toBe(0);
    }
    expect((await bus.logs.read('a', 0)).state).toBe('closed');
    expect((await bus.counters.get('a')).value).toBe(1);
    expect((await bus.logs.read('a:count', 0)).state).toBe('live');
    expect(await bus.deleteByPrefix('a:c')).toBe(2);
    expect(await bus.deleteByPrefix('a')).toBe(4);
    expect(await bus.logs.read('a', 0)).toEqual({ state: 'missing' });
  });

  it('erases the named logs only, closed or live, and ends their tails', async () => {
    const bus = backend().open();
    for (const key of ['tenants/A/run:r1', 'tenants/A/run:r2', 'tenants/A/run:r10', 'tenants/A/run:r3']) await bus.logs.append(key, key);
    await bus.logs.close('tenants/A/run:r1');
    await bus.counters.increment('tenants/A/run:r1', 1, 60);
    const erased = follow(bus.logs, 'tenants/A/run:r2', 1);
    await sleep(50);

    // r1 twice and a never-written r9: each existing log is counted once.
    expect(await bus.deleteLogs(['tenants/A/run:r1', 'tenants/A/run:r2', 'tenants/A/run:r1', 'tenants/A/run:r9'])).toBe(2);
    await expect(within(erased.done, 2000, 'the erased tail to end')).rejects.toMatchObject({ code: 'log_erased' });
    expect(await bus.logs.read('tenants/A/run:r1', 0)).toEqual({ state: 'missing' });
    expect(await bus.logs.read('tenants/A/run:r2', 0)).toEqual({ state: 'missing' });
    // Not a prefix: r10 stays, and so does a counter that shares a log's key.
    expect((await bus.logs.read('tenants/A/run:r10', 0)).state).toBe('live');
    expect((await bus.logs.read('tenants/A/run:r3', 0)).state).toBe('live');
    expect((await bus.counters.get('tenants/A/run:r1')).value).toBe(1);
    expect(await bus.deleteLogs([])).toBe(0);
  });

  it("erases a tenant's runs and counters, not those of a tenant whose id starts the same", async () => {
    const bus = backend().open();
    for (const tenant of ['A', 'AB', 'B']) {
      await bus.logs.append(`tenants/${tenant}/runs/r1`, 1);
      await bus.logs.append(`tenants/${tenant}/runs/r2`, 1);
      await bus.counters.increment(`tenants/${tenant}/rpm`, 1, 60);
    }
    const erased = follow(bus.logs, 'tenants/A/runs/r1', 1);
    const kept = follow(bus.logs, 'tenants/AB/runs/r1', 0);
    await waitFor(() => kept.ids.length === 1, 'the replay');

    expect(await bus.deleteByPrefix('tenants/A/')).toBe(3);
    await expect(within(erased.done, 2000, 'the erased tail to end')).rejects.toMatchObject({ code: 'log_erased' });
    expect(await bus.logs.read('tenants/A/runs/r2', 0)).toEqual({ state: 'missing' });
    expect((await bus.counters.get('tenants/A/rpm')).value).toBe(0);
    for (const tenant of ['AB', 'B']) {
      expect((await bus.logs.read(`tenants/${tenant}/runs/r2`, 0)).state).toBe('live');
      expect((await bus.counters.get(`tenants/${tenant}/rpm`)).value).toBe(1);
    }
    await bus.logs.append('tenants/AB/runs/r1', 2);
    await bus.logs.close('tenants/AB/runs/r1');
    expect(await kept.done).toEqual([1, 2]);
  });

  it('answers ping and refuses data that is not JSON', async () => {
    const bus = backend().open();
    await expect(bus.ping()).resolves.toBeUndefined();
    await expect(bus.logs.append(newKey(), undefined)).rejects.toMatchObject({ kind: 'invalid_argument' });
  });
}

describe('event bus: in-process', () => {
  const opened: EventBus[] = [];
  const backend: Backend = {
    open: (retention) => {
      const bus = createMemoryEventBus(retention);
      opened.push(bus);
      return bus;
    },
    // One process holds the only copy, so the "other process" is the same bus.
    peer: (bus) => bus,
    closeAll: async () => {
      await Promise.all(opened.splice(0).map((bus) => bus.close()));
    },
  };
  eventBusContract(() => backend);
});

const redisServer = redisServerBinary();

describe.skipIf(!redisServer)('event bus: redis', () => {
  let server: RedisServer;
  let tenants = 0;
  const opened = new Map<EventBus, { keyPrefix: string; retention: RetentionOptions }>();
  const connect = (keyPrefix: string, retention: RetentionOptions) => {
    const bus = createRedisEventBus({ url: server.url, keyPrefix, ...retention });
    opened.set(bus, { keyPrefix, retention });
    return bus;
  };
  const backend: Backend = {
    open: (retention = {}) => connect(`agentplane:tenant-${++tenants}:`, retention),
    peer: (bus) => {
      const { keyPrefix, retention } = opened.get(bus)!;
      return connect(keyPrefix, retention);
    },
    closeAll: async () => {
      const buses = [...opened.keys()];
      opened.clear();
      await Promise.all(buses.map((bus) => bus.close()));
    },
  };

  beforeAll(async () => {
    server = await startRedis(redisServer!);
  });
  afterAll(async () => {
    await backend.closeAll();
    await server?.stop();
  });

  eventBusContract(() => backend);

  it('leaves no subscription behind when tails end', async () => {
    const bus = backend.open();
    const probe = createClient({ url: server.url });
    await probe.connect();
    try {
      const channel = `agentplane:tenant-${tenants}:run-probe:log`;
      const abort = new AbortController();
      const tail = follow(bus.logs, 'run-probe', 0, abort.signal);
      await waitFor(async () => (await probe.pubSubNumSub(channel))[channel] === 1, 'the tail to subscribe');
      abort.abort();
      await tail.done;
      await waitFor(async () => (await probe.pubSubNumSub(channel))[channel] === 0, 'the tail to unsubscribe');
    } finally {
      probe.destroy();
      await backend.closeAll();
    }
  });

  it('hands a tail the frames its own process appends without reading them back, and reads what another process appends', async () => {
    const bus = backend.open();
    const other = backend.peer(bus);
    const key = newKey();
    const reads: number[] = [];
    const read = bus.logs.read.bind(bus.logs);
    bus.logs.read = (logKey, afterId, limit) => (reads.push(afterId), read(logKey, afterId, limit));
    const tail = follow(bus.logs, key, 0);
    await bus.logs.append(key, 'start');
    await waitFor(() => tail.ids.length === 1, 'the first frame');
    // A tail reads once as it starts and once more when its subscription is answered (for what was appended in
    // between); under load the answer can come after the first frame, so count from after both.
    await waitFor(() => reads.length >= 2, 'the read once subscribed', 20_000);
    const readsBefore = reads.length;
    // Sixty frames as a run relays tokens, several in flight at once, then the terminal frame.
    await Promise.all(range(2, 61).map((n) => bus.logs.append(key, `token ${n}`)));
    await waitFor(() => tail.ids.length === 61, 'the tokens');
    expect(reads.length).toBe(readsBefore);
    // A frame from another process is read, in its place between this process's own.
    await other.logs.append(key, 'from elsewhere');
    await waitFor(() => tail.ids.length === 62, 'the frame from elsewhere');
    await bus.logs.appendLast(key, 'done');
    expect(await within(tail.done, 2_000, 'the tail ending')).toEqual(range(1, 63));
    expect(reads.length).toBeGreaterThan(readsBefore);
    expect(reads.length).toBeLessThanOrEqual(readsBefore + 2);
  });

  it('erases a tenant in one SCAN pass over its own names', async () => {
    const bus = backend.open();
    const keyPrefix = `agentplane:tenant-${tenants}:`;
    for (const n of range(1, 3)) await bus.logs.append(`tenants/A/runs/r${n}`, n);
    await bus.counters.increment('tenants/A/rpm', 1, 60);
    const monitor = createClient({ url: server.url });
    await monitor.connect();
    const commands: string[] = [];
    try {
      await monitor.monitor((line) => commands.push(String(line)));
      expect(await bus.deleteByPrefix('tenants/A/')).toBe(4);
      // The erase ends by waking the tails of its three logs.
      await waitFor(() => commands.filter((c) => /"publish"/i.test(c)).length === 3, 'the erase to be monitored');
    } finally {
      monitor.destroy();
    }
    const scans = commands.flatMap((c) => {
      const scan = /"scan" "(\d+)" "match" "([^"]*)"/i.exec(c);
      return scan ? [{ cursor: scan[1], match: scan[2] }] : [];
    });
    // One pass: a single SCAN starting at cursor 0, every page matching only the tenant's names.
    expect(scans.filter((scan) => scan.cursor === '0')).toHaveLength(1);
    expect(new Set(scans.map((scan) => scan.match))).toEqual(new Set([`${keyPrefix}tenants/A/*`]));
  });

  it('rejects ping within a couple of seconds when redis is down, without crashing', async () => {
    const bus = await createEventBus({ kind: 'redis', url: `redis://127.0.0.1:${await freePort()}`, keyPrefix: 'dead:' });
    try {
      await expect(within(bus.ping(), 4000, 'the ping to fail')).rejects.toMatchObject({ kind: 'unavailable' });
    } finally {
      await within(bus.close(), 2000, 'close');
    }
  });
});

describe('event bus: in-process retention on an injected clock', () => {
  it('expires frames, then the marker, without waiting', async () => {
    let now = 1_000_000;
    const clocked = createMemoryEventBus({ logRetentionSeconds: 60, markerRetentionSeconds: 600, now: () => now });
    await clocked.logs.append('run', 1);
    now += 59_000;
    expect((await clocked.logs.read('run', 0)).state).toBe('live');
    now += 1_000;
    expect(await clocked.logs.read('run', 0)).toEqual({ state: 'expired' });
    now += 540_000;
    expect(await clocked.logs.read('run', 0)).toEqual({ state: 'missing' });
    const window = await clocked.counters.increment('rpm', 1, 60);
    expect(window.resetAt.getTime()).toBe(now + 60_000);
    now += 60_000;
    expect(await clocked.counters.get('rpm')).toEqual({ value: 0, resetAt: null });
    await clocked.close();
  });

  it('packs a closed log at the sweep and reads it back frame for frame, until it expires', async () => {
    let now = 1_000_000;
    const clocked = createMemoryEventBus({ logRetentionSeconds: 60, markerRetentionSeconds: 600, now: () => now });
    const frames = [{ type: 'start' }, { type: 'token', text: 'line one\nline two' }, { type: 'token', text: 'ünïcødé 🚀 \u2028' }, { type: 'done' }];
    for (const frame of frames) await clocked.logs.append('run', frame);
    await clocked.logs.close('run');
    await clocked.logs.append('live', { type: 'start' });
    const before = await clocked.logs.read('run', 0);
    (clocked.logs as unknown as { sweep(): void }).sweep();
    expect(await clocked.logs.read('run', 0)).toEqual(before);
    // What is kept is the packed bytes alone, not a view of zlib's 64 KiB output chunk (64 KiB held per finished run).
    const packed = (clocked.logs as unknown as { stored: Map<string, { packed?: { data: Uint8Array } }> }).stored.get('run')!.packed!.data;
    expect(packed.buffer.byteLength).toBe(packed.byteLength);
    expect(await clocked.logs.read('run', 2, 1)).toEqual({ state: 'closed', events: [{ id: 3, data: frames[2] }], lastId: 4 });
    const tailed: unknown[] = [];
    for await (const event of clocked.logs.tail('run', 1, AbortSignal.timeout(2_000))) tailed.push(event.data);
    expect(tailed).toEqual(frames.slice(1));
    // A log still open is left as it is, and takes more frames.
    expect(await clocked.logs.append('live', { type: 'token' })).toBe(2);
    now += 60_000;
    expect(await clocked.logs.read('run', 0)).toEqual({ state: 'expired' });
    await clocked.close();
  });

  it('holds run logs within its memory budget: the oldest finished runs lose their frames, then their markers, a live one nothing', async () => {
    const budget = 40_000;
    const bus = createMemoryEventBus({ maxHeldBytes: budget });
    const held = () => (bus.logs as unknown as { heldBytes: number }).heldBytes;
    const frame = { type: 'token', text: 'x'.repeat(200) };
    await bus.logs.append('live-first', frame);
    for (let run = 0; run < 400; run++) {
      for (let i = 0; i < 10; i++) await bus.logs.append(`run-${run}`, frame);
      await bus.logs.close(`run-${run}`);
      expect(held()).toBeLessThanOrEqual(budget);
    }
    // Ten frames of ~230 bytes are ~2.9 KB a run: the budget holds about a dozen, and never the oldest.
    expect(await bus.logs.read('run-0', 0)).toEqual({ state: 'missing' });
    const newest = await bus.logs.read('run-399', 0);
    expect(newest.state).toBe('closed');
    expect('events' in newest && newest.events).toHaveLength(10);
    const states = await Promise.all(Array.from({ length: 400 }, (_, run) => bus.logs.read(`run-${run}`, 0).then((page) => page.state)));
    // Oldest first: markers gone, then frames gone, then whole.
    const firstExpired = states.indexOf('expired');
    const firstClosed = states.indexOf('closed');
    expect(0 < firstExpired && firstExpired < firstClosed).toBe(true);
    expect(states.slice(0, firstExpired).every((state) => state === 'missing')).toBe(true);
    expect(states.slice(firstClosed).every((state) => state === 'closed')).toBe(true);
    expect(await bus.logs.read('live-first', 0)).toMatchObject({ state: 'live', events: [{ id: 1, data: frame }] });
    await bus.close();
  });

  it('refuses a marker that would not outlive the frames', async () => {
    await expect(createEventBus({ kind: 'memory', logRetentionSeconds: 60, markerRetentionSeconds: 30 })).rejects.toMatchObject({
      kind: 'invalid_argument',
    });
  });
});
