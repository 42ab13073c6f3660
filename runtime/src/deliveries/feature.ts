// What event deliveries bring to the composition root: the outbox worked by every process from start to shutdown,
// its rows in the tenant erase, and the hourly pruning of delivered and dead rows past their retention.
import { sql } from 'kysely';
import type { FeatureHost } from '../features.js';
import type { EventOutbox } from './outbox.js';

const PRUNE_EVERY_MS = 60 * 60 * 1000;

export function registerDeliveries(host: FeatureHost, outbox: EventOutbox): void {
  host.eraseRows({
    table: 'event_deliveries',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('event_deliveries').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
  host.every('pruning event deliveries', PRUNE_EVERY_MS, () => outbox.prune());
  // Events about a forgotten subject (their answers are in them) go with the rest of their data, sent or not.
  host.forgetRows({
    table: 'event_deliveries',
    purge: async (trx, tenantId, subject) =>
      Number((await trx.deleteFrom('event_deliveries').where('tenant_id', '=', tenantId).where(sql<boolean>`payload -> 'data' ->> 'subject' = ${subject}`).executeTakeFirst()).numDeletedRows),
  });
  outbox.start();
  host.onShutdown(() => outbox.stop());
}
