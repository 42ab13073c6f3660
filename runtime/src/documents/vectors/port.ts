// The vector index port (DESIGN.md: ports and adapters; docs/decisions/0046): where chunk vectors live and how the
// nearest ones a caller may see are found. pgvector (the default, embedded on PGlite) keeps them beside the chunks
// and joins the visibility rule into the query; Pinecone keeps them in a namespace per tenant with each document's
// visibility fields as metadata, and applies the same rule as a metadata filter. Either way the search filters
// inside the index (k visible results, never the top k cut and then filtered), and retrieval checks what it answers
// against the documents once more (a vector whose document changed since is not answered).
import type { Kysely, Selectable } from 'kysely';
import type { DocumentsTable, RuntimeSchema } from '../../store/schema.js';
import type { EmbeddingTarget } from '../../tenants/configuration.js';
import type { DocumentAcl, DocumentReader } from '../access.js';

/** What an index knows of a document: its id, the generation its chunks belong to, and the fields the rule reads. */
export interface IndexedDocument extends DocumentAcl {
  id: string;
  generation: number;
}

export interface ChunkVector {
  chunkId: string;
  /** The chunk's place in its document. */
  ordinal: number;
  values: number[];
}

export interface VectorIndex {
  readonly name: 'pgvector' | 'pinecone';
  /** Makes sure a space can take vectors (pgvector: its HNSW index). Idempotent. */
  prepare(target: EmbeddingTarget): Promise<void>;
  /**
   * Stores vectors of a document's chunks in a space; writing the same chunk again replaces it. `trx` is the
   * transaction that writes the chunks: an index in the same database writes inside it; one elsewhere writes at once
   * (its records are keyed by document, generation and place, so a retried write replaces, never duplicates).
   */
  write(target: EmbeddingTarget, document: IndexedDocument, vectors: ChunkVector[], trx?: Kysely<RuntimeSchema>): Promise<void>;
  /** The `limit` chunks nearest to `vector` in the space among the documents `reader` may see, nearest first. */
  nearest(reader: DocumentReader, target: EmbeddingTarget, vector: number[], limit: number, documentIds?: string[]): Promise<{ chunk_id: string }[]>;
  /** The document's visibility fields changed: the index's copy follows. */
  updateDocument(document: IndexedDocument): Promise<void>;
  /** Removes the document's vectors: all of them, or those of other generations than `keepGeneration`. */
  removeDocument(tenantId: string, documentId: string, keepGeneration?: number): Promise<void>;
  /** Removes every vector of a tenant (the erase). */
  removeTenant(tenantId: string): Promise<void>;
}

/** What the vector index is told about a document: its id, generation and visibility fields. */
export const indexedOf = (document: Pick<Selectable<DocumentsTable>, 'id' | 'generation' | 'tenant_id' | 'owner' | 'visibility' | 'scope' | 'allowed_roles' | 'allowed_groups'>): IndexedDocument => ({
  id: document.id,
  generation: document.generation,
  tenant_id: document.tenant_id,
  owner: document.owner,
  visibility: document.visibility,
  scope: document.scope,
  allowed_roles: document.allowed_roles,
  allowed_groups: document.allowed_groups,
});

