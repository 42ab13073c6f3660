// What a task's fires tell the project (SPEC.md Emission ties; docs/decisions/0059): `scheduled_task.fired` when a
// fire's run starts, `turn.stopped` when it stops (a pause included, with what it waits for, so the receiver can send
// `approval_decisions` back). Each goes to the project's webhook URL and to the task's callback URL, written to the
// outbox in the transaction that moves the fire, so neither is lost to a crash between the two.
import { sql, type Kysely } from 'kysely';
import type { EventOutbox, NewEvent } from '../deliveries/outbox.js';
import type { RuntimeSchema, SessionPending } from '../store/schema.js';
import type { FireEvents, SettledFire, StartedFire } from './scheduler.js';

/** How much of the run's last answer a `turn.stopped` event carries. */
export const EVENT_CONTENT_CHARS = 20_000;

export class TaskEvents implements FireEvents {
  constructor(private readonly outbox: EventOutbox) {}

  async fired(db: Kysely<RuntimeSchema>, fire: StartedFire): Promise<void> {
    const task = await db.selectFrom('tasks').select(['name', 'callback_url', 'owner']).where('id', '=', fire.taskId).executeTakeFirst();
    if (!task) return;
    const targets = await targetsOf(db, fire.tenantId, task.callback_url);
    await this.outbox.enqueue(
      [
        {
          tenantId: fire.tenantId,
          type: 'scheduled_task.fired',
          data: { task_id: fire.taskId, task_name: task.name, slot: fire.slot.toISOString(), run_id: fire.runId, session_id: fire.sessionId, subject: task.owner },
          targets,
        },
      ],
      db,
    );
  }

  async stopped(db: Kysely<RuntimeSchema>, fires: SettledFire[]): Promise<void> {
    const events: NewEvent[] = [];
    for (const fire of fires) {
      const { rows } = await sql<{
        tenant_id: string;
        name: string;
        callback_url: string | null;
        owner: string;
        session_id: string | null;
        pending: SessionPending | null;
        content: string | null;
      }>`
        select t.tenant_id, t.name, t.callback_url, t.owner, r.session_id, s.pending,
          (select m.content from messages m where m.run_id = ${fire.runId} and m.role = 'assistant' order by m.seq desc limit 1) as content
        from tasks t
        left join runs r on r.id = ${fire.runId}
        left join sessions s on s.id = r.session_id
        where t.id = ${fire.taskId}`.execute(db);
      const task = rows[0];
      if (!task) continue;
      const { outcome } = fire;
      const pending = task.pending?.run_id === fire.runId ? task.pending : null;
      events.push({
        tenantId: task.tenant_id,
        type: 'turn.stopped',
        data: {
          run_id: fire.runId,
          session_id: task.session_id,
          subject: task.owner,
          origin: { kind: 'task', task_id: fire.taskId, task_name: task.name, slot: fire.slot.toISOString() },
          status: outcome.status,
          finish_reason: outcome.finishReason ?? (outcome.status === 'failed' ? 'error' : null),
          error: outcome.error,
          content: (task.content ?? '').slice(0, EVENT_CONTENT_CHARS),
          requires_action: pending !== null,
          approvals: pending?.approvals.map(({ kind: _kind, ...approval }) => approval) ?? [],
          questions: pending?.questions ?? [],
        },
        targets: await targetsOf(db, task.tenant_id, task.callback_url),
      });
    }
    await this.outbox.enqueue(events, db);
  }
}

/** The project's webhook URL (its pushed configuration's, read on `db` so a transaction sees its own) and a callback. */
async function targetsOf(db: Kysely<RuntimeSchema>, tenantId: string, callbackUrl: string | null): Promise<NewEvent['targets']> {
  const { rows } = await sql<{ url: string | null }>`select document -> 'webhook' ->> 'url' as url from tenant_configurations where tenant_id = ${tenantId}`.execute(db);
  const project = rows[0]?.url ?? null;
  return [...(project ? [{ target: 'project' as const, url: project }] : []), ...(callbackUrl ? [{ target: 'callback' as const, url: callbackUrl }] : [])];
}
