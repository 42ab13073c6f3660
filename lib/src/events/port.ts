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
  /**
   * Checks and claims in one atomic step, across every process sharing the backend: refuses, changing nothing, when
   * any counter is already at or above its claim's `limit`; otherwise adds every claim's `amount` (a claim of 0 only
   * checks, and opens no window). Concurrent reservations each see the others' claims, so a cap is admitted against
   * what is really left (docs/decisions/0075).
   */
  reserve(claims: readonly CounterClaim[]): Promise<Reservation>;
  /**
   * Replaces each held claim's amount with what was really used, in the window the claim was made in: a claim whose
   * window has ended went with it and changes nothing now. Each held claim must be settled at most once.
   */
  settle(settlements: readonly { held: HeldClaim; used: number }[]): Promise<void>;
}

export interface CounterClaim {
  key: string;
  /** Added now (an integer >= 0); settled later against what was used. */
  amount: number;
  /** The claim is refused while the counter is at or above this. */
  limit: number;
  windowSeconds: number;
}

/** A claim a reservation added, and the window it went into. */
export interface HeldClaim {
  key: string;
  amount: number;
  windowSeconds: number;
  /** When the window it was added to ends (ms since the epoch): the window's identity when it is settled. */
  windowEndsAt: number;
}

export type Reservation =
  | { admitted: true; held: HeldClaim[] }
  /** `refused` is the claim that was at its limit, with its counter's value and window end (null: none open). */
  | { admitted: false; refused: CounterClaim; value: number; resetAt: Date | null };

export interface EventBus {
  readonly logs: EventLogs;
  readonly pubsub: PubSub;
  readonly counters: Counters;
  /** Resolves when the backend answers, rejects (`unavailable`) otherwise, within a couple of seconds. */
  ping(): Promise<void>;
  /** Erases every log (with its marker) and counter whose key starts with `prefix`; returns how many. */
  deleteByPrefix(prefix: string): Promise<number>;
  /**
   * Erases these logs (with their markers) and ends their tails, as `deleteByPrefix` does, without scanning: one
   * subject's runs among a tenant's (forgetting a subject). Returns how many of them existed.
   */
  deleteLogs(keys: readonly string[]): Promise<number>;
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

export function checkClaims(claims: readonly CounterClaim[]): void {
  for (const claim of claims) {
    checkKey(claim.key);
    checkIncrement(claim.amount, claim.windowSeconds);
    if (claim.amount < 0) throw invalidArgument('a claim must be >= 0');
    if (!Number.isSafeInteger(claim.limit)) throw invalidArgument('a claim\'s limit must be an integer');
  }
  if (new Set(claims.map((claim) => claim.key)).size !== claims.length) throw invalidArgument('a reservation claims each counter once');
}

export function checkSettlements(settlements: readonly { held: HeldClaim; used: number }[]): void {
  for (const { held, used } of settlements) {
    checkKey(held.key);
    if (!Number.isSafeInteger(used) || used < 0) throw invalidArgument('what a claim used must be an integer >= 0');
  }
}

/**
 * How far apart two readings of a window's end may be and still be the same window. Redis tells a window's end only
 * as time left, read by the caller at another moment, so two readings differ by the round trips' delays; a later
 * window of the same counter ends at least its whole length later.
 */
export function windowToleranceMs(windowSeconds: number): number {
  return Math.min(1000, (windowSeconds * 1000) / 2);
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

/**
 * Subscribes to change notices of one log; resolves once notices flow; returns the unsubscribe. A notice may say
 * the id it announces (undefined: unknown, or the log closed).
 */
export type WatchLog = (key: string, onChange: (announcedId?: number) => void) => Promise<() => Promise<void>>;

/**
 * This process's own appends, handed to its own tails as the backend acknowledges them (the Redis adapter): a tail
 * that follows a run on the process running it, as `POST /chat/stream` does, yields them without reading them
 * back (docs/decisions/0069).
 */
export interface OwnAppends {
  /**
   * Hands each append to `key` acknowledged from now on to `take` (`closed`: the log's last frame), and tells
   * `failed` of one that failed. Returns the way to stop.
   */
  follow(key: string, take: (event: RunLogEvent<unknown>, closed: boolean) => void, failed: () => void): () => void;
  /** Whether an append of this process to `key` awaits its acknowledgement: it will be handed over, or fail. */
  awaiting(key: string): boolean;
}

const TAIL_PAGE = 500;
/** A followed log is re-read this often even without a notice, so expiry is noticed and no lost notice stalls it. */
const RECHECK_MS = 10_000;

/**
 * The tail both adapters share. Ids make it gap-free: it reads everything after the last id it yielded, again once
 * notices of new frames flow, and again after a notice of a frame it has not yielded. A notice that races a read
 * only causes one extra read. With `own`, frames this process appended are yielded as they are acknowledged, when
 * they continue from the last id yielded; a notice of a frame still being acknowledged waits for it instead of
 * reading.
 */
export async function* followLog<T>(
  read: EventLogs['read'],
  watch: WatchLog,
  key: string,
  afterId: number,
  signal: AbortSignal,
  own?: OwnAppends,
): AsyncGenerator<RunLogEvent<T>> {
  checkKey(key);
  checkRead(afterId);
  if (signal.aborted) return;
  const notice = new ChangeNotice();
  /** The highest id a notice announced since the last read (Infinity: unknown, or the log closed). */
  let announced = -1;
  let mustRead = true;
  // The first read does not wait for notices to flow; once they do, the log is read once more for what was
  // appended in between (a subscription is a round trip of its own, on the path to a stream's first frame).
  const watching = watch(key, (id) => {
    announced = Math.max(announced, id ?? Infinity);
    notice.fire();
  });
  // Not waited for: handed frames, an abort and the periodic re-read go on meanwhile (a Redis subscription has no
  // timeout of its own). Once it answers, the log is read again; a failed one ends the tail.
  let watchFailure: { error: unknown } | undefined;
  watching.then(
    () => {
      mustRead = true;
      notice.fire();
    },
    (error: unknown) => {
      watchFailure = { error };
      notice.fire();
    },
  );
  const handed: { event: RunLogEvent<T>; closed: boolean }[] = [];
  const unfollow = own?.follow(
    key,
    (event, closed) => {
      handed.push({ event: event as RunLogEvent<T>, closed });
      notice.fire();
    },
    notice.fire,
  );
  let last = afterId;
  let seen = false;
  try {
    while (!signal.aborted) {
      if (watchFailure) throw watchFailure.error;
      notice.clear();
      // Frames this process appended that continue the log need no read; one beyond the next id left a gap that
      // a frame from elsewhere fills, which the read below brings.
      while (handed.length > 0 && handed[0]!.event.id <= last + 1) {
        const { event, closed } = handed.shift()!;
        if (event.id <= last) continue;
        last = event.id;
        seen = true;
        yield event;
        if (closed || signal.aborted) return;
      }
      if (mustRead || handed.length > 0 || (announced > last && !own?.awaiting(key))) {
        mustRead = false;
        announced = -1;
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
          if (page.state === 'closed' && last >= page.lastId) return;
          if (page.events.length === TAIL_PAGE) {
            mustRead = true;
            continue;
          }
        }
      }
      await notice.wait(signal, RECHECK_MS);
      // Woken by nothing: the periodic re-read.
      if (!notice.fired) mustRead = true;
    }
  } finally {
    unfollow?.();
    // Not awaited: ending the tail must not wait on a backend that may be unreachable, nor fail because of it.
    void watching.then((unwatch) => unwatch()).catch(() => undefined);
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

  /** Whether a notice arrived since the last `clear`. */
  get fired(): boolean {
    return this.pending;
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
