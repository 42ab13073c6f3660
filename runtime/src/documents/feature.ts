// What documents bring to the composition root: the ingest worker (started here, stopped at shutdown before the
// stores close), the sweep of abandoned uploads, and their part of the tenant erase (their rows, children first;
// their bytes are under the tenant's blob prefix, which the blob store's erase step removes).
import type { FeatureHost } from '../features.js';
import type { IngestWorker } from './ingest/worker.js';
import type { DocumentService } from './service.js';
import type { VectorIndex } from './vectors/port.js';

/** How often abandoned uploads are looked for; an upload's deadline is hours, so minutes late is no matter. */
const SWEEP_INTERVAL_MS = 15 * 60 * 1000;

export function registerDocuments(host: FeatureHost, documents: DocumentService, worker: IngestWorker, vectors: VectorIndex): void {
  worker.start();
  host.onShutdown(() => worker.stop());
  host.every('document upload sweep', SWEEP_INTERVAL_MS, () => documents.sweepAbandoned(), { now: true });
  // Vectors kept outside the database (Pinecone): best effort after the rows, reported, retried by the next erase.
  if (vectors.name !== 'pgvector') {
    host.eraseStep({
      name: 'vectors',
      phase: 'outside_database',
      run: async (tenantId) => {
        await vectors.removeTenant(tenantId);
        return {};
      },
    });
  }
  for (const table of ['ingest_jobs', 'embedding_jobs', 'embedding_spaces', 'document_chunks', 'documents'] as const) {
    host.eraseRows({
      table,
      purge: async (trx, tenantId) => Number((await trx.deleteFrom(table).where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
    });
  }
}
