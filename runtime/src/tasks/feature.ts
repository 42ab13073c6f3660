// What scheduled tasks bring to the composition root: the tenant erase stops a tenant's schedules first, before its
// runs are cancelled and any row goes (DESIGN.md flow 5): its tasks cancelled, and on Kubernetes their CronJobs
// deleted; then its fires and tasks are purged. Forgetting a subject stops theirs the same way. The scheduler stops
// claiming when the process drains (another replica, or this one's successor, takes the slots) and at shutdown.
// Registered ahead of the chat feature, whose erase step cancels the runs.
import type { Kysely } from 'kysely';
import type { FeatureHost } from '../features.js';
import type { RuntimeSchema } from '../store/schema.js';
import type { TaskCronJobs } from './cronjobs.js';
import { stopSchedules, type TaskScheduler } from './scheduler.js';

export function registerTasks(host: FeatureHost, db: Kysely<RuntimeSchema>, scheduler: TaskScheduler, drainSignal: AbortSignal, cronJobs?: TaskCronJobs): void {
  host.eraseStep({
    name: 'schedules',
    phase: 'stop_work',
    run: async (tenantId) => {
      const items = await stopSchedules(db, tenantId);
      // Cancelled first, so a Job that starts meanwhile fires nothing; a CronJob left by a failure here fails the
      // erase, which a retry runs again.
      await cronJobs?.removeTenant(tenantId);
      return { items };
    },
  });
  host.eraseRows({
    table: 'task_fires',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('task_fires').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
  host.eraseRows({
    table: 'tasks',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('tasks').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
  host.forgetStep({
    name: 'schedules',
    run: async (tenantId, subject) => {
      const items = await stopSchedules(db, tenantId, { subject });
      if (cronJobs) {
        const theirs = await db.selectFrom('tasks').select('id').where('tenant_id', '=', tenantId).where('owner', '=', subject).where('on_cronjob', '=', true).execute();
        await cronJobs.remove(theirs.map((task) => task.id));
      }
      return { items };
    },
  });
  host.forgetRows({
    table: 'tasks',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('tasks').where('tenant_id', '=', tenantId).where('owner', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  drainSignal.addEventListener('abort', () => void scheduler.stop(), { once: true });
  host.onShutdown(() => scheduler.stop());
  if (cronJobs) host.onShutdown(() => cronJobs.stop());
}
