// The Pinecone adapter of the vector index (docs/decisions/0046), through `@pinecone-database/pinecone`: one
// namespace per tenant, and each record carries its document's visibility fields as metadata, so the visibility
// rule (../access.ts) is applied by Pinecone as a metadata filter inside the query, never to a cut top k. Records
// are keyed by document, generation, place and embedding space, so a retried write replaces what an earlier attempt
// wrote. Pinecone cannot join the documents table: a change of a document's visibility updates its records, and
// retrieval checks every answer against the documents again, so a record out of step can hide a chunk for a moment
// but never show one.
import { createHash } from 'node:crypto';
import { Pinecone, type Index } from '@pinecone-database/pinecone';
import { isPrivileged } from '@agentplane/lib/permissions';
import type { EmbeddingTarget } from '../../tenants/configuration.js';
import type { DocumentAcl, DocumentReader } from '../access.js';
import type { ChunkVector, IndexedDocument, VectorIndex } from './port.js';

/** Records per upsert request: well inside Pinecone's 1,000 records and 2 MB. */
const UPSERT_BATCH = 100;

export interface PineconeIndexOptions {
  apiKey: string;
  /** The index's host (from `describe_index` or the console): no control-plane call is made to find it. */
  host: string;
  /** Replaces the client's fetch; the guarded one in production. */
  fetch?: typeof fetch;
}

type Metadata = Record<string, string | number | boolean | string[]>;

/** A space's short name in record ids and metadata. */
const spaceKey = (space: string) => createHash('sha256').update(space).digest('hex').slice(0, 16);
/** A path and every path above it: `a:b:c` → `a`, `a:b`, `a:b:c`. */
const pathsOf = (path: string) => path.split(':').map((_, i, segments) => segments.slice(0, i + 1).join(':'));

/** The fields the visibility rule reads, as Pinecone metadata (no nulls: empty text and lists stand for none). */
export function aclMetadata(document: DocumentAcl & { id: string }): Metadata {
  return {
    document_id: document.id,
    visibility: document.visibility,
    owner: document.owner ?? '',
    owner_paths: document.owner === null ? [] : pathsOf(document.owner),
    scope: document.scope ?? '',
    allowed_roles: [...document.allowed_roles],
    allowed_groups: [...document.allowed_groups],
    acl_open: document.allowed_roles.length === 0 && document.allowed_groups.length === 0,
  };
}

/** The visibility rule (../access.ts, `visibleDocuments`) as a Pinecone metadata filter; the tenant is the namespace. */
export function visibilityFilter(reader: DocumentReader): Record<string, unknown> {
  const conditions: Record<string, unknown>[] = [];
  if (reader.dataScope !== undefined) conditions.push({ $or: [{ owner: { $eq: '' } }, { owner_paths: { $in: [reader.dataScope] } }] });
  const shared: Record<string, unknown>[] = [{ visibility: { $ne: 'self' } }];
  if (!isPrivileged(reader.roles)) {
    shared.push({ $or: [{ visibility: { $eq: 'project' } }, { scope: { $in: pathsOf(reader.sub) } }, { owner_paths: { $in: [reader.scope] } }] });
    const admitted: Record<string, unknown>[] = [{ acl_open: { $eq: true } }];
    if (reader.roles.length > 0) admitted.push({ allowed_roles: { $in: [...reader.roles] } });
    if (reader.groups.length > 0) admitted.push({ allowed_groups: { $in: [...reader.groups] } });
    shared.push({ $or: admitted });
  }
  conditions.push({ $or: [{ owner: { $eq: reader.sub } }, { $and: shared }] });
  return { $and: conditions };
}

export class PineconeIndex implements VectorIndex {
  readonly name = 'pinecone' as const;
  private readonly index: Index;

  constructor(options: PineconeIndexOptions) {
    const client = new Pinecone({ apiKey: options.apiKey, ...(options.fetch ? { fetchApi: options.fetch } : {}) });
    this.index = client.index({ host: options.host });
  }

  /** A serverless index takes any space of its dimension as it is. */
  async prepare(): Promise<void> {}

  async write(target: EmbeddingTarget, document: IndexedDocument, vectors: ChunkVector[]): Promise<void> {
    const space = spaceKey(target.space);
    const acl = aclMetadata(document);
    const namespace = this.index.namespace(document.tenant_id);
    for (let i = 0; i < vectors.length; i += UPSERT_BATCH) {
      await namespace.upsert({
        records: vectors.slice(i, i + UPSERT_BATCH).map((vector) => ({
          id: `${document.id}#${document.generation}#${vector.ordinal}#${space}`,
          values: vector.values,
          metadata: { ...acl, chunk_id: vector.chunkId, generation: document.generation, space },
        })),
      });
    }
  }

  async nearest(reader: DocumentReader, target: EmbeddingTarget, vector: number[], limit: number, documentIds?: string[]): Promise<{ chunk_id: string }[]> {
    const filter = visibilityFilter(reader);
    const conditions = filter.$and as Record<string, unknown>[];
    conditions.unshift({ space: { $eq: spaceKey(target.space) } });
    if (documentIds) conditions.push({ document_id: { $in: documentIds } });
    const answer = await this.index.namespace(reader.tenantId).query({ vector, topK: Math.min(10_000, Math.max(1, Math.trunc(limit))), filter, includeMetadata: true });
    return answer.matches.flatMap((match) => (typeof match.metadata?.chunk_id === 'string' ? [{ chunk_id: match.metadata.chunk_id }] : []));
  }

  async updateDocument(document: IndexedDocument): Promise<void> {
    await this.index.namespace(document.tenant_id).update({ filter: { document_id: { $eq: document.id } }, metadata: aclMetadata(document) });
  }

  async removeDocument(tenantId: string, documentId: string, keepGeneration?: number): Promise<void> {
    const filter = keepGeneration === undefined ? { document_id: { $eq: documentId } } : { $and: [{ document_id: { $eq: documentId } }, { generation: { $ne: keepGeneration } }] };
    await this.index.namespace(tenantId).deleteMany({ filter });
  }

  async removeTenant(tenantId: string): Promise<void> {
    try {
      await this.index.namespace(tenantId).deleteAll();
    } catch (error) {
      // A tenant that never wrote a vector has no namespace: nothing to remove.
      if ((error as { name?: string }).name === 'PineconeNotFoundError') return;
      throw error;
    }
  }
}
