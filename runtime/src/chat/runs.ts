// The durable record of runs (DESIGN.md "Runs"): one row per turn, at most one running per session (the database
// says so on every replica), a lease the running process renews, and the sweep that fails runs whose process
// died. The frames a client sees live in the run log on the event port; this is what outlives them.
import { randomBytes } from 'node:crypto';
import { isUniqueViolation } from '@agentplane/lib/db/database';
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import { AppError, conflict } from '@agentplane/lib/errors';
import type { RuntimeSchema } from '../store/schema.js';
import { tenantEventPrefix } from '../tenants/keys.js';

export type RunRow = Selectable<RuntimeSchema['runs']>;
export type RunStatus = 'running' | 'completed' | 'requires_action' | 'failed' | 'cancelled';

/** `run_` and 24 random hex digits: unguessable, so an id alone reveals nothing about other runs. */
export const newRunId = () => `run_${randomBytes(12).toString('hex')}`;

/** The run log of a run, on the event port, under its tenant's prefix (so a tenant erase finds it). */
export const runLogKey = (tenantId: string, runId: string) => `${tenantEventPrefix(tenantId)}run:${runId}`;
/**
 * Cancel and steer notices reach the process holding the run (its lease owner) on that process's one channel: a
 * run costs no subscription of its own (docs/decisions/0035).
 */
export const runControlChannel = (leaseOwner: string) => `runtime:${leaseOwner}:run-control`;

export type RunControl = { type: 'cancel' | 'steer'; run_id: string };

export const turnRunning = () =>
  conflict('a turn is already running in this session; wait for it to finish or cancel it', { code: 'turn_running' });

/** Why a run stopped at the person's request (POST .../cancel, a tenant erase): it ends `cancelled`, not failed. */
export class RunCancelledError extends AppError {
  constructor() {
    super('internal', 'cancelled', { code: 'cancelled' });
    this.name = 'RunCancelledError';
  }
}

/** Why a run cut off by the end of a drain's grace period failed: retryable, and its text is kept. */
export class RunInterruptedError extends AppError {
  constructor() {
    super(
      'unavailable',
      'the process running this turn was stopped (a deploy or restart) before the turn finished; what it wrote is in the session, send the message again to continue',
      { code: 'run_interrupted' },
    );
    this.name = 'RunInterruptedError';
  }
}

/** Why a run stopped when its process found its lease gone (another replica swept it as lost and ended its log). */
export class RunLeaseLostError extends AppError {
  constructor() {
    super('internal', 'lost', { code: 'run_lost' });
    this.name = 'RunLeaseLostError';
  }
}

type Db = Kysely<RuntimeSchema> | Transaction<RuntimeSchema>;

/** How a run ended, as its row records it. */
export interface RunEnding {
  status: Exclude<RunStatus, 'running'>;
  finishReason?: string | null;
  error?: Record<string, unknown> | null;
}


export class RunStore {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    /** This life of this process, as the lease owner (a restart is a new owner). */
    readonly owner: string,
    private readonly leaseSeconds: number,
  ) {}

  /**
   * Inserts a running run. A run of the same session whose lease lapsed is failed first (its process is gone); a
   * live one makes this 409 `turn_running`.
   */
  async begin(trx: Transaction<RuntimeSchema>, run: { id: string; tenantId: string; sessionId: string; subject: string; model: string | null }): Promise<void> {
    await trx
      .updateTable('runs')
      .set({ status: 'failed', error: JSON.stringify(runLostError()), finished_at: new Date() })
      .where('session_id', '=', run.sessionId)
      .where('status', '=', 'running')
      .where('lease_expires_at', '<', new Date())
      .execute();
    try {
      await trx
        .insertInto('runs')
        .values({
          id: run.id,
          tenant_id: run.tenantId,
          session_id: run.sessionId,
          subject: run.subject,
          model: run.model,
          status: 'running',
          lease_owner: this.owner,
          lease_expires_at: this.leaseEnd(),
        })
        .execute();
    } catch (error) {
      if (isUniqueViolation(error)) throw turnRunning();
      throw error;
    }
  }

  async get(runId: string): Promise<RunRow | undefined> {
    return this.db.selectFrom('runs').selectAll().where('id', '=', runId).executeTakeFirst();
  }

  /**
   * Extends the leases of these runs, and reads what others asked of each meanwhile (a cancel or steer whose notice
   * was missed). A run missing from the answer is no longer this process's to run (finished, or swept as lost).
   */
  async renewAll(runIds: string[]): Promise<Map<string, { cancelRequested: boolean; steerWaiting: boolean }>> {
    const renewed = new Map<string, { cancelRequested: boolean; steerWaiting: boolean }>();
    // A thousand ids a statement keeps each one's parameters far below PostgreSQL's limit of 65,535.
    for (let at = 0; at < runIds.length; at += 1_000) {
      const rows = await this.db
        .updateTable('runs')
        .set({ lease_expires_at: this.leaseEnd() })
        .where('id', 'in', runIds.slice(at, at + 1_000))
        .where('status', '=', 'running')
        .where('lease_owner', '=', this.owner)
        .returning(['id', 'cancel_requested', 'steer_waiting'])
        .execute();
      for (const row of rows) renewed.set(row.id, { cancelRequested: row.cancel_requested, steerWaiting: row.steer_waiting });
    }
    return renewed;
  }

  /** The lease a run started by this process takes: its owner and when it lapses unless renewed. */
  newLease(): { leaseOwner: string; leaseExpiresAt: Date } {
    return { leaseOwner: this.owner, leaseExpiresAt: this.leaseEnd() };
  }

  /** Records how the run ended; only a running run moves (a swept run stays failed). */
  async finish(db: Db, runId: string, outcome: RunEnding): Promise<boolean> {
    const result = await db
      .updateTable('runs')
      .set({
        status: outcome.status,
        finish_reason: outcome.finishReason ?? null,
        error: outcome.error ? JSON.stringify(outcome.error) : null,
        finished_at: new Date(),
        lease_expires_at: null,
      })
      .where('id', '=', runId)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Ends a run and, in the same transaction, whatever else its end moves (`alongside`, told whether the row moved:
   * a run swept as lost meanwhile stays failed). With `unlessSteered`, a steer still waiting leaves the run running
   * and answers `steered` instead: the run row is locked first, so a concurrent steer either lands before this check
   * or finds the run finished.
   */
  async end(
    runId: string,
    ending: RunEnding,
    options: { unlessSteered?: boolean; alongside?: (trx: Transaction<RuntimeSchema>, moved: boolean) => Promise<void> } = {},
  ): Promise<'ended' | 'steered'> {
    return this.db.transaction().execute(async (trx) => {
      const run = await trx.selectFrom('runs').select('steer_waiting').where('id', '=', runId).forUpdate().executeTakeFirst();
      if (options.unlessSteered && run?.steer_waiting) return 'steered';
      const moved = await this.finish(trx, runId, ending);
      await options.alongside?.(trx, moved);
      return 'ended';
    });
  }

  /** The id of a conversation's latest run, whatever its status; undefined when it has none. */
  async latestOf(tenantId: string, sessionId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('runs')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where('session_id', '=', sessionId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.id;
  }

  /** A tenant's running runs and the processes holding them (a tenant erase cancels them first). */
  /** The tenant's running runs (of one subject's, when named). */
  async runningOf(tenantId: string, subject?: string): Promise<{ id: string; lease_owner: string | null }[]> {
    let select = this.db.selectFrom('runs').select(['id', 'lease_owner']).where('tenant_id', '=', tenantId).where('status', '=', 'running');
    if (subject !== undefined) select = select.where('subject', '=', subject);
    return select.execute();
  }

  /** Every run, in any state, that a forgotten subject's log could replay: their own turns and those in their conversations. */
  async allOf(tenantId: string, subject: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('runs')
      .select('id')
      .where('tenant_id', '=', tenantId)
      .where((eb) => eb.or([eb('subject', '=', subject), eb('session_id', 'in', eb.selectFrom('sessions').select('id').where('tenant_id', '=', tenantId).where('owner', '=', subject))]))
      .execute();
    return rows.map((row) => row.id);
  }

  async requestCancel(runId: string): Promise<void> {
    await this.db.updateTable('runs').set({ cancel_requested: true }).where('id', '=', runId).where('status', '=', 'running').execute();
  }

  /** Fails every running run whose lease lapsed and returns them, so the sweeper can end their logs. */
  async sweepLost(): Promise<RunRow[]> {
    return this.db
      .updateTable('runs')
      .set({ status: 'failed', error: JSON.stringify(runLostError()), finished_at: new Date() })
      .where('status', '=', 'running')
      .where('lease_expires_at', '<', new Date())
      .returningAll()
      .execute();
  }

  /**
   * Fails every running run this process does not hold (an earlier life's), lease or not, and returns them. Only
   * for a store no other process writes (the embedded database behind its data-dir lock).
   */
  async failAbandoned(): Promise<RunRow[]> {
    return this.db
      .updateTable('runs')
      .set({ status: 'failed', error: JSON.stringify(runLostError()), finished_at: new Date(), lease_expires_at: null })
      .where('status', '=', 'running')
      .where('lease_owner', '<>', this.owner)
      .returningAll()
      .execute();
  }

  /**
   * Queues a steer message if the run is still running; false otherwise. Marking the run's row (`steer_waiting`) is
   * what a finishing run checks in the statement that ends it, so the two cannot pass each other.
   */
  async queueSteer(tenantId: string, runId: string, message: string): Promise<boolean> {
    const { rows } = await sql<{ seq: string }>`
      with run as (update runs set steer_waiting = true where id = ${runId} and status = 'running' returning id)
      insert into run_steers (tenant_id, run_id, message) select ${tenantId}::uuid, id, ${message} from run
      returning seq`.execute(this.db);
    return rows.length > 0;
  }

  /**
   * Takes the steer messages not yet picked up, oldest first, marking them consumed. The run's row is cleared first
   * and stays locked, so a steer queued meanwhile waits, then marks it again and is taken at the next boundary.
   */
  async takeSteers(runId: string): Promise<string[]> {
    return this.db.transaction().execute(async (trx) => {
      await trx.updateTable('runs').set({ steer_waiting: false }).where('id', '=', runId).execute();
      const rows = await trx
        .updateTable('run_steers')
        .set({ consumed_at: new Date() })
        .where('run_id', '=', runId)
        .where('consumed_at', 'is', null)
        .returning(['seq', 'message'])
        .execute();
      return rows.sort((a, b) => Number(a.seq) - Number(b.seq)).map((row) => row.message);
    });
  }

  private leaseEnd(): Date {
    return new Date(Date.now() + this.leaseSeconds * 1000);
  }
}

/** What a run whose process died answers: a 500 the client may retry once, saying what happened. */
export function runLostError() {
  return {
    status: 500,
    code: 'run_lost',
    message: 'the process running this turn stopped before it finished; what it wrote is in the session, send the message again to continue',
  };
}
