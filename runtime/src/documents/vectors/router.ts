// Which vector index holds a space's vectors (docs/decisions/0047): the deployment's (pgvector, or the deployment's
// Pinecone index), or a project's own Pinecone index named in its configuration. Every space's target says which;
// what is not about one space (a document's visibility changed, a document or a tenant removed) goes to every index
// that holds the tenant's vectors: the deployment's and the project indexes its spaces name.
import { createHash } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { RuntimeSchema } from '../../store/schema.js';
import type { EmbeddingTarget, ProjectIndex } from '../../tenants/configuration.js';
import type { DocumentReader } from '../access.js';
import type { EmbeddingSpaces, SealedIndex } from '../spaces.js';
import type { ChunkVector, IndexedDocument, VectorIndex } from './port.js';

/** Clients kept for project indexes: one per host and key, the least recently used dropped past this many. */
const CLIENTS_KEPT = 256;

export interface VectorIndexRouterOptions {
  /** The deployment's index: where a space without an index of its own lives. */
  deployment: VectorIndex;
  /** The tenants' spaces, which name the project indexes that hold their vectors. */
  spaces: EmbeddingSpaces;
  /** Opens a project's own Pinecone index (guarded: its host is the customer's to choose). */
  open(index: ProjectIndex): Promise<VectorIndex>;
}

export class VectorIndexRouter implements VectorIndex {
  readonly name: VectorIndex['name'];
  private readonly clients = new Map<string, Promise<VectorIndex>>();

  constructor(private readonly options: VectorIndexRouterOptions) {
    this.name = options.deployment.name;
  }

  /** The index a space's vectors live in. */
  async of(target: EmbeddingTarget): Promise<VectorIndex> {
    return target.index ? this.opened(target.index) : this.options.deployment;
  }

  async prepare(target: EmbeddingTarget): Promise<void> {
    await (await this.of(target)).prepare(target);
  }

  async write(target: EmbeddingTarget, document: IndexedDocument, vectors: ChunkVector[], trx?: Kysely<RuntimeSchema>): Promise<void> {
    await (await this.of(target)).write(target, document, vectors, trx);
  }

  async nearest(reader: DocumentReader, target: EmbeddingTarget, vector: number[], limit: number, documentIds?: string[]): Promise<{ chunk_id: string }[]> {
    return (await this.of(target)).nearest(reader, target, vector, limit, documentIds);
  }

  async updateDocument(document: IndexedDocument): Promise<void> {
    await this.everyIndex(document.tenant_id, (index) => index.updateDocument(document));
  }

  async removeDocument(tenantId: string, documentId: string, keepGeneration?: number): Promise<void> {
    await this.everyIndex(tenantId, (index) => index.removeDocument(tenantId, documentId, keepGeneration));
  }

  async removeTenant(tenantId: string): Promise<void> {
    await this.removeTenantFrom(tenantId, await this.options.spaces.sealedIndexes(tenantId));
  }

  /**
   * The project indexes that hold the tenant's vectors, keys sealed: read in the erase's purge transaction before
   * its rows go, and kept with the erase record until `removeTenantFrom` has emptied them.
   */
  collectForErase(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<SealedIndex[]> {
    return this.options.spaces.sealedIndexes(tenantId, trx);
  }

  /** Empties the tenant's namespace in the deployment's index and in each of `indexes`; every one is tried. Answers how many project indexes. */
  async removeTenantFrom(tenantId: string, indexes: SealedIndex[]): Promise<number> {
    const opened = this.options.spaces.openIndexes(tenantId, indexes);
    await settleAll([this.options.deployment, ...opened].map(async (index) => (await this.resolved(index)).removeTenant(tenantId)));
    return opened.length;
  }

  private async everyIndex(tenantId: string, work: (index: VectorIndex) => Promise<void>): Promise<void> {
    const projectIndexes = await this.options.spaces.projectIndexes(tenantId);
    await settleAll([this.options.deployment, ...projectIndexes].map(async (index) => work(await this.resolved(index))));
  }

  private resolved(index: VectorIndex | ProjectIndex): Promise<VectorIndex> {
    return 'host' in index ? this.opened(index) : Promise.resolve(index);
  }

  private opened(index: ProjectIndex): Promise<VectorIndex> {
    const key = createHash('sha256').update(index.host).update('\0').update(index.apiKey).digest('hex');
    let client = this.clients.get(key);
    if (client) {
      this.clients.delete(key);
    } else {
      client = this.options.open(index);
      // A failed open is not kept: the next call tries again.
      client.catch(() => this.clients.delete(key));
      if (this.clients.size >= CLIENTS_KEPT) this.clients.delete(this.clients.keys().next().value!);
    }
    this.clients.set(key, client);
    return client;
  }
}

/** Waits for every call; the first failure is thrown once all have ended, so one index down stops none of the others. */
async function settleAll(calls: Promise<void>[]): Promise<void> {
  const failed = (await Promise.allSettled(calls)).find((outcome) => outcome.status === 'rejected');
  if (failed) throw failed.reason;
}
