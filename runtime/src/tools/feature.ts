// What server-side tools bring to the composition root: their delivery records in the tenant erase, and the hourly
// pruning of records past their retention.
import type { FeatureHost } from '../features.js';
import type { ToolDeliveries } from './deliveries.js';

const PRUNE_EVERY_MS = 60 * 60 * 1000;

export function registerTools(host: FeatureHost, deliveries: ToolDeliveries): void {
  host.eraseRows({
    table: 'tool_deliveries',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('tool_deliveries').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
  host.every('pruning webhook tool deliveries', PRUNE_EVERY_MS, () => deliveries.prune());
  host.forgetRows({
    table: 'tool_deliveries',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('tool_deliveries').where('tenant_id', '=', tenantId).where('subject', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  host.forgetRows({
    table: 'user_mcp_servers',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('user_mcp_servers').where('tenant_id', '=', tenantId).where('owner', '=', subject).executeTakeFirst()).numDeletedRows),
  });
}
