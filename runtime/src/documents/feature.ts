// What documents bring to the composition root: the ingest worker (started here, stopped at shutdown before the
// stores close), the sweep of abandoned uploads, and their part of the tenant erase (their rows, children first;
// their bytes are under the tenant's blob prefix, which the blob store's erase step removes).
import type { FeatureHost } from '../features.js';
import type { IngestWorker } from './ingest/worker.js';
import type { DocumentService } from './service.js';
import type { SealedIndex } from './spaces.js';
import type { VectorIndexRouter } from './vectors/router.js';

/** How often abandoned uploads are looked for; an upload's deadline is hours, so minutes late is no matter. */
const SWEEP_INTERVAL_MS = 15 * 60 * 1000;

export function registerDocuments(host: FeatureHost, documents: DocumentService, worker: IngestWorker, vectors: VectorIndexRouter, pollMs: number): void {
  worker.start(pollMs);
  host.onShutdown(() => worker.stop());
  host.every('document upload sweep', SWEEP_INTERVAL_MS, () => documents.sweepAbandoned(), { now: true });
  // Vectors kept outside the database (the deployment's Pinecone index, the project's own): best effort after the
  // rows, reported, retried by the next erase. Only the tenant's spaces name its own indexes, so they are collected
  // before the rows go.
  host.eraseStep({
    name: 'vectors',
    phase: 'outside_database',
    collect: (trx, tenantId) => vectors.collectForErase(trx, tenantId),
    run: async (tenantId, collected) => {
      const projectIndexes = await vectors.removeTenantFrom(tenantId, (collected ?? []) as SealedIndex[]);
      // The namespaces emptied: one in each project index, and one in the deployment's Pinecone index.
      return { items: projectIndexes + (vectors.name === 'pgvector' ? 0 : 1) };
    },
  });
  for (const table of ['ingest_jobs', 'embedding_jobs', 'embedding_spaces', 'document_chunks', 'documents'] as const) {
    host.eraseRows({
      table,
      purge: async (trx, tenantId) => Number((await trx.deleteFrom(table).where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows),
    });
  }
}
