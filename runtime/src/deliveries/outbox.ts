// Events the service sends a project (SPEC.md Outbound deliveries, Emission ties; docs/decisions/0059): `turn.stopped`
// and `scheduled_task.fired`, to the project's webhook URL and to a task's callback URL. Durable: each event is a row
// per target, written before anything is sent; every runtime process works the outbox, claiming due rows under
// `SKIP LOCKED`, POSTing them through the URL guard signed with the project's webhook secret, and retrying a failed
// attempt with exponential backoff until it is delivered or its attempts run out (dead). Every attempt is logged and
// kept on its row.
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { eventSignature } from '@agentplane/lib/crypto/signatures';
import { conflict, errorMessage } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import { readUpTo } from '@agentplane/lib/net/capped';
import type { GuardedFetch } from '@agentplane/lib/net/guarded-fetch';
import type { DeliveryAttempt, RuntimeSchema } from '../store/schema.js';
import { projectWebhookUrl, projectWebhookUrlOf } from './turn-stopped.js';

export const EVENT_TYPES = ['turn.stopped', 'scheduled_task.fired'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Attempts before a delivery is dead: 5 s, 20 s, 80 s, 5 min, 21 min, then hourly; about 3.5 hours in all. */
export const MAX_DELIVERY_ATTEMPTS = 8;
const FIRST_RETRY_MS = 5_000;
const MAX_RETRY_MS = 3_600_000;
/** How long one attempt may take, its answer read. */
const ATTEMPT_MS = 10_000;
/** How long a claimed row is this process's before another may take it over. */
const CLAIM_MS = 60_000;
const SENDING_AT_ONCE = 8;
/** Rows claimed per pass: as many as are sent at once, so none waits past its claim behind slow receivers. */
const BATCH = SENDING_AT_ONCE;
/** How much of a receiver's answer is kept with an attempt. */
const ANSWER_EXCERPT = 200;
export const DELIVERY_RETENTION_DAYS = 30;

export interface NewEvent {
  tenantId: string;
  type: EventType;
  data: Record<string, unknown>;
  /** Where it goes; none (no webhook URL, no callback) writes nothing. */
  targets: { target: 'project' | 'callback'; url: string }[];
}

/** A row claimed for an attempt. */
interface Claimed {
  id: string;
  event_id: string;
  tenant_id: string;
  target: string;
  url: string;
  payload: Record<string, unknown>;
  attempts: number;
  type: string;
}

export interface EventDeliveryOut {
  id: string;
  event_id: string;
  type: string;
  target: string;
  url: string;
  status: string;
  attempts: number;
  attempt_log: DeliveryAttempt[];
  next_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
  payload: Record<string, unknown>;
}

export interface EventOutboxOptions {
  db: Kysely<RuntimeSchema>;
  logger: Logger;
  /** Guarded fetch (every target passes the URL guard). */
  fetch: GuardedFetch;
  /** The tenant's webhook secret, in clear. */
  secretOf(tenantId: string): Promise<string>;
  owner: string;
  tickMs?: number;
  now?: () => number;
  /** Told of each attempt's outcome (the runtime's metrics). */
  onAttempt?: (outcome: 'delivered' | 'retry' | 'dead') => void;
}

/** The wait before attempt `n + 1` after `n` failed: ×4 each time from 5 s, at most an hour, ±20%. */
export function retryDelayMs(failedAttempts: number, random = Math.random): number {
  const base = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 4 ** (failedAttempts - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

export class EventOutbox {
  private timer: NodeJS.Timeout | undefined;
  private working: Promise<void> | undefined;
  private again = false;
  private stopped = true;

  constructor(private readonly options: EventOutboxOptions) {}

  /** Writes the events' rows (on `db`, a transaction's if given), then looks at the outbox soon. */
  async enqueue(events: NewEvent[], db: Kysely<RuntimeSchema> = this.options.db): Promise<void> {
    const rows = events.flatMap((event) => {
      const eventId = randomUUID();
      const payload = JSON.stringify({ id: eventId, type: event.type, created_at: new Date().toISOString(), data: event.data });
      return event.targets.map(({ target, url }) => ({
        id: randomUUID(),
        event_id: eventId,
        tenant_id: event.tenantId,
        type: event.type,
        target,
        url,
        payload,
        status: 'pending',
      }));
    });
    if (rows.length === 0) return;
    await db.insertInto('event_deliveries').values(rows).execute();
    this.wake();
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  wake(): void {
    if (this.stopped) return;
    if (this.working) this.again = true;
    else this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.working;
  }

  /** One pass: claim the due rows and attempt each. Tests call it directly. */
  async work(): Promise<void> {
    const claimed = await sql<Claimed>`
      with due as (
        select id from event_deliveries
        where status = 'pending' and next_attempt_at <= now() and (claim_expires_at is null or claim_expires_at < now())
        order by next_attempt_at
        limit ${BATCH}
        for update skip locked
      )
      update event_deliveries d set claimed_by = ${this.options.owner}, claim_expires_at = now() + ${`${CLAIM_MS} milliseconds`}::interval
      from due where d.id = due.id
      returning d.id, d.event_id, d.tenant_id, d.target, d.url, d.payload, d.attempts, d.type`.execute(this.options.db);
    let next = 0;
    const rows = claimed.rows;
    const worker = async () => {
      while (next < rows.length) {
        const row = rows[next++]!;
        await this.attempt(row).catch((err: unknown) => this.options.logger.warn({ err, delivery_id: row.id }, 'event delivery attempt could not be recorded'));
      }
    };
    await Promise.all(Array.from({ length: Math.min(SENDING_AT_ONCE, rows.length) }, worker));
  }

  /** The tenant's deliveries, newest first; `status` narrows. */
  async list(tenantId: string, query: { limit: number; status?: string | undefined; id?: string }): Promise<EventDeliveryOut[]> {
    let select = this.options.db.selectFrom('event_deliveries').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit);
    if (query.status) select = select.where('status', '=', query.status);
    if (query.id) select = select.where('id', '=', query.id);
    return (await select.execute()).map((row) => ({
      id: row.id,
      event_id: row.event_id,
      type: row.type,
      target: row.target,
      url: row.url,
      status: row.status,
      attempts: row.attempts,
      attempt_log: row.attempt_log,
      next_attempt_at: row.status === 'pending' ? row.next_attempt_at.toISOString() : null,
      last_status: row.last_status,
      last_error: row.last_error,
      created_at: row.created_at.toISOString(),
      delivered_at: row.delivered_at?.toISOString() ?? null,
      payload: row.payload,
    }));
  }

  /**
   * Sends a delivered or dead event to its target again (docs/decisions/0059, redelivery): the same event id, a fresh
   * timestamp and signature, and a fresh budget of attempts; its earlier attempts stay in its log. A delivery still
   * pending is left to its retries: 409. Answers the row as it now is, or null when the tenant has no such delivery.
   */
  async redeliver(tenantId: string, deliveryId: string): Promise<EventDeliveryOut | null> {
    const { db } = this.options;
    const requeued = await db
      .updateTable('event_deliveries')
      .set({ status: 'pending', attempts: 0, next_attempt_at: sql<Date>`now()`, delivered_at: null, claimed_by: null, claim_expires_at: null })
      .where('id', '=', deliveryId)
      .where('tenant_id', '=', tenantId)
      .where('status', 'in', ['delivered', 'dead'])
      // A project delivery needs the project's webhook URL still set (its attempts go to the URL in force).
      .where(sql<boolean>`(target <> 'project' or ${projectWebhookUrlOf(tenantId)} is not null)`)
      .executeTakeFirst();
    if (Number(requeued.numUpdatedRows) === 0) {
      const row = await db.selectFrom('event_deliveries').select(['status', 'target']).where('id', '=', deliveryId).where('tenant_id', '=', tenantId).executeTakeFirst();
      if (!row) return null;
      if (row.status === 'pending') {
        throw conflict(`event delivery ${deliveryId} is still being attempted: it is retried on its own until it is delivered or dead`, { code: 'delivery_pending' });
      }
      throw conflict("the project has no webhook URL: set one (PUT /api/projects/:id/webhook) before sending its events again", { code: 'no_webhook_url' });
    }
    this.wake();
    return (await this.list(tenantId, { limit: 1, id: deliveryId }))[0] ?? null;
  }

  /** Removes delivered and dead rows past the retention; answers how many. */
  async prune(now = new Date()): Promise<number> {
    const before = new Date(now.getTime() - DELIVERY_RETENTION_DAYS * 86_400_000);
    const result = await this.options.db.deleteFrom('event_deliveries').where('status', '<>', 'pending').where('created_at', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.working = this.work()
        .catch((err: unknown) => this.options.logger.warn({ err }, 'event outbox pass failed'))
        .finally(() => {
          this.working = undefined;
          if (this.stopped) return;
          const soon = this.again;
          this.again = false;
          this.schedule(soon ? 0 : (this.options.tickMs ?? 1_000));
        });
    }, delayMs);
    this.timer.unref();
  }

  private async attempt(claimed: Claimed): Promise<void> {
    const { logger } = this.options;
    // The project's URL is the one in force at each attempt: a changed one takes the retries, a removed one ends them.
    const current = claimed.target === 'project' ? await projectWebhookUrl(this.options.db, claimed.tenant_id) : claimed.url;
    if (current === null) {
      await this.options.db
        .updateTable('event_deliveries')
        .set({ status: 'dead', last_error: "the project's webhook URL was removed", claimed_by: null, claim_expires_at: null })
        .where('id', '=', claimed.id)
        .where('claimed_by', '=', this.options.owner)
        .execute();
      return;
    }
    const row = { ...claimed, url: current };
    const started = performance.now();
    const body = JSON.stringify(row.payload);
    const timestamp = Math.floor((this.options.now?.() ?? Date.now()) / 1000);
    let status: number | null = null;
    let error: string | null = null;
    try {
      const secret = await this.options.secretOf(row.tenant_id);
      const response = await this.options.fetch(row.url, {
        method: 'POST',
        redirect: 'manual',
        signal: AbortSignal.timeout(ATTEMPT_MS),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'agentplane-events',
          'x-delivery-id': row.event_id,
          'x-delivery-timestamp': String(timestamp),
          'x-event-type': row.type,
          'x-signature': eventSignature(secret, row.event_id, timestamp, body),
        },
        body,
      });
      status = response.status;
      const answer = (await readUpTo(response, ANSWER_EXCERPT * 4)).text.slice(0, ANSWER_EXCERPT);
      if (status < 200 || status >= 300) error = `the receiver answered HTTP ${status}${answer === '' ? '' : `: ${answer}`}`;
    } catch (caught) {
      error = errorMessage(caught).slice(0, 500);
    }
    const attempts = row.attempts + 1;
    const attempt: DeliveryAttempt = { at: new Date().toISOString(), status, error, duration_ms: Math.round(performance.now() - started) };
    const delivered = error === null;
    const dead = !delivered && attempts >= MAX_DELIVERY_ATTEMPTS;
    this.options.onAttempt?.(delivered ? 'delivered' : dead ? 'dead' : 'retry');
    const url = new URL(row.url);
    logger.info(
      { delivery_id: row.id, event_id: row.event_id, type: row.type, target: `${url.origin}${url.pathname}`, attempt: attempts, status, error, duration_ms: attempt.duration_ms },
      delivered ? 'event delivered' : dead ? 'event delivery dead: its attempts ran out' : 'event delivery attempt failed; it will be retried',
    );
    await this.options.db
      .updateTable('event_deliveries')
      .set({
        status: delivered ? 'delivered' : dead ? 'dead' : 'pending',
        attempts,
        attempt_log: sql`attempt_log || ${JSON.stringify([attempt])}::jsonb`,
        last_status: status,
        last_error: error,
        claimed_by: null,
        claim_expires_at: null,
        ...(delivered ? { delivered_at: new Date() } : {}),
        ...(!delivered && !dead ? { next_attempt_at: new Date(Date.now() + retryDelayMs(attempts)) } : {}),
      })
      .where('id', '=', row.id)
      // Still this process's claim: one that lapsed (a slow receiver) is another's attempt, or a redelivery, now.
      .where('claimed_by', '=', this.options.owner)
      .execute();
  }
}
