// What memory brings to the composition root: its part of the tenant erase and of forgetting a subject (memory
// items, vectors included, and wiki pages are rows; nothing of theirs lives outside the database).
import type { FeatureHost } from '../features.js';

export function registerMemory(host: FeatureHost): void {
  // A forgotten subject's memory goes, and so does every wiki page they last wrote or that is kept for their path
  // alone (docs/decisions/0074): a page's text is what their turns wrote and its scope can be their path, so a page
  // kept with its author blanked would still name them and repeat their words.
  host.forgetRows({
    table: 'memory_items',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('memory_items').where('tenant_id', '=', tenantId).where('subject', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  host.forgetRows({
    table: 'wiki_pages',
    purge: async (trx, tenantId, subject) =>
      Number(
        (
          await trx
            .deleteFrom('wiki_pages')
            .where('tenant_id', '=', tenantId)
            .where((eb) => eb.or([eb('author', '=', subject), eb('scope', '=', subject)]))
            .executeTakeFirst()
        ).numDeletedRows,
      ),
  });
  for (const table of ['memory_items', 'wiki_pages'] as const) {
    host.eraseRows({
      table,
      purge: async (trx, tenantId) => Number((await trx.deleteFrom(table).where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
    });
  }
}
