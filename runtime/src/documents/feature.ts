// What documents bring to the composition root: the sweep of abandoned uploads, and their part of the tenant erase
// (their rows; their bytes are under the tenant's blob prefix, which the blob store's erase step removes).
import type { FeatureHost } from '../features.js';
import type { DocumentService } from './service.js';

/** How often abandoned uploads are looked for; an upload's deadline is hours, so minutes late is no matter. */
const SWEEP_INTERVAL_MS = 15 * 60 * 1000;

export function registerDocuments(host: FeatureHost, documents: DocumentService): void {
  host.every('document upload sweep', SWEEP_INTERVAL_MS, () => documents.sweepAbandoned(), { now: true });
  host.eraseRows({
    table: 'documents',
    purge: async (trx, tenantId) => Number((await trx.deleteFrom('documents').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
  });
}
