// Hands V8's idle pages back to the system after a burst (decision 0067).
//
// V8 keeps the pages a garbage collection empties in a pool for reuse, and keeps old-space pages committed after
// their objects die; only its memory reducer, or a low-memory notification, gives them back. The reducer waits
// while it judges the allocation rate high, and in a process that keeps allocating a little (an operator's resyncs,
// a runtime's lease renewals) it judged so for good: after a 1,000-Project burst the operator's heap held 72 MiB
// while 250 MiB of V8 pages stayed resident, and a probe that allocated 150 MiB once kept its RSS for 100 seconds
// until the reducer's watchdog fired. This looks every interval, and when V8 holds much more than it uses and the
// process has been mostly idle since the last look, asks V8 for what a low-memory notification does: a full,
// compacting collection that releases the pooled pages (a pause of tens of milliseconds per 50 MiB of live heap).
import { setFlagsFromString } from 'node:v8';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { runInNewContext } from 'node:vm';
import type { Logger } from './logging.js';

const MiB = 1024 * 1024;

export interface HeapReleaseOptions {
  logger: Logger;
  /** How often to look. */
  intervalMs?: number;
  /**
   * Memory V8 may hold beyond what it uses before it is asked to give it back: committed heap not in use, plus
   * resident memory outside the heap that grew since the lowest reading (where the pooled pages are counted).
   */
  slackBytes?: number;
  /** Asks only when the event loop was busy at most this share of the time since the last look (0-1). */
  maxBusy?: number;
}

/** What `startHeapRelease` hands back: it has already asked V8 once, for what starting up left. */
export interface HeapRelease {
  /** How many times V8 was asked to give memory back. */
  readonly releases: number;
  /** Looks now (the timer's work): answers whether V8 was asked. */
  check(): boolean;
  stop(): void;
}

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's `gc`, taken from a context made while it was exposed, so the program's own global scope never gets one;
 * undefined when this V8 refuses (the releaser then does nothing).
 */
function lastResortCollector(): Collect | undefined {
  try {
    setFlagsFromString('--expose-gc');
    const collect: unknown = runInNewContext('typeof gc === "function" ? gc : undefined');
    return typeof collect === 'function' ? (collect as Collect) : undefined;
  } catch {
    return undefined;
  } finally {
    // Only contexts made from now on would see it; the main one never did unless node was started with the flag.
    setFlagsFromString('--no-expose-gc');
  }
}

/** Asks V8 for a low-memory collection, logs what it gave back and how long it paused; answers the memory after. */
function release(collect: Collect, logger: Logger, what: string, before = process.memoryUsage()): NodeJS.MemoryUsage {
  const started = performance.now();
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  const pauseMs = performance.now() - started;
  const after = process.memoryUsage();
  logger.info({ rssMiB: Math.round(before.rss / MiB), rssAfterMiB: Math.round(after.rss / MiB), heapUsedMiB: Math.round(after.heapUsed / MiB), pauseMs: Math.round(pauseMs) }, what);
  return after;
}

export function startHeapRelease({ logger, intervalMs = 10_000, slackBytes = 48 * MiB, maxBusy = 0.1 }: HeapReleaseOptions): HeapRelease {
  const collect = lastResortCollector();
  let releases = 0;
  let lastLook: EventLoopUtilization = performance.eventLoopUtilization();
  // Starting up is a burst too (modules compiled, a database opened): what it left goes back now, before the program
  // serves, and the least resident memory outside the heap seen so far (what the process needs besides V8's heap)
  // is read from there.
  const initial = collect ? release(collect, logger, 'gave what starting up left back to the system') : process.memoryUsage();
  let floor = initial.rss - initial.heapTotal;
  // What V8 still held right after it was last asked (committed heap it could not compact away): not asked for again.
  let kept = 0;
  const heldNow = (usage: NodeJS.MemoryUsage) => usage.heapTotal - usage.heapUsed + (usage.rss - usage.heapTotal - floor);
  const check = (): boolean => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, lastLook).utilization;
    lastLook = now;
    const usage = process.memoryUsage();
    floor = Math.min(floor, usage.rss - usage.heapTotal);
    const held = heldNow(usage);
    kept = Math.min(kept, held);
    if (!collect || held - kept < slackBytes || busy > maxBusy) return false;
    const after = release(collect, logger, 'gave idle heap pages back to the system', usage);
    releases += 1;
    // What is left outside the heap is the new floor: memory that stayed is in use (a database's buffers, say), and
    // asking again for it would only pause the process.
    floor = after.rss - after.heapTotal;
    kept = heldNow(after);
    return true;
  };
  const timer = setInterval(check, intervalMs);
  timer.unref();
  return {
    get releases() {
      return releases;
    },
    check,
    stop: () => clearInterval(timer),
  };
}
