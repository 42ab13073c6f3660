// The pgvector adapter gives a space its approximate (HNSW) index only once the space holds enough vectors for a
// search to use it: before that every search is exact, and writes do not pay for keeping a graph. Once made, the
// index is found by another process (or after a restart) whatever the count.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '@agentplane/lib/db/database';
import { silentLogger } from '@agentplane/lib/logging';
import { documentRow, insertTenants, storesUnderTest } from '@agentplane/test/fakes/document-rows';
import type { RuntimeSchema } from '../../store/schema.js';
import type { EmbeddingTarget } from '../../tenants/configuration.js';
import { INDEX_FROM_VECTORS, PgVectorIndex } from './pgvector.js';

const DIMENSIONS = 8;
const space = `http://embedder|lazy|${DIMENSIONS}`;
const target: EmbeddingTarget = { space, modelSpace: space, providerId: 'p', baseUrl: 'http://embedder', apiKey: 'k', model: 'lazy', dimensions: DIMENSIONS };
const TENANT = randomUUID();
const [store] = storesUnderTest();

describe('the approximate index of a pgvector space', () => {
  let database: Database<RuntimeSchema>;
  const documentId = randomUUID();

  beforeAll(async () => {
    database = await store!.open();
    await insertTenants(database.db, [TENANT]);
    await database.db
      .insertInto('documents')
      .values(documentRow({ id: documentId, tenant_id: TENANT, owner: 'acme:alice', visibility: 'scope', scope: 'acme:alice', allowed_roles: [], allowed_groups: [], generation: 1 }))
      .execute();
  }, 120_000);
  afterAll(async () => {
    await database?.close();
    await store!.stop();
  });

  const indexes = async () =>
    (await sql<{ indexdef: string }>`select indexdef from pg_indexes where indexname like 'chunk_embeddings_hnsw_%'`.execute(database.db)).rows.map((row) => row.indexdef);
  /** `count` more chunks of the document, each with a vector in the space, written through `index`. */
  async function add(index: PgVectorIndex, count: number, from: number): Promise<void> {
    const ids = Array.from({ length: count }, () => randomUUID());
    for (let i = 0; i < count; i += 1_000) {
      await database.db
        .insertInto('document_chunks')
        .values(
          ids.slice(i, i + 1_000).map((id, j) => ({
            id, document_id: documentId, tenant_id: TENANT, generation: 1, ordinal: from + i + j, content: `chunk ${from + i + j}`, start_offset: 0, end_offset: 1, tokens: 1,
          })),
        )
        .execute();
    }
    const document = { id: documentId, tenant_id: TENANT, generation: 1, owner: 'acme:alice', visibility: 'scope' as const, scope: 'acme:alice', allowed_roles: [], allowed_groups: [] };
    await index.write(target, document, ids.map((chunkId, i) => ({ chunkId, ordinal: from + i, values: Array.from({ length: DIMENSIONS }, (_, d) => Math.sin((from + i) * 13 + d)) })));
  }

  it('is made once the space holds enough vectors, built over them, and found again by another process', async () => {
    const first = new PgVectorIndex(database.db, silentLogger());
    await first.prepare(target);
    await add(first, INDEX_FROM_VECTORS - 1, 0);
    await first.prepare(target);
    expect(await indexes()).toEqual([]);

    // Another process counts for itself: one more vector, and the next prepare (an ingest's, or a search's) makes it.
    const second = new PgVectorIndex(database.db, silentLogger());
    await add(second, 1, INDEX_FROM_VECTORS - 1);
    await second.prepare(target);
    const made = await indexes();
    expect(made).toHaveLength(1);
    expect(made[0]).toMatch(/USING hnsw/);
    expect(made[0]).toContain(space);

    // A third (a restart) sees it is there without counting past it, and searches as before.
    const third = new PgVectorIndex(database.db, silentLogger());
    await third.prepare(target);
    const reader = { tenantId: TENANT, sub: 'acme:alice', scope: 'acme:alice', dataScope: undefined, roles: [], groups: [] };
    const nearest = await third.nearest(reader, target, Array.from({ length: DIMENSIONS }, (_, d) => Math.sin(5 * 13 + d)), 3);
    expect(nearest).toHaveLength(3);
  }, 120_000);
});
