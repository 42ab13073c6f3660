// Retrieval against a brute-force reference of who may see what, on PGlite and on PostgreSQL: 400 documents with
// random owners, visibilities, scopes, roles and groups (and some of the project's corpus) in two tenants, and
// 10,000 random callers. Every document has one chunk holding a word every query matches and a vector, so both
// halves of the search (keyword and vector) run, and k is larger than any caller's share: each caller must get back
// exactly the documents the reference says they may see. One leak or one wrongly hidden document fails the test.
// The same population runs against the Pinecone adapter's vector search alone (its visibility rule is a metadata
// filter, with no keyword half to make up for a chunk it wrongly hides), through the real client and a fake of
// Pinecone's data plane.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '@agentplane/lib/db/database';
import { referenceCanSee } from '@agentplane/test/fakes/document-acl';
import { documentRow, insertTenants, storesUnderTest } from '@agentplane/test/fakes/document-rows';
import { silentLogger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../store/schema.js';
import type { EmbeddingTarget } from '../tenants/configuration.js';
import type { DocumentAcl, DocumentReader } from './access.js';
import { Retriever } from './retrieval.js';
import { FakePineconeServer } from '@agentplane/test/fakes/pinecone-server';
import { PgVectorIndex } from './vectors/pgvector.js';
import { PineconeIndex } from './vectors/pinecone.js';

const TENANTS = [randomUUID(), randomUUID()];
const PATHS = ['acme', 'acme:sales', 'acme:sales:alice', 'acme:sales:bob', 'acme:sales:bob:notes', 'acme:support', 'acme:support:erin', 'acme2', 'acme2:zed'];
const ROLES = ['admin', 'owner', 'service', 'lead', 'member'];
const GROUPS = ['sales', 'support', 'ops'];
const DOCUMENTS = 400;
const CALLERS = 10_000;
const DIMENSIONS = 8;
const target: EmbeddingTarget = { space: `test|property|${DIMENSIONS}`, modelSpace: `test|property|${DIMENSIONS}`, providerId: 'p', baseUrl: 'http://unused', apiKey: 'unused', model: 'property', dimensions: DIMENSIONS };

const ancestorOf = (path: string, depth: number) => {
  const segments = path.split(':');
  return segments.slice(0, Math.max(1, segments.length - (depth % segments.length))).join(':');
};
const someOf = <T>(values: T[]) => fc.subarray(values, { maxLength: 2 });
const documentArbitrary = fc
  .record({
    corpus: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    tenant: fc.constantFrom(...TENANTS),
    owner: fc.constantFrom(...PATHS),
    self: fc.boolean(),
    depth: fc.nat(),
    allowed_roles: someOf(ROLES.slice(3)),
    allowed_groups: someOf(GROUPS),
  })
  .map(({ corpus, tenant, owner, self, depth, allowed_roles, allowed_groups }): DocumentAcl & { id: string } =>
    corpus
      ? { id: randomUUID(), tenant_id: tenant, owner: null, visibility: 'project', scope: null, allowed_roles, allowed_groups }
      : { id: randomUUID(), tenant_id: tenant, owner, visibility: self ? 'self' : 'scope', scope: self ? null : ancestorOf(owner, depth), allowed_roles, allowed_groups },
  );
const callerArbitrary = fc
  .record({
    tenantId: fc.constantFrom(...TENANTS),
    sub: fc.constantFrom(...PATHS),
    depth: fc.nat(),
    dataScope: fc.option(fc.constantFrom(...PATHS), { nil: undefined, freq: 4 }),
    roles: someOf(ROLES),
    groups: someOf(GROUPS),
  })
  .map(({ depth, ...caller }): DocumentReader => ({ ...caller, scope: ancestorOf(caller.sub, depth) }));

/** Each caller finds exactly the documents the reference lets them see: no leak, nothing wrongly hidden. */
async function expectExactlyTheVisible(documents: (DocumentAcl & { id: string })[], callers: DocumentReader[], find: (caller: DocumentReader) => Promise<string[]>): Promise<void> {
  const problems: string[] = [];
  let visibleTotal = 0;
  for (const caller of callers) {
    const expected = new Set(documents.filter((doc) => referenceCanSee(caller, doc)).map((doc) => doc.id));
    visibleTotal += expected.size;
    const got = new Set(await find(caller));
    const leaked = [...got].filter((id) => !expected.has(id));
    const hidden = [...expected].filter((id) => !got.has(id));
    if (leaked.length > 0 || hidden.length > 0) problems.push(`${JSON.stringify(caller)}: ${leaked.length} leaked, ${hidden.length} wrongly hidden`);
    if (problems.length >= 5) break;
  }
  expect(problems).toEqual([]);
  // The population is not degenerate: callers see something, and not everything.
  expect(visibleTotal / callers.length).toBeGreaterThan(5);
  expect(visibleTotal / callers.length).toBeLessThan(documents.length / 2);
}

const stores = storesUnderTest();

describe.each(stores)('retrieval against the visibility reference on $name', (store) => {
  let database: Database<RuntimeSchema>;
  const documents = fc.sample(documentArbitrary, { numRuns: DOCUMENTS, seed: 14 });
  const callers = fc.sample(callerArbitrary, { numRuns: CALLERS, seed: 15 });

  beforeAll(async () => {
    database = await store.open();
    await insertTenants(database.db, TENANTS);
    const now = new Date();
    await database.db
      .insertInto('documents')
      .values(
        documents.map((doc, i) => documentRow({ ...doc, title: `document ${i}`, generation: 1, chunk_count: 1, uploaded_at: now, ingested_at: now })),
      )
      .execute();
    const chunks = documents.map((doc, i) => ({
      id: randomUUID(),
      document_id: doc.id,
      tenant_id: doc.tenant_id,
      generation: 1,
      ordinal: 0,
      content: `handbook passage ${i}`,
      start_offset: 0,
      end_offset: 10,
      page: null,
      tokens: 3,
    }));
    await database.db.insertInto('document_chunks').values(chunks).execute();
    await database.db
      .insertInto('chunk_embeddings')
      .values(chunks.map((chunk, i) => ({ chunk_id: chunk.id, space: target.space, embedding: `[${Array.from({ length: DIMENSIONS }, (_, d) => Math.sin(i * 7 + d)).join(',')}]` })))
      .execute();
  }, 120_000);
  afterAll(async () => {
    await database?.close();
    await store.stop();
  });

  it(`answers each of ${CALLERS.toLocaleString('en-US')} random callers exactly the documents the reference lets them see`, async () => {
    const query = [1, 0, 0, 0, 0, 0, 0, 0];
    const retriever = new Retriever(database.db, async () => [query], new PgVectorIndex(database.db, silentLogger()));
    await expectExactlyTheVisible(documents, callers, async (caller) =>
      (await retriever.retrieve(caller, target, { query: 'handbook', k: DOCUMENTS })).results.map((result) => result.document_id),
    );
  }, 900_000);
});

describe('the Pinecone adapter against the visibility reference', () => {
  let fake: FakePineconeServer;
  let index: PineconeIndex;
  const documents = fc.sample(documentArbitrary, { numRuns: DOCUMENTS, seed: 16 });
  const callers = fc.sample(callerArbitrary, { numRuns: CALLERS, seed: 17 });
  const documentOfChunk = new Map<string, string>();

  beforeAll(async () => {
    fake = await FakePineconeServer.start({ apiKey: 'pc-property-key', dimension: DIMENSIONS });
    index = new PineconeIndex({ apiKey: 'pc-property-key', host: fake.host });
    for (const [i, doc] of documents.entries()) {
      const chunkId = randomUUID();
      documentOfChunk.set(chunkId, doc.id);
      await index.write(target, { ...doc, generation: 1 }, [{ chunkId, ordinal: 0, values: Array.from({ length: DIMENSIONS }, (_, d) => Math.sin(i * 7 + d)) }]);
    }
  }, 120_000);
  afterAll(async () => {
    await fake?.stop();
  });

  it(`finds for each of ${CALLERS.toLocaleString('en-US')} random callers exactly the documents the reference lets them see`, async () => {
    await expectExactlyTheVisible(documents, callers, async (caller) =>
      (await index.nearest(caller, target, [1, 0, 0, 0, 0, 0, 0, 0], DOCUMENTS)).map((hit) => documentOfChunk.get(hit.chunk_id)!),
    );
  }, 900_000);
});

