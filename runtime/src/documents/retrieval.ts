// Retrieval over the documents a caller may see (docs/decisions/0042): the query's nearest chunks in the project's
// embedding space and its best keyword matches, fused by reciprocal rank. The visibility rule is part of both
// queries (a join to the document and its filter), so a filtered search still returns k visible chunks: the vector
// scan keeps going past chunks the caller may not see (pgvector's iterative index scan) instead of cutting the top
// k and filtering what is left. Only the chunks of the generation a document serves are searched.
import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../store/schema.js';
import type { EmbeddingTarget } from '../tenants/configuration.js';
import { visibleDocuments, type DocumentReader } from './access.js';
import type { Embed } from './ingest/embed.js';

/** Reciprocal rank fusion's constant: how much the first ranks outweigh the next ones (the usual 60). */
const RRF_K = 60;
/** Candidates each search contributes to the fusion, per result wanted. */
const CANDIDATES_PER_RESULT = 4;
/** The HNSW search list, at least (pgvector's default is 40). */
const EF_SEARCH = 100;
/** Index tuples an iterative scan may visit looking for visible chunks before it gives up. */
const MAX_SCAN_TUPLES = 40_000;
/**
 * Up to this many visible chunks, the nearest are found exactly, by measuring every one of them: faster than the
 * approximate index when the filter admits few (the index would have to walk past all the others), and exact.
 */
export const EXACT_SCAN_MAX_CHUNKS = 20_000;

export interface RetrieveRequest {
  query: string;
  k: number;
  /** Search only these documents (still only those the caller sees). */
  documentIds?: string[] | undefined;
}

export interface RetrievedChunk {
  document_id: string;
  title: string;
  chunk_id: string;
  ordinal: number;
  text: string;
  heading_path: string[];
  start: number;
  end: number;
  page: number | null;
  /** Reciprocal-rank-fused score: higher is better; comparable within one answer only. */
  score: number;
  /** Which searches found it. */
  matched: ('vector' | 'keyword')[];
}

export interface RetrieveResult {
  results: RetrievedChunk[];
  /** `hybrid` when the query was also embedded; `keyword` when the project has no embedding model. */
  mode: 'hybrid' | 'keyword';
  /** Whether the project's rerank model ordered the results (then `score` is its relevance). */
  reranked?: boolean;
}

interface Candidate {
  chunk_id: string;
}

export class Retriever {
  private readonly indexed = new Set<string>();

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly embed: Embed,
    private readonly logger: Logger,
  ) {}

  async retrieve(reader: DocumentReader, target: EmbeddingTarget | undefined, request: RetrieveRequest): Promise<RetrieveResult> {
    const limit = request.k * CANDIDATES_PER_RESULT;
    const [vector] = target ? await this.embed(target, [request.query]) : [undefined];
    const [nearest, keyword] = await Promise.all([
      target && vector ? this.nearest(reader, target, vector, limit, request.documentIds) : Promise.resolve([]),
      this.keywordMatches(reader, request.query, limit, request.documentIds),
    ]);
    const fused = new Map<string, { score: number; matched: RetrievedChunk['matched'] }>();
    const add = (list: Candidate[], kind: 'vector' | 'keyword') =>
      list.forEach((candidate, rank) => {
        const entry = fused.get(candidate.chunk_id) ?? { score: 0, matched: [] };
        entry.score += 1 / (RRF_K + rank + 1);
        entry.matched.push(kind);
        fused.set(candidate.chunk_id, entry);
      });
    add(nearest, 'vector');
    add(keyword, 'keyword');
    const top = [...fused.entries()].sort((a, b) => b[1].score - a[1].score || a[0].localeCompare(b[0])).slice(0, request.k);
    if (top.length === 0) return { results: [], mode: target ? 'hybrid' : 'keyword' };
    const rows = await this.db
      .selectFrom('document_chunks as c')
      .innerJoin('documents', 'documents.id', 'c.document_id')
      .select(['c.id', 'c.document_id', 'documents.title', 'c.ordinal', 'c.content', 'c.heading_path', 'c.start_offset', 'c.end_offset', 'c.page'])
      .where('c.id', 'in', top.map(([id]) => id))
      // Seen again at the moment of answering: a document deleted or hidden since the searches is not answered.
      .where(visibleDocuments(reader))
      .whereRef('c.generation', '=', 'documents.generation')
      .execute();
    const byId = new Map(rows.map((row) => [row.id, row]));
    const results: RetrievedChunk[] = [];
    for (const [id, { score, matched }] of top) {
      const row = byId.get(id);
      if (!row) continue;
      results.push({
        document_id: row.document_id,
        title: row.title,
        chunk_id: row.id,
        ordinal: row.ordinal,
        text: row.content,
        heading_path: row.heading_path,
        start: row.start_offset,
        end: row.end_offset,
        page: row.page,
        score,
        matched,
      });
    }
    return { results, mode: target ? 'hybrid' : 'keyword' };
  }

  /**
   * Makes sure the space has its approximate index: HNSW over the vectors cast to the space's dimension, partial to
   * the space (pgvector's way to index vectors of several dimensions in one column). Idempotent.
   */
  async ensureIndex(target: EmbeddingTarget): Promise<void> {
    if (this.indexed.has(target.space)) return;
    const name = `chunk_embeddings_hnsw_${createHash('sha256').update(target.space).digest('hex').slice(0, 16)}`;
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

  /**
   * The `limit` visible chunks nearest to `vector` in the target's space, nearest first (the vector half alone).
   * When the caller sees few chunks they are all measured (exact); otherwise the approximate index is walked with
   * the filter applied as it goes. `exact` forces one way or the other (the benchmark compares them).
   */
  async nearest(reader: DocumentReader, target: EmbeddingTarget, vector: number[], limit: number, documentIds?: string[], options: { exact?: boolean } = {}): Promise<Candidate[]> {
    await this.ensureIndex(target);
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

  /** How many chunks the caller sees (the documents' chunk counts): what decides between exact and approximate. */
  private async visibleChunks(reader: DocumentReader, documentIds: string[] | undefined): Promise<number> {
    let query = this.db.selectFrom('documents').select((eb) => eb.fn.coalesce(eb.fn.sum<number>('chunk_count'), sql<number>`0`).as('chunks')).where(visibleDocuments(reader));
    if (documentIds) query = query.where('documents.id', 'in', documentIds);
    return Number((await query.executeTakeFirstOrThrow()).chunks);
  }

  private async keywordMatches(reader: DocumentReader, text: string, limit: number, documentIds: string[] | undefined): Promise<Candidate[]> {
    // Any of the query's words, ranked by how many and how close: a question's words rarely all appear in one chunk.
    const tsquery = sql`(select coalesce(to_tsquery('simple', string_agg(quote_literal(word), ' | ')), ''::tsquery) from unnest(tsvector_to_array(to_tsvector('simple', ${text}))) as word)`;
    let query = this.db
      .selectFrom('document_chunks as c')
      .innerJoin('documents', 'documents.id', 'c.document_id')
      .select(['c.id as chunk_id'])
      .where(sql<boolean>`c.search @@ ${tsquery}`)
      .whereRef('c.generation', '=', 'documents.generation')
      .where(visibleDocuments(reader));
    if (documentIds) query = query.where('documents.id', 'in', documentIds);
    return query.orderBy(sql`ts_rank_cd(c.search, ${tsquery})`, 'desc').orderBy('c.id').limit(limit).execute();
  }
}
