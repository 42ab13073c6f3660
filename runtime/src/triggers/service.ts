// Webhook triggers (SPEC.md Trigger, Tasks-triggers endpoints, Errors 8; docs/decisions/0060). A person with capability
// `triggers` makes one: a secret URL (256 random bits in its slug; the slug is kept only as a hash) that another
// system POSTs events to with no bearer token. Each event is taken at once (200 `{accepted: true}`), stored, and
// started as an unattended run of the trigger's owner told the trigger's prompt and the event; the reply lands in
// the conversation and in `turn.stopped`, never in the response. Events are keyed by `X-Event-Id` or
// `Idempotency-Key`, else by a hash of the body: a key seen within 24 hours answers `{accepted: true, duplicate: true}`
// and starts nothing. A trigger may also be signed (`X-Signature: sha256=<hex HMAC of the raw body>`), and fires are
// rate-limited per trigger. Rotation gives a new URL; the old one answers for 24 hours more.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { EVENT_SIGNATURE_VERSION, EVENT_TIMESTAMP_TOLERANCE_SECONDS, verifyEventSignature, verifySignature } from '@agentplane/lib/crypto/signatures';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { newSecret } from '@agentplane/lib/crypto/secret-box';
import { pageOf } from '@agentplane/lib/db/paging';
import { AppError, conflict, invalidArgument, notFound, permissionDenied, unauthenticated } from '@agentplane/lib/errors';
import type { Counters } from '@agentplane/lib/events/port';
import type { Logger } from '@agentplane/lib/logging';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { requireCapability } from '@agentplane/lib/permissions';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { grantOf, type Principal } from '../auth/authenticate.js';
import { chooseModel } from '../chat/model-choice.js';
import { newRunId } from '../chat/runs.js';
import { runOutcome, untilNoneStarting, type RunOutcome, type StartUnattended } from '../chat/unattended.js';
import type { EventOutbox, NewEvent } from '../deliveries/outbox.js';
import { AuditLog } from '../governance/audit.js';
import { eventTargets, stoppedRunData } from '../deliveries/turn-stopped.js';
import { canSeeOwner, ownsConversation, visibleOwnerCondition } from '../sessions/access.js';
import type { SessionService } from '../sessions/service.js';
import { underCap } from '../store/capped.js';
import type { RuntimeSchema, TriggersTable } from '../store/schema.js';
import { tenantEventPrefix } from '../tenants/keys.js';

export const TRIGGER_ROTATION_OVERLAP_MS = 24 * 3_600_000;
export const EVENT_DEDUPLICATION_MS = 24 * 3_600_000;
export const DEFAULT_TRIGGER_RATE_PER_MINUTE = 60;
export const MAX_TRIGGER_RATE_PER_MINUTE = 600;
export const MAX_TRIGGERS_PER_SUBJECT = 50;
export const MAX_TRIGGER_PROMPT_CHARS = 32_000;
/** How much of an event's body the run is told. */
export const MAX_EVENT_CHARS = 32_000;
const MAX_EVENT_KEY_CHARS = 256;
const SLUG_PREFIX = 'trg_';
/** How long a taken event is this process's to start before another may take it over. */
const CLAIM_MS = 60_000;
const BATCH = 100;
/** How often other processes' strays and ended runs are looked for when nothing of this process's is open. */
const IDLE_TICK_MS = 5_000;
const BUSY_TICK_MS = 200;

export interface TriggerInput {
  name: string;
  prompt: string;
  signed?: boolean | undefined;
  session_id?: string | null | undefined;
  model?: string | null | undefined;
  callback_url?: string | null | undefined;
  rate_per_minute?: number | undefined;
}

export interface TriggerOut {
  id: string;
  name: string;
  prompt: string;
  /** The trigger's URL's last characters; the URL itself is shown at creation and rotation only. */
  url_hint: string;
  signed: boolean;
  previous_url_until: string | null;
  session_id: string | null;
  model: string | null;
  callback_url: string | null;
  rate_per_minute: number;
  fire_count: number;
  last_fired_at: string | null;
  subject: string;
  created_at: string;
}

type TriggerRow = Selectable<TriggersTable>;

const triggerNotFound = (id: string) => notFound(`trigger ${id} not found`);
const triggerNotOwned = (id: string) => permissionDenied(`trigger ${id} belongs to another subject: this token may read it but not change it`, { code: 'not_owner' });
// The slug is a credential: a refusal never repeats it.
const noTriggerHere = () => notFound('no trigger answers at this URL', { code: 'trigger_not_found' });

const hashOf = (slug: string) => createHash('sha256').update(slug).digest('hex');
const secretAad = (tenantId: string, triggerId: string) => `tenant:${tenantId}:trigger:${triggerId}:signing-secret`;

export interface TriggerServiceDeps {
  db: Kysely<RuntimeSchema>;
  secrets: SecretBox;
  sessions: SessionService;
  urlPolicy: UrlPolicy;
  counters: Counters;
  outbox: EventOutbox;
  start: StartUnattended;
  logger: Logger;
  /** This process's name on its claims. */
  owner: string;
  /** Where clients reach the data plane: the start of a trigger's URL. */
  publicUrl: string;
  /** Told of each event's outcome and each refusal by the trigger's rate (the runtime's metrics). */
  metrics?: { triggerEvent(outcome: 'accepted' | 'duplicate'): void; refused(code: string): void };
}

export class TriggerService {
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = true;
  /** Events this process started whose runs have not settled: while any are, it looks often. */
  private open = 0;

  constructor(private readonly deps: TriggerServiceDeps) {}

  /** Creating, listing, rotating and removing triggers all need capability `triggers`. */
  authorize(principal: Principal): void {
    requireCapability(principal.permission, 'triggers', 'webhook triggers');
  }

  /** A new trigger; its URL (and its signing secret, when signed) are in this answer only. */
  async create(principal: Principal, input: TriggerInput): Promise<TriggerOut & { url: string; signing_secret?: string }> {
    const { db } = this.deps;
    requireCapability(principal.permission, 'chat', "a trigger's turns");
    const name = input.name.trim();
    const prompt = input.prompt.trim();
    if (name === '') throw invalidArgument('name must not be empty');
    if (prompt === '') throw invalidArgument('prompt must not be empty');
    const rate = input.rate_per_minute ?? DEFAULT_TRIGGER_RATE_PER_MINUTE;
    if (!Number.isInteger(rate) || rate < 1 || rate > MAX_TRIGGER_RATE_PER_MINUTE) throw invalidArgument(`rate_per_minute must be a whole number from 1 to ${MAX_TRIGGER_RATE_PER_MINUTE}`);
    const callbackUrl = input.callback_url ? (await checkUrl(input.callback_url, this.deps.urlPolicy, 'callback_url')).url.href : null;
    if (input.session_id) await this.deps.sessions.ownedSession(principal, input.session_id);
    if (input.model) chooseModel(principal.configuration, principal.permission, principal.routing, input.model);
    const id = randomUUID();
    const slug = newSlug();
    const signingSecret = input.signed ? newSecret('whsec_') : undefined;
    // Counted and inserted under the person's lock: concurrent creates cannot both take the last place.
    const row = await underCap(db, `triggers:${principal.tenantId}:${principal.claims.sub}`, async (trx) => {
      const mine = await trx.selectFrom('triggers').select(sql<string>`count(*)`.as('n')).where('tenant_id', '=', principal.tenantId).where('owner', '=', principal.claims.sub).executeTakeFirstOrThrow();
      if (Number(mine.n) >= MAX_TRIGGERS_PER_SUBJECT) throw conflict(`a person may have at most ${MAX_TRIGGERS_PER_SUBJECT} triggers; remove one first`, { code: 'too_many_triggers' });
      return trx
        .insertInto('triggers')
        .values({
          id,
          tenant_id: principal.tenantId,
          owner: principal.claims.sub,
          name: name.slice(0, 200),
          prompt,
          slug_hash: hashOf(slug),
          url_hint: slug.slice(-4),
          signing_secret: signingSecret ? this.deps.secrets.seal(signingSecret, secretAad(principal.tenantId, id)) : null,
          session_id: input.session_id ?? null,
          model: input.model ?? null,
          callback_url: callbackUrl,
          rate_per_minute: rate,
          acts_as: JSON.stringify(grantOf(principal.claims)),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return { ...present(row), url: this.urlOf(slug), ...(signingSecret ? { signing_secret: signingSecret } : {}) };
  }

  async list(principal: Principal, query: { limit: number; offset: number }) {
    const rows = await this.deps.db
      .selectFrom('triggers')
      .selectAll()
      .where('tenant_id', '=', principal.tenantId)
      .where(visibleOwnerCondition(principal, 'triggers.owner'))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(query.limit + 1)
      .offset(query.offset)
      .execute();
    const page = pageOf(rows, query);
    return { triggers: page.rows.map(present), has_more: page.has_more, next_offset: page.next_offset };
  }

  /** A new URL for the caller's trigger; the one it replaces answers for 24 hours more. The signing secret stays. */
  async rotate(principal: Principal, id: string): Promise<TriggerOut & { url: string }> {
    const row = await this.owned(principal, id);
    const slug = newSlug();
    const rotated = await this.deps.db
      .updateTable('triggers')
      .set({
        slug_hash: hashOf(slug),
        previous_slug_hash: row.slug_hash,
        previous_until: new Date(Date.now() + TRIGGER_ROTATION_OVERLAP_MS),
        url_hint: slug.slice(-4),
        updated_at: new Date(),
      })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ...present(rotated), url: this.urlOf(slug) };
  }

  /** Removes the caller's trigger: its URLs answer no more; runs it started go on. */
  async remove(principal: Principal, id: string): Promise<TriggerOut> {
    await this.owned(principal, id);
    const row = await this.deps.db.deleteFrom('triggers').where('id', '=', id).returningAll().executeTakeFirstOrThrow();
    return present(row);
  }

  /** The trigger a fire's URL names (the current slug, or the replaced one within its 24 hours); 404 otherwise. */
  async bySlug(slug: string): Promise<TriggerRow> {
    if (!slug.startsWith(SLUG_PREFIX) || slug.length > 128) throw noTriggerHere();
    const hash = hashOf(slug);
    const row = await this.deps.db
      .selectFrom('triggers')
      .selectAll()
      .where((eb) => eb.or([eb('slug_hash', '=', hash), eb.and([eb('previous_slug_hash', '=', hash), eb('previous_until', '>', new Date())])]))
      .executeTakeFirst();
    if (!row) throw noTriggerHere();
    return row;
  }

  /**
   * Takes an event: its signature checked (a signed trigger), the trigger's rate, its key; stored once per key
   * within 24 hours, and its run started without waiting for it.
   */
  async fire(
    trigger: TriggerRow,
    event: { body: Buffer; json: unknown; signature: string | undefined; eventId: string | undefined; timestamp?: string | undefined },
  ): Promise<{ accepted: true; duplicate?: true }> {
    const bodyKey = () => `sha256:${createHash('sha256').update(event.body).digest('hex')}`;
    let key = event.eventId ?? bodyKey();
    if (trigger.signing_secret !== null) {
      const secret = this.deps.secrets.open(trigger.signing_secret, secretAad(trigger.tenant_id, trigger.id));
      // Two forms. `v1=` signs the event's id and time with the body (Standard Webhooks' construction): a capture
      // replayed later is too old, and sooner is the same id. `sha256=` signs the body alone (GitHub's form): the
      // unsigned id headers could be changed at will, so such an event is keyed by its body.
      if (event.signature?.trim().startsWith(`${EVENT_SIGNATURE_VERSION}=`)) {
        if (event.eventId === undefined || !verifyEventSignature(event.signature, { id: event.eventId, timestamp: event.timestamp, body: event.body }, secret)) {
          throw unauthenticated(
            `X-Signature v1= must be the hex HMAC-SHA256 of "<X-Event-Id>.<X-Event-Timestamp>.<raw body>" under the trigger's signing secret, with X-Event-Timestamp (Unix seconds) within ${EVENT_TIMESTAMP_TOLERANCE_SECONDS} seconds of now`,
            { code: 'invalid_signature' },
          );
        }
      } else if (verifySignature(event.signature, event.body, secret)) key = bodyKey();
      else {
        throw unauthenticated(
          'X-Signature must be sha256= and the hex HMAC-SHA256 of the raw body, or v1= and that of "<X-Event-Id>.<X-Event-Timestamp>.<raw body>", under the trigger\'s signing secret',
          { code: 'invalid_signature' },
        );
      }
    }
    if (key.length > MAX_EVENT_KEY_CHARS || /[\u0000-\u001f\u007f]/.test(key)) throw invalidArgument(`X-Event-Id and Idempotency-Key must be at most ${MAX_EVENT_KEY_CHARS} printable characters`);
    const rate = await this.deps.counters.increment(`${tenantEventPrefix(trigger.tenant_id)}trigger:${trigger.id}:fires`, 1, 60);
    if (rate.value > trigger.rate_per_minute) {
      this.deps.metrics?.refused('trigger_rate_limited');
      throw new AppError('rate_limited', `this trigger takes at most ${trigger.rate_per_minute} events a minute; the window resets at ${rate.resetAt.toISOString()}`, {
        code: 'trigger_rate_limited',
        retryAt: rate.resetAt,
        extra: { reset_at: rate.resetAt.toISOString() },
      });
    }
    const message = `${trigger.prompt}\n\nThe event that fired this trigger (JSON):\n${eventText(event)}`;
    const runId = newRunId();
    // A key seen within 24 hours is a duplicate; one older than that (not pruned yet) is taken as new.
    const { rows } = await sql<{ id: string }>`
      insert into trigger_events (id, trigger_id, tenant_id, event_key, message, run_id, state, claimed_by, claim_expires_at)
      values (${randomUUID()}, ${trigger.id}, ${trigger.tenant_id}, ${key}, ${message}, ${runId}, 'pending', ${this.deps.owner}, now() + ${`${CLAIM_MS} milliseconds`}::interval)
      on conflict (trigger_id, event_key) do update set id = excluded.id, message = excluded.message, run_id = excluded.run_id, state = 'pending',
        claimed_by = excluded.claimed_by, claim_expires_at = excluded.claim_expires_at, received_at = now(), session_id = null, started_at = null, outcome = null
      where trigger_events.received_at < now() - ${`${EVENT_DEDUPLICATION_MS} milliseconds`}::interval
      returning id`.execute(this.deps.db);
    if (rows.length === 0) {
      this.deps.metrics?.triggerEvent('duplicate');
      return { accepted: true, duplicate: true };
    }
    this.deps.metrics?.triggerEvent('accepted');
    await this.deps.db.updateTable('triggers').set({ fire_count: sql`fire_count + 1`, last_fired_at: new Date() }).where('id', '=', trigger.id).execute();
    this.open += 1;
    void this.startEvent({ id: rows[0]!.id, tenantId: trigger.tenant_id, triggerId: trigger.id, runId, message, trigger }).catch((err: unknown) =>
      this.deps.logger.warn({ err, trigger_id: trigger.id, run_id: runId }, 'could not start a trigger event'),
    );
    this.schedule(BUSY_TICK_MS);
    return { accepted: true };
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
  }

  /** Events of others that died before starting them, and events whose runs ended. Tests call it directly. */
  async tick(): Promise<void> {
    const strays = await sql<{ id: string; tenant_id: string; trigger_id: string; run_id: string; message: string }>`
      with stray as (
        select id from trigger_events where state in ('pending', 'starting') and claim_expires_at < now() limit ${BATCH} for update skip locked
      )
      update trigger_events e set claimed_by = ${this.deps.owner}, claim_expires_at = now() + ${`${CLAIM_MS} milliseconds`}::interval
      from stray where e.id = stray.id
      returning e.id, e.tenant_id, e.trigger_id, e.run_id, e.message`.execute(this.deps.db);
    for (const stray of strays.rows) {
      const trigger = await this.deps.db.selectFrom('triggers').selectAll().where('id', '=', stray.trigger_id).executeTakeFirst();
      if (!trigger) continue;
      const existing = await this.deps.db.selectFrom('runs').select('session_id').where('id', '=', stray.run_id).executeTakeFirst();
      await this.startEvent({ id: stray.id, tenantId: stray.tenant_id, triggerId: stray.trigger_id, runId: stray.run_id, message: stray.message, trigger }, existing?.session_id);
    }
    await this.settle();
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.ticking) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch((err: unknown) => this.deps.logger.warn({ err }, 'trigger pass failed'))
        .finally(() => {
          this.ticking = undefined;
          this.schedule(this.open > 0 ? BUSY_TICK_MS : IDLE_TICK_MS);
        });
    }, delayMs);
    this.timer.unref();
  }

  private async startEvent(event: { id: string; tenantId: string; triggerId: string; runId: string; message: string; trigger: TriggerRow }, existingSession?: string): Promise<void> {
    const { db } = this.deps;
    const ours = await db.updateTable('trigger_events').set({ state: 'starting' }).where('id', '=', event.id).where('state', 'in', ['pending', 'starting']).where('claimed_by', '=', this.deps.owner).executeTakeFirst();
    if (Number(ours.numUpdatedRows) === 0) return;
    const started = existingSession
      ? { started: true as const, sessionId: existingSession }
      : await this.deps
          .start({ tenantId: event.tenantId, actsAs: event.trigger.acts_as as AccessTokenGrant, runId: event.runId, message: event.message, sessionId: event.trigger.session_id, model: event.trigger.model, needs: 'triggers' })
          .catch((error: unknown) => ({ started: false as const, error: error instanceof Error ? error.message : String(error) }));
    if (started.started) {
      await db.transaction().execute(async (trx) => {
        const moved = await trx
          .updateTable('trigger_events')
          .set({ state: 'started', session_id: started.sessionId, started_at: new Date(), claim_expires_at: null })
          .where('id', '=', event.id)
          .where('state', '=', 'starting')
          .executeTakeFirst();
        if (Number(moved.numUpdatedRows) === 0) return;
        // The unattended start is in the audit log, committed with the event's move.
        await AuditLog.append(trx, [
          {
            tenantId: event.tenantId,
            actor: event.trigger.owner,
            actorKind: 'unattended',
            action: 'trigger.fire',
            resource: { trigger_id: event.triggerId, run_id: event.runId, session_id: started.sessionId },
            outcome: 'ok',
          },
        ]);
      });
      return;
    }
    await this.record([{ id: event.id, runId: event.runId, outcome: { status: 'failed', finishReason: null, error: started.error } }]);
  }

  private async settle(): Promise<void> {
    const ended = await this.deps.db
      .selectFrom('trigger_events')
      .innerJoin('runs', 'runs.id', 'trigger_events.run_id')
      .select(['trigger_events.id', 'trigger_events.run_id', 'runs.status', 'runs.finish_reason', 'runs.error'])
      .where('trigger_events.state', '=', 'started')
      .where('runs.status', '<>', 'running')
      .limit(BATCH)
      .execute();
    if (ended.length > 0) await this.record(ended.map((event) => ({ id: event.id, runId: event.run_id, outcome: runOutcome(event) })));
  }

  /** Settles events once each (one settled by another process meanwhile is left), with their `turn.stopped` events, in one transaction. */
  private async record(events: { id: string; runId: string; outcome: RunOutcome }[]): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const messages: NewEvent[] = [];
      for (const { id, runId, outcome } of events) {
        const row = await trx
          .updateTable('trigger_events')
          .set({ state: 'settled', claim_expires_at: null, outcome: JSON.stringify(outcome) })
          .where('id', '=', id)
          .where('state', '<>', 'settled')
          .returning(['trigger_id', 'event_key'])
          .executeTakeFirst();
        if (!row) continue;
        this.open = Math.max(0, this.open - 1);
        const trigger = await trx.selectFrom('triggers').select(['tenant_id', 'name', 'owner', 'callback_url']).where('id', '=', row.trigger_id).executeTakeFirst();
        if (!trigger) continue;
        messages.push({
          tenantId: trigger.tenant_id,
          type: 'turn.stopped',
          data: {
            ...(await stoppedRunData(trx, runId, outcome)),
            subject: trigger.owner,
            origin: { kind: 'trigger', trigger_id: row.trigger_id, trigger_name: trigger.name, event_key: row.event_key },
          },
          targets: await eventTargets(trx, trigger.tenant_id, trigger.callback_url),
        });
      }
      await this.deps.outbox.enqueue(messages, trx);
    });
  }

  /** Events past the de-duplication window: their keys are free again. */
  async prune(now = new Date()): Promise<number> {
    const before = new Date(now.getTime() - EVENT_DEDUPLICATION_MS);
    const result = await this.deps.db.deleteFrom('trigger_events').where('state', '=', 'settled').where('received_at', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  private async owned(principal: Principal, id: string): Promise<TriggerRow> {
    const row = await this.deps.db.selectFrom('triggers').selectAll().where('id', '=', id).where('tenant_id', '=', principal.tenantId).executeTakeFirst();
    if (!row || !canSeeOwner(principal, row.owner)) throw triggerNotFound(id);
    if (!ownsConversation(principal, row.owner)) throw triggerNotOwned(id);
    return row;
  }

  private urlOf(slug: string): string {
    return `${this.deps.publicUrl}/triggers/${slug}`;
  }
}

function newSlug(): string {
  return `${SLUG_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** The event as the run reads it: its JSON, cut to MAX_EVENT_CHARS. */
function eventText(event: { body: Buffer; json: unknown }): string {
  const text = event.body.length === 0 ? '(no body)' : JSON.stringify(event.json, null, 2);
  return text.length > MAX_EVENT_CHARS ? `${text.slice(0, MAX_EVENT_CHARS)}\n… (cut at ${MAX_EVENT_CHARS} characters)` : text;
}

function present(row: TriggerRow): TriggerOut {
  return {
    id: row.id,
    name: row.name,
    prompt: row.prompt,
    url_hint: row.url_hint,
    signed: row.signing_secret !== null,
    previous_url_until: row.previous_until && row.previous_until.getTime() > Date.now() ? row.previous_until.toISOString() : null,
    session_id: row.session_id,
    model: row.model,
    callback_url: row.callback_url,
    rate_per_minute: row.rate_per_minute,
    fire_count: row.fire_count,
    last_fired_at: row.last_fired_at?.toISOString() ?? null,
    subject: row.owner,
    created_at: row.created_at.toISOString(),
  };
}

/**
 * Stops a tenant's trigger events (the erase's first steps, before its runs are cancelled): events not started yet
 * are settled, and those being started waited for, so each has its run by the time the runs are cancelled.
 */
export async function stopTriggerEvents(db: Kysely<RuntimeSchema>, tenantId: string, options: { subject?: string; waitMs?: number } = {}): Promise<number> {
  const owned = options.subject === undefined ? undefined : (await db.selectFrom('triggers').select('id').where('tenant_id', '=', tenantId).where('owner', '=', options.subject).execute()).map((row) => row.id);
  if (owned !== undefined && owned.length === 0) return 0;
  let pending = db
    .updateTable('trigger_events')
    .set({ state: 'settled', outcome: JSON.stringify({ status: 'failed', finishReason: null, error: owned ? "the trigger's owner was forgotten" : 'the project was erased' }), claim_expires_at: null })
    .where('tenant_id', '=', tenantId)
    .where('state', '=', 'pending');
  if (owned) pending = pending.where('trigger_id', 'in', owned);
  const stopped = await pending.executeTakeFirst();
  await untilNoneStarting(
    async () => {
      let query = db.selectFrom('trigger_events').select('run_id').where('tenant_id', '=', tenantId).where('state', '=', 'starting');
      if (owned) query = query.where('trigger_id', 'in', owned);
      return (await query.executeTakeFirst())?.run_id;
    },
    "a trigger's event",
    options.waitMs,
  );
  return Number(stopped.numUpdatedRows);
}
