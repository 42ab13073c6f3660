// The vector index contract, the same cases on both adapters: pgvector on the embedded store, and Pinecone through
// the real client against a protocol-level fake of its data plane. Nearest first among what the reader may see, with
// the filter inside the search (k visible results when the nearest belong to others); a rewrite replaces; a
// visibility change is followed; a document's older generations and a tenant's vectors are removed.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '@agentplane/lib/db/database';
import { silentLogger } from '@agentplane/lib/logging';
import { documentRow, insertTenants, storesUnderTest } from '@agentplane/test/fakes/document-rows';
import { FakePineconeServer } from '@agentplane/test/fakes/pinecone-server';
import type { RuntimeSchema } from '../../store/schema.js';
import type { EmbeddingTarget } from '../../tenants/configuration.js';
import type { DocumentReader } from '../access.js';
import { PgVectorIndex } from './pgvector.js';
import { PineconeIndex } from './pinecone.js';
import type { IndexedDocument, VectorIndex } from './port.js';

const DIMENSIONS = 4;
const target: EmbeddingTarget = { space: `http://embedder|model|${DIMENSIONS}`, modelSpace: `http://embedder|model|${DIMENSIONS}`, providerId: 'p', baseUrl: 'http://embedder', apiKey: 'k', model: 'model', dimensions: DIMENSIONS };
const TENANT = randomUUID();
const OTHER_TENANT = randomUUID();
const [store] = storesUnderTest();

interface Adapter {
  name: string;
  start(db: Database<RuntimeSchema>): Promise<{ index: VectorIndex; stop(): Promise<void>; stored(tenantId: string): Promise<number> }>;
}

const adapters: Adapter[] = [
  {
    name: 'pgvector',
    async start(database) {
      const index = new PgVectorIndex(database.db, silentLogger());
      return {
        index,
        stop: async () => {},
        stored: async (tenantId) =>
          (await database.db.selectFrom('chunk_embeddings as e').innerJoin('document_chunks as c', 'c.id', 'e.chunk_id').select('e.chunk_id').where('c.tenant_id', '=', tenantId).execute()).length,
      };
    },
  },
  {
    name: 'pinecone',
    async start() {
      const fake = await FakePineconeServer.start({ apiKey: 'pc-test-key', dimension: DIMENSIONS });
      return { index: new PineconeIndex({ apiKey: 'pc-test-key', host: fake.host }), stop: () => fake.stop(), stored: async (tenantId) => fake.records(tenantId).size };
    },
  },
];

describe.each(adapters)('the vector index contract on $name', (adapter) => {
  let database: Database<RuntimeSchema>;
  let index: VectorIndex;
  let stop: () => Promise<void>;
  let stored: (tenantId: string) => Promise<number>;

  beforeAll(async () => {
    database = await store!.open();
    await insertTenants(database.db, [TENANT, OTHER_TENANT]);
    ({ index, stop, stored } = await adapter.start(database));
    await index.prepare(target);
  }, 120_000);
  afterAll(async () => {
    await stop?.();
    await database?.close();
    await store!.stop();
  });

  const reader = (sub: string, extra: Partial<DocumentReader> = {}): DocumentReader => ({ tenantId: TENANT, sub, scope: sub, dataScope: undefined, roles: [], groups: [], ...extra });

  /** A document with one chunk per vector, in the store (the rows pgvector joins) and in the index. */
  async function put(acl: Partial<IndexedDocument> & { owner: string | null }, vectors: number[][], generation = 1): Promise<{ document: IndexedDocument; chunks: string[] }> {
    const document: IndexedDocument = { id: randomUUID(), tenant_id: TENANT, visibility: 'scope', scope: acl.owner, allowed_roles: [], allowed_groups: [], generation, ...acl };
    await database.db.insertInto('documents').values(documentRow({ ...document, generation, chunk_count: vectors.length })).execute();
    const chunks = vectors.map(() => randomUUID());
    await database.db
      .insertInto('document_chunks')
      .values(chunks.map((id, ordinal) => ({ id, document_id: document.id, tenant_id: document.tenant_id, generation, ordinal, content: `chunk ${ordinal}`, start_offset: 0, end_offset: 1, page: null, tokens: 1 })))
      .execute();
    await index.write(target, document, chunks.map((chunkId, ordinal) => ({ chunkId, ordinal, values: vectors[ordinal]! })));
    return { document, chunks };
  }
  const ids = async (who: DocumentReader, vector: number[], k: number, documentIds?: string[]) => (await index.nearest(who, target, vector, k, documentIds)).map((hit) => hit.chunk_id);

  it('answers the nearest chunks first, and k of those the reader may see when the nearest are others\'', async () => {
    const hidden = await put({ owner: 'acme:bob', visibility: 'self' }, Array.from({ length: 12 }, (_, i) => [1, 0.01 * i, 0, 0]));
    const mine = await put({ owner: 'acme:alice' }, [
      [0, 1, 0, 0],
      [0.5, 0.5, 0, 0],
      [0.9, 0.1, 0, 0],
    ]);
    const found = await ids(reader('acme:alice'), [1, 0, 0, 0], 3);
    expect(found).toEqual([mine.chunks[2], mine.chunks[1], mine.chunks[0]]);
    // Bob sees his own first.
    expect((await ids(reader('acme:bob'), [1, 0, 0, 0], 3)).every((id) => hidden.chunks.includes(id))).toBe(true);
    // Restricted to named documents.
    expect(await ids(reader('acme:bob'), [1, 0, 0, 0], 20, [mine.document.id])).toEqual([]);
    expect(await ids(reader('acme:alice'), [0, 1, 0, 0], 1, [mine.document.id])).toEqual([mine.chunks[0]]);
  });

  it('replaces a chunk written again, and follows a change of visibility', async () => {
    const doc = await put({ owner: 'acme:carol', visibility: 'self' }, [[0, 0, 1, 0]]);
    await index.write(target, doc.document, [{ chunkId: doc.chunks[0]!, ordinal: 0, values: [0, 0, 0.9, 0.1] }]);
    expect(await ids(reader('acme:carol'), [0, 0, 1, 0], 10, [doc.document.id])).toEqual([doc.chunks[0]]);
    const dave = reader('acme:dave', { roles: ['support'] });
    expect(await ids(dave, [0, 0, 1, 0], 10, [doc.document.id])).toEqual([]);
    // Shared with the whole of acme, for support only.
    const shared: IndexedDocument = { ...doc.document, visibility: 'scope', scope: 'acme', allowed_roles: ['support'] };
    await database.db.updateTable('documents').set({ visibility: 'scope', scope: 'acme', allowed_roles: ['support'] }).where('id', '=', doc.document.id).execute();
    await index.updateDocument(shared);
    expect(await ids(dave, [0, 0, 1, 0], 10, [doc.document.id])).toEqual([doc.chunks[0]]);
    expect(await ids(reader('acme:erin'), [0, 0, 1, 0], 10, [doc.document.id])).toEqual([]);
    expect(await ids(reader('acme:erin', { roles: ['admin'] }), [0, 0, 1, 0], 10, [doc.document.id])).toEqual([doc.chunks[0]]);
  });

  it("drops a document's older generations, then all of it, and a tenant's vectors, leaving others alone", async () => {
    const first = await put({ owner: 'acme:frank' }, [[0, 0, 0, 1]]);
    // The next generation, as the ingest worker writes it: new chunks, the document swapped, the old chunks gone.
    const next: IndexedDocument = { ...first.document, generation: 2 };
    const chunk = randomUUID();
    await database.db.insertInto('document_chunks').values({ id: chunk, document_id: next.id, tenant_id: TENANT, generation: 2, ordinal: 0, content: 'next', start_offset: 0, end_offset: 1, page: null, tokens: 1 }).execute();
    await index.write(target, next, [{ chunkId: chunk, ordinal: 0, values: [0, 0, 0.1, 1] }]);
    await database.db.updateTable('documents').set({ generation: 2 }).where('id', '=', next.id).execute();
    await database.db.deleteFrom('document_chunks').where('document_id', '=', next.id).where('generation', '<>', 2).execute();
    await index.removeDocument(TENANT, next.id, 2);
    expect(await ids(reader('acme:frank'), [0, 0, 0, 1], 10, [next.id])).toEqual([chunk]);

    await database.db.deleteFrom('documents').where('id', '=', next.id).execute();
    await index.removeDocument(TENANT, next.id);
    expect(await ids(reader('acme:frank'), [0, 0, 0, 1], 10, [next.id])).toEqual([]);

    const elsewhere: IndexedDocument = { id: randomUUID(), tenant_id: OTHER_TENANT, owner: 'globex:gina', visibility: 'scope', scope: 'globex:gina', allowed_roles: [], allowed_groups: [], generation: 1 };
    await database.db.insertInto('documents').values(documentRow({ ...elsewhere, generation: 1, chunk_count: 1 })).execute();
    const theirs = randomUUID();
    await database.db.insertInto('document_chunks').values({ id: theirs, document_id: elsewhere.id, tenant_id: OTHER_TENANT, generation: 1, ordinal: 0, content: 'x', start_offset: 0, end_offset: 1, page: null, tokens: 1 }).execute();
    await index.write(target, elsewhere, [{ chunkId: theirs, ordinal: 0, values: [1, 1, 1, 1] }]);
    // Another tenant's reader never finds this tenant's vectors, and the other way round.
    expect(await ids({ ...reader('globex:gina'), tenantId: OTHER_TENANT }, [1, 0, 0, 0], 50)).toEqual([theirs]);

    expect(await stored(TENANT)).toBeGreaterThan(0);
    await index.removeTenant(TENANT);
    // pgvector's vectors leave with the tenant's rows, purged in the same erase.
    if (index.name === 'pgvector') await database.db.deleteFrom('documents').where('tenant_id', '=', TENANT).execute();
    expect(await stored(TENANT)).toBe(0);
    expect(await stored(OTHER_TENANT)).toBe(1);
    await index.removeTenant(randomUUID());
  });
});
