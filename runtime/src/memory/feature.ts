// What memory brings to the composition root: its part of the tenant erase (memory items, vectors included, and
// wiki pages are rows; nothing of theirs lives outside the database).
import type { FeatureHost } from '../features.js';

export function registerMemory(host: FeatureHost): void {
  for (const table of ['memory_items', 'wiki_pages'] as const) {
    host.eraseRows({
      table,
      purge: async (trx, tenantId) => Number((await trx.deleteFrom(table).where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
    });
  }
}
