// What a task's fires tell the project (SPEC.md Emission ties; docs/decisions/0059): `scheduled_task.fired` when a
// fire's run starts, `turn.stopped` when it stops. Each goes to the project's webhook URL and to the task's callback
// URL, written to the outbox in the transaction that moves the fire, so neither is lost to a crash between the two.
import type { Kysely } from 'kysely';
import type { EventOutbox, NewEvent } from '../deliveries/outbox.js';
import { eventTargets, stoppedRunData } from '../deliveries/turn-stopped.js';
import { AuditLog } from '../governance/audit.js';
import type { RuntimeSchema } from '../store/schema.js';
import type { FireEvents, SettledFire, StartedFire } from './scheduler.js';

export class TaskEvents implements FireEvents {
  constructor(private readonly outbox: EventOutbox) {}

  async fired(db: Kysely<RuntimeSchema>, fire: StartedFire): Promise<void> {
    const task = await db.selectFrom('tasks').select(['name', 'callback_url', 'owner']).where('id', '=', fire.taskId).executeTakeFirst();
    if (!task) return;
    // The unattended start is in the audit log, committed with the fire.
    await AuditLog.append(db, [
      {
        tenantId: fire.tenantId,
        actor: task.owner,
        actorKind: 'unattended',
        action: 'task.fire',
        resource: { task_id: fire.taskId, slot: fire.slot.toISOString(), run_id: fire.runId, session_id: fire.sessionId },
        outcome: 'ok',
      },
    ]);
    await this.outbox.enqueue(
      [
        {
          tenantId: fire.tenantId,
          type: 'scheduled_task.fired',
          data: { task_id: fire.taskId, task_name: task.name, slot: fire.slot.toISOString(), run_id: fire.runId, session_id: fire.sessionId, subject: task.owner },
          targets: await eventTargets(db, fire.tenantId, task.callback_url),
        },
      ],
      db,
    );
  }

  async stopped(db: Kysely<RuntimeSchema>, fires: SettledFire[]): Promise<void> {
    const events: NewEvent[] = [];
    for (const fire of fires) {
      const task = await db.selectFrom('tasks').select(['tenant_id', 'name', 'callback_url', 'owner']).where('id', '=', fire.taskId).executeTakeFirst();
      if (!task) continue;
      events.push({
        tenantId: task.tenant_id,
        type: 'turn.stopped',
        data: {
          ...(await stoppedRunData(db, fire.runId, fire.outcome)),
          subject: task.owner,
          origin: { kind: 'task', task_id: fire.taskId, task_name: task.name, slot: fire.slot.toISOString() },
        },
        targets: await eventTargets(db, task.tenant_id, task.callback_url),
      });
    }
    await this.outbox.enqueue(events, db);
  }
}
