// Redis adapter of the event port, shared by every runtime process of a project (node-redis).
//
// Key layout under the project's prefix P: the caller's key first, then what Redis holds for it, so all there is
// under a caller prefix (a tenant's `tenants/<id>/`) matches one SCAN pattern and an erase is one pass.
//   P<key>:log      Stream of frames; entry id `<n>-0` is frame n. Closing adds a `<last>-1` entry, so a log
//                   closed before any frame still exists. TTL: log retention, renewed by every append/close.
//   P<key>:logmark  Hash {last, closed}: assigns ids and outlives the stream (marker retention) to tell
//                   `expired` from `missing`; ids continue from it if an expired log is written again.
//   P<key>:count    Fixed-window counter; the first increment of a window sets its TTL.
// Channels: P<key>:log carries append/close/erase notices that wake tails; P<channel>:pubsub carries messages.
// Keys are arbitrary strings, yet no two (key, kind) pairs share a name: no kind holds ':', so a name ends in
// exactly one `:<kind>` and the key is what comes before it (key `a`'s log is `a:log`; key `a:log`'s is
// `a:log:log`, its counter `a:log:count`).
// Appends and closes are Lua scripts: id assignment, append, TTLs and the notice are one atomic step; so are a
// reservation over several counters (every check, then every claim) and its settlement.
import { createHash } from 'node:crypto';
import { createClient } from 'redis';
import { AppError, unavailable } from '../errors.js';
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
  windowToleranceMs,
  type CounterClaim,
  type CounterWindow,
  type HeldClaim,
  type Reservation,
  type Counters,
  type EventBus,
  type EventLogs,
  type LogRead,
  type OwnAppends,
  type PubSub,
  type Retention,
  type RetentionOptions,
  type RunLogEvent,
  type WatchLog,
} from './port.js';

export interface RedisEventBusOptions extends RetentionOptions {
  url: string;
  /** Prepended to every key and channel; each project has its own on a shared Redis. */
  keyPrefix: string;
  /** Per connection attempt. Default 2000. */
  connectTimeoutMs?: number;
  /** How long a command may wait for a connection before it fails instead of hanging. Default 5000. */
  commandTimeoutMs?: number;
  /** Default 2000. */
  pingTimeoutMs?: number;
  logger?: Logger;
}

type Client = ReturnType<typeof createClient>;

/** A Lua script run by its SHA1, loaded on first use on each server (EVALSHA, then EVAL on NOSCRIPT). */
class Script {
  private readonly sha: string;

  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(client: Client, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await client.evalSha(this.sha, { keys, arguments: args });
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.eval(this.source, { keys, arguments: args });
    }
  }
}

// KEYS: stream, marker. ARGV: frame json, log ms, marker ms, notice channel. Returns the id, or 0 when closed.
const appendFrame = new Script(`
if redis.call('HGET', KEYS[2], 'closed') == '1' then return 0 end
local id = redis.call('HINCRBY', KEYS[2], 'last', 1)
redis.call('XADD', KEYS[1], id .. '-0', 'd', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], id)
return id`);

// KEYS: stream, marker. ARGV: log ms, marker ms, notice channel.
const closeLog = new Script(`
if redis.call('HGET', KEYS[2], 'closed') == '1' then return 0 end
local last = redis.call('HGET', KEYS[2], 'last') or '0'
redis.call('HSET', KEYS[2], 'last', last, 'closed', '1')
redis.call('XADD', KEYS[1], last .. '-1', 'closed', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PUBLISH', ARGV[3], 'closed')
return 1`);

// KEYS: stream, marker. ARGV: frame json, log ms, marker ms, notice channel. The append and the close as one step.
// Returns the frame's id, or 0 when the log was closed already.
const appendLastFrame = new Script(`
if redis.call('HGET', KEYS[2], 'closed') == '1' then return 0 end
local id = redis.call('HINCRBY', KEYS[2], 'last', 1)
redis.call('HSET', KEYS[2], 'closed', '1')
redis.call('XADD', KEYS[1], id .. '-0', 'd', ARGV[1])
redis.call('XADD', KEYS[1], id .. '-1', 'closed', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], 'closed')
return id`);

// KEYS: stream, marker. ARGV: first stream id wanted, max entries ('0': all).
// Returns {'expired'} | {'missing'} | {state, lastId, entries}.
const readFrames = new Script(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then return {'expired'} end
  return {'missing'}
end
local marker = redis.call('HMGET', KEYS[2], 'last', 'closed')
local entries
if ARGV[2] == '0' then entries = redis.call('XRANGE', KEYS[1], ARGV[1], '+')
else entries = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2]) end
local state = 'live'
if marker[2] == '1' then state = 'closed' end
return {state, marker[1] or '0', entries}`);

// KEYS: counter. ARGV: increment, window ms. Returns {value, ms left in the window}.
const incrementCounter = new Script(`
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {value, ttl}`);

// KEYS: counter. Returns {value, ms left} or {0, -2} when no window is open.
const readCounter = new Script(`
local value = redis.call('GET', KEYS[1])
if not value then return {0, -2} end
return {tonumber(value), redis.call('PTTL', KEYS[1])}`);

// KEYS: counters. ARGV: per counter amount, limit, window ms. Refuses, changing nothing, when a counter is at or above
// its limit: {0, index, value, ms left or -2}; else adds every non-zero amount: {1, ms left in each counter's window}.
const reserveCounters = new Script(`
for i, key in ipairs(KEYS) do
  local value = tonumber(redis.call('GET', key) or '0')
  if value >= tonumber(ARGV[3 * i - 1]) then return {0, i, value, redis.call('PTTL', key)} end
end
local left = {1}
for i, key in ipairs(KEYS) do
  local ttl = 0
  if ARGV[3 * i - 2] ~= '0' then
    redis.call('INCRBY', key, ARGV[3 * i - 2])
    ttl = redis.call('PTTL', key)
    if ttl < 0 then
      redis.call('PEXPIRE', key, ARGV[3 * i])
      ttl = tonumber(ARGV[3 * i])
    end
  end
  left[i + 1] = ttl
end
return left`);

// KEYS: counters. ARGV: per counter the change, the ms its claim's window should have left now, the tolerance in ms
// (windowToleranceMs). A counter whose window has ended since, or was erased, is left alone. A window's end is told as
// time left both ways and turned into a time on the caller's clock, so Redis's clock is never compared with it.
const settleCounters = new Script(`
for i, key in ipairs(KEYS) do
  local ttl = redis.call('PTTL', key)
  if ttl > 0 and math.abs(ttl - tonumber(ARGV[3 * i - 1])) < tonumber(ARGV[3 * i]) then
    redis.call('INCRBY', key, ARGV[3 * i - 2])
  end
end
return 0`);

export function createRedisEventBus(options: RedisEventBusOptions): EventBus {
  return new RedisEventBus(options);
}

class RedisEventBus implements EventBus {
  readonly logs: EventLogs;
  readonly pubsub: PubSub;
  readonly counters: Counters;
  private readonly client: Client;
  /** Subscriber mode takes a connection over, so pub/sub and tail notices share a second one. */
  private readonly subscriber: Client;
  private readonly closing = new AbortController();
  private readonly logger: Logger;
  private readonly pingTimeoutMs: number;
  private readonly names: KeyLayout;

  constructor(options: RedisEventBusOptions) {
    const retention = resolveRetention(options);
    this.logger = options.logger ?? silentLogger();
    this.pingTimeoutMs = options.pingTimeoutMs ?? 2000;
    this.names = new KeyLayout(options.keyPrefix);
    this.client = createClient({
      url: options.url,
      socket: {
        connectTimeout: options.connectTimeoutMs ?? 2000,
        // Keep retrying while Redis is away (readiness reports it); back off to 2 s with jitter.
        reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 2000) + Math.floor(Math.random() * 100),
      },
      commandOptions: { timeout: options.commandTimeoutMs ?? 5000 },
    });
    this.subscriber = this.client.duplicate();
    for (const [role, client] of [['commands', this.client], ['subscriber', this.subscriber]] as const) {
      this.watchHealth(role, client);
      // Connecting goes on in the background: a Redis that is down must not stop the process from starting.
      client.connect().catch((err: unknown) => {
        if (!this.closing.signal.aborted) this.logger.error({ err, role }, 'event bus: redis connect gave up');
      });
    }
    this.logs = new RedisLogs(this.client, this.subscriber, this.names, retention, this.closing.signal);
    this.pubsub = new RedisPubSub(this.client, this.subscriber, this.names, this.logger);
    this.counters = new RedisCounters(this.client, this.names);
  }

  async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(unavailable('event bus: redis did not answer in time')), this.pingTimeoutMs);
    });
    try {
      await Promise.race([this.client.ping(), timeout]);
    } catch (err) {
      throw err instanceof AppError ? err : unavailable('event bus: redis is unavailable', { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  /** One SCAN over the names that start with the prefix; each log's stream and marker go in one UNLINK. */
  async deleteByPrefix(prefix: string): Promise<number> {
    const logs = new Set<string>();
    const counters = new Set<string>();
    const match = `${globEscape(this.names.prefix + prefix)}*`;
    for await (const batch of this.client.scanIterator({ MATCH: match, COUNT: 500 })) {
      const names: string[] = [];
      for (const name of batch) {
        const found = this.names.parse(name);
        // The exact check on the key: a kind suffix can continue the prefix too (key `a`'s `a:log` matches `a:l*`).
        if (!found || !found.key.startsWith(prefix)) continue;
        // SCAN may return a name twice, and a log has two names: each key is counted and unlinked once.
        const seen = found.kind === 'count' ? counters : logs;
        if (seen.has(found.key)) continue;
        seen.add(found.key);
        if (found.kind === 'count') names.push(name);
        else names.push(this.names.stream(found.key), this.names.marker(found.key));
      }
      if (names.length > 0) await this.client.unlink(names);
    }
    // Wake tails following an erased log, so they end instead of waiting for a frame that never comes.
    await Promise.all([...logs].map((key) => this.client.publish(this.names.logChannel(key), 'erased')));
    return logs.size + counters.size;
  }

  /** The logs' streams and markers in UNLINKs of a few hundred names; a log counts as existing by its marker. */
  async deleteLogs(keys: readonly string[]): Promise<number> {
    keys.forEach(checkKey);
    const unique = [...new Set(keys)];
    let erased = 0;
    for (let start = 0; start < unique.length; start += 250) {
      const batch = unique.slice(start, start + 250);
      erased += await this.client.unlink(batch.map((key) => this.names.marker(key)));
      await this.client.unlink(batch.map((key) => this.names.stream(key)));
      await Promise.all(batch.map((key) => this.client.publish(this.names.logChannel(key), 'erased')));
    }
    return erased;
  }

  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort();
    await Promise.all([this.client, this.subscriber].map(shutDown));
  }

  /** Logs a connection going down once (not every retry) and coming back; without a listener, 'error' would crash. */
  private watchHealth(role: string, client: Client): void {
    let healthy = true;
    client.on('error', (err: unknown) => {
      if (healthy && !this.closing.signal.aborted) this.logger.warn({ err, role }, 'event bus: redis connection lost');
      healthy = false;
    });
    client.on('ready', () => {
      if (!healthy) this.logger.info({ role }, 'event bus: redis connection back');
      healthy = true;
    });
  }
}

class RedisLogs implements EventLogs {
  /** Every active tail's wake-up, fired when the subscriber reconnects: notices sent meanwhile were lost. */
  private readonly wakeOnReconnect = new Set<() => void>();

  constructor(
    private readonly client: Client,
    private readonly subscriber: Client,
    private readonly names: KeyLayout,
    private readonly retention: Retention,
    private readonly closing: AbortSignal,
  ) {
    subscriber.on('ready', () => {
      for (const wake of this.wakeOnReconnect) wake();
    });
  }

  append<T>(key: string, data: T): Promise<number> {
    return this.appendWith(appendFrame, key, data, false);
  }

  appendLast<T>(key: string, data: T): Promise<number> {
    return this.appendWith(appendLastFrame, key, data, true);
  }

  /** Runs one of the append scripts (same keys and arguments, 0 for a closed log); hands the frame to own tails. */
  private async appendWith<T>(script: Script, key: string, data: T, last: boolean): Promise<number> {
    checkKey(key);
    const { logMs, markerMs } = this.retention;
    const json = toJson(data);
    const followers = this.ownTails.get(key);
    if (followers) followers.awaiting++;
    let id: number;
    try {
      id = Number(await script.run(this.client, this.keys(key), [json, `${logMs}`, `${markerMs}`, this.channel(key)]));
    } catch (error) {
      if (followers) followers.settle(undefined, last);
      throw error;
    }
    // What a read would give back: the frame as its JSON says.
    if (followers) followers.settle(id === 0 ? undefined : { id, data: JSON.parse(json) as unknown }, last);
    if (id === 0) throw logClosed(key);
    return id;
  }

  /** This process's tails, by log, that take its own appends as they are acknowledged (docs/decisions/0069). */
  private readonly ownTails = new Map<string, OwnTails>();

  private readonly ownAppends: OwnAppends = {
    follow: (key, take, failed) => {
      let tails = this.ownTails.get(key);
      if (!tails) this.ownTails.set(key, (tails = new OwnTails()));
      const tail = { take, failed };
      tails.takers.add(tail);
      return () => {
        tails.takers.delete(tail);
        if (tails.takers.size === 0 && this.ownTails.get(key) === tails) this.ownTails.delete(key);
      };
    },
    awaiting: (key) => (this.ownTails.get(key)?.awaiting ?? 0) > 0,
  };

  async close(key: string): Promise<void> {
    checkKey(key);
    const { logMs, markerMs } = this.retention;
    await closeLog.run(this.client, this.keys(key), [`${logMs}`, `${markerMs}`, this.channel(key)]);
  }

  async read<T>(key: string, afterId: number, limit?: number): Promise<LogRead<T>> {
    checkKey(key);
    checkRead(afterId, limit);
    const reply = (await readFrames.run(this.client, this.keys(key), [`${afterId + 1}-0`, `${limit ?? 0}`])) as
      | ['expired' | 'missing']
      | ['live' | 'closed', string | number, [string, string[]][]];
    if (reply[0] === 'expired' || reply[0] === 'missing') return { state: reply[0] };
    const [state, lastId, entries] = reply as ['live' | 'closed', string | number, [string, string[]][]];
    const events: RunLogEvent<T>[] = [];
    for (const [streamId, fields] of entries) {
      // Skip the close entry (`<n>-1`); frames are `<n>-0` with one field, d.
      if (!streamId.endsWith('-0')) continue;
      events.push({ id: Number(streamId.slice(0, -2)), data: JSON.parse(fields[1] ?? 'null') as T });
    }
    return { state, events, lastId: Number(lastId) };
  }

  tail<T>(key: string, afterId: number, signal: AbortSignal): AsyncIterable<RunLogEvent<T>> {
    return followLog<T>(this.read.bind(this), this.watch, key, afterId, AbortSignal.any([signal, this.closing]), this.ownAppends);
  }

  private readonly watch: WatchLog = async (key, onChange) => {
    // The append scripts publish the frame's id, or `closed`.
    const listener = (message: string) => onChange(/^\d+$/.test(message) ? Number(message) : undefined);
    this.wakeOnReconnect.add(onChange);
    try {
      await this.subscriber.subscribe(this.channel(key), listener);
    } catch (err) {
      this.wakeOnReconnect.delete(onChange);
      throw err;
    }
    return async () => {
      this.wakeOnReconnect.delete(onChange);
      if (this.subscriber.isOpen) await this.subscriber.unsubscribe(this.channel(key), listener);
    };
  };

  private keys(key: string): string[] {
    return [this.names.stream(key), this.names.marker(key)];
  }

  private channel(key: string): string {
    return this.names.logChannel(key);
  }
}

/** The tails of one log on this process, and how many of its own appends to it await their acknowledgement. */
class OwnTails {
  awaiting = 0;
  readonly takers = new Set<{ take: (event: RunLogEvent<unknown>, closed: boolean) => void; failed: () => void }>();

  /** An append was acknowledged (its frame) or failed (undefined). */
  settle(event: RunLogEvent<unknown> | undefined, closed: boolean): void {
    this.awaiting--;
    for (const tail of this.takers) {
      if (event) tail.take(event, closed);
      else tail.failed();
    }
  }
}

class RedisPubSub implements PubSub {
  constructor(
    private readonly client: Client,
    private readonly subscriber: Client,
    private readonly names: KeyLayout,
    private readonly logger: Logger,
  ) {}

  async publish(channel: string, message: unknown): Promise<void> {
    checkKey(channel);
    await this.client.publish(this.names.pubsubChannel(channel), toJson(message));
  }

  async subscribe(channel: string, handler: (message: unknown) => void): Promise<() => Promise<void>> {
    checkKey(channel);
    const name = this.names.pubsubChannel(channel);
    const listener = (json: string) => {
      try {
        handler(JSON.parse(json));
      } catch (err) {
        this.logger.error({ err, channel }, 'pub/sub handler failed');
      }
    };
    await this.subscriber.subscribe(name, listener);
    return async () => {
      if (this.subscriber.isOpen) await this.subscriber.unsubscribe(name, listener);
    };
  }
}

class RedisCounters implements Counters {
  constructor(
    private readonly client: Client,
    private readonly names: KeyLayout,
  ) {}

  async increment(key: string, by: number, windowSeconds: number): Promise<CounterWindow> {
    checkKey(key);
    checkIncrement(by, windowSeconds);
    const windowMs = Math.round(windowSeconds * 1000);
    const reply = await incrementCounter.run(this.client, [this.names.counter(key)], [`${by}`, `${windowMs}`]);
    const [value, ttl] = reply as [number, number];
    return { value: Number(value), resetAt: new Date(Date.now() + Number(ttl)) };
  }

  async get(key: string): Promise<{ value: number; resetAt: Date | null }> {
    checkKey(key);
    const [value, ttl] = (await readCounter.run(this.client, [this.names.counter(key)], [])) as [number, number];
    return { value: Number(value), resetAt: Number(ttl) < 0 ? null : new Date(Date.now() + Number(ttl)) };
  }

  async reserve(claims: readonly CounterClaim[]): Promise<Reservation> {
    checkClaims(claims);
    if (claims.length === 0) return { admitted: true, held: [] };
    const reply = (await reserveCounters.run(
      this.client,
      claims.map((claim) => this.names.counter(claim.key)),
      claims.flatMap((claim) => [`${claim.amount}`, `${claim.limit}`, `${Math.round(claim.windowSeconds * 1000)}`]),
    )) as number[];
    if (Number(reply[0]) === 0) {
      const [, index, value, ttl] = reply.map(Number) as [number, number, number, number];
      return { admitted: false, refused: claims[index - 1]!, value, resetAt: ttl < 0 ? null : new Date(Date.now() + ttl) };
    }
    const now = Date.now();
    const held: HeldClaim[] = [];
    claims.forEach((claim, i) => {
      if (claim.amount > 0) held.push({ key: claim.key, amount: claim.amount, windowSeconds: claim.windowSeconds, windowEndsAt: now + Number(reply[i + 1]) });
    });
    return { admitted: true, held };
  }

  async settle(settlements: readonly { held: HeldClaim; used: number }[]): Promise<void> {
    checkSettlements(settlements);
    const changed = settlements.filter(({ held, used }) => used !== held.amount);
    if (changed.length === 0) return;
    await settleCounters.run(
      this.client,
      changed.map(({ held }) => this.names.counter(held.key)),
      changed.flatMap(({ held, used }) => [`${used - held.amount}`, `${held.windowEndsAt - Date.now()}`, `${windowToleranceMs(held.windowSeconds)}`]),
    );
  }
}

type StoredKind = 'log' | 'logmark' | 'count';
const storedKinds: readonly StoredKind[] = ['log', 'logmark', 'count'];

/** Names of what Redis holds for a caller's key under a project's prefix (the layout in the header). */
class KeyLayout {
  constructor(readonly prefix: string) {}

  stream(key: string): string {
    return this.name(key, 'log');
  }

  marker(key: string): string {
    return this.name(key, 'logmark');
  }

  counter(key: string): string {
    return this.name(key, 'count');
  }

  logChannel(key: string): string {
    return this.name(key, 'log');
  }

  pubsubChannel(channel: string): string {
    return this.name(channel, 'pubsub');
  }

  /** The caller's key and kind behind a Redis key name, or null when the name is not one this layout makes. */
  parse(name: string): { key: string; kind: StoredKind } | null {
    if (!name.startsWith(this.prefix)) return null;
    for (const kind of storedKinds) {
      const suffix = `:${kind}`;
      if (name.length > this.prefix.length + suffix.length && name.endsWith(suffix)) {
        return { key: name.slice(this.prefix.length, -suffix.length), kind };
      }
    }
    return null;
  }

  private name(key: string, kind: StoredKind | 'pubsub'): string {
    return `${this.prefix}${key}:${kind}`;
  }
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Graceful when connected (pending replies drain), immediate otherwise (a reconnecting client would wait). */
async function shutDown(client: Client): Promise<void> {
  if (!client.isOpen) return;
  if (client.isReady) await client.close();
  else client.destroy();
}
