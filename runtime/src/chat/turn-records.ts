// The statements a turn pays on every call (docs/decisions/0035): its start and its end, each one round trip that
// writes across sessions, runs, messages and usage_records at once. Data-modifying CTEs make each one statement,
// so it is atomic without `begin`/`commit` and costs one trip to PostgreSQL (and one query to PGlite, which runs
// one at a time). What is rare (answers to a pause, a session holding a pause, a lapsed run to clear) keeps the
// transactional path in ChatService; these are the common cases, and decline (undefined) where they do not apply.
import { randomUUID } from 'node:crypto';
import { isUniqueViolation, sqlStateOf } from '@agentplane/lib/db/database';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { MessageRow, NewMessage, SessionStatus } from '../sessions/conversations.js';
import { rowOf, type AuditEntry } from '../governance/audit.js';
import type { RuntimeSchema, SessionPending } from '../store/schema.js';
import type { RunEnding } from './runs.js';

/** A model call's usage row, written with the step's message. */
export interface UsageRow {
  model: string;
  purpose: string;
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
}

export interface TurnStart {
  tenantId: string;
  sessionId: string;
  runId: string;
  subject: string;
  model: string;
  message: string;
  /** The lease the starting process takes on the run. */
  leaseOwner: string;
  leaseExpiresAt: Date;
  /** A subagent's working conversation: the conversation that delegated to it. */
  parentSessionId?: string | undefined;
}

/** How a run's end went: ended, or left running because a steer waits (the loop goes on), or no longer ours. */
export type EndResult = { outcome: 'ended' | 'steered' | 'gone'; message: MessageRow | undefined };

export interface TurnEnd {
  tenantId: string;
  sessionId: string;
  runId: string;
  ending: RunEnding;
  /** The session's rollup when the run ends. */
  rollup: { status: SessionStatus; model: string | null; pending: SessionPending | null };
  /** The step's final message, written whatever the outcome: new, or the draft `draftId` settled into it. */
  message?: { draftId: string | null; value: NewMessage };
  usage?: UsageRow;
  /** Leave the run running when a steer waits (only an agent that finished on its own answers one). */
  unlessSteered: boolean;
}

/** A step that called tools: its message (new, or its draft settled into it) and its model call's usage. */
export interface StepRecord {
  tenantId: string;
  sessionId: string;
  runId: string;
  /** `id` is the message's: the draft's when there is one. */
  message: { id: string; draftId: string | null; value: NewMessage };
  usage?: UsageRow | undefined;
}

/**
 * What a call of a webhook tool leaves in the tool-call record (docs/decisions/0052), written with its result. The
 * result and error are excerpts already.
 */
export interface DeliveryRecord {
  toolId: string;
  tool: string;
  subject: string;
  status: number | null;
  ok: boolean;
  attempts: number;
  durationMs: number;
  resultExcerpt: string;
  error: string | null;
}

const codeOf = sqlStateOf;
/** A deadlock or serialization failure: nothing was written, and a retry on the slow path is safe. */
const isConcurrencyFailure = (error: unknown) => codeOf(error) === '40P01' || codeOf(error) === '40001';

export class TurnRecords {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  /** A turn that opens its conversation: the session (running), the run with its lease and the person's message. */
  async startNewSession(start: TurnStart): Promise<MessageRow> {
    const { rows } = await sql<MessageRow>`
      with session as (
        insert into sessions (id, tenant_id, owner, model, status, parent_session_id)
        values (${start.sessionId}, ${start.tenantId}, ${start.subject}, ${start.model}, 'running', ${start.parentSessionId ?? null}::uuid)
      ), run as (
        insert into runs (id, tenant_id, session_id, subject, model, status, lease_owner, lease_expires_at)
        values (${start.runId}, ${start.tenantId}, ${start.sessionId}, ${start.subject}, ${start.model}, 'running', ${start.leaseOwner}, ${start.leaseExpiresAt})
      )
      insert into messages (id, tenant_id, session_id, run_id, subject, role, content)
      values (${randomUUID()}, ${start.tenantId}, ${start.sessionId}, ${start.runId}, ${start.subject}, 'user', ${start.message})
      returning *`.execute(this.db);
    return rows[0]!;
  }

  /**
   * A plain message into a conversation that holds no pause: the session marked running, the run, the message, and
   * the whole history back (the message last). Undefined when it does not apply (a pause waits, the session is gone,
   * a run holds it): nothing was written, and the caller takes the transactional path that says which.
   */
  async startInSession(start: TurnStart): Promise<MessageRow[] | undefined> {
    const messageId = randomUUID();
    let rows: MessageRow[];
    try {
      ({ rows } = await sql<MessageRow>`
        with session as (
          update sessions set status = 'running', model = ${start.model}, updated_at = now()
          where id = ${start.sessionId} and tenant_id = ${start.tenantId} and pending is null
            -- Unchanged since this statement's snapshot: a session changed while this waited for its lock (the last
            -- turn's end committing) would make the history below stale, so the transactional path takes it.
            and updated_at = (select current.updated_at from sessions current where current.id = ${start.sessionId})
          returning id
        ), run as (
          insert into runs (id, tenant_id, session_id, subject, model, status, lease_owner, lease_expires_at)
          select ${start.runId}, ${start.tenantId}::uuid, id, ${start.subject}, ${start.model}, 'running', ${start.leaseOwner}, ${start.leaseExpiresAt}::timestamptz
          from session
        ), message as (
          insert into messages (id, tenant_id, session_id, run_id, subject, role, content)
          select ${messageId}::uuid, ${start.tenantId}::uuid, id, ${start.runId}, ${start.subject}, 'user', ${start.message}
          from session
          returning *
        )
        select * from (select * from messages where session_id = ${start.sessionId} union all select * from message) history order by seq`.execute(this.db));
    } catch (error) {
      // A run still holds the session (live, or lapsed and waiting to be cleared), or the statement lost a race for
      // its locks: the transactional path decides, on fresh reads.
      if (isUniqueViolation(error) || isConcurrencyFailure(error)) return undefined;
      throw error;
    }
    return rows.at(-1)?.id === messageId ? rows : undefined;
  }

  /**
   * A step that called tools, in one statement: its usage, its message and the session touched. The engine runs it
   * while the step's calls are made, so a handler's round trip hides it.
   */
  async step(step: StepRecord): Promise<MessageRow> {
    const { message } = step;
    const parts: RawBuilder<unknown>[] = [sql`session as (update sessions set updated_at = now() where id = ${step.sessionId})`];
    if (step.usage) parts.push(sql`usage as (${usageInsert(step, step.usage)})`);
    parts.push(sql`message as (${message.draftId === null ? messageInsert(step, message.value, sql`true`, message.id) : draftSettle(message.draftId, message.value, sql`true`)})`);
    const { rows } = await sql<MessageRow>`with ${sql.join(parts, sql`, `)} select * from message`.execute(this.db);
    return rows[0]!;
  }

  /**
   * The answers to a step's calls, in the order given, with the records of the webhook calls among them and the
   * session touched: one statement. Each answer's `seq` is taken from the identity's sequence and handed out in
   * order, so the answers read back in the order the calls were made, by contract rather than by how the insert
   * happens to run.
   */
  async answers(
    where: { tenantId: string; sessionId: string; runId: string },
    answers: NewMessage[],
    deliveries: DeliveryRecord[],
    audit: AuditEntry[] = [],
  ): Promise<MessageRow[]> {
    if (answers.length === 0 && deliveries.length === 0 && audit.length === 0) return [];
    const parts: RawBuilder<unknown>[] = [sql`session as (update sessions set updated_at = now() where id = ${where.sessionId})`];
    if (audit.length > 0) {
      // The audit log's entries of the calls go in the same statement as their results.
      const rows = audit.map(rowOf);
      parts.push(sql`audited as (
        insert into audit_log (tenant_id, actor, actor_kind, action, resource, outcome, status, ip, request_id)
        values ${sql.join(
          rows.map((row) => sql`(${row.tenant_id}::uuid, ${row.actor}::text, ${row.actor_kind}::text, ${row.action}::text, ${row.resource}::jsonb, ${row.outcome}::text, ${row.status}::integer, ${row.ip}::text, ${row.request_id}::text)`),
          sql`, `,
        )})`);
    }
    if (deliveries.length > 0) {
      const values = deliveries.map(
        (delivery) =>
          sql`(${randomUUID()}::uuid, ${where.tenantId}::uuid, ${delivery.toolId}::text, ${delivery.tool}::text, ${where.sessionId}::uuid, ${where.runId}::text,
            ${delivery.subject}::text, ${delivery.status}::integer, ${delivery.ok}::boolean, ${delivery.attempts}::integer,
            ${Math.round(delivery.durationMs)}::integer, ${delivery.resultExcerpt}::text, ${delivery.error}::text)`,
      );
      parts.push(sql`deliveries as (
        insert into tool_deliveries (id, tenant_id, tool_id, tool, session_id, run_id, subject, status, ok, attempts, duration_ms, result_excerpt, error)
        values ${sql.join(values, sql`, `)})`);
    }
    if (answers.length === 0) {
      await sql`with ${sql.join(parts, sql`, `)} select 1`.execute(this.db);
      return [];
    }
    const values = answers.map(
      (answer, index) =>
        sql`(${index + 1}::bigint, ${randomUUID()}::uuid, ${answer.runId ?? null}::text, ${answer.subject ?? null}::text, ${answer.role}::text,
          ${answer.content}::text, ${answer.toolCalls ? JSON.stringify(answer.toolCalls) : null}::jsonb, ${answer.toolCallId ?? null}::text,
          ${answer.name ?? null}::text, ${answer.model ?? null}::text, ${answer.metadata ? JSON.stringify(answer.metadata) : null}::jsonb)`,
    );
    const columns = sql`id, tenant_id, session_id, run_id, subject, role, content, tool_calls, tool_call_id, name, model, metadata`;
    const chosen = sql`a.id, ${where.tenantId}::uuid, ${where.sessionId}::uuid, a.run_id, a.subject, a.role, a.content, a.tool_calls, a.tool_call_id, a.name, a.model, a.metadata`;
    const answered = sql`(values ${sql.join(values, sql`, `)}) as a (i, id, run_id, subject, role, content, tool_calls, tool_call_id, name, model, metadata)`;
    if (answers.length === 1) {
      // One answer takes the next `seq` as any insert does.
      parts.push(sql`inserted as (insert into messages (${columns}) select ${chosen} from ${answered} returning *)`);
    } else {
      parts.push(sql`seqs as (
        select s, row_number() over (order by s) as i
        from (select nextval(pg_get_serial_sequence('messages', 'seq')) as s from generate_series(1, ${answers.length}::integer)) taken)`);
      parts.push(sql`inserted as (
        insert into messages (seq, ${columns}) overriding system value
        select seqs.s, ${chosen} from ${answered} join seqs using (i)
        returning *)`);
    }
    const { rows } = await sql<MessageRow>`with ${sql.join(parts, sql`, `)} select * from inserted order by seq`.execute(this.db);
    return rows;
  }

  /**
   * Ends a run with its last step: the step's message and usage, the run's row, and the session's rollup. The
   * message and usage are written whatever happens to the run; the row and rollup move only if the run is still
   * running (and, with `unlessSteered`, no steer waits on it: a steer marks the same row, so one racing this
   * statement either lands first and keeps the run going, or finds it finished).
   */
  async end(end: TurnEnd): Promise<EndResult> {
    const { rollup, ending } = end;
    const pending = rollup.pending === null ? null : JSON.stringify(rollup.pending);
    const error = ending.error ? JSON.stringify(ending.error) : null;
    const parts: RawBuilder<unknown>[] = [
      // The session's row is locked before the run's, the order a turn's start takes them in, so the two never
      // wait on each other.
      sql`locked as (select id from sessions where id = ${end.sessionId} for no key update)`,
      sql`run as (
        update runs set status = ${ending.status}, finish_reason = ${ending.finishReason ?? null}, error = ${error}::jsonb,
          finished_at = now(), lease_expires_at = null
        where id = ${end.runId} and status = 'running'${end.unlessSteered ? sql` and not steer_waiting` : sql``}
          and exists (select 1 from locked)
        returning id
      )`,
      sql`session as (
        update sessions set updated_at = now(),
          status = case when exists (select 1 from run) then ${rollup.status} else status end,
          model = case when exists (select 1 from run) then ${rollup.model}::text else model end,
          pending = case when exists (select 1 from run) then ${pending}::jsonb else pending end
        where id = ${end.sessionId}
      )`,
    ];
    if (end.usage) parts.push(sql`usage as (${usageInsert(end, end.usage)})`);
    const message = end.message;
    // The message only while the run is still this turn's (running, ended or steered by this statement); a run swept
    // as lost meanwhile had its text settled by the sweep, and the conversation may have moved on.
    const stillRunning = sql`exists (select 1 from runs where id = ${end.runId} and status = 'running')`;
    if (message) {
      parts.push(
        sql`message as (${message.draftId === null ? messageInsert(end, message.value, stillRunning) : draftSettle(message.draftId, message.value, stillRunning)})`,
      );
    }
    const { rows } = await sql<{ ended: boolean; message: MessageRow | null }>`
      with ${sql.join(parts, sql`, `)}
      select exists (select 1 from run) as ended, ${message ? sql`(select row_to_json(message) from message)` : sql`null`} as message`.execute(this.db);
    const row = rows[0]!;
    const written = row.message === null ? undefined : revive(row.message);
    if (row.ended) return { outcome: 'ended', message: written };
    // Not moved: a steer waits (the loop goes on), or the run is no longer running (swept as lost). Rare; read it.
    const run = await this.db.selectFrom('runs').select(['status', 'steer_waiting']).where('id', '=', end.runId).executeTakeFirst();
    return { outcome: run?.status === 'running' && run.steer_waiting ? 'steered' : 'gone', message: written };
  }
}

function messageInsert(end: { tenantId: string; sessionId: string }, message: NewMessage, when: RawBuilder<unknown>, id: string = randomUUID()) {
  return sql`insert into messages (id, tenant_id, session_id, run_id, subject, role, content, tool_calls, tool_call_id, name, model, metadata)
    select ${id}::uuid, ${end.tenantId}::uuid, ${end.sessionId}::uuid, ${message.runId ?? null}::text, ${message.subject ?? null}::text,
      ${message.role}::text, ${message.content}::text, ${message.toolCalls ? JSON.stringify(message.toolCalls) : null}::jsonb,
      ${message.toolCallId ?? null}::text, ${message.name ?? null}::text, ${message.model ?? null}::text,
      ${message.metadata ? JSON.stringify(message.metadata) : null}::jsonb
    where ${when}
    returning *`;
}

/** The draft becomes the final message with a new `seq`, so a follower of the session's events gets it now, once. */
function draftSettle(draftId: string, message: NewMessage, when: RawBuilder<unknown>) {
  return sql`update messages set seq = default, content = ${message.content},
      tool_calls = ${message.toolCalls ? JSON.stringify(message.toolCalls) : null}::jsonb,
      metadata = ${message.metadata ? JSON.stringify(message.metadata) : null}::jsonb
    where id = ${draftId} and ${when}
    returning *`;
}

function usageInsert(end: { tenantId: string; sessionId: string; runId: string }, usage: UsageRow) {
  return sql`insert into usage_records (tenant_id, session_id, run_id, model, purpose, input_tokens, output_tokens, cost_usd)
    values (${end.tenantId}, ${end.sessionId}, ${end.runId}, ${usage.model}, ${usage.purpose}, ${usage.inputTokens}, ${usage.outputTokens}, ${usage.costUsd})`;
}

/** `row_to_json` gives timestamps as text; the rest of the service reads them as dates. */
function revive(json: MessageRow): MessageRow {
  return { ...json, created_at: new Date(json.created_at as unknown as string) };
}
