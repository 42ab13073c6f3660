// The shared tail with this process's own appends handed over (docs/decisions/0069), against a log kept in a plain
// array: which frames it yields, in what order, and when it reads the log instead of taking what it was handed.
import { describe, expect, it } from 'vitest';
import { followLog, type LogRead, type OwnAppends, type RunLogEvent } from './port.js';

/** A log, its notices, and this process's appends to it, driven step by step by the test. */
function world() {
  const frames: RunLogEvent<string>[] = [];
  let closed = false;
  const reads: number[] = [];
  let notify: (id?: number) => void = () => undefined;
  let take: (event: RunLogEvent<unknown>, closed: boolean) => void = () => undefined;
  let failed: () => void = () => undefined;
  let awaiting = 0;
  const own: OwnAppends = {
    follow: (_key, onTake, onFailed) => {
      take = onTake;
      failed = onFailed;
      return () => undefined;
    },
    awaiting: () => awaiting > 0,
  };
  const read = async <T>(_key: string, afterId: number): Promise<LogRead<T>> => {
    reads.push(afterId);
    return { state: closed ? 'closed' : 'live', events: frames.filter((frame) => frame.id > afterId) as RunLogEvent<T>[], lastId: frames.length };
  };
  const yielded: number[] = [];
  const controller = new AbortController();
  const tail = (async () => {
    for await (const event of followLog<string>(read, async (_key, onChange) => ((notify = onChange), async () => undefined), 'run-1', 0, controller.signal, own)) {
      yielded.push(event.id);
    }
  })();
  const settle = () => new Promise((resolve) => setTimeout(resolve, 5));
  return {
    reads,
    yielded,
    tail,
    controller,
    settle,
    /** Another process appends: the frame is stored and its notice sent. */
    async appendElsewhere(data: string) {
      frames.push({ id: frames.length + 1, data });
      notify(frames.length);
      await settle();
    },
    /** This process appends: stored and announced at once, handed over when `acknowledge` runs (or failed). */
    appendHere(data: string, last = false) {
      awaiting++;
      const event = { id: frames.length + 1, data };
      frames.push(event);
      if (last) closed = true;
      notify(last ? undefined : event.id);
      return {
        acknowledge: async () => {
          awaiting--;
          take(event, last);
          await settle();
        },
        fail: async () => {
          awaiting--;
          failed();
          await settle();
        },
      };
    },
  };
}

describe('followLog with own appends', () => {
  it('yields its own frames as they are acknowledged, without reading, even when their notice comes first', async () => {
    const log = world();
    await log.settle();
    // Once before notices flow, once after.
    expect(log.reads).toEqual([0, 0]);
    for (const text of ['start', 'a', 'b']) {
      const append = log.appendHere(text);
      await log.settle(); // the notice arrived before the acknowledgement
      await append.acknowledge();
    }
    expect(log.yielded).toEqual([1, 2, 3]);
    expect(log.reads).toEqual([0, 0]);
    await log.appendHere('done', true).acknowledge();
    await log.tail;
    expect(log.yielded).toEqual([1, 2, 3, 4]);
    expect(log.reads).toEqual([0, 0]);
  });

  it("reads a frame another process appended, and fills the gap it leaves before this process's next frame", async () => {
    const log = world();
    await log.settle();
    await log.appendHere('start').acknowledge();
    // Another process's frame and this one's next, acknowledged before the other's notice is acted on.
    const elsewhere = log.appendElsewhere('cancel asked');
    const next = log.appendHere('token');
    await elsewhere;
    await next.acknowledge();
    expect(log.yielded).toEqual([1, 2, 3]);
    expect(log.reads.length).toBeGreaterThan(2);
    await log.appendHere('done', true).acknowledge();
    await log.tail;
    expect(log.yielded).toEqual([1, 2, 3, 4]);
  });

  it('reads a frame whose acknowledgement was lost (an append that failed after the backend stored it)', async () => {
    const log = world();
    await log.settle();
    const lost = log.appendHere('stored, reply lost');
    await log.settle();
    expect(log.yielded).toEqual([]);
    await lost.fail();
    expect(log.yielded).toEqual([1]);
    log.controller.abort();
    await log.tail;
  });

  it('yields what the log holds before notices flow, reads again once they do, and fails when they cannot', async () => {
    const frames = [{ id: 1, data: 'start' }, { id: 2, data: 'token' }];
    const reads: number[] = [];
    const read = async <T>(_key: string, afterId: number): Promise<LogRead<T>> => {
      reads.push(afterId);
      return { state: 'live', events: frames.filter((frame) => frame.id > afterId) as RunLogEvent<T>[], lastId: frames.length };
    };
    let subscribed!: (unwatch: () => Promise<void>) => void;
    const subscription = new Promise<() => Promise<void>>((resolve) => (subscribed = resolve));
    const controller = new AbortController();
    const tail = followLog<string>(read, () => subscription, 'run-1', 0, controller.signal)[Symbol.asyncIterator]();
    // The subscription has not answered: the frames already written come anyway.
    expect((await tail.next()).value).toEqual({ id: 1, data: 'start' });
    expect((await tail.next()).value).toEqual({ id: 2, data: 'token' });
    // One appended before notices flowed is read once they do.
    frames.push({ id: 3, data: 'meanwhile' });
    const third = tail.next();
    subscribed(async () => undefined);
    expect((await third).value).toEqual({ id: 3, data: 'meanwhile' });
    expect(reads).toEqual([0, 2]);
    controller.abort();
    await tail.return(undefined);

    const refused = followLog<string>(read, () => Promise.reject(new Error('no subscription')), 'run-2', 3, new AbortController().signal)[Symbol.asyncIterator]();
    await expect(refused.next()).rejects.toThrow('no subscription');
  });

  it('does not wait on a subscription that has not answered: handed frames, the terminal one and an abort all get through', async () => {
    const reads: number[] = [];
    const read = async <T>(_key: string, afterId: number): Promise<LogRead<T>> => (reads.push(afterId), { state: 'live', events: [], lastId: 0 });
    let take!: (event: RunLogEvent<unknown>, closed: boolean) => void;
    const own: OwnAppends = { follow: (_key, onTake) => ((take = onTake), () => undefined), awaiting: () => false };
    const never = () => new Promise<() => Promise<void>>(() => undefined);
    const yielded: unknown[] = [];
    const tail = (async () => {
      for await (const event of followLog<string>(read, never, 'run-1', 0, new AbortController().signal, own)) yielded.push(event.data);
    })();
    await new Promise((resolve) => setTimeout(resolve, 5));
    take({ id: 1, data: 'start' }, false);
    take({ id: 2, data: 'done' }, true);
    await tail;
    expect(yielded).toEqual(['start', 'done']);

    const controller = new AbortController();
    const aborted = (async () => {
      for await (const _event of followLog<string>(read, never, 'run-2', 0, controller.signal)) void _event;
    })();
    await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort();
    await aborted;
  });
});
