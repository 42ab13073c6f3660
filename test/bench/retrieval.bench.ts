// Retrieval on pgvector at size: 100,000 chunks (10,000 documents of 10 chunks, 384-dimension vectors in 200
// clusters, 50 words each) on the PostgreSQL server, searched by a caller whose visibility filter admits 1% of them
// and by an admin who sees about half. Figures: latency of the vector search alone (exact over the visible chunks,
// HNSW with iterative scans, and ours, which picks between them) and of the whole hybrid retrieve, against the
// exact search measured in the same run, and recall@10 against it.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { sql, type Kysely } from 'kysely';
import { openDatabase } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { silentLogger } from '@agentplane/lib/logging';
import type { DocumentReader } from '@agentplane/runtime/documents/access';
import { Retriever } from '@agentplane/runtime/documents/retrieval';
import { PgVectorIndex } from '@agentplane/runtime/documents/vectors/pgvector';
import { runtimeMigrations } from '@agentplane/runtime/store/migrations';
import type { RuntimeSchema } from '@agentplane/runtime/store/schema';
import type { EmbeddingTarget } from '@agentplane/runtime/tenants/configuration';
import { documentRow, insertTenants } from '../fakes/document-rows.js';
import { postgresBinaries, startPostgres } from '../harness/postgres.js';
import { finishTable, percentile, Teardown, type BenchReport, type Table } from './measure.js';

const DOCUMENTS = Number(process.env.BENCH_RETRIEVAL_DOCUMENTS ?? 10_000);
const CHUNKS_PER_DOCUMENT = 10;
const VISIBLE_SHARE = 0.01;
const DIMENSIONS = 384;
const CLUSTERS = 200;
const QUERIES = 200;
const K = 10;
const WORDS = Array.from({ length: 5_000 }, (_, i) => `w${i.toString(36)}`);

/** A deterministic generator, so every run searches the same corpus. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

export async function run(): Promise<BenchReport> {
  if (!postgresBinaries()) return { name: 'retrieval', tables: [], skipped: ['retrieval: PostgreSQL binaries missing (bash hack/test-deps.sh)'] };
  const teardown = new Teardown();
  try {
    const postgres = await startPostgres();
    teardown.add(() => postgres.stop());
    const database = await openDatabase<RuntimeSchema>({ driver: 'postgres', url: await postgres.createDatabase() });
    teardown.add(() => database.close());
    await migrate(database.db, runtimeMigrations);
    const rand = random(20261126);
    const gaussian = () => Math.sqrt(-2 * Math.log(rand() || 1e-12)) * Math.cos(2 * Math.PI * rand());
    const normalise = (v: number[]) => {
      const norm = Math.hypot(...v) || 1;
      return v.map((x) => x / norm);
    };
    const centers = Array.from({ length: CLUSTERS }, () => normalise(Array.from({ length: DIMENSIONS }, gaussian)));
    const near = () => {
      const center = centers[Math.floor(rand() * CLUSTERS)]!;
      return normalise(center.map((x) => x + 0.35 * gaussian() / Math.sqrt(DIMENSIONS) * 4));
    };

    const tenantId = randomUUID();
    await insertTenants(database.db, [tenantId]);
    const target: EmbeddingTarget = { space: `bench|model|${DIMENSIONS}`, modelSpace: `bench|model|${DIMENSIONS}`, providerId: 'p', baseUrl: 'http://unused', apiKey: 'unused', model: 'model', dimensions: DIMENSIONS };
    const loadStarted = performance.now();
    const visibleDocuments = Math.round(DOCUMENTS * VISIBLE_SHARE);
    await load(database.db, tenantId, target, { near, rand, visibleDocuments });
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    const indexStarted = performance.now();
    await sql`set maintenance_work_mem = '1GB'`.execute(database.db);
    const retriever = new PgVectorIndex(database.db, silentLogger());
    await retriever.prepare(target);
    await sql`analyze`.execute(database.db);
    const indexSeconds = (performance.now() - indexStarted) / 1000;

    const readers: { name: string; share: string; reader: DocumentReader }[] = [
      { name: 'a filter admitting 1%', share: '1%', reader: { tenantId, sub: 'acme:alice', scope: 'acme:alice', dataScope: undefined, roles: [], groups: [] } },
      { name: 'a filter admitting ~50%', share: '50%', reader: { tenantId, sub: 'acme:it', scope: 'acme:it', dataScope: undefined, roles: ['admin'], groups: [] } },
    ];
    const queries = Array.from({ length: QUERIES }, () => ({ vector: near(), text: Array.from({ length: 3 }, () => WORDS[Math.floor(rand() * WORDS.length)]!).join(' ') }));
    const time = async (work: (query: (typeof queries)[number]) => Promise<unknown>) => {
      for (const query of queries.slice(0, 20)) await work(query);
      const latencies: number[] = [];
      for (const query of queries) {
        const started = performance.now();
        await work(query);
        latencies.push(performance.now() - started);
      }
      latencies.sort((a, b) => a - b);
      return { p50Ms: percentile(latencies, 0.5), p95Ms: percentile(latencies, 0.95), p99Ms: percentile(latencies, 0.99) };
    };
    const vectors = new Map(queries.map((query) => [query.text, query.vector]));
    const hybrid = new Retriever(database.db, async (_target, texts) => texts.map((text) => vectors.get(text)!), retriever);

    const rows: Table['rows'] = [];
    for (const { name, reader } of readers) {
      const exact = (vector: number[]) => retriever.nearest(reader, target, vector, K, undefined, { exact: true });
      const truth: Set<string>[] = [];
      for (const query of queries) truth.push(new Set((await exact(query.vector)).map((c) => c.chunk_id)));
      const recallOf = async (options: { exact?: boolean }) => {
        let found = 0;
        let answered = 0;
        for (const [i, query] of queries.entries()) {
          const result = await retriever.nearest(reader, target, query.vector, K, undefined, options);
          answered += result.length;
          found += result.filter((c) => truth[i]!.has(c.chunk_id)).length;
        }
        return { recall: found / (QUERIES * K), answered: answered / QUERIES };
      };
      const caseName = `nearest 10 visible chunks, ${name}`;
      rows.push({ case: caseName, impl: 'exact: every visible chunk measured', baseline: true, figures: { ...(await time((q) => exact(q.vector))), recall: 1, answered: K } });
      rows.push({
        case: caseName,
        impl: 'HNSW with iterative scan alone',
        figures: { ...(await time((q) => retriever.nearest(reader, target, q.vector, K, undefined, { exact: false }))), ...(await recallOf({ exact: false })) },
      });
      rows.push({ case: caseName, impl: 'ours: exact below 20,000 visible chunks, else HNSW', figures: { ...(await time((q) => retriever.nearest(reader, target, q.vector, K))), ...(await recallOf({})) } });
      rows.push({ case: `hybrid retrieve (vectors + words, fused), ${name}`, impl: 'ours', baseline: true, figures: await time((q) => hybrid.retrieve(reader, target, { query: q.text, k: K })) });
    }
    const plan = await database.db.transaction().execute(async (trx) => {
      await sql`set local hnsw.iterative_scan = relaxed_order`.execute(trx);
      const literal = `[${queries[0]!.vector.join(',')}]`;
      const { rows: lines } = await sql<{ 'QUERY PLAN': string }>`explain select e.chunk_id from chunk_embeddings e where e.space = ${target.space}
        order by (e.embedding::vector(384)) <=> ${literal}::vector(384) limit 10`.execute(trx);
      return lines.map((line) => line['QUERY PLAN']).join(' ');
    });

    const table: Table = finishTable({
      title: `retrieval: ${DOCUMENTS * CHUNKS_PER_DOCUMENT} chunks on PostgreSQL, k=${K}`,
      columns: [
        { key: 'p50Ms', label: 'p50 ms', ratio: true },
        { key: 'p95Ms', label: 'p95 ms', ratio: true },
        { key: 'p99Ms', label: 'p99 ms', ratio: true },
        { key: 'recall', label: 'recall@10' },
        { key: 'answered', label: 'answered per query' },
      ],
      rows,
      note:
        `${DOCUMENTS} documents of ${CHUNKS_PER_DOCUMENT} chunks, ${DIMENSIONS} dimensions in ${CLUSTERS} clusters. 1%: a caller owning ${visibleDocuments} documents; the others' are half self, half shared with their owner's scope, so an admin sees ~50%. ` +
        `Load ${loadSeconds.toFixed(1)} s, index build ${indexSeconds.toFixed(1)} s. The vector plan uses the index: ${/hnsw/i.test(plan) ? 'yes' : 'no'}.`,
    });
    return { name: 'retrieval', tables: [table], skipped: [] };
  } finally {
    await teardown.run();
  }
}

async function load(
  db: Kysely<RuntimeSchema>,
  tenantId: string,
  target: EmbeddingTarget,
  gen: { near: () => number[]; rand: () => number; visibleDocuments: number },
): Promise<void> {
  const visible = new Set<number>();
  while (visible.size < gen.visibleDocuments) visible.add(Math.floor(gen.rand() * DOCUMENTS));
  for (let start = 0; start < DOCUMENTS; start += 100) {
    const documents = Array.from({ length: Math.min(100, DOCUMENTS - start) }, (_, j) => {
      const index = start + j;
      const mine = visible.has(index);
      return documentRow({
        id: randomUUID(),
        tenant_id: tenantId,
        owner: mine ? 'acme:alice' : `acme:other${index}`,
        visibility: mine || index % 2 === 0 ? 'scope' : 'self',
        scope: mine ? 'acme:alice' : index % 2 === 0 ? `acme:other${index}` : null,
        allowed_roles: [],
        allowed_groups: [],
        chunk_count: CHUNKS_PER_DOCUMENT,
        title: `document ${index}`,
        generation: 1,
      });
    });
    await db.insertInto('documents').values(documents).execute();
    const chunks = documents.flatMap((document) =>
      Array.from({ length: CHUNKS_PER_DOCUMENT }, (_, ordinal) => ({
        id: randomUUID(),
        document_id: document.id,
        tenant_id: tenantId,
        generation: 1,
        ordinal,
        content: Array.from({ length: 50 }, () => WORDS[Math.floor(gen.rand() * WORDS.length)]!).join(' '),
        start_offset: 0,
        end_offset: 0,
        page: null,
        tokens: 60,
      })),
    );
    await db.insertInto('document_chunks').values(chunks).execute();
    await db
      .insertInto('chunk_embeddings')
      .values(chunks.map((chunk) => ({ chunk_id: chunk.id, space: target.space, embedding: `[${gen.near().map((x) => x.toFixed(6)).join(',')}]` })))
      .execute();
  }
}
