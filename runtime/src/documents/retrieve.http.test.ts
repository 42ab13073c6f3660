// POST /documents/retrieve in both setups: by meaning and by words, fused; only what the caller sees, and still k
// results when most of the nearest chunks belong to documents the caller may not see; by words alone when the
// project has no embedding model; restricted to named documents; refused without documents:read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import type { DocumentOutput } from './schemas.js';

const EMBEDDING_MODEL = 'embed-small';
const DIMENSIONS = 32;

interface Retrieved {
  results: { document_id: string; title: string; text: string; heading_path: string[]; matched: string[]; score: number }[];
  mode: string;
}

describe.each(availableSetups())('document retrieval (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  let fake: FakeOpenAIServer;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-embeddings-0002', chatModels: ['chat-model'], embeddingModels: { [EMBEDDING_MODEL]: DIMENSIONS }, rerankModels: ['rerank-small'] });
    rt = await startTestRuntime({ env: { ...((await services?.env()) ?? {}), AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', INGEST_CONCURRENCY: '4' } });
  });
  afterAll(async () => {
    await rt?.stop();
    await fake?.stop();
    await services?.stop();
  });

  type Minter = TestTenant & { token(grant?: Partial<AccessTokenGrant>): Promise<string> };
  async function tenant(options: { embedding?: boolean; rerank?: string } = {}): Promise<Minter> {
    const t = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'documents:read', 'documents:write'] } });
    const embedding = { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: DIMENSIONS };
    const pushed = await t.reconfigure({
      providers: [{ id: 'cred-1', kind: 'openai_compatible', base_url: fake.url, api_key: fake.apiKey, models: ['chat-model'] }],
      ...(options.embedding === false ? {} : { retrieval: { embedding, ...(options.rerank ? { rerank: { provider: 'cred-1', model: options.rerank } } : {}) } }),
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    return Object.assign(t, { token: (grant: Partial<AccessTokenGrant> = {}) => t.mint({ sub: 'acme:alice', scope: 'acme:alice', ...grant }) });
  }
  const post = (path: string, token: string, body: unknown) => rt.endUser(path, token, { method: 'POST', body: JSON.stringify(body) });
  async function upload(token: string, title: string, text: string, extra: Record<string, unknown> = {}): Promise<DocumentOutput> {
    const res = await post('/documents?wait=30', token, { title, text, content_type: 'text/markdown', ...extra });
    expect(res.status, await res.clone().text()).toBe(201);
    const doc = (await res.json()) as DocumentOutput;
    expect(doc.status).toBe('ready');
    return doc;
  }
  async function retrieve(token: string, body: Record<string, unknown>): Promise<Retrieved> {
    const res = await post('/documents/retrieve', token, body);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as Retrieved;
  }

  it('finds by words and by meaning, fused, best first, with each chunk\'s place', async () => {
    const t = await tenant();
    const alice = await t.token();
    await upload(alice, 'Returns', '# Returns\nItems can be returned within 30 days.\n\n## Refunds\nThe refund window closes 30 days after delivery.');
    await upload(alice, 'Shipping', '# Shipping\nOrders ship from Lisbon every weekday.');
    const byWords = await retrieve(alice, { query: 'When does the refund window close?', k: 3 });
    expect(byWords.mode).toBe('hybrid');
    expect(byWords.results[0]).toMatchObject({ title: 'Returns', heading_path: ['Returns', 'Refunds'], text: '## Refunds\nThe refund window closes 30 days after delivery.' });
    expect(byWords.results[0]!.matched).toContain('keyword');
    // The fake embeds a text to the same vector every time: a chunk's own text is its nearest neighbour.
    const byMeaning = await retrieve(alice, { query: '# Shipping\nOrders ship from Lisbon every weekday.', k: 1 });
    expect(byMeaning.results).toHaveLength(1);
    expect(byMeaning.results[0]).toMatchObject({ title: 'Shipping', matched: ['vector', 'keyword'] });
    const scores = (await retrieve(alice, { query: 'refund shipping days', k: 5 })).results.map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  it('searches only what the caller sees, and still answers k chunks when the nearest ones are hidden', async () => {
    const t = await tenant();
    const alice = await t.token();
    const bob = await t.token({ sub: 'acme:bob', scope: 'acme:bob' });
    const secret = 'The merger closes on Friday.';
    // Thirty of Bob's own documents, each with the very text Alice will ask: the nearest chunks are all his.
    for (let i = 0; i < 30; i++) await upload(bob, `bob ${i}`, secret, { visibility: 'self' });
    for (let i = 0; i < 6; i++) await upload(alice, `alice ${i}`, `Note ${i}: the merger is public news on ${i} channels.`);
    const found = await retrieve(alice, { query: secret, k: 5 });
    expect(found.results).toHaveLength(5);
    expect(found.results.every((r) => r.title.startsWith('alice '))).toBe(true);
    // Bob sees his own; an admin does not see Bob's self documents either.
    expect((await retrieve(bob, { query: secret, k: 3 })).results.map((r) => r.title.startsWith('bob '))).toEqual([true, true, true]);
    const admin = await t.token({ sub: 'acme:it', scope: 'acme:it', roles: ['admin'] });
    expect((await retrieve(admin, { query: secret, k: 10 })).results.some((r) => r.title.startsWith('bob '))).toBe(false);
    // Another tenant sees none of it.
    const stranger = await (await tenant()).token({ roles: ['admin'] });
    expect((await retrieve(stranger, { query: secret, k: 10 })).results).toEqual([]);
  });

  it('searches by words alone without an embedding model, and only the documents named', async () => {
    const t = await tenant({ embedding: false });
    const alice = await t.token();
    const a = await upload(alice, 'A', 'Invoices are due within 14 days.');
    await upload(alice, 'B', 'Invoices from abroad are due within 30 days.');
    const all = await retrieve(alice, { query: 'invoices due', k: 5 });
    expect(all.mode).toBe('keyword');
    expect(all.results.map((r) => r.title).sort()).toEqual(['A', 'B']);
    expect(all.results.every((r) => r.matched.join() === 'keyword')).toBe(true);
    expect((await retrieve(alice, { query: 'invoices due', k: 5, document_ids: [a.id] })).results.map((r) => r.title)).toEqual(['A']);
    expect((await retrieve(alice, { query: 'nothing like it', k: 5 })).results).toEqual([]);
  });

  it('asks for documents:read, and refuses a query it cannot take', async () => {
    const t = await tenant();
    const writer = await t.token({ capabilities: ['documents:write'] });
    const denied = await post('/documents/retrieve', writer, { query: 'x' });
    expect(denied.status).toBe(403);
    const alice = await t.token();
    expect((await post('/documents/retrieve', alice, { query: '' })).status).toBe(422);
    expect((await post('/documents/retrieve', alice, { query: 'x', k: 51 })).status).toBe(422);
    expect((await post('/documents/retrieve', alice, { query: 'x'.repeat(4001) })).status).toBe(422);
  });

  it("orders the best candidates with the project's rerank model, and answers in the fused order when it fails", async () => {
    const t = await tenant({ rerank: 'rerank-small' });
    const alice = await t.token();
    // Keyword search ranks the long, repetitive note first; the reranker scores by the share of the query's words.
    await upload(alice, 'Noise', 'kettle kettle kettle kettle kettle kettle descaling');
    const exact = await upload(alice, 'Kettle care', 'To descale the kettle, boil vinegar and water weekly.');
    const ranked = (await retrieve(alice, { query: 'descale kettle vinegar weekly', k: 2 })) as Retrieved & { reranked: boolean };
    expect(ranked.reranked).toBe(true);
    expect(ranked.results[0]!.document_id).toBe(exact.id);
    expect(ranked.results[0]!.score).toBe(1);
    expect(ranked.results.map((r) => r.score)).toEqual([...ranked.results.map((r) => r.score)].sort((a, b) => b - a));
    const call = fake.requests.filter((r) => r.path === '/rerank').at(-1)!;
    expect(call.body).toMatchObject({ model: 'rerank-small', query: 'descale kettle vinegar weekly', top_n: 2 });
    expect((call.body as { documents: string[] }).documents.length).toBeGreaterThanOrEqual(2);

    const broken = await tenant({ rerank: 'no-such-reranker' });
    const bob = await broken.token();
    await upload(bob, 'Kettle care', 'To descale the kettle, boil vinegar and water weekly.');
    const fallback = (await retrieve(bob, { query: 'descale kettle', k: 3 })) as Retrieved & { reranked: boolean };
    expect(fallback.reranked).toBe(false);
    expect(fallback.results).toHaveLength(1);
  });
});
