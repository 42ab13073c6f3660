// The event port: numbered per-key logs that readers replay and then follow (a run's events behind SSE and
// Last-Event-ID), pub/sub (steer and cancel reach a run on any process), and fixed-window counters (rpm/tpm
// limits). Adapters: memory.ts (embedded default) and redis.ts (shared by every runtime process).
import { AppError, invalidArgument, notFound } from '../errors.js';

export interface RunLogEvent<T = unknown> {
  /** 1, 2, 3, ... per key: the SSE `id:` a client sends back as Last-Event-ID. */
  id: number;
  data: T;
}

/**
 * One page of a log. `lastId` is the newest id the log has (0 when none), so a reader can tell whether it
 * has everything. `expired`: the log existed but its retention passed; `missing`: it was never written (or
 * its marker is gone too, or it was erased).
 */
export type LogRead<T> =
  | { state: 'live' | 'closed'; events: RunLogEvent<T>[]; lastId: number }
  | { state: 'expired' }
  | { state: 'missing' };

export interface EventLogs {
  /** Appends one frame (JSON) and returns its id. Ids are assigned atomically across processes sharing the backend. */
  append<T>(key: string, data: T): Promise<number>;
  /** Marks the log finished (its terminal frame is written): tails end once drained. Idempotent. */
  close(key: string): Promise<void>;
  /**
   * Appends the log's terminal frame and closes the log in one step, returning the frame's id: one round trip
   * instead of two, and nothing (another frame, a reordered retry) can land between them. A closed log takes
   * nothing (`log_closed`).
   */
  appendLast<T>(key: string, data: T): Promise<number>;
  /** Frames with id > afterId, oldest first, at most `limit` (all when omitted). */
  read<T>(key: string, afterId: number, limit?: number): Promise<LogRead<T>>;
  /**
   * Replays frames after `afterId`, then yields new ones as they are appended, with no gap or duplicate.
   * Ends when the log is closed and drained, or promptly when `signal` aborts (or the bus closes). A log not
   * written yet is waited for; one that expires or is erased while followed ends the tail with `not_found`.
   */
  tail<T>(key: string, afterId: number, signal: AbortSignal): AsyncIterable<RunLogEvent<T>>;
}

export interface PubSub {
  /** Delivers `message` (JSON) to every current subscriber of `channel`, in every process. At most once. */
  publish(channel: string, message: unknown): Promise<void>;
  /** Resolves once the subscription is active (a later publish reaches it); returns the unsubscribe. */
  subscribe(channel: string, handler: (message: unknown) => void): Promise<() => Promise<void>>;
}

export interface CounterWindow {
  value: number;
  /** When the current fixed window ends and the counter starts again from 0. */
  resetAt: Date;
}

export interface Counters {
  /** Adds `by` to the counter; the first increment of a window starts it, `windowSeconds` long. */
  increment(key: string, by: number, windowSeconds: number): Promise<CounterWindow>;
  /** The current value; `resetAt` is null when no window is open (value 0). */
  get(key: string): Promise<{ value: number; resetAt: Date | null }>;
}

export interface EventBus {
  readonly logs: EventLogs;
  readonly pubsub: PubSub;
  readonly counters: Counters;
  /** Resolves when the backend answers, rejects (`unavailable`) otherwise, within a couple of seconds. */
  ping(): Promise<void>;
  /** Erases every log (with its marker) and counter whose key starts with `prefix`; returns how many. */
  deleteByPrefix(prefix: string): Promise<number>;
  /** Ends every tail and releases connections and timers. Idempotent. */
  close(): Promise<void>;
}

export interface RetentionOptions {
  /** How long a log's frames are kept after its last append or close. Default 3600. */
  logRetentionSeconds?: number;
  /** How long a log is still known to have existed (reads say `expired`, not `missing`). Default 7 days. */
  markerRetentionSeconds?: number;
}

export interface Retention {
  logMs: number;
  markerMs: number;
}

export function resolveRetention(options: RetentionOptions): Retention {
  const logSeconds = options.logRetentionSeconds ?? 3600;
  const markerSeconds = options.markerRetentionSeconds ?? 7 * 24 * 3600;
  if (!(logSeconds > 0) || !(markerSeconds > 0)) throw invalidArgument('event log retentions must be positive');
  // The marker is what tells `expired` from `missing`, so it must outlive the frames.
  if (markerSeconds < logSeconds) throw invalidArgument('markerRetentionSeconds must be at least logRetentionSeconds');
  return { logMs: Math.round(logSeconds * 1000), markerMs: Math.round(markerSeconds * 1000) };
}

// Argument checks shared by the adapters, so both refuse the same inputs the same way.

export function checkKey(key: string): void {
  if (typeof key !== 'string' || key === '') throw invalidArgument('event key must be a non-empty string');
}

export function checkRead(afterId: number, limit?: number): void {
  if (!Number.isSafeInteger(afterId) || afterId < 0) throw invalidArgument('afterId must be an integer >= 0');
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
    throw invalidArgument('limit must be an integer >= 1');
  }
}

export function checkIncrement(by: number, windowSeconds: number): void {
  if (!Number.isSafeInteger(by)) throw invalidArgument('counter increment must be an integer');
  if (!(windowSeconds > 0)) throw invalidArgument('counter window must be positive');
}

/** JSON text of a frame or message; both adapters store JSON so a reader sees the same values on either. */
export function toJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw invalidArgument('event data must be JSON-serialisable');
  return text;
}

/** An append to a log that was closed (its run ended or was swept as lost): 409 `log_closed`. */
export class LogClosedError extends AppError {
  constructor(readonly key: string) {
    super('conflict', `event log '${key}' is closed`, { code: 'log_closed' });
    this.name = 'LogClosedError';
  }
}

export const logClosed = (key: string) => new LogClosedError(key);

/** Subscribes to change notices of one log; resolves once notices flow; returns the unsubscribe. */
export type WatchLog = (key: string, onChange: () => void) => Promise<() => Promise<void>>;

const TAIL_PAGE = 500;
/** A followed log is re-read this often even without a notice, so expiry is noticed and no lost notice stalls it. */
const RECHECK_MS = 10_000;

/**
 * The tail both adapters share. Ids make it gap-free: it watches first, then reads everything after the last
 * id it yielded, and re-reads after every notice. A notice that races a read only causes one extra read.
 */
export async function* followLog<T>(
  read: EventLogs['read'],
  watch: WatchLog,
  key: string,
  afterId: number,
  signal: AbortSignal,
): AsyncGenerator<RunLogEvent<T>> {
  checkKey(key);
  checkRead(afterId);
  if (signal.aborted) return;
  const notice = new ChangeNotice();
  const unwatch = await watch(key, notice.fire);
  let last = afterId;
  let seen = false;
  try {
    while (!signal.aborted) {
      notice.clear();
      const page = await read<T>(key, last, TAIL_PAGE);
      if (page.state === 'expired') throw notFound(`event log '${key}' expired`, { code: 'log_expired' });
      if (page.state === 'missing') {
        if (seen) throw notFound(`event log '${key}' was erased`, { code: 'log_erased' });
      } else {
        seen = true;
        for (const event of page.events) {
          if (signal.aborted) return;
          last = event.id;
          yield event;
        }
        if (page.events.length === TAIL_PAGE) continue;
        if (page.state === 'closed' && last >= page.lastId) return;
      }
      await notice.wait(signal, RECHECK_MS);
    }
  } finally {
    // Not awaited: ending the tail must not wait on a backend that may be unreachable, nor fail because of it.
    void unwatch().catch(() => undefined);
  }
}

/** A sticky wake-up: a notice that arrives while a reader is reading is kept for its next wait. */
export class ChangeNotice {
  private pending = false;
  private wake: (() => void) | null = null;

  readonly fire = (): void => {
    this.pending = true;
    this.wake?.();
  };

  clear(): void {
    this.pending = false;
  }

  wait(signal: AbortSignal, timeoutMs: number): Promise<void> {
    if (this.pending || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done);
      this.wake = done;
    });
  }
}
