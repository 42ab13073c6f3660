// Documents with their vectors in Pinecone (VECTOR_INDEX=pinecone), through the real client against a protocol-level
// fake of Pinecone's data plane: ingestion writes each chunk's vector with its document's visibility as metadata in
// the tenant's namespace, retrieval finds by meaning only what the caller may see, a change of visibility follows
// into the index, a reingest leaves only the new generation, a delete and the tenant erase leave nothing behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';
import { FakePineconeServer } from '@agentplane/test/fakes/pinecone-server';
import { eventually } from '@agentplane/test/harness/eventually';
import { configuredTenant, startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';
import type { DocumentOutput } from './schemas.js';

const EMBEDDING_MODEL = 'embed-small';
const DIMENSIONS = 16;

describe('documents with Pinecone as the vector index', () => {
  let rt: TestRuntime;
  let pinecone: FakePineconeServer;
  let provider: FakeOpenAIServer;

  beforeAll(async () => {
    pinecone = await FakePineconeServer.start({ apiKey: 'pc-test-key-0001', dimension: DIMENSIONS });
    provider = await FakeOpenAIServer.start({ apiKey: 'sk-test-embeddings-0009', chatModels: ['chat-model'], embeddingModels: { [EMBEDDING_MODEL]: DIMENSIONS } });
    rt = await startTestRuntime({
      env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', VECTOR_INDEX: 'pinecone', PINECONE_API_KEY: 'pc-test-key-0001', PINECONE_INDEX_HOST: pinecone.host },
    });
  });
  afterAll(async () => {
    await rt?.stop();
    await provider?.stop();
    await pinecone?.stop();
  });

  it('writes, searches, follows, replaces and removes vectors in the tenant\'s namespace, and the erase empties it', async () => {
    const tenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'documents:read', 'documents:write'] } });
    const pushed = await tenant.reconfigure({
      providers: [{ id: 'cred-1', kind: 'openai_compatible', base_url: provider.url, api_key: provider.apiKey, models: ['chat-model'] }],
      retrieval: { embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: DIMENSIONS } },
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    const alice = await tenant.mint({ sub: 'acme:alice', scope: 'acme' });
    const bob = await tenant.mint({ sub: 'acme:bob', scope: 'acme:bob' });
    const send = (token: string, path: string, method: string, body?: unknown) => rt.endUser(path, token, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const retrieve = async (token: string, query: string) =>
      (await (await send(token, '/documents/retrieve', 'POST', { query })).json()) as { results: { document_id: string; matched: string[] }[]; mode: string };

    const created = await send(alice, '/documents?wait=20', 'POST', { title: 'Boilers', text: '# Boilers\nBleed the radiators before winter.', visibility: 'self' });
    expect(created.status, await created.clone().text()).toBe(201);
    const doc = (await created.json()) as DocumentOutput;
    const records = () => [...pinecone.records(tenant.tenantId).values()].filter((record) => record.metadata.document_id === doc.id);
    expect(records()).toHaveLength(1);
    expect(records()[0]!.metadata).toMatchObject({ visibility: 'self', owner: 'acme:alice', owner_paths: ['acme', 'acme:alice'], generation: 1 });

    // Found by meaning (the vector half answered from Pinecone) by its owner; not by Bob.
    const found = await retrieve(alice, 'radiators winter');
    expect(found.mode).toBe('hybrid');
    expect(found.results.find((r) => r.document_id === doc.id)?.matched).toContain('vector');
    expect((await retrieve(bob, 'radiators winter')).results).toEqual([]);

    // Shared with Alice's scope, which covers Bob: the index follows, and Bob finds it by meaning too.
    expect((await send(alice, `/documents/${doc.id}`, 'PATCH', { visibility: 'scope' })).status).toBe(200);
    expect(records()[0]!.metadata).toMatchObject({ visibility: 'scope', scope: 'acme' });
    expect((await retrieve(bob, 'radiators winter')).results.find((r) => r.document_id === doc.id)?.matched).toContain('vector');

    // A reingest writes the next generation and drops the previous one (just after it is swapped in).
    const again = await send(alice, `/documents/${doc.id}/reingest?wait=20`, 'POST');
    expect(again.status).toBe(202);
    expect(((await again.json()) as DocumentOutput).status).toBe('ready');
    await eventually(() => JSON.stringify(records().map((record) => record.metadata.generation)) === '[2]', { what: 'only generation 2 in the index' });

    expect((await send(alice, `/documents/${doc.id}`, 'DELETE')).status).toBe(200);
    expect(records()).toEqual([]);

    await send(alice, '/documents?wait=20', 'POST', { title: 'Kept', text: 'Something to erase.' });
    expect(pinecone.records(tenant.tenantId).size).toBeGreaterThan(0);
    const erased = await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' });
    const report = (await erased.json()) as { complete: boolean; steps: { step: string; outcome: string }[] };
    expect(report.complete).toBe(true);
    expect(report.steps).toContainEqual(expect.objectContaining({ step: 'vectors', outcome: 'done' }));
    expect(pinecone.records(tenant.tenantId).size).toBe(0);
  });
});
