// What memory brings to the composition root: its part of the tenant erase (memory items, vectors included, and
// wiki pages are rows; nothing of theirs lives outside the database).
import type { FeatureHost } from '../features.js';

export function registerMemory(host: FeatureHost): void {
  // A forgotten subject's memory goes; the wiki pages they last wrote are the project's and stay, no longer naming them.
  host.forgetRows({
    table: 'memory_items',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('memory_items').where('tenant_id', '=', tenantId).where('subject', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  host.forgetRows({
    table: 'wiki_pages',
    purge: async (trx, tenantId, subject) =>
      Number((await trx.updateTable('wiki_pages').set({ author: '(forgotten)' }).where('tenant_id', '=', tenantId).where('author', '=', subject).executeTakeFirst()).numUpdatedRows),
  });
  for (const table of ['memory_items', 'wiki_pages'] as const) {
    host.eraseRows({
      table,
      purge: async (trx, tenantId) => Number((await trx.deleteFrom(table).where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
    });
  }
}
