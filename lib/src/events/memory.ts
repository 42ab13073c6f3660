// In-process adapter of the event port: the embedded default (`npm start`, one process). It keeps the Redis
// adapter's semantics, retention included: expiry is checked lazily against an injectable clock, and a sweep
// frees expired state and wakes tails that follow it.
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { unavailable } from '../errors.js';
import { silentLogger, type Logger } from '../logging.js';
import {
  checkClaims,
  checkIncrement,
  checkSettlements,
  checkKey,
  checkRead,
  followLog,
  logClosed,
  resolveRetention,
  toJson,
  type CounterClaim,
  type CounterWindow,
  type HeldClaim,
  type Reservation,
  type Counters,
  type EventBus,
  type EventLogs,
  type LogRead,
  type PubSub,
  type Retention,
  type RetentionOptions,
  type RunLogEvent,
} from './port.js';

export interface MemoryEventBusOptions extends RetentionOptions {
  /** Milliseconds since the epoch; injectable so retention can be tested without waiting. */
  now?: () => number;
  logger?: Logger;
  /**
   * Bytes of run logs the process holds at most (frames, packed logs and markers, as estimated). Past it the oldest
   * closed logs lose their frames first (a read says `expired`), then their markers (`missing`); a live log is never
   * cut. Retention alone bounds memory by time, and a busy process finishes turns faster than an hour forgets them.
   * Default 64 MiB.
   */
  maxHeldBytes?: number;
}

const DEFAULT_MAX_HELD_BYTES = 64 * 1024 * 1024;
/** Estimated bytes of one log's entry (map slot, record, key) and of one frame beside its JSON: enough to bound. */
const ENTRY_BYTES = 200;
const FRAME_BYTES = 64;
/** How long a closed log waits to be packed, so a client reading it as it ends finds it as written. */
const PACK_DELAY_MS = 1_000;

export function createMemoryEventBus(options: MemoryEventBusOptions = {}): EventBus {
  return new MemoryEventBus(options);
}

interface StoredLog {
  /**
   * Contiguous frames ending at `lastId`; null once retention passed while the marker still stands. A closed log's
   * frames are packed by the sweep (`packed`, and this is emptied): a finished run is kept for resume for an hour,
   * and kept as thirty small objects it would cost several KiB of heap per turn (docs/decisions/0035).
   */
  frames: { id: number; json: string }[] | null;
  /** A closed log's frames, deflated as newline-separated JSON, from `firstId`. */
  packed?: { firstId: number; data: Uint8Array };
  lastId: number;
  closed: boolean;
  framesUntil: number;
  markerUntil: number;
  /** Estimated bytes of its frames or packed frames, counted in the logs' `held`. */
  bytes: number;
}

class MemoryLogs implements EventLogs {
  /** In creation order, which the eviction walks from the oldest. */
  private readonly stored = new Map<string, StoredLog>();
  private readonly watchers = new Map<string, Set<() => void>>();
  /** Estimated bytes held by every stored log: entries, frames and packed frames. */
  private held = 0;
  private toPack: string[] = [];
  private packer: NodeJS.Timeout | undefined;
  private warnedFull = false;

  constructor(
    private readonly retention: Retention,
    private readonly now: () => number,
    private readonly closing: AbortSignal,
    private readonly maxHeld: number,
    private readonly logger: Logger,
  ) {}

  /** Estimated bytes held (for tests and metrics). */
  get heldBytes(): number {
    return this.held;
  }

  async append<T>(key: string, data: T): Promise<number> {
    return this.appendNow(key, data);
  }

  async appendLast<T>(key: string, data: T): Promise<number> {
    const id = this.appendNow(key, data);
    this.closeNow(key);
    return id;
  }

  async close(key: string): Promise<void> {
    this.closeNow(key);
  }

  private appendNow<T>(key: string, data: T): number {
    checkKey(key);
    const json = toJson(data);
    const log = this.current(key) ?? this.create(key);
    if (log.closed) throw logClosed(key);
    // After expiry the marker still holds lastId, so ids keep increasing rather than restarting at 1.
    log.frames ??= [];
    const id = ++log.lastId;
    log.frames.push({ id, json });
    log.bytes += json.length + FRAME_BYTES;
    this.held += json.length + FRAME_BYTES;
    this.touch(key, log);
    if (this.held > this.maxHeld) this.evict();
    return id;
  }

  private closeNow(key: string): void {
    checkKey(key);
    const log = this.current(key) ?? this.create(key);
    if (log.closed) return;
    log.closed = true;
    log.frames ??= [];
    this.touch(key, log);
    this.toPack.push(key);
    if (!this.packer) {
      this.packer = setTimeout(() => this.packClosed(), PACK_DELAY_MS);
      this.packer.unref();
    }
  }

  async read<T>(key: string, afterId: number, limit?: number): Promise<LogRead<T>> {
    checkKey(key);
    checkRead(afterId, limit);
    const log = this.current(key);
    if (!log) return { state: 'missing' };
    if (!log.frames) return { state: 'expired' };
    const frames = log.packed ? unpack(log.packed) : log.frames;
    const first = frames[0]?.id ?? log.lastId + 1;
    const start = Math.max(0, afterId + 1 - first);
    const page = frames.slice(start, limit === undefined ? undefined : start + limit);
    const events = page.map((frame): RunLogEvent<T> => ({ id: frame.id, data: JSON.parse(frame.json) as T }));
    return { state: log.closed ? 'closed' : 'live', events, lastId: log.lastId };
  }

  tail<T>(key: string, afterId: number, signal: AbortSignal): AsyncIterable<RunLogEvent<T>> {
    return followLog<T>(this.read.bind(this), this.watch, key, afterId, AbortSignal.any([signal, this.closing]));
  }

  /** Drops state whose retention passed, wakes tails of logs that just expired or vanished, and packs closed logs. */
  sweep(): void {
    for (const [key, log] of this.stored) {
      const hadFrames = log.frames !== null;
      const after = this.current(key);
      if (hadFrames && !after?.frames) this.notify(key);
      else if (after) this.pack(after);
    }
  }

  deleteByPrefix(prefix: string): number {
    let erased = 0;
    for (const key of [...this.stored.keys()]) {
      const log = key.startsWith(prefix) ? this.current(key) : undefined;
      if (!log) continue;
      this.remove(key, log);
      this.notify(key);
      erased++;
    }
    return erased;
  }

  deleteKeys(keys: readonly string[]): number {
    let erased = 0;
    for (const key of new Set(keys)) {
      const log = this.current(key);
      if (!log) continue;
      this.remove(key, log);
      this.notify(key);
      erased++;
    }
    return erased;
  }

  /** Stops the packing timer (the bus is closing). */
  stop(): void {
    clearTimeout(this.packer);
  }

  /**
   * Packs the logs closed since the last call: a finished run is kept for resume, and as thirty small objects it
   * would cost several KiB of heap per turn where deflated newline-separated JSON costs a few hundred bytes.
   */
  private packClosed(): void {
    this.packer = undefined;
    const keys = this.toPack;
    this.toPack = [];
    for (const key of keys) {
      const log = this.stored.get(key);
      if (log) this.pack(log);
    }
    if (this.held > this.maxHeld) this.evict();
  }

  private pack(log: StoredLog): void {
    if (!log.closed || !log.frames || log.frames.length === 0 || log.packed) return;
    log.packed = pack(log.frames);
    log.frames = [];
    this.held += log.packed.data.length - log.bytes;
    log.bytes = log.packed.data.length;
  }

  /**
   * Brings what is held under nine tenths of the budget, oldest first: a closed log loses its frames (its tails wake
   * and read `expired`), and one whose frames are already gone loses its marker. A live log is never cut.
   */
  private evict(): void {
    const target = this.maxHeld * 0.9;
    for (let pass = 0; pass < 2 && this.held > target; pass++) {
      for (const [key, log] of this.stored) {
        if (this.held <= target) break;
        if (!log.closed) continue;
        if (log.frames !== null) {
          this.dropFrames(log);
          this.notify(key);
        } else this.remove(key, log);
      }
    }
    if (!this.warnedFull) {
      this.warnedFull = true;
      this.logger.warn(
        { max_held_bytes: this.maxHeld },
        'run logs reached their memory budget: the oldest finished runs can no longer be resumed from their frames (set EVENT_LOG_MEMORY_MB, or use Redis)',
      );
    }
  }

  private dropFrames(log: StoredLog): void {
    log.frames = null;
    delete log.packed;
    this.held -= log.bytes;
    log.bytes = 0;
  }

  private remove(key: string, log: StoredLog): void {
    this.stored.delete(key);
    this.held -= log.bytes + ENTRY_BYTES + key.length;
  }

  private readonly watch = async (key: string, onChange: () => void) => {
    const set = this.watchers.get(key) ?? new Set();
    this.watchers.set(key, set);
    set.add(onChange);
    return async () => {
      set.delete(onChange);
      if (set.size === 0 && this.watchers.get(key) === set) this.watchers.delete(key);
    };
  };

  /** The log as retention leaves it now, or undefined when even its marker is gone. */
  private current(key: string): StoredLog | undefined {
    const log = this.stored.get(key);
    if (!log) return undefined;
    const now = this.now();
    if (now >= log.markerUntil) {
      this.remove(key, log);
      return undefined;
    }
    if (now >= log.framesUntil && log.frames !== null) this.dropFrames(log);
    return log;
  }

  private create(key: string): StoredLog {
    const log: StoredLog = { frames: [], lastId: 0, closed: false, framesUntil: 0, markerUntil: 0, bytes: 0 };
    this.stored.set(key, log);
    this.held += ENTRY_BYTES + key.length;
    return log;
  }

  private touch(key: string, log: StoredLog): void {
    const now = this.now();
    log.framesUntil = now + this.retention.logMs;
    log.markerUntil = now + this.retention.markerMs;
    this.notify(key);
  }

  private notify(key: string): void {
    for (const onChange of this.watchers.get(key) ?? []) onChange();
  }
}

/** Newline-separated JSON never holds a raw newline, so the frames split back exactly. */
function pack(frames: { id: number; json: string }[]): { firstId: number; data: Uint8Array } {
  const deflated = deflateRawSync(frames.map((frame) => frame.json).join('\n'), { level: 1 });
  // Copied out: zlib's result is a view of its 64 KiB output chunk, which a kept view would keep whole (per turn).
  return { firstId: frames[0]!.id, data: new Uint8Array(deflated) };
}

function unpack(packed: { firstId: number; data: Uint8Array }): { id: number; json: string }[] {
  return inflateRawSync(packed.data)
    .toString('utf8')
    .split('\n')
    .map((json, i) => ({ id: packed.firstId + i, json }));
}

class MemoryPubSub implements PubSub {
  private readonly subscriptions = new Map<string, Set<{ handler: (message: unknown) => void }>>();

  constructor(private readonly logger: Logger) {}

  async publish(channel: string, message: unknown): Promise<void> {
    checkKey(channel);
    const json = toJson(message);
    const subscribers = this.subscriptions.get(channel);
    if (!subscribers) return;
    for (const subscription of [...subscribers]) {
      // Delivered later, as over a network: a handler never runs inside its publisher's call.
      queueMicrotask(() => {
        if (!subscribers.has(subscription)) return;
        try {
          subscription.handler(JSON.parse(json));
        } catch (err) {
          this.logger.error({ err, channel }, 'pub/sub handler failed');
        }
      });
    }
  }

  async subscribe(channel: string, handler: (message: unknown) => void): Promise<() => Promise<void>> {
    checkKey(channel);
    const subscribers = this.subscriptions.get(channel) ?? new Set();
    this.subscriptions.set(channel, subscribers);
    const subscription = { handler };
    subscribers.add(subscription);
    return async () => {
      subscribers.delete(subscription);
      if (subscribers.size === 0 && this.subscriptions.get(channel) === subscribers) this.subscriptions.delete(channel);
    };
  }
}

class MemoryCounters implements Counters {
  private readonly windows = new Map<string, { value: number; resetAt: number }>();

  constructor(private readonly now: () => number) {}

  async increment(key: string, by: number, windowSeconds: number): Promise<CounterWindow> {
    checkKey(key);
    checkIncrement(by, windowSeconds);
    let window = this.current(key);
    if (!window) {
      window = { value: 0, resetAt: this.now() + Math.round(windowSeconds * 1000) };
      this.windows.set(key, window);
    }
    window.value += by;
    return { value: window.value, resetAt: new Date(window.resetAt) };
  }

  async get(key: string): Promise<{ value: number; resetAt: Date | null }> {
    checkKey(key);
    const window = this.current(key);
    return window ? { value: window.value, resetAt: new Date(window.resetAt) } : { value: 0, resetAt: null };
  }

  // Synchronous between the checks and the claims, so no other reservation of this process runs in between.
  async reserve(claims: readonly CounterClaim[]): Promise<Reservation> {
    checkClaims(claims);
    for (const claim of claims) {
      const window = this.current(claim.key);
      const value = window?.value ?? 0;
      if (value >= claim.limit) return { admitted: false, refused: claim, value, resetAt: window ? new Date(window.resetAt) : null };
    }
    const held: HeldClaim[] = [];
    for (const claim of claims) {
      if (claim.amount === 0) continue;
      let window = this.current(claim.key);
      if (!window) {
        window = { value: 0, resetAt: this.now() + Math.round(claim.windowSeconds * 1000) };
        this.windows.set(claim.key, window);
      }
      window.value += claim.amount;
      held.push({ key: claim.key, amount: claim.amount, windowSeconds: claim.windowSeconds, windowEndsAt: window.resetAt });
    }
    return { admitted: true, held };
  }

  async settle(settlements: readonly { held: HeldClaim; used: number }[]): Promise<void> {
    checkSettlements(settlements);
    for (const { held, used } of settlements) {
      const window = this.current(held.key);
      // A window's end is its identity here: a later window of the same counter ends later.
      if (window && window.resetAt === held.windowEndsAt) window.value += used - held.amount;
    }
  }

  sweep(): void {
    for (const key of [...this.windows.keys()]) this.current(key);
  }

  deleteByPrefix(prefix: string): number {
    let erased = 0;
    for (const key of [...this.windows.keys()]) {
      if (key.startsWith(prefix) && this.current(key) && this.windows.delete(key)) erased++;
    }
    return erased;
  }

  private current(key: string) {
    const window = this.windows.get(key);
    if (window && this.now() >= window.resetAt) {
      this.windows.delete(key);
      return undefined;
    }
    return window;
  }
}

class MemoryEventBus implements EventBus {
  readonly logs: MemoryLogs;
  readonly pubsub: MemoryPubSub;
  readonly counters: MemoryCounters;
  private readonly closing = new AbortController();
  private readonly sweeper: NodeJS.Timeout;

  constructor(options: MemoryEventBusOptions) {
    const retention = resolveRetention(options);
    const now = options.now ?? Date.now;
    const logger = options.logger ?? silentLogger();
    this.logs = new MemoryLogs(retention, now, this.closing.signal, options.maxHeldBytes ?? DEFAULT_MAX_HELD_BYTES, logger);
    this.pubsub = new MemoryPubSub(logger);
    this.counters = new MemoryCounters(now);
    // Often enough that a followed log ending by expiry is noticed soon after; never keeps the process alive.
    const every = Math.min(retention.logMs, 60_000);
    this.sweeper = setInterval(() => {
      this.logs.sweep();
      this.counters.sweep();
    }, every);
    this.sweeper.unref();
  }

  async ping(): Promise<void> {
    if (this.closing.signal.aborted) throw unavailable('event bus is closed');
  }

  async deleteByPrefix(prefix: string): Promise<number> {
    return this.logs.deleteByPrefix(prefix) + this.counters.deleteByPrefix(prefix);
  }

  async deleteLogs(keys: readonly string[]): Promise<number> {
    keys.forEach(checkKey);
    return this.logs.deleteKeys(keys);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.logs.stop();
    this.closing.abort();
  }
}
