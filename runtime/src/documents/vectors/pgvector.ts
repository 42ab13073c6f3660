// The pgvector adapter of the vector index (docs/decisions/0042, 0046): vectors in `chunk_embeddings` beside their
// chunks, one HNSW index per embedding space once the space is large enough to use it, and the visibility rule
// joined into the query. Chunk and vector rows
// go in one transaction and leave with their document, so removal needs nothing of its own.
import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../../store/schema.js';
import type { EmbeddingTarget } from '../../tenants/configuration.js';
import { visibleDocuments, type DocumentReader } from '../access.js';
import type { ChunkVector, IndexedDocument, VectorIndex } from './port.js';

/** The HNSW search list, at least (pgvector's default is 40). */
const EF_SEARCH = 100;
/** Index tuples an iterative scan may visit looking for visible chunks before it gives up. */
const MAX_SCAN_TUPLES = 40_000;
/**
 * Up to this many visible chunks, the nearest are found exactly, by measuring every one of them: faster than the
 * approximate index when the filter admits few (the index would have to walk past all the others), and exact.
 */
export const EXACT_SCAN_MAX_CHUNKS = 20_000;

/**
 * A space is given its approximate index once it holds this many vectors. Below, no caller can see more chunks than
 * the space holds, so every search is exact and the index would never be walked: writes skip maintaining its graph
 * (most of an ingest's cost in a space that has one: docs/benchmarks.md).
 */
export const INDEX_FROM_VECTORS = EXACT_SCAN_MAX_CHUNKS;
/** How long a count below the threshold is trusted before the space is counted again (other processes write too). */
const RECOUNT_AFTER_MS = 60_000;

export class PgVectorIndex implements VectorIndex {
  readonly name = 'pgvector' as const;
  private readonly indexed = new Set<string>();
  /** Spaces counted below the threshold: vectors this process may still write, and until when, before counting again. */
  private readonly below = new Map<string, { room: number; until: number }>();

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly logger: Logger,
  ) {}

  /**
   * Makes sure the space has its approximate index once it can be of use (`INDEX_FROM_VECTORS`): HNSW over the
   * vectors cast to the space's dimension, partial to the space (pgvector's way to index vectors of several
   * dimensions in one column). Built over what the space holds at once, then kept by every write. Idempotent.
   */
  async prepare(target: EmbeddingTarget): Promise<void> {
    if (this.indexed.has(target.space)) return;
    const below = this.below.get(target.space);
    if (below && below.room > 0 && below.until > Date.now()) return;
    // Counted up to the threshold only, through the space's own index: a few milliseconds at most.
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from (select 1 from chunk_embeddings where space = ${target.space} limit ${INDEX_FROM_VECTORS}) as held`.execute(this.db);
    const held = rows[0]?.n ?? 0;
    if (held < INDEX_FROM_VECTORS && !(await this.indexExists(target))) {
      this.below.set(target.space, { room: INDEX_FROM_VECTORS - held, until: Date.now() + RECOUNT_AFTER_MS });
      return;
    }
    this.below.delete(target.space);
    await this.createIndex(target);
  }

  private indexName(target: EmbeddingTarget): string {
    return `chunk_embeddings_hnsw_${createHash('sha256').update(target.space).digest('hex').slice(0, 16)}`;
  }

  /** Made already (by another process, or before a restart): it is kept by writes whatever the count. */
  private async indexExists(target: EmbeddingTarget): Promise<boolean> {
    const { rows } = await sql<{ found: number }>`select 1 as found from pg_indexes where indexname = ${this.indexName(target)}`.execute(this.db);
    if (rows.length > 0) this.indexed.add(target.space);
    return rows.length > 0;
  }

  private async createIndex(target: EmbeddingTarget): Promise<void> {
    const name = this.indexName(target);
    // The space is written into the index's predicate as a literal; it is the project's own configuration, quoted.
    const literal = `'${target.space.replace(/'/g, "''")}'`;
    try {
      await sql
        .raw(
          `create index if not exists ${name} on chunk_embeddings using hnsw ((embedding::vector(${Math.trunc(target.dimensions)})) vector_cosine_ops) where space = ${literal}`,
        )
        .execute(this.db);
    } catch (error) {
      // Another process made it at the same moment: `if not exists` does not cover that race.
      const code = (error as { code?: string }).code;
      if (code !== '42P07' && code !== '23505') throw error;
    }
    this.indexed.add(target.space);
    this.logger.debug({ index: name, dimensions: target.dimensions }, 'vector index ready');
  }

  async write(target: EmbeddingTarget, _document: IndexedDocument, vectors: ChunkVector[], trx: Kysely<RuntimeSchema> = this.db): Promise<void> {
    const below = this.below.get(target.space);
    if (below) below.room -= vectors.length;
    for (let i = 0; i < vectors.length; i += 200) {
      await trx
        .insertInto('chunk_embeddings')
        .values(vectors.slice(i, i + 200).map((vector) => ({ chunk_id: vector.chunkId, space: target.space, embedding: `[${vector.values.join(',')}]` })))
        .onConflict((oc) => oc.columns(['chunk_id', 'space']).doUpdateSet((eb) => ({ embedding: eb.ref('excluded.embedding') })))
        .execute();
    }
  }

  /**
   * The `limit` visible chunks nearest to `vector` in the target's space, nearest first. When the caller sees few
   * chunks they are all measured (exact); otherwise the approximate index is walked with the filter applied as it
   * goes. `exact` forces one way or the other (the benchmark compares them).
   */
  async nearest(reader: DocumentReader, target: EmbeddingTarget, vector: number[], limit: number, documentIds?: string[], options: { exact?: boolean } = {}): Promise<{ chunk_id: string }[]> {
    await this.prepare(target);
    const dimensions = Math.trunc(target.dimensions);
    const literal = `[${vector.join(',')}]`;
    const distance = sql`(e.embedding::vector(${sql.raw(String(dimensions))})) <=> ${literal}::vector(${sql.raw(String(dimensions))})`;
    const exact = options.exact ?? (await this.visibleChunks(reader, documentIds)) <= EXACT_SCAN_MAX_CHUNKS;
    if (exact) {
      // The visible chunks first (materialized, so the planner cannot turn this into an index walk), then each one
      // measured: as many distances as chunks the caller sees.
      let visible = this.db
        .selectFrom('documents')
        .innerJoin('document_chunks as c', (join) => join.onRef('c.document_id', '=', 'documents.id').onRef('c.generation', '=', 'documents.generation'))
        .select('c.id')
        .where(visibleDocuments(reader));
      if (documentIds) visible = visible.where('documents.id', 'in', documentIds);
      return this.db
        .with((cte) => cte('visible').materialized(), () => visible)
        .selectFrom('chunk_embeddings as e')
        .innerJoin('visible', 'visible.id', 'e.chunk_id')
        .select('e.chunk_id')
        .where('e.space', '=', target.space)
        // `+ 0`: an order the index cannot give, so no plan walks the index and drops what the join filters out.
        .orderBy(sql`(${distance}) + 0`)
        .limit(limit)
        .execute();
    }
    return this.db.transaction().execute(async (trx) => {
      // Keep scanning past chunks the filter drops, so k visible ones come back (pgvector 0.8 iterative scans).
      await sql`set local hnsw.iterative_scan = relaxed_order`.execute(trx);
      await sql.raw(`set local hnsw.max_scan_tuples = ${MAX_SCAN_TUPLES}`).execute(trx);
      // A wider search list than pgvector's default 40: recall@10 0.90 → higher for little time (docs/benchmarks.md).
      await sql.raw(`set local hnsw.ef_search = ${Math.min(1000, Math.max(EF_SEARCH, 2 * Math.trunc(limit)))}`).execute(trx);
      let query = trx
        .selectFrom('chunk_embeddings as e')
        .innerJoin('document_chunks as c', 'c.id', 'e.chunk_id')
        .innerJoin('documents', 'documents.id', 'c.document_id')
        .select(['e.chunk_id'])
        .where('e.space', '=', target.space)
        .whereRef('c.generation', '=', 'documents.generation')
        .where(visibleDocuments(reader));
      if (documentIds) query = query.where('documents.id', 'in', documentIds);
      return query.orderBy(distance).limit(limit).execute();
    });
  }

  /** The rule is joined at query time: nothing to follow. */
  async updateDocument(): Promise<void> {}

  /** Vector rows leave with their chunks (and chunks with their generation or document). */
  async removeDocument(): Promise<void> {}

  /** The tenant's rows are purged with the rest of its rows. */
  async removeTenant(): Promise<void> {}

  /** How many chunks the caller sees (the documents' chunk counts): what decides between exact and approximate. */
  private async visibleChunks(reader: DocumentReader, documentIds: string[] | undefined): Promise<number> {
    let query = this.db.selectFrom('documents').select((eb) => eb.fn.coalesce(eb.fn.sum<number>('chunk_count'), sql<number>`0`).as('chunks')).where(visibleDocuments(reader));
    if (documentIds) query = query.where('documents.id', 'in', documentIds);
    return Number((await query.executeTakeFirstOrThrow()).chunks);
  }
}
