// The data plane's audit log (SPEC.md `/audit`; docs/decisions/0065): every write a caller makes (its route, the ids
// it names, how it went, from where), every tool call a turn makes, every unattended start and every forget. Append-
// only in the database itself (a trigger refuses changes but a tenant's erase and the replacing of a forgotten
// subject). Read by privileged tokens, newest first.
import { sql, type Kysely, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import type { Logger } from '@agentplane/lib/logging';
import type { AuditLogTable, RuntimeSchema } from '../store/schema.js';

export const ACTOR_KINDS = ['end_user', 'admin', 'unattended', 'anonymous'] as const;
export const AUDIT_OUTCOMES = ['ok', 'refused', 'failed'] as const;
export const DEFAULT_AUDIT_PAGE = 100;
export const MAX_AUDIT_PAGE = 1_000;

export interface AuditEntry {
  tenantId: string;
  actor: string;
  actorKind: (typeof ACTOR_KINDS)[number];
  action: string;
  resource?: Record<string, unknown>;
  outcome: (typeof AUDIT_OUTCOMES)[number];
  status?: number | null;
  ip?: string | null;
  requestId?: string | null;
}

export interface AuditEntryOut {
  id: string;
  at: string;
  actor: string;
  actor_kind: string;
  action: string;
  resource: Record<string, unknown>;
  outcome: string;
  status: number | null;
  ip: string | null;
  request_id: string | null;
}

export interface AuditQuery {
  limit: number;
  /** Entries older than this id (the previous page's `next_before`). */
  before?: string | undefined;
  actor?: string | undefined;
  action?: string | undefined;
  outcome?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

/** The outcome an HTTP status means for the log. */
export const outcomeOf = (status: number): AuditEntry['outcome'] => (status < 400 ? 'ok' : status < 500 ? 'refused' : 'failed');

/** Entries held for the next batched write at most: more are written at once. */
const MAX_HELD = 500;

export class AuditLog {
  private held: AuditEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly logger: Logger,
    /** How long an answered request's entry may wait to be written with others (one statement for many requests). */
    private readonly flushMs = 200,
  ) {}

  /** Appends entries (on `db`, a transaction's when given). */
  async record(entries: AuditEntry[], db: Kysely<RuntimeSchema> = this.db): Promise<void> {
    await AuditLog.append(db, entries);
  }

  /** Appends entries on `db` (a transaction's: the entry commits with what it tells of). */
  static async append(db: Kysely<RuntimeSchema>, entries: AuditEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await db.insertInto('audit_log').values(entries.map(rowOf)).execute();
  }

  /**
   * Appends entries of what is already answered (a request's write) with others, within `flushMs`: one statement for
   * many requests rather than one more per request. A failure is logged; entries held when the process dies are lost.
   */
  recordLater(entries: AuditEntry[]): void {
    this.held.push(...entries);
    if (this.held.length >= MAX_HELD) void this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  /** Writes what is held (and waits for a write under way): at shutdown, and before a read wants everything. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const entries = this.held;
    this.held = [];
    this.flushing = this.flushing.then(() =>
      this.record(entries).catch(async () => {
        // One entry the store refuses must not lose the others: each is tried on its own.
        for (const entry of entries) {
          await this.record([entry]).catch((err: unknown) => this.logger.error({ err, action: entry.action }, 'could not append to the audit log'));
        }
      }),
    );
    await this.flushing;
  }

  /** `visible`: a condition on the actor, for a reader whose `data_scope` narrows what it sees. */
  async list(tenantId: string, query: AuditQuery, visible?: RawBuilder<SqlBool>): Promise<{ entries: AuditEntryOut[]; next_before: string | null }> {
    // What this process holds is written first, so a reader sees every write answered before its request.
    await this.flush();
    let select = this.db.selectFrom('audit_log').selectAll().where('tenant_id', '=', tenantId);
    if (visible) select = select.where(visible);
    if (query.before !== undefined) select = select.where('id', '<', query.before);
    if (query.actor !== undefined) select = select.where('actor', '=', query.actor);
    if (query.action !== undefined) select = select.where('action', '=', query.action);
    if (query.outcome !== undefined) select = select.where('outcome', '=', query.outcome);
    if (query.since !== undefined) select = select.where('at', '>=', new Date(query.since));
    if (query.until !== undefined) select = select.where('at', '<', new Date(query.until));
    const rows = await select.orderBy('id', 'desc').limit(query.limit + 1).execute();
    const page = rows.slice(0, query.limit);
    return { entries: page.map(present), next_before: rows.length > query.limit ? String(page.at(-1)!.id) : null };
  }

  /** Forgetting a subject: the entries they made name a tombstone instead (in the forget's transaction). */
  static async pseudonymize(trx: Kysely<RuntimeSchema>, tenantId: string, subject: string, tombstone: string): Promise<number> {
    await sql`select set_config('agentplane.audit', 'forget', true)`.execute(trx);
    const result = await trx.updateTable('audit_log').set({ actor: `forgotten:${tombstone}`, ip: null }).where('tenant_id', '=', tenantId).where('actor', '=', subject).executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** A tenant's erase: its entries go with its other rows (in the erase's transaction). */
  static async purge(trx: Kysely<RuntimeSchema>, tenantId: string): Promise<number> {
    await sql`select set_config('agentplane.audit', 'erase', true)`.execute(trx);
    return Number((await trx.deleteFrom('audit_log').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows);
  }
}

/** An entry as the insert takes it; also the values a turn's answers statement writes beside its tool results. */
export function rowOf(entry: AuditEntry) {
  return {
    tenant_id: entry.tenantId,
    actor: entry.actor,
    actor_kind: entry.actorKind,
    action: entry.action,
    resource: JSON.stringify(entry.resource ?? {}),
    outcome: entry.outcome,
    status: entry.status ?? null,
    ip: entry.ip ?? null,
    request_id: entry.requestId ?? null,
  };
}

function present(row: Selectable<AuditLogTable>): AuditEntryOut {
  return {
    id: String(row.id),
    at: row.at.toISOString(),
    actor: row.actor,
    actor_kind: row.actor_kind,
    action: row.action,
    resource: row.resource,
    outcome: row.outcome,
    status: row.status,
    ip: row.ip,
    request_id: row.request_id,
  };
}
