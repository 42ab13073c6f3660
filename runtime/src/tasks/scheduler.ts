// The database-backed scheduler (DESIGN.md Scheduler; docs/decisions/0058). Every runtime process runs one, against
// the shared store; a slot fires once however many there are:
// - Due tasks are claimed under `FOR UPDATE SKIP LOCKED`, their fire rows inserted (the key (task, slot) makes a
//   second fire of one slot, by another replica or a CronJob's Job, insert nothing) and their next slot written, in
//   one transaction. Each fire names its run before the run exists, so a fire started twice starts one run.
// - A fire is started as an unattended turn of the task's owner; one claimed by a process that died before starting
//   it is taken over once its claim lapses.
// - A fire whose run has ended is settled: the task's status (a one-shot task ends with its run), last finish reason
//   and error are written from the run's row, so a run that finished anywhere, or was swept as lost, settles too.
// A recurring task whose previous fire is still running skips the slot (a CronJob's `concurrencyPolicy: Forbid`).
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import type { Logger } from '@agentplane/lib/logging';
import { newRunId } from '../chat/runs.js';
import { runOutcome, untilNoneStarting, type RunOutcome, type StartUnattended, type UnattendedStarted } from '../chat/unattended.js';
import type { RuntimeSchema } from '../store/schema.js';
import { dueFire, nextSlot, specOf } from './schedule.js';

export const DEFAULT_TICK_MS = 500;
export const DEFAULT_CATCH_UP_MS = 3_600_000;
/** How long a claimed fire is this process's to start before another may take it over. */
const CLAIM_MS = 60_000;
/** Due tasks claimed per statement, and fires started at once. */
const BATCH = 200;
const STARTING_AT_ONCE = 16;
/** How often fires others claimed and never started are looked for. */
const STRAYS_EVERY_MS = 10_000;

/** What starting a fire needs: the task's prompt and choices, and the claims it acts with. */
export interface FireToStart {
  taskId: string;
  slot: Date;
  tenantId: string;
  runId: string;
  prompt: string;
  sessionId: string | null;
  model: string | null;
  actsAs: AccessTokenGrant;
  /** Claimed from a process that died: its run may already exist. */
  takenOver?: boolean;
}


/** What a CronJob's call to fire a slot came to. */
export type SlotFire =
  | { fired: true; runId: string }
  | { fired: false; reason: 'not_found' | 'not_scheduled' | 'not_a_slot' | 'already_fired' | 'still_running'; detail?: string };

/** A due task, and the slot it fires now (null: none, its next slot written all the same). */
interface FirePlan {
  task: { id: string; tenant_id: string; prompt: string; session_id: string | null; model: string | null; acts_as: unknown };
  fire: Date | null;
  next: Date | null;
  runId: string;
}

/**
 * A task a CronJob fires is left to its Jobs until this long past its slot: the CronJob's starting deadline (60 s)
 * and a margin. A slot no Job fired by then is fired here, late rather than never; a Job arriving later still finds
 * the slot fired and fires nothing.
 */
export const CRONJOB_GRACE_SECONDS = 90;
/** The least catch-up window of a task on a CronJob: its grace and a minute. */
const CRONJOB_CATCH_UP_MS = (CRONJOB_GRACE_SECONDS + 60) * 1000;
const leftToCronJob = sql<boolean>`(not on_cronjob or next_run_at <= now() - ${`${CRONJOB_GRACE_SECONDS} seconds`}::interval)`;
/** How far ahead of the database's clock a Job's slot may be (the cluster's clock and the database's differ a little). */
const SLOT_CLOCK_SKEW_MS = 60_000;

/** A fire whose run started, and one whose outcome was just written. */
export type StartedFire = FireToStart & { sessionId: string };
export interface SettledFire {
  taskId: string;
  runId: string;
  slot: Date;
  outcome: RunOutcome;
}

/** What a fire's start and end tell the project (its events), written in the same transaction as the move. */
export interface FireEvents {
  fired(db: Kysely<RuntimeSchema>, fire: StartedFire): Promise<void>;
  stopped(db: Kysely<RuntimeSchema>, fires: SettledFire[]): Promise<void>;
}

export interface SchedulerOptions {
  db: Kysely<RuntimeSchema>;
  logger: Logger;
  /** This process's name on its claims. */
  owner: string;
  /** Starts a fire's run: an unattended turn of the task's owner. */
  start: StartUnattended;
  events?: FireEvents;
  /** Told of each fire whose run started (the runtime's metrics). */
  onFired?: () => void;
  tickMs?: number;
  catchUpMs?: number;
}

export class TaskScheduler {
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private lastStrayCheck = 0;
  private readonly tickMs: number;
  private readonly catchUpMs: number;

  constructor(private readonly options: SchedulerOptions) {
    this.tickMs = options.tickMs ?? DEFAULT_TICK_MS;
    this.catchUpMs = options.catchUpMs ?? DEFAULT_CATCH_UP_MS;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Looks again soon: a task was made or cancelled here. */
  wake(): void {
    if (this.stopped) return;
    if (this.ticking) this.again = true;
    else this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
  }

  /** One pass: claim what is due and start it, take over strays, settle what ended. Tests call it directly. */
  async tick(): Promise<void> {
    // One look decides what else the pass does: an idle project costs one statement a tick.
    const { rows } = await sql<{ due: boolean; ended: boolean }>`
      select exists (select 1 from tasks where status = 'scheduled' and next_run_at <= now() and ${leftToCronJob}) as due,
        exists (select 1 from task_fires f join runs r on r.id = f.run_id where f.state = 'started' and r.status <> 'running') as ended`.execute(this.options.db);
    const { due, ended } = rows[0]!;
    const claimed = due ? await this.claimDue() : [];
    const strays = Date.now() - this.lastStrayCheck >= STRAYS_EVERY_MS ? await this.claimStrays() : [];
    await this.startAll([...claimed, ...strays]);
    if (ended) await this.settle();
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch((err: unknown) => this.options.logger.warn({ err }, 'scheduler pass failed'))
        .finally(() => {
          this.ticking = undefined;
          if (this.stopped) return;
          const soon = this.again;
          this.again = false;
          this.schedule(soon ? 0 : this.tickMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** Due tasks: their fires inserted (once per slot), their next slot and run count written. */
  private async claimDue(): Promise<FireToStart[]> {
    return this.options.db.transaction().execute(async (trx) => {
      const due = await trx
        .selectFrom('tasks')
        .select(['id', 'tenant_id', 'prompt', 'session_id', 'model', 'acts_as', 'cron', 'timezone', 'interval_seconds', 'run_at', 'next_run_at', 'on_cronjob', sql<Date>`now()`.as('now')])
        .where('status', '=', 'scheduled')
        .where('next_run_at', '<=', sql<Date>`now()`)
        .where(leftToCronJob)
        .orderBy('next_run_at')
        .limit(BATCH)
        .forUpdate()
        .skipLocked()
        .execute();
      if (due.length === 0) return [];
      const busy = await this.busy(trx, due.map((task) => task.id));
      const plans = due.map((task) => {
        const spec = specOf(task);
        // A CronJob's slot is fired here only after its grace: late, never skipped, whatever the catch-up window.
        const { fire, next } = dueFire(spec, task.next_run_at!, task.now, task.on_cronjob ? Math.max(this.catchUpMs, CRONJOB_CATCH_UP_MS) : this.catchUpMs);
        if (task.on_cronjob && fire !== null) {
          this.options.logger.warn({ task_id: task.id, slot: fire.toISOString() }, "no Job of the task's CronJob fired this slot in time: the database scheduler fires it");
        }
        // A recurring task still running its last fire skips this slot rather than run twice at once.
        const firing = fire !== null && !(busy.has(task.id) && spec.kind !== 'once') ? fire : null;
        return { task, fire: firing, next, runId: newRunId() };
      });
      return this.claim(trx, plans);
    });
  }

  /**
   * A CronJob's Job asks to fire one slot of its task (docs/decisions/0066): claimed as a due pass claims, so a slot
   * fires once whoever asks, and however often. A slot already fired or skipped (by this scheduler's fallback, or an
   * earlier Job) fires nothing; nor does a slot while the task's previous fire still runs, as under `Forbid`.
   */
  async fireSlot(taskId: string, slot: Date): Promise<SlotFire> {
    const outcome = await this.options.db.transaction().execute(async (trx): Promise<SlotFire | FireToStart> => {
      const task = await trx
        .selectFrom('tasks')
        .select(['id', 'tenant_id', 'prompt', 'session_id', 'model', 'acts_as', 'cron', 'timezone', 'interval_seconds', 'run_at', 'next_run_at', 'status', sql<Date>`now()`.as('now')])
        .where('id', '=', taskId)
        .forUpdate()
        .executeTakeFirst();
      if (!task) return { fired: false, reason: 'not_found' };
      if (task.status !== 'scheduled' || task.next_run_at === null) return { fired: false, reason: 'not_scheduled', detail: `the task is ${task.status}` };
      const spec = specOf(task);
      if (spec.kind !== 'cron' || nextSlot(spec, new Date(slot.getTime() - 1))?.getTime() !== slot.getTime()) {
        return { fired: false, reason: 'not_a_slot', detail: `${slot.toISOString()} is not a slot of this task's schedule` };
      }
      if (slot.getTime() > task.now.getTime() + SLOT_CLOCK_SKEW_MS) return { fired: false, reason: 'not_a_slot', detail: `${slot.toISOString()} has not come yet` };
      if (slot.getTime() < task.next_run_at.getTime()) return { fired: false, reason: 'already_fired', detail: 'this slot was fired or skipped already' };
      const next = nextSlot(spec, new Date(Math.max(slot.getTime(), task.now.getTime())));
      const running = (await this.busy(trx, [task.id])).has(task.id);
      const [fire] = await this.claim(trx, [{ task, fire: running ? null : slot, next, runId: newRunId() }]);
      if (running) return { fired: false, reason: 'still_running', detail: "the task's previous fire is still running: this slot is skipped" };
      return fire ?? { fired: false, reason: 'already_fired', detail: 'this slot was fired already' };
    });
    if ('fired' in outcome) return outcome;
    await this.startOne(outcome);
    return { fired: true, runId: outcome.runId };
  }

  /** Which of these tasks have a fire not settled yet. */
  private async busy(trx: Kysely<RuntimeSchema>, ids: string[]): Promise<Set<string>> {
    const fires = await trx.selectFrom('task_fires').select('task_id').where('task_id', 'in', ids).where('state', '<>', 'settled').execute();
    return new Set(fires.map((fire) => fire.task_id));
  }

  /**
   * Claims the planned fires, in the caller's transaction: each fire row inserted once per (task, slot), and every
   * planned task's next slot, status and run count written. Answers the fires this claim inserted.
   */
  private async claim(trx: Kysely<RuntimeSchema>, plans: FirePlan[]): Promise<FireToStart[]> {
    const { owner } = this.options;
    const firing = plans.filter((plan) => plan.fire !== null);
    const inserted = new Set<string>();
    if (firing.length > 0) {
      const rows = await trx
        .insertInto('task_fires')
        .values(
          firing.map((plan) => ({
            task_id: plan.task.id,
            slot: plan.fire!,
            tenant_id: plan.task.tenant_id,
            run_id: plan.runId,
            state: 'pending',
            claimed_by: owner,
            claim_expires_at: new Date(Date.now() + CLAIM_MS),
          })),
        )
        .onConflict((oc) => oc.columns(['task_id', 'slot']).doNothing())
        .returning('task_id')
        .execute();
      for (const row of rows) inserted.add(row.task_id);
    }
    const values = plans.map((plan) => {
      const fired = inserted.has(plan.task.id);
      // No slot after this one: the task ends with this fire's run (`running` until it settles), or here.
      const status = plan.next !== null ? 'scheduled' : fired ? 'running' : 'completed';
      return sql`(${plan.task.id}::uuid, ${plan.next}::timestamptz, ${status}::text, ${fired}::boolean, ${fired ? plan.runId : null}::text)`;
    });
    await sql`
      update tasks as t set next_run_at = v.next, status = v.status, run_count = t.run_count + v.fired::int,
        last_run_at = case when v.fired then now() else t.last_run_at end, last_run_id = coalesce(v.run_id, t.last_run_id), updated_at = now()
      from (values ${sql.join(values, sql`, `)}) as v (id, next, status, fired, run_id)
      where t.id = v.id`.execute(trx);
    return plans
      .filter((plan) => inserted.has(plan.task.id))
      .map((plan) => ({
        taskId: plan.task.id,
        slot: plan.fire!,
        tenantId: plan.task.tenant_id,
        runId: plan.runId,
        prompt: plan.task.prompt,
        sessionId: plan.task.session_id,
        model: plan.task.model,
        actsAs: plan.task.acts_as as AccessTokenGrant,
      }));
  }

  /** Fires another process claimed and never started (it died in between): taken over once their claim lapsed. */
  private async claimStrays(): Promise<FireToStart[]> {
    this.lastStrayCheck = Date.now();
    const { rows } = await sql<{
      task_id: string;
      slot: Date;
      tenant_id: string;
      run_id: string;
      prompt: string;
      session_id: string | null;
      model: string | null;
      acts_as: AccessTokenGrant;
    }>`
      with stray as (
        select task_id, slot from task_fires
        where state in ('pending', 'starting') and claim_expires_at < now()
        limit ${BATCH}
        for update skip locked
      ), taken as (
        update task_fires f set claimed_by = ${this.options.owner}, claim_expires_at = now() + ${`${CLAIM_MS} milliseconds`}::interval
        from stray where f.task_id = stray.task_id and f.slot = stray.slot
        returning f.task_id, f.slot, f.tenant_id, f.run_id
      )
      select taken.*, t.prompt, t.session_id, t.model, t.acts_as from taken join tasks t on t.id = taken.task_id`.execute(this.options.db);
    return rows.map((row) => ({
      taskId: row.task_id,
      slot: row.slot,
      tenantId: row.tenant_id,
      runId: row.run_id,
      prompt: row.prompt,
      sessionId: row.session_id,
      model: row.model,
      actsAs: row.acts_as,
      takenOver: true,
    }));
  }

  private async startAll(fires: FireToStart[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < fires.length) {
        const fire = fires[next++]!;
        await this.startOne(fire).catch((err: unknown) => this.options.logger.warn({ err, task_id: fire.taskId, run_id: fire.runId }, 'could not start a task fire'));
      }
    };
    await Promise.all(Array.from({ length: Math.min(STARTING_AT_ONCE, fires.length) }, worker));
  }

  private async startOne(fire: FireToStart): Promise<void> {
    const { db } = this.options;
    // Marked as starting first: a tenant erase settles pending fires and waits for starting ones to have their run
    // (which its next step cancels), so no fire starts a run behind its back. A fire settled meanwhile is dropped.
    // A task cancelled since the claim starts nothing; the claim is renewed for the start's own time.
    const ours = await db
      .updateTable('task_fires')
      .set({ state: 'starting', claim_expires_at: sql<Date>`now() + ${`${CLAIM_MS} milliseconds`}::interval` })
      .where('task_id', '=', fire.taskId)
      .where('slot', '=', fire.slot)
      .where('state', 'in', ['pending', 'starting'])
      .where('claimed_by', '=', this.options.owner)
      .where(({ exists, selectFrom }) => exists(selectFrom('tasks').select('tasks.id').where('tasks.id', '=', fire.taskId).where('tasks.status', 'in', ['scheduled', 'running'])))
      .executeTakeFirst();
    if (Number(ours.numUpdatedRows) === 0) return;
    // Taken over from a process that died: its run may exist already, and is not started again.
    const existing = fire.takenOver ? await db.selectFrom('runs').select('session_id').where('id', '=', fire.runId).executeTakeFirst() : undefined;
    const started: UnattendedStarted = existing
      ? { started: true, sessionId: existing.session_id }
      : await this.options.start({ tenantId: fire.tenantId, actsAs: fire.actsAs, runId: fire.runId, message: fire.prompt, sessionId: fire.sessionId, model: fire.model, needs: 'tasks:write' }).catch((error: unknown) => ({ started: false, error: error instanceof Error ? error.message : String(error) }));
    if (started.started) {
      // The fire's move and its `scheduled_task.fired` event commit together.
      await db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ moved: boolean }>`
          with fire as (
            update task_fires set state = 'started', session_id = ${started.sessionId}, started_at = now(), claim_expires_at = null
            where task_id = ${fire.taskId} and slot = ${fire.slot} and state = 'starting'
            returning task_id
          ), task as (
            update tasks set last_session_id = ${started.sessionId} where id in (select task_id from fire) and last_run_id = ${fire.runId}
          )
          select exists (select 1 from fire) as moved`.execute(trx);
        if (!rows[0]?.moved) return;
        this.options.onFired?.();
        await this.options.events?.fired(trx, { ...fire, sessionId: started.sessionId });
      });
      return;
    }
    // Refused before a run existed (no model, a limit, the task's conversation busy): settled at once, as failed.
    await this.record([{ taskId: fire.taskId, slot: fire.slot, runId: fire.runId, outcome: { status: 'failed', finishReason: null, error: started.error } }]);
  }

  /** Fires whose run has ended: their outcome written to the fire and its task. */
  private async settle(): Promise<void> {
    const ended = await this.options.db
      .selectFrom('task_fires')
      .innerJoin('runs', 'runs.id', 'task_fires.run_id')
      .select(['task_fires.task_id', 'task_fires.slot', 'task_fires.run_id', 'runs.status', 'runs.finish_reason', 'runs.error'])
      .where('task_fires.state', '=', 'started')
      .where('runs.status', '<>', 'running')
      .limit(BATCH)
      .execute();
    if (ended.length === 0) return;
    await this.record(ended.map((fire) => ({ taskId: fire.task_id, slot: fire.slot, runId: fire.run_id, outcome: runOutcome(fire) })));
  }

  /**
   * Writes fires' outcomes, each once (a fire already settled, by another replica meanwhile, is left alone): the
   * fire settled, and its task's last finish reason and errors; a one-shot task (or one whose slots ran out) ends
   * with its run's status; a cancelled task stays cancelled.
   */
  private async record(fires: { taskId: string; slot: Date; runId: string; outcome: RunOutcome }[]): Promise<void> {
    const values = fires.map(
      ({ taskId, slot, runId, outcome }) =>
        sql`(${taskId}::uuid, ${slot}::timestamptz, ${runId}::text, ${outcome.status}::text, ${outcome.finishReason}::text, ${outcome.error}::text, ${JSON.stringify(outcome)}::jsonb)`,
    );
    // The outcomes and their `turn.stopped` events commit together.
    await this.options.db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ task_id: string; run_id: string; slot: Date }>`
        with v (task_id, slot, run_id, status, finish_reason, error, outcome) as (values ${sql.join(values, sql`, `)}),
        settled as (
          update task_fires f set state = 'settled', outcome = v.outcome, claim_expires_at = null
          from v where f.task_id = v.task_id and f.slot = v.slot and f.state <> 'settled'
          returning f.task_id, f.slot, v.run_id, v.status, v.finish_reason, v.error
        ), task as (
          update tasks t set
            status = case when t.status = 'running' then settled.status else t.status end,
            last_error = case when t.status = 'running' and settled.status = 'failed' then settled.error else null end,
            last_finish_reason = case when t.status = 'running' or settled.status <> 'failed' then settled.finish_reason else 'error' end,
            last_run_error = settled.error,
            updated_at = now()
          from settled where t.id = settled.task_id and t.last_run_id = settled.run_id
        )
        select task_id, run_id, slot from settled`.execute(trx);
      if (rows.length === 0 || !this.options.events) return;
      const outcomes = new Map(fires.map((fire) => [fire.runId, fire.outcome]));
      await this.options.events.stopped(
        trx,
        rows.map((row) => ({ taskId: row.task_id, runId: row.run_id, slot: row.slot, outcome: outcomes.get(row.run_id)! })),
      );
    });
  }
}

/**
 * Stops a tenant's schedules (the erase's first step, before its runs are cancelled): its tasks cancelled, its fires
 * not started yet settled, and those being started waited for, so each has its run by the time the runs are
 * cancelled. Answers how many tasks it stopped; throws when a start does not finish in time (the erase stops before
 * any row goes, and a retry looks again).
 */
export async function stopSchedules(db: Kysely<RuntimeSchema>, tenantId: string, options: { subject?: string; waitMs?: number } = {}): Promise<number> {
  const ofSubject = options.subject === undefined ? [] : await db.selectFrom('tasks').select('id').where('tenant_id', '=', tenantId).where('owner', '=', options.subject).execute();
  const taskIds = ofSubject.map((task) => task.id);
  if (options.subject !== undefined && taskIds.length === 0) return 0;
  let tasks = db.updateTable('tasks').set({ status: 'cancelled', next_run_at: null, updated_at: new Date() }).where('tenant_id', '=', tenantId).where('status', 'in', ['scheduled', 'running']);
  if (options.subject !== undefined) tasks = tasks.where('id', 'in', taskIds);
  const stopped = await tasks.executeTakeFirst();
  let pending = db
    .updateTable('task_fires')
    .set({ state: 'settled', outcome: JSON.stringify({ status: 'failed', finishReason: null, error: options.subject === undefined ? 'the project was erased' : 'its owner was forgotten' }), claim_expires_at: null })
    .where('tenant_id', '=', tenantId)
    .where('state', '=', 'pending');
  if (options.subject !== undefined) pending = pending.where('task_id', 'in', taskIds);
  await pending.execute();
  await untilNoneStarting(
    async () => {
      let query = db.selectFrom('task_fires').select('run_id').where('tenant_id', '=', tenantId).where('state', '=', 'starting');
      if (options.subject !== undefined) query = query.where('task_id', 'in', taskIds);
      return (await query.executeTakeFirst())?.run_id;
    },
    'a fire of a scheduled task',
    options.waitMs,
  );
  return Number(stopped.numUpdatedRows);
}

/** A claim owner's name for a process that has no run store at hand (tests). */
export const newSchedulerOwner = () => `scheduler-${randomUUID()}`;
