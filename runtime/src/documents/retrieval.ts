// Retrieval over the documents a caller may see (docs/decisions/0042): the query's nearest chunks in the project's
// embedding space and its best keyword matches, fused by reciprocal rank. The visibility rule is part of both
// queries (a join to the document and its filter), so a filtered search still returns k visible chunks: the vector
// scan keeps going past chunks the caller may not see (pgvector's iterative index scan) instead of cutting the top
// k and filtering what is left. Only the chunks of the generation a document serves are searched.
import { sql, type Kysely } from 'kysely';
import type { RuntimeSchema } from '../store/schema.js';
import type { EmbeddingTarget } from '../tenants/configuration.js';
import { visibleDocuments, type DocumentReader } from './access.js';
import type { Embed } from './ingest/embed.js';
import type { VectorIndex } from './vectors/port.js';

/** Reciprocal rank fusion's constant: how much the first ranks outweigh the next ones (the usual 60). */
const RRF_K = 60;
/** Candidates each search contributes to the fusion, per result wanted. */
const CANDIDATES_PER_RESULT = 4;

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
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly embed: Embed,
    /** Where the vectors are, and the vector half of the search (./vectors). */
    private readonly index: VectorIndex,
  ) {}

  async retrieve(reader: DocumentReader, target: EmbeddingTarget | undefined, request: RetrieveRequest): Promise<RetrieveResult> {
    const limit = request.k * CANDIDATES_PER_RESULT;
    const [vector] = target ? await this.embed(target, [request.query]) : [undefined];
    const [nearest, keyword] = await Promise.all([
      target && vector ? this.index.nearest(reader, target, vector, limit, request.documentIds) : Promise.resolve([]),
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
