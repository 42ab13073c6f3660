// The work queue between watches and reconcilers (the Pepr/controller-runtime model): keys `kind/namespace/name`,
// at most one reconcile per key at a time, a key added while it runs runs once more afterwards, repeated adds of a
// waiting key collapse into one, a global limit on concurrent reconciles, per-key exponential backoff after a
// failure, and a delayed re-run a reconciler may ask for. It dispatches only while started (the leader).

export interface ReconcileOutcome {
  /** Run this key again after this long, even if nothing changes (waiting on something outside the API). */
  requeueAfterMs?: number;
}

export type Reconcile = (key: string) => Promise<ReconcileOutcome | void>;

export interface ReconcileReport {
  key: string;
  result: 'success' | 'requeue' | 'error';
  durationMs: number;
  error?: unknown;
  /** When the key runs again on its own (after a failure's backoff or a requested requeue). */
  retryInMs?: number;
}

export interface WorkQueueOptions {
  reconcile: Reconcile;
  /** Reconciles running at once, over all keys. */
  concurrency: number;
  /** The first retry's delay; each further failure doubles it. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  onReport?: (report: ReconcileReport) => void;
}

export class WorkQueue {
  /** Keys waiting to run, oldest first (a Set iterates in insertion order, and dedupes). */
  private readonly waiting = new Set<string>();
  private readonly running = new Set<string>();
  /** Keys added while running: they run again when the current run ends. */
  private readonly dirty = new Set<string>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private started = false;
  private idle: Array<() => void> = [];

  constructor(private readonly options: WorkQueueOptions) {}

  /** Keys waiting to run now (not counting delayed ones). */
  get depth(): number {
    return this.waiting.size;
  }

  get inFlight(): number {
    return this.running.size;
  }

  add(key: string): void {
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    this.waiting.add(key);
    this.dispatch();
  }

  /** Adds the key after `delayMs`; an earlier pending delay for the same key wins. */
  addAfter(key: string, delayMs: number): void {
    const at = Date.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.delayed.set(key, { at, timer });
  }

  /** Starts (or resumes) running keys. */
  start(): void {
    this.started = true;
    this.dispatch();
  }

  /** Runs nothing new; reconciles already running finish. Keys keep collecting for a later start. */
  pause(): void {
    this.started = false;
  }

  /** Resolves once no reconcile is running. */
  drain(): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Pauses, forgets every waiting and delayed key, and waits for the running ones. */
  async stop(): Promise<void> {
    this.pause();
    this.waiting.clear();
    this.dirty.clear();
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    await this.drain();
  }

  /** The delay before retrying a key that has now failed `failures` times in a row. */
  backoffMs(failures: number): number {
    return Math.min(this.options.maxBackoffMs, this.options.baseBackoffMs * 2 ** Math.min(failures - 1, 30));
  }

  private dispatch(): void {
    while (this.started && this.running.size < this.options.concurrency && this.waiting.size > 0) {
      const key = this.waiting.values().next().value as string;
      this.waiting.delete(key);
      // Running now supersedes a pending delayed run; the run asks again if it still needs one.
      const pending = this.delayed.get(key);
      if (pending) {
        clearTimeout(pending.timer);
        this.delayed.delete(key);
      }
      this.running.add(key);
      void this.run(key);
    }
  }

  private async run(key: string): Promise<void> {
    const startedAt = performance.now();
    let report: ReconcileReport;
    try {
      const outcome = await this.options.reconcile(key);
      this.failures.delete(key);
      const requeue = outcome?.requeueAfterMs;
      report = { key, result: requeue === undefined ? 'success' : 'requeue', durationMs: performance.now() - startedAt };
      if (requeue !== undefined) {
        report.retryInMs = requeue;
        this.addAfter(key, requeue);
      }
    } catch (error) {
      const failures = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, failures);
      const retryInMs = this.backoffMs(failures);
      report = { key, result: 'error', durationMs: performance.now() - startedAt, error, retryInMs };
      this.addAfter(key, retryInMs);
    }
    this.running.delete(key);
    try {
      this.options.onReport?.(report);
    } finally {
      if (this.dirty.delete(key)) this.waiting.add(key);
      if (this.running.size === 0) for (const resolve of this.idle.splice(0)) resolve();
      this.dispatch();
    }
  }
}
