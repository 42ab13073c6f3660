// What a tenant's runtime can tell its project's admins about how its turns and unattended work are going (SPEC.md
// Turn health, Readiness report): the turns of the last 24 hours and the streak of failures, the tasks whose last fire
// waits for a person, and the facts readiness steps depend on. Read through the admin surface by the control plane.
import { sql, type Kysely } from 'kysely';
import type { RuntimeSchema } from '../store/schema.js';

export const TURN_HEALTH_WINDOW_HOURS = 24;
/** How far back the streak of failed turns is counted. */
const STREAK_LOOKBACK = 200;

export interface TurnHealth {
  window_hours: number;
  total: number;
  errored: number;
  /** Failed turns counted back from the latest that ended; a success resets it. */
  consecutive_errors: number;
  last_error: { run_id: string; at: string; code: string | null; message: string } | null;
  last_success_at: string | null;
}

export interface WaitingTask {
  task_id: string;
  name: string;
  stopped_at: string;
  session_id: string | null;
  run_id: string | null;
}

export interface ReadinessFacts {
  turns: TurnHealth;
  tasks_waiting: WaitingTask[];
  /** Documents the tenant holds (an embedding model matters once there are some). */
  documents: number;
  /** Unattended work that sends events: active tasks and triggers. */
  active_tasks: number;
  triggers: number;
}

export class TenantActivity {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  async turnHealth(tenantId: string): Promise<TurnHealth> {
    const { rows: counts } = await sql<{ total: number; errored: number; last_success_at: Date | null }>`
      select count(*)::int as total, (count(*) filter (where status = 'failed'))::int as errored,
        (select max(finished_at) from runs where tenant_id = ${tenantId} and status = 'completed') as last_success_at
      from runs where tenant_id = ${tenantId} and created_at > now() - ${`${TURN_HEALTH_WINDOW_HOURS} hours`}::interval`.execute(this.db);
    const recent = await this.db
      .selectFrom('runs')
      .select(['id', 'status', 'error', 'finished_at'])
      .where('tenant_id', '=', tenantId)
      .where('status', '<>', 'running')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(STREAK_LOOKBACK)
      .execute();
    let streak = 0;
    while (streak < recent.length && recent[streak]!.status === 'failed') streak += 1;
    const lastFailed = recent.find((run) => run.status === 'failed');
    const lastError =
      lastFailed ??
      (await this.db.selectFrom('runs').select(['id', 'status', 'error', 'finished_at']).where('tenant_id', '=', tenantId).where('status', '=', 'failed').orderBy('created_at', 'desc').limit(1).executeTakeFirst());
    const row = counts[0]!;
    return {
      window_hours: TURN_HEALTH_WINDOW_HOURS,
      total: row.total,
      errored: row.errored,
      consecutive_errors: streak,
      last_error: lastError
        ? {
            run_id: lastError.id,
            at: (lastError.finished_at ?? new Date()).toISOString(),
            code: typeof lastError.error?.code === 'string' ? lastError.error.code : null,
            message: typeof lastError.error?.message === 'string' ? lastError.error.message : 'the run failed',
          }
        : null,
      last_success_at: row.last_success_at ? new Date(row.last_success_at).toISOString() : null,
    };
  }

  /** Tasks whose last fire ended `needs_input`: which, when it stopped, and the conversation holding the question. */
  async tasksWaiting(tenantId: string): Promise<WaitingTask[]> {
    const rows = await this.db
      .selectFrom('tasks')
      .leftJoin('runs', 'runs.id', 'tasks.last_run_id')
      .select(['tasks.id', 'tasks.name', 'tasks.last_session_id', 'tasks.last_run_id', 'tasks.updated_at', 'runs.finished_at'])
      .where('tasks.tenant_id', '=', tenantId)
      .where('tasks.last_finish_reason', '=', 'needs_input')
      .where('tasks.status', '<>', 'cancelled')
      .orderBy('tasks.updated_at', 'desc')
      .limit(50)
      .execute();
    return rows.map((row) => ({
      task_id: row.id,
      name: row.name,
      stopped_at: (row.finished_at ?? row.updated_at).toISOString(),
      session_id: row.last_session_id,
      run_id: row.last_run_id,
    }));
  }

  async readinessFacts(tenantId: string): Promise<ReadinessFacts> {
    const [turns, waiting, { rows }] = await Promise.all([
      this.turnHealth(tenantId),
      this.tasksWaiting(tenantId),
      sql<{ documents: number; active_tasks: number; triggers: number }>`
        select (select count(*)::int from documents where tenant_id = ${tenantId}) as documents,
          (select count(*)::int from tasks where tenant_id = ${tenantId} and status in ('scheduled', 'running')) as active_tasks,
          (select count(*)::int from triggers where tenant_id = ${tenantId}) as triggers`.execute(this.db),
    ]);
    return { turns, tasks_waiting: waiting, ...rows[0]! };
  }
}
