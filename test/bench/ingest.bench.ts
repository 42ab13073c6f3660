// Ingestion: chunks per second through one worker (one job at a time), with a fast local embedder standing in for
// the provider (a hash of the text as a 384-dimension vector, no network), so the figure is ours: reading the bytes
// from the blob store, parsing, chunking, embedding calls, and the one transaction that writes a generation. The
// baseline in the same run is parsing and chunking alone, in memory. On the embedded store and on PostgreSQL.
// Then the worker's memory while it reads a 100 MB PDF: its process's peak RSS against the same process idle.
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { sql } from 'kysely';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { silentLogger } from '@agentplane/lib/logging';
import { FsBlobStore } from '@agentplane/runtime/blob/fs';
import { BlobUrlSigner } from '@agentplane/runtime/blob/signed-urls';
import { chunkDocument } from '@agentplane/runtime/documents/ingest/chunk';
import { parseDocument } from '@agentplane/runtime/documents/ingest/parse';
import { enqueueIngest, IngestWorker } from '@agentplane/runtime/documents/ingest/worker';
import { INDEX_FROM_VECTORS, PgVectorIndex } from '@agentplane/runtime/documents/vectors/pgvector';
import { runtimeMigrations } from '@agentplane/runtime/store/migrations';
import type { RuntimeSchema } from '@agentplane/runtime/store/schema';
import { documentRow, insertTenants } from '../fakes/document-rows.js';
import { minimalPdf } from '../fakes/documents.js';
import { postgresBinaries, startPostgres } from '../harness/postgres.js';
import { makeTempDir } from '../harness/process.js';
import { runJsonChild } from './children.js';
import { finishTable, Teardown, type BenchReport, type Row, type Table } from './measure.js';

const DOCUMENTS = Number(process.env.BENCH_INGEST_DOCUMENTS ?? 40);
const SECTIONS_PER_DOCUMENT = 250;
const DIMENSIONS = 384;
/** About 100 MB of PDF. */
const PDF_PAGES = Number(process.env.BENCH_INGEST_PDF_PAGES ?? 17_000);
const words = (seed: number, count: number) => Array.from({ length: count }, (_, i) => `word${(seed * 31 + i * 7) % 997}`).join(' ');
/** A Markdown handbook: sections of two paragraphs, one chunk each. */
const handbook = (n: number) =>
  Array.from({ length: SECTIONS_PER_DOCUMENT }, (_, s) => `## Section ${n}.${s}\n\n${words(n + s, 60)}.\n\n${words(n * s + 1, 60)}.`).join('\n\n');

/** The fast local embedder: a vector from a hash of the text, at once. */
async function localEmbed(_target: unknown, texts: string[]): Promise<number[][]> {
  return texts.map((text) => {
    const digest = createHash('sha256').update(text).digest();
    return Array.from({ length: DIMENSIONS }, (_, i) => (digest[i % 32]! - 128) / 128);
  });
}

/**
 * Fills the space with `INDEX_FROM_VECTORS` vectors of another tenant and gives it its approximate index, as a
 * space shared by many tenants soon is: every write after that also keeps the HNSW graph.
 */
async function fillSpace(database: Database<RuntimeSchema>, space: string): Promise<void> {
  const tenantId = randomUUID();
  await insertTenants(database.db, [tenantId]);
  const documentId = randomUUID();
  await database.db
    .insertInto('documents')
    .values(
      documentRow({
        id: documentId, tenant_id: tenantId, owner: 'acme:bob', visibility: 'self', scope: null, allowed_roles: [], allowed_groups: [],
        title: 'filler', content_type: 'text/plain', blob_key: `tenants/${tenantId}/documents/${documentId}`, status: 'ready', uploaded_at: new Date(), generation: 1,
      }),
    )
    .execute();
  await sql`
    insert into document_chunks (id, document_id, tenant_id, generation, ordinal, content, start_offset, end_offset, tokens)
    select gen_random_uuid(), ${documentId}, ${tenantId}, 1, n, 'filler ' || n, 0, 10, 3 from generate_series(1, ${INDEX_FROM_VECTORS}) as n`.execute(database.db);
  await sql`
    insert into chunk_embeddings (chunk_id, space, embedding)
    select c.id, ${space}, g.v::vector
    from document_chunks c
    -- Correlated with the row (its ordinal is never 0), so each chunk gets a vector of its own.
    cross join lateral (select array_agg(random() - 0.5) as v from generate_series(1, ${DIMENSIONS}) where c.ordinal > 0) as g
    where c.document_id = ${documentId}`.execute(database.db);
  await new PgVectorIndex(database.db, silentLogger()).prepare({ space, modelSpace: space, providerId: 'p', baseUrl: 'http://unused', apiKey: 'unused', model: 'hash', dimensions: DIMENSIONS });
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_indexes where indexname like 'chunk_embeddings_hnsw_%'`.execute(database.db);
  if (rows[0]!.n !== 1) throw new Error('the filled space has no approximate index');
}

async function pipeline(database: Database<RuntimeSchema>, dir: string, options: { indexedSpace: boolean }): Promise<Record<string, number>> {
  await migrate(database.db, runtimeMigrations);
  const space = `http://unused|hash|${DIMENSIONS}`;
  if (options.indexedSpace) await fillSpace(database, space);
  const tenantId = randomUUID();
  await insertTenants(database.db, [tenantId]);
  const blobs = new FsBlobStore({ root: join(dir, 'blobs'), signer: new BlobUrlSigner({ secret: 'x'.repeat(32), publicBaseUrl: 'http://127.0.0.1' }) });
  const ids: string[] = [];
  for (let n = 0; n < DOCUMENTS; n++) {
    const id = randomUUID();
    const key = `tenants/${tenantId}/documents/${id}`;
    await blobs.put(key, handbook(n), { contentType: 'text/markdown' });
    await database.db
      .insertInto('documents')
      .values(
        documentRow({
          id, tenant_id: tenantId, owner: 'acme:alice', visibility: 'scope', scope: 'acme:alice', allowed_roles: [], allowed_groups: [],
          title: `handbook ${n}`, content_type: 'text/markdown', blob_key: key, status: 'uploaded', uploaded_at: new Date(),
        }),
      )
      .execute();
    ids.push(id);
  }
  const target = { space: `local|hash|${DIMENSIONS}`, baseUrl: 'http://unused', apiKey: 'unused', model: 'hash', dimensions: DIMENSIONS };
  const worker = new IngestWorker({
    db: database.db,
    blobs,
    configurations: { load: async () => ({ tenantId, version: 1, digest: 'x', document: { retrieval: { embedding: { provider: 'p', model: 'hash', dimensions: DIMENSIONS } }, providers: [{ id: 'p', kind: 'openai_compatible', base_url: target.baseUrl, api_key: 'k', models: [] }] } as never }) },
    embed: localEmbed,
    vectors: new PgVectorIndex(database.db, silentLogger()),
    logger: silentLogger(),
    owner: 'bench',
    leaseSeconds: 120,
    concurrency: 1,
  });
  for (const id of ids) await enqueueIngest(database.db, { id, tenant_id: tenantId });
  const started = performance.now();
  while (await worker.runOne()) {
    // one job at a time, back to back
  }
  const seconds = (performance.now() - started) / 1000;
  const chunks = Number((await database.db.selectFrom('document_chunks').select((eb) => eb.fn.countAll().as('n')).where('tenant_id', '=', tenantId).executeTakeFirstOrThrow()).n);
  const vectors = Number(
    (
      await database.db
        .selectFrom('chunk_embeddings as e')
        .innerJoin('document_chunks as c', 'c.id', 'e.chunk_id')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('c.tenant_id', '=', tenantId)
        .where('e.space', '=', space)
        .executeTakeFirstOrThrow()
    ).n,
  );
  if (chunks !== DOCUMENTS * SECTIONS_PER_DOCUMENT || vectors !== chunks) throw new Error(`ingested ${chunks} chunks and ${vectors} vectors, expected ${DOCUMENTS * SECTIONS_PER_DOCUMENT} of each`);
  return { chunks, seconds, chunksPerSecond: chunks / seconds };
}

async function parseAndChunkOnly(): Promise<Record<string, number>> {
  const started = performance.now();
  let chunks = 0;
  for (let n = 0; n < DOCUMENTS; n++) chunks += chunkDocument(await parseDocument('text/markdown', Buffer.from(handbook(n)))).length;
  const seconds = (performance.now() - started) / 1000;
  return { chunks, seconds, chunksPerSecond: chunks / seconds };
}

/** In a fresh process: idle RSS, then the peak while parsing and chunking a PDF of about 100 MB. */
async function pdfMemoryProbe(): Promise<Record<string, number>> {
  // Pages of 60 lines of ten words, as a text PDF lays them out: about 5.8 KB of PDF a page.
  const pages = Array.from({ length: PDF_PAGES }, (_, i) => Array.from({ length: 60 }, (_, line) => `${words(i * 60 + line, 10)}.`).join('\n'));
  const pdf = minimalPdf(pages);
  const status = () => {
    const text = readFileSync('/proc/self/status', 'utf8');
    const kib = (field: string) => Number(/(\d+) kB/.exec(text.split('\n').find((line) => line.startsWith(`${field}:`)) ?? '')?.[1] ?? Number.NaN);
    return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
  };
  global.gc?.();
  const idle = status();
  const started = performance.now();
  const chunks = chunkDocument(await parseDocument('application/pdf', pdf)).length;
  const seconds = (performance.now() - started) / 1000;
  const after = status();
  return { pdfMiB: pdf.length / 2 ** 20, idleRssMiB: idle.rss, peakRssMiB: after.peak, addedPeakMiB: after.peak - idle.rss, chunks, seconds };
}

export async function run(): Promise<BenchReport> {
  const teardown = new Teardown();
  try {
    const rows: Row[] = [];
    const caseName = `${DOCUMENTS} Markdown documents, ${DOCUMENTS * SECTIONS_PER_DOCUMENT} chunks, one worker`;
    rows.push({ case: caseName, impl: 'parse and chunk alone, in memory', baseline: true, figures: await parseAndChunkOnly() });
    const spaces = [
      { indexedSpace: false, label: 'a space below its index' },
      { indexedSpace: true, label: `a space past ${INDEX_FROM_VECTORS.toLocaleString('en-US')} vectors (HNSW kept)` },
    ];
    for (const { indexedSpace, label } of spaces) {
      const dir = makeTempDir('bench-ingest');
      const embedded = await openDatabase<RuntimeSchema>({ driver: 'pglite', dataDir: join(dir, 'db') });
      try {
        rows.push({ case: caseName, impl: `ours, embedded (PGlite), ${label}`, figures: await pipeline(embedded, dir, { indexedSpace }) });
      } finally {
        await embedded.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
    if (postgresBinaries()) {
      const postgres = await startPostgres();
      teardown.add(() => postgres.stop());
      for (const { indexedSpace, label } of spaces) {
        const database = await openDatabase<RuntimeSchema>({ driver: 'postgres', url: await postgres.createDatabase() });
        teardown.add(() => database.close());
        const dir = makeTempDir('bench-ingest-pg');
        teardown.add(() => rmSync(dir, { recursive: true, force: true }));
        rows.push({ case: caseName, impl: `ours, PostgreSQL, ${label}`, figures: await pipeline(database, dir, { indexedSpace }) });
      }
    }
    const throughput: Table = finishTable({
      title: 'ingest: chunks per second through one worker (fast local embedder)',
      columns: [
        { key: 'chunks', label: 'chunks' },
        { key: 'seconds', label: 's', ratio: true },
        { key: 'chunksPerSecond', label: 'chunks/s', ratio: true },
      ],
      rows,
      note: 'ours: blob read, parse, chunk, embed (hash vectors, 384 dimensions), write the generation and its vectors in one transaction, one job at a time. Target ≥ 2,000 chunks/s.',
    });
    const memory = await runJsonChild<Record<string, number>>(new URL(import.meta.url).pathname, ['probe'], { nodeArgs: ['--expose-gc'], what: 'the PDF memory probe' });
    const memoryTable: Table = {
      title: 'ingest: memory while reading a large PDF (fresh process)',
      columns: [
        { key: 'pdfMiB', label: 'PDF MiB' },
        { key: 'idleRssMiB', label: 'idle RSS MiB' },
        { key: 'peakRssMiB', label: 'peak RSS MiB' },
        { key: 'addedPeakMiB', label: 'peak over idle MiB' },
        { key: 'chunks', label: 'chunks' },
        { key: 'seconds', label: 's' },
      ],
      rows: [{ case: `${PDF_PAGES.toLocaleString('en-US')} pages of text`, impl: 'parse (PDF.js) and chunk', figures: memory }],
    };
    return { name: 'ingest', tables: [throughput, memoryTable], skipped: postgresBinaries() ? [] : ['ingest on PostgreSQL: binaries missing'] };
  } finally {
    await teardown.run();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2] === 'probe') {
  process.stdout.write(`${JSON.stringify(await pdfMemoryProbe())}\n`);
}
