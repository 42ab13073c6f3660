// What webhook triggers bring to the composition root: in the tenant erase, their events not yet started are stopped
// before the runs are cancelled (registered ahead of the chat feature), then their rows purged; the pass that starts
// others' strays and settles ended runs, stopped at shutdown; the hourly pruning of events past the 24-hour window.
import type { Kysely } from 'kysely';
import type { FeatureHost } from '../features.js';
import type { RuntimeSchema } from '../store/schema.js';
import { stopTriggerEvents, type TriggerService } from './service.js';

const PRUNE_EVERY_MS = 60 * 60 * 1000;

export function registerTriggers(host: FeatureHost, db: Kysely<RuntimeSchema>, triggers: TriggerService): void {
  host.eraseStep({ name: 'trigger events', phase: 'stop_work', run: async (tenantId) => ({ items: await stopTriggerEvents(db, tenantId) }) });
  host.eraseRows({
    table: 'trigger_events',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('trigger_events').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
  host.eraseRows({
    table: 'triggers',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('triggers').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
  host.every('pruning trigger events', PRUNE_EVERY_MS, () => triggers.prune());
  host.forgetStep({ name: 'trigger events', run: async (tenantId, subject) => ({ items: await stopTriggerEvents(db, tenantId, { subject }) }) });
  host.forgetRows({
    table: 'triggers',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('triggers').where('tenant_id', '=', tenantId).where('owner', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  host.onShutdown(() => triggers.stop());
}
