// The data plane's audit log (SPEC.md `/audit`; docs/decisions/0065): every write a caller makes (its route, the ids
// it names, how it went, from where), every tool call a turn makes, every unattended start and every forget. Append-
// only in the database itself (a trigger refuses changes but a tenant's erase and the replacing of a forgotten
// subject). Read by privileged tokens, newest first.
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
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
  /** When it happened, when not now (an entry written later from the spool). */
  at?: Date;
  /** The key of a spooled entry: written twice (a replay after a crash), it is inserted once. */
  spoolKey?: string;
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

/** The spool's file of entries held now; each batch being written is renamed away from it first. */
const SPOOL_FILE = 'held.jsonl';

export class AuditLog {
  private held: AuditEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private batches = 0;
  private spoolFd: number | undefined;

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly logger: Logger,
    /** How long an answered request's entry may wait to be written with others (one statement for many requests). */
    private readonly flushMs = 200,
    /**
     * Where held entries are appended as they are recorded, so a process killed before their batch is written
     * (kill -9) leaves them for its next start (`replaySpool`). A write(2) survives the process; only the machine's
     * crash could lose it.
     */
    private readonly spoolDir?: string,
  ) {
    if (spoolDir) mkdirSync(spoolDir, { recursive: true });
  }

  /**
   * Writes what a previous process spooled and did not write (it was killed), once each, then removes the files.
   * Entries of a tenant erased since are dropped. Run at start, before anything is recorded.
   */
  static async replaySpool(db: Kysely<RuntimeSchema>, spoolDir: string, logger: Logger): Promise<number> {
    if (!existsSync(spoolDir)) return 0;
    let written = 0;
    for (const name of readdirSync(spoolDir).filter((file) => file.endsWith('.jsonl')).sort()) {
      const path = join(spoolDir, name);
      const entries: AuditEntry[] = [];
      for (const line of readFileSync(path, 'utf8').split('\n')) {
        if (line.trim() === '') continue;
        try {
          const entry = JSON.parse(line) as AuditEntry & { at: string };
          entries.push({ ...entry, at: new Date(entry.at) });
        } catch {
          // The last line of a process killed mid-append: what it held of it is not an entry.
        }
      }
      for (let i = 0; i < entries.length; i += 500) {
        const batch = entries.slice(i, i + 500);
        const tenants = new Set((await db.selectFrom('tenants').select('tenant_id').where('tenant_id', 'in', [...new Set(batch.map((entry) => entry.tenantId))]).execute()).map((row) => row.tenant_id));
        const kept = batch.filter((entry) => tenants.has(entry.tenantId));
        if (kept.length === 0) continue;
        const result = await db
          .insertInto('audit_log')
          .values(kept.map(rowOf))
          .onConflict((oc) => oc.column('spool_key').where('spool_key', 'is not', null).doNothing())
          .executeTakeFirst();
        written += Number(result.numInsertedOrUpdatedRows ?? 0);
      }
      unlinkSync(path);
    }
    if (written > 0) logger.info({ entries: written }, 'audit entries a previous process held were written');
    return written;
  }

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
   * many requests rather than one more per request. Spooled first (when a spool is set): entries held when the
   * process is killed are written by its next start. A failure to write is logged, and the batch's spool kept.
   */
  recordLater(entries: AuditEntry[]): void {
    const at = new Date();
    const keyed = entries.map((entry) => ({ ...entry, at: entry.at ?? at, spoolKey: randomUUID() }));
    // On disk before anything else: a process killed now leaves them for its next start.
    if (this.spoolDir) {
      try {
        // One write(2) per request on a descriptor kept open (a batch's rename closes it).
        this.spoolFd ??= openSync(join(this.spoolDir, SPOOL_FILE), 'a');
        writeSync(this.spoolFd, `${keyed.map((entry) => JSON.stringify(entry)).join('\n')}\n`);
      } catch (err) {
        this.logger.error({ err }, 'could not spool audit entries; they are held in memory until their batch is written');
      }
    }
    this.held.push(...keyed);
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
    // The batch's spool moves aside (entries recorded meanwhile start a new one) and goes once the batch is written.
    const batchSpool = this.spoolDir && entries.length > 0 ? join(this.spoolDir, `batch-${Date.now()}-${process.pid}-${this.batches++}.jsonl`) : undefined;
    if (batchSpool) this.closeSpool();
    if (batchSpool && existsSync(join(this.spoolDir!, SPOOL_FILE))) renameSync(join(this.spoolDir!, SPOOL_FILE), batchSpool);
    this.flushing = this.flushing.then(async () => {
      let lost = 0;
      await this.record(entries).catch(async () => {
        // One entry the store refuses must not lose the others: each is tried on its own.
        for (const entry of entries) {
          await this.record([entry]).catch((err: unknown) => {
            lost += 1;
            this.logger.error({ err, action: entry.action }, 'could not append to the audit log');
          });
        }
      });
      // Kept when some could not be written (the store was down): the next start tries them again.
      if (batchSpool && lost === 0 && existsSync(batchSpool)) unlinkSync(batchSpool);
    });
    await this.flushing;
  }

  private closeSpool(): void {
    if (this.spoolFd === undefined) return;
    closeSync(this.spoolFd);
    this.spoolFd = undefined;
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
    ...(entry.at ? { at: entry.at } : {}),
    ...(entry.spoolKey ? { spool_key: entry.spoolKey } : {}),
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
