import { describe, expect, it } from 'vitest';
import { eventually } from '@agentplane/test/harness/eventually';
import { WorkQueue, type ReconcileReport } from './queue.js';

/** A reconcile whose runs stay open until the test lets them finish. */
function gatedReconciler() {
  const runs: string[] = [];
  const open = new Map<string, Array<() => void>>();
  let inFlight = 0;
  let maxInFlight = 0;
  const perKey = new Map<string, number>();
  let overlapped = false;
  return {
    runs,
    get maxInFlight() {
      return maxInFlight;
    },
    get overlapped() {
      return overlapped;
    },
    openRuns: (key: string) => open.get(key)?.length ?? 0,
    finish(key: string) {
      const release = open.get(key)?.shift();
      if (!release) throw new Error(`no open run of ${key}`);
      release();
    },
    reconcile: async (key: string) => {
      runs.push(key);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
      if (perKey.get(key)! > 1) overlapped = true;
      await new Promise<void>((resolve) => open.set(key, [...(open.get(key) ?? []), resolve]));
      perKey.set(key, perKey.get(key)! - 1);
      inFlight -= 1;
    },
  };
}

describe('WorkQueue', () => {
  it('runs one reconcile per key at a time and runs a key added meanwhile exactly once more', async () => {
    const gate = gatedReconciler();
    const queue = new WorkQueue({ reconcile: gate.reconcile, concurrency: 4, baseBackoffMs: 5, maxBackoffMs: 50 });
    queue.start();
    queue.add('Project//a');
    await eventually(() => gate.openRuns('Project//a') === 1);
    // Changes arriving while it runs collapse into one more run, after this one.
    queue.add('Project//a');
    queue.add('Project//a');
    queue.add('Project//a');
    expect(gate.runs).toEqual(['Project//a']);
    gate.finish('Project//a');
    await eventually(() => gate.openRuns('Project//a') === 1 && gate.runs.length === 2);
    gate.finish('Project//a');
    await queue.drain();
    expect(gate.runs).toEqual(['Project//a', 'Project//a']);
    expect(gate.overlapped).toBe(false);
  });

  it('collapses repeated adds of a waiting key and keeps the global concurrency limit', async () => {
    const gate = gatedReconciler();
    const queue = new WorkQueue({ reconcile: gate.reconcile, concurrency: 2, baseBackoffMs: 5, maxBackoffMs: 50 });
    queue.start();
    for (const key of ['k/a', 'k/b', 'k/c', 'k/d', 'k/c', 'k/d', 'k/c']) queue.add(key);
    await eventually(() => gate.runs.length === 2);
    expect(queue.depth).toBe(2);
    expect(queue.inFlight).toBe(2);
    for (const key of ['k/a', 'k/b']) gate.finish(key);
    await eventually(() => gate.runs.length === 4);
    for (const key of ['k/c', 'k/d']) gate.finish(key);
    await queue.drain();
    expect(gate.runs).toEqual(['k/a', 'k/b', 'k/c', 'k/d']);
    expect(gate.maxInFlight).toBe(2);
  });

  it('retries a failing key with exponential backoff up to the maximum, and forgets failures on success', async () => {
    let attempts = 0;
    const reports: ReconcileReport[] = [];
    const queue = new WorkQueue({
      reconcile: async () => {
        attempts += 1;
        if (attempts <= 5) throw new Error(`attempt ${attempts} failed`);
      },
      concurrency: 1,
      baseBackoffMs: 2,
      maxBackoffMs: 10,
      onReport: (report) => reports.push(report),
    });
    queue.start();
    queue.add('Tenant/ns/t');
    await eventually(() => reports.some((r) => r.result === 'success'));
    expect(reports.map((r) => [r.result, r.retryInMs])).toEqual([
      ['error', 2],
      ['error', 4],
      ['error', 8],
      ['error', 10],
      ['error', 10],
      ['success', undefined],
    ]);
    // After a success the count starts over.
    expect(queue.backoffMs(1)).toBe(2);
  });

  it('runs a key again when its reconcile asks for a requeue', async () => {
    let runs = 0;
    const queue = new WorkQueue({
      reconcile: async () => {
        runs += 1;
        return runs < 3 ? { requeueAfterMs: 1 } : undefined;
      },
      concurrency: 1,
      baseBackoffMs: 5,
      maxBackoffMs: 50,
    });
    queue.start();
    queue.add('Project//waiting');
    await eventually(() => runs === 3);
    await queue.drain();
    expect(runs).toBe(3);
  });

  it('runs nothing while paused, resumes on start, and stop waits for the running reconcile', async () => {
    const gate = gatedReconciler();
    const queue = new WorkQueue({ reconcile: gate.reconcile, concurrency: 2, baseBackoffMs: 5, maxBackoffMs: 50 });
    queue.add('k/standby');
    expect(queue.depth).toBe(1);
    expect(gate.runs).toEqual([]);
    queue.start();
    await eventually(() => gate.openRuns('k/standby') === 1);
    queue.add('k/later');
    await eventually(() => gate.openRuns('k/later') === 1);
    let stopped = false;
    const stopping = queue.stop().then(() => (stopped = true));
    queue.add('k/after-stop');
    gate.finish('k/standby');
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    gate.finish('k/later');
    await stopping;
    expect(gate.runs).toEqual(['k/standby', 'k/later']);
  });
});
