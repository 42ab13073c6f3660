// A project's own Pinecone index on a deployment whose index is pgvector (docs/decisions/0047), through the real
// client against protocol-level fakes of two Pinecone indexes: the tenant's vectors go to its own index and nowhere
// else, its key is sealed at rest and shown redacted, a move to another index is built in the background while
// searches keep answering, a change of visibility follows into every index that holds the tenant's vectors, and the
// erase empties them all, even once the configuration no longer names them, retrying an index that was down.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';
import { FakePineconeServer } from '@agentplane/test/fakes/pinecone-server';
import { eventually } from '@agentplane/test/harness/eventually';
import { configuredTenant, startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';
import type { DocumentOutput } from './schemas.js';

const EMBEDDING_MODEL = 'embed-small';
const DIMENSIONS = 16;
const OWN_KEY = 'pc-own-index-key-0001';
const NEXT_KEY = 'pc-next-index-key-0002';

describe("a project's own Pinecone index", () => {
  let rt: TestRuntime;
  let own: FakePineconeServer;
  let next: FakePineconeServer;
  let provider: FakeOpenAIServer;

  beforeAll(async () => {
    own = await FakePineconeServer.start({ apiKey: OWN_KEY, dimension: DIMENSIONS });
    next = await FakePineconeServer.start({ apiKey: NEXT_KEY, dimension: DIMENSIONS });
    provider = await FakeOpenAIServer.start({ apiKey: 'sk-test-embeddings-0047', chatModels: ['chat-model'], embeddingModels: { [EMBEDDING_MODEL]: DIMENSIONS } });
    rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' } });
  });
  afterAll(async () => {
    await rt?.stop();
    await provider?.stop();
    await Promise.all([own?.stop(), next?.stop()]);
  });

  const retrievalWith = (index?: FakePineconeServer) => ({
    providers: [{ id: 'cred-1', kind: 'openai_compatible' as const, base_url: provider.url, api_key: provider.apiKey, models: ['chat-model'] }],
    retrieval: {
      embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: DIMENSIONS },
      ...(index ? { vector_index: { provider: 'pinecone', index_host: index.host, api_key: index.apiKey } } : {}),
    },
  });
  const send = (token: string, path: string, method: string, body?: unknown) => rt.endUser(path, token, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const byMeaning = async (token: string, query: string, documentId: string) => {
    const answer = (await (await send(token, '/documents/retrieve', 'POST', { query })).json()) as { results: { document_id: string; matched: string[] }[] };
    return answer.results.find((result) => result.document_id === documentId)?.matched.includes('vector') ?? false;
  };
  const queriesTo = (index: FakePineconeServer) => index.requests.filter((request) => request.path === '/query').length;

  it("keeps the tenant's vectors in its own index only, with the key sealed and shown redacted", async () => {
    const ownTenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'documents:read', 'documents:write'] } });
    const sharedTenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'documents:read', 'documents:write'] } });
    expect((await ownTenant.reconfigure(retrievalWith(own) as never)).status).toBe(200);
    expect((await sharedTenant.reconfigure(retrievalWith() as never)).status).toBe(200);

    // The key is sealed in the stored configuration and redacted in the answer.
    const shown = await (await rt.admin(`/tenants/${ownTenant.tenantId}/configuration`)).text();
    expect(shown).not.toContain(OWN_KEY);
    expect(JSON.parse(shown).retrieval.vector_index).toEqual({ provider: 'pinecone', index_host: own.host, api_key: `****${OWN_KEY.slice(-4)}` });
    const row = (await sql<{ row: string }>`select document::text as row from tenant_configurations where tenant_id = ${ownTenant.tenantId}`.execute(rt.runtime.database.db)).rows[0]!.row;
    expect(row).not.toContain(OWN_KEY);
    expect(row).toMatch(/"sealed_api_key": ?"v1\./);

    const alice = await ownTenant.mint({ sub: 'acme:alice', scope: 'acme' });
    const carol = await sharedTenant.mint({ sub: 'acme:carol', scope: 'acme' });
    const mine = (await (await send(alice, '/documents?wait=20', 'POST', { title: 'Boilers', text: '# Boilers\nBleed the radiators before winter.' })).json()) as DocumentOutput;
    const theirs = (await (await send(carol, '/documents?wait=20', 'POST', { title: 'Gutters', text: '# Gutters\nClear the leaves in autumn.' })).json()) as DocumentOutput;
    expect([mine.status, theirs.status]).toEqual(['ready', 'ready']);

    // Alice's vectors are in her project's index, in her tenant's namespace; Carol's are not there (pgvector holds them).
    expect([...own.records(ownTenant.tenantId).values()].map((record) => record.metadata.document_id)).toEqual([mine.id]);
    expect(own.namespacesInUse()).toEqual([ownTenant.tenantId]);
    const pgvectorRows = async (tenantId: string) =>
      Number(
        (
          await sql<{ n: string }>`select count(*) as n from chunk_embeddings e join document_chunks c on c.id = e.chunk_id where c.tenant_id = ${tenantId}`.execute(
            rt.runtime.database.db,
          )
        ).rows[0]!.n,
      );
    expect(await pgvectorRows(ownTenant.tenantId)).toBe(0);
    expect(await pgvectorRows(sharedTenant.tenantId)).toBeGreaterThan(0);

    // Both find their own by meaning, each from where its vectors are.
    const before = queriesTo(own);
    expect(await byMeaning(alice, 'radiators winter', mine.id)).toBe(true);
    expect(queriesTo(own)).toBe(before + 1);
    expect(await byMeaning(carol, 'leaves autumn', theirs.id)).toBe(true);
    expect(queriesTo(own)).toBe(before + 1);
  });

  it('moves to another index in the background, follows changes into both, and the erase empties every one, retrying an index that was down', async () => {
    const tenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'documents:read', 'documents:write'] } });
    expect((await tenant.reconfigure(retrievalWith(own) as never)).status).toBe(200);
    const alice = await tenant.mint({ sub: 'acme:alice', scope: 'acme' });
    const bob = await tenant.mint({ sub: 'acme:bob', scope: 'acme:bob' });
    const doc = (await (await send(alice, '/documents?wait=20', 'POST', { title: 'Boilers', text: '# Boilers\nBleed the radiators before winter.', visibility: 'self' })).json()) as DocumentOutput;
    expect(doc.status).toBe('ready');
    expect(own.records(tenant.tenantId).size).toBe(1);

    // The move: the next index fills in the background; searches answer by meaning all along.
    expect((await tenant.reconfigure(retrievalWith(next) as never)).status).toBe(200);
    expect(await byMeaning(alice, 'radiators winter', doc.id)).toBe(true);
    await eventually(async () => next.records(tenant.tenantId).size === 1, { what: "the document's vectors in the next index" });
    await eventually(async () => {
      const before = queriesTo(next);
      return (await byMeaning(alice, 'radiators winter', doc.id)) && queriesTo(next) === before + 1;
    }, { what: 'searches answered from the next index' });

    // A change of visibility follows into both indexes (the old one still holds the old space's vectors).
    expect(await byMeaning(bob, 'radiators winter', doc.id)).toBe(false);
    expect((await send(alice, `/documents/${doc.id}`, 'PATCH', { visibility: 'scope' })).status).toBe(200);
    for (const index of [own, next]) expect([...index.records(tenant.tenantId).values()][0]!.metadata).toMatchObject({ visibility: 'scope', scope: 'acme' });
    expect(await byMeaning(bob, 'radiators winter', doc.id)).toBe(true);

    // Back to the deployment's index: the configuration names neither Pinecone index any more.
    expect((await tenant.reconfigure(retrievalWith() as never)).status).toBe(200);
    await eventually(async () => byMeaning(alice, 'radiators winter', doc.id), { what: 'found by meaning on pgvector' });

    // The erase, with the old index down: reported incomplete, and the collected indexes kept (keys sealed).
    own.unavailable = true;
    const first = (await (await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' })).json()) as { complete: boolean; steps: { step: string; outcome: string }[] };
    expect(first.complete).toBe(false);
    expect(first.steps).toContainEqual(expect.objectContaining({ step: 'vectors', outcome: 'failed' }));
    expect(next.records(tenant.tenantId).size).toBe(0);
    const kept = (await sql<{ collected: string }>`select collected::text as collected from tenant_erasures where tenant_id = ${tenant.tenantId}`.execute(rt.runtime.database.db)).rows[0]!.collected;
    expect(kept).toContain(own.host);
    expect(kept).not.toContain(OWN_KEY);

    // Retried once the index is back: complete, nothing left anywhere, and nothing kept.
    own.unavailable = false;
    const second = (await (await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' })).json()) as { complete: boolean; steps: { step: string; outcome: string; items?: number }[] };
    expect(second.complete).toBe(true);
    expect(second.steps).toContainEqual(expect.objectContaining({ step: 'vectors', outcome: 'done', items: 2 }));
    expect(own.records(tenant.tenantId).size).toBe(0);
    const after = (await sql<{ collected: string }>`select collected::text as collected from tenant_erasures where tenant_id = ${tenant.tenantId}`.execute(rt.runtime.database.db)).rows[0]!.collected;
    expect(after).toBe('{}');
  });
});
