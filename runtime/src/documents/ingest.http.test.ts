// Ingestion through HTTP, in both setups: an upload is read, chunked by its structure and embedded with the
// project's own model in batches, and its chunks are listed with their place in the document; a document that
// cannot be read fails with the reason (422 to a caller that waits, readable with GET) and leaves every other
// document alone; a provider that fails for a while is retried; a reingest swaps to a new generation; a job whose
// process died mid-document is taken up again once its lease lapses, and writes nothing twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { minimalPdf } from '@agentplane/test/fakes/documents';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import type { DocumentChunkOutput, DocumentOutput } from './schemas.js';

const EMBEDDING_MODEL = 'embed-small';
const DIMENSIONS = 24;

describe.each(availableSetups())('document ingestion (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  let fake: FakeOpenAIServer;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-embeddings-0001', chatModels: ['chat-model'], embeddingModels: { [EMBEDDING_MODEL]: DIMENSIONS, 'embed-large': 12 } });
    rt = await startTestRuntime({ env: { ...((await services?.env()) ?? {}), AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', INGEST_LEASE_SECONDS: '2' } });
  });
  afterAll(async () => {
    await rt?.stop();
    await fake?.stop();
    await services?.stop();
  });

  type Minter = TestTenant & { token(grant?: Partial<AccessTokenGrant>): Promise<string> };
  async function tenant(options: { embedding?: boolean } = {}): Promise<Minter> {
    const t = await configuredTenant(rt, { ceiling: { capabilities: ['documents:read', 'documents:write'] } });
    const providers = [{ id: 'cred-1', kind: 'openai_compatible', base_url: fake.url, api_key: fake.apiKey, models: ['chat-model'] }];
    const pushed = await t.reconfigure({
      providers,
      ...(options.embedding === false ? {} : { retrieval: { embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: DIMENSIONS } } }),
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    return Object.assign(t, { token: (grant: Partial<AccessTokenGrant> = {}) => t.mint({ sub: 'acme:alice', scope: 'acme:alice', ...grant }) });
  }
  const post = (path: string, token: string, body: unknown) => rt.endUser(path, token, { method: 'POST', body: JSON.stringify(body) });
  async function json<T>(response: Response, status: number): Promise<T> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return JSON.parse(text) as T;
  }
  async function chunksOf(token: string, id: string): Promise<DocumentChunkOutput[]> {
    return (await json<{ chunks: DocumentChunkOutput[] }>(await rt.endUser(`/documents/${id}/chunks?limit=200`, token), 200)).chunks;
  }
  const db = () => rt.runtime.database.db;

  const guide = [
    '# Returns',
    'Items can be returned within 30 days of delivery.',
    '',
    '## Refunds',
    'Refunds go back to the card that paid, within 5 working days.',
    '',
    '# Shipping',
    'Orders ship from Lisbon every weekday.',
  ].join('\n');

  it('reads, chunks and embeds an upload; its chunks keep their headings and their place', async () => {
    const t = await tenant();
    const token = await t.token();
    const before = fake.requestsTo('/embeddings').length;
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: guide, content_type: 'text/markdown', title: 'Guide' }), 201);
    expect(doc).toMatchObject({ status: 'ready', failure: null, chunk_count: 3 });
    expect(doc.ingested_at).not.toBeNull();
    const chunks = await chunksOf(token, doc.id);
    expect(chunks.map((c) => ({ path: c.heading_path, text: c.text }))).toEqual([
      { path: ['Returns'], text: '# Returns\nItems can be returned within 30 days of delivery.' },
      { path: ['Returns', 'Refunds'], text: '## Refunds\nRefunds go back to the card that paid, within 5 working days.' },
      { path: ['Shipping'], text: '# Shipping\nOrders ship from Lisbon every weekday.' },
    ]);
    // For Markdown the document's text is the upload itself: each chunk is its span of the file.
    for (const chunk of chunks) expect(guide.slice(chunk.start, chunk.end)).toBe(chunk.text);
    const requests = fake.requestsTo('/embeddings').slice(before);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.body).toMatchObject({ model: EMBEDDING_MODEL, input: chunks.map((c) => c.text) });
    const vectors = await db().selectFrom('chunk_embeddings').select(['chunk_id', 'space']).where('chunk_id', 'in', chunks.map((c) => c.id)).execute();
    expect(vectors).toHaveLength(3);
    expect(new Set(vectors.map((v) => v.space))).toEqual(new Set([`${fake.url}|${EMBEDDING_MODEL}|${DIMENSIONS}`]));
  });

  it('embeds a long document in batches of at most 64, in order', async () => {
    const t = await tenant();
    const token = await t.token();
    const before = fake.requestsTo('/embeddings').length;
    const long = Array.from({ length: 150 }, (_, i) => `# Section ${i}\nFact number ${i} is on its own.`).join('\n');
    const doc = await json<DocumentOutput>(await post('/documents?wait=30', token, { text: long, content_type: 'text/markdown' }), 201);
    expect(doc).toMatchObject({ status: 'ready', chunk_count: 150 });
    const inputs = fake.requestsTo('/embeddings').slice(before).map((request) => (request.body as { input: string[] }).input);
    expect(inputs.map((batch) => batch.length).sort((a, b) => b - a)).toEqual([64, 64, 22]);
    expect(inputs.flat().sort()).toEqual((await chunksOf(token, doc.id)).map((c) => c.text).sort());
  });

  it('fails a document it cannot read, with the reason, and leaves every other document alone', async () => {
    const t = await tenant();
    const token = await t.token();
    const good = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: 'A fine document.', title: 'good' }), 201);
    const form = new FormData();
    form.set('file', new Blob(['%PDF-1.7 and then nothing a PDF reader can use'], { type: 'application/pdf' }), 'broken.pdf');
    const failed = await rt.endUser('/documents?wait=20', token, { method: 'POST', body: form });
    expect(failed.status).toBe(422);
    const detail = ((await failed.json()) as { detail: { loc: string[]; msg: string }[] }).detail;
    expect(detail[0]!.msg).toMatch(/^the ingest of document [0-9a-f-]+ failed: not readable as PDF/);
    const id = detail[0]!.loc[1]!;
    const record = await json<DocumentOutput>(await rt.endUser(`/documents/${id}`, token), 200);
    expect(record).toMatchObject({ status: 'failed', chunk_count: 0 });
    expect(record.failure).toMatch(/^not readable as PDF/);
    expect((await rt.endUser(`/documents/${id}/chunks`, token)).status).toBe(422);
    expect(await json(await rt.endUser(`/documents/${good.id}`, token), 200)).toMatchObject({ status: 'ready', chunk_count: 1 });
    expect(await db().selectFrom('ingest_jobs').select('document_id').where('tenant_id', '=', t.tenantId).execute()).toEqual([]);
  });

  it('reads a real PDF page by page', async () => {
    const t = await tenant({ embedding: false });
    const token = await t.token();
    const form = new FormData();
    form.set('file', new Blob([minimalPdf(['Page one speaks of returns.', 'Page two speaks of shipping.'])], { type: 'application/pdf' }), 'policy.pdf');
    const doc = await json<DocumentOutput>(await rt.endUser('/documents?wait=20', token, { method: 'POST', body: form }), 201);
    expect(doc.status).toBe('ready');
    expect((await chunksOf(token, doc.id)).map((c) => ({ page: c.page, text: c.text }))).toEqual([
      { page: 1, text: 'Page one speaks of returns.' },
      { page: 2, text: 'Page two speaks of shipping.' },
    ]);
    // Without an embedding model the chunks are searched by their words: no vectors.
    expect(await db().selectFrom('chunk_embeddings').select('chunk_id').where('chunk_id', 'in', (await chunksOf(token, doc.id)).map((c) => c.id)).execute()).toEqual([]);
  });

  it('retries a provider that fails for a while, and reingests into a new generation that replaces the old', async () => {
    const t = await tenant();
    const token = await t.token();
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: guide, content_type: 'text/markdown' }), 201);
    const first = await chunksOf(token, doc.id);
    fake.fail(503, { message: 'overloaded' }, { path: '/embeddings', times: 2 });
    try {
      const again = await json<DocumentOutput>(await post(`/documents/${doc.id}/reingest?wait=30`, token, undefined), 202);
      expect(again).toMatchObject({ status: 'ready', chunk_count: 3, failure: null });
    } finally {
      fake.clearFaults();
    }
    const second = await chunksOf(token, doc.id);
    expect(second.map((c) => c.text)).toEqual(first.map((c) => c.text));
    expect(second.map((c) => c.id).some((id) => first.some((old) => old.id === id))).toBe(false);
    expect(await db().selectFrom('document_chunks').select('id').where('document_id', '=', doc.id).execute()).toHaveLength(3);
  });

  it('takes up a job whose process died mid-document once its lease lapses, and writes it once', async () => {
    const t = await tenant();
    const token = await t.token();
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: guide, content_type: 'text/markdown' }), 201);
    // Another process claimed the reingest and died holding it: its lease runs out in a second.
    await db().updateTable('documents').set({ status: 'processing' }).where('id', '=', doc.id).execute();
    await db()
      .insertInto('ingest_jobs')
      .values({ document_id: doc.id, tenant_id: t.tenantId, attempts: 1, run_after: new Date(), lease_owner: 'a-process-that-died', lease_expires_at: new Date(Date.now() + 1000), last_error: null })
      .execute();
    const read = await json<DocumentOutput>(await rt.endUser(`/documents/${doc.id}`, token), 200);
    expect(read.status).toBe('processing');
    const done = await rt.runtime.documents.awaitIngest(read, 20);
    expect(done).toMatchObject({ status: 'ready', chunk_count: 3 });
    const rows = await db().selectFrom('document_chunks').select(['generation']).where('document_id', '=', doc.id).execute();
    expect(rows.map((r) => r.generation)).toEqual([2, 2, 2]);
  });

  it('gives the owner alone reingest, and refuses it before the upload is complete', async () => {
    const t = await tenant();
    const token = await t.token();
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: 'x' }), 201);
    const other = await t.token({ sub: 'acme:bob', scope: 'acme' });
    expect((await post(`/documents/${doc.id}/reingest`, other, undefined)).status).toBe(403);
    const started = await json<{ document: DocumentOutput }>(await post('/documents/presign-upload', token, { filename: 'a.txt', content_type: 'text/plain', size: 3 }), 201);
    const early = await post(`/documents/${started.document.id}/reingest`, token, undefined);
    expect(early.status).toBe(409);
    expect(((await early.json()) as { detail: string }).detail).toMatch(/^upload out of order: /);
  });

  it('embeds what was read into a new model in the background, and searches the old index until the new one is complete', async () => {
    const t = await tenant();
    const token = await t.token();
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: guide, content_type: 'text/markdown' }), 201);
    const spaceOf = (model: string, dimensions: number) => `${fake.url}|${model}|${dimensions}`;
    const query = '# Shipping\nOrders ship from Lisbon every weekday.';
    // The model the last search asked (background embedding calls may come after it: they are not the search's).
    const lastEmbeddingModel = () => {
      const searches = fake.requestsTo('/embeddings').filter((request) => JSON.stringify((request.body as { input: unknown }).input) === JSON.stringify([query]));
      return (searches.at(-1)?.body as { model: string } | undefined)?.model;
    };
    const providers = [{ id: 'cred-1', kind: 'openai_compatible', base_url: fake.url, api_key: fake.apiKey, models: ['chat-model'] }];
    // The new model answers slowly until the first search is done, so the background work cannot finish before it.
    const embeddings = fake.routeOf('POST', '/embeddings')!;
    fake.route('POST', '/embeddings', (request, self) => {
      const answer = embeddings(request, self);
      return (request.body as { model?: string }).model === 'embed-large' && 'status' in answer ? { ...answer, delayMs: 2_000 } : answer;
    });
    try {
      expect((await t.reconfigure({ providers, retrieval: { embedding: { provider: 'cred-1', model: 'embed-large', dimensions: 12 } } } as never)).status).toBe(200);

      // The first search after the change finds the new space incomplete: it asks the old model, in the old space.
      const during = await json<{ mode: string; results: { document_id: string; matched: string[] }[] }>(await post('/documents/retrieve', token, { query, k: 1 }), 200);
      expect(lastEmbeddingModel()).toBe(EMBEDDING_MODEL);
      expect(during.results[0]).toMatchObject({ document_id: doc.id, matched: ['vector', 'keyword'] });
    } finally {
      fake.route('POST', '/embeddings', embeddings);
    }

    // In the background every chunk gets its vector in the new space; then searches use it.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const space = await db().selectFrom('embedding_spaces').select('ready_at').where('tenant_id', '=', t.tenantId).where('space', '=', spaceOf('embed-large', 12)).executeTakeFirst();
      if (space?.ready_at) break;
      if (Date.now() > deadline) throw new Error('the new space was never ready');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const chunks = await chunksOf(token, doc.id);
    const vectors = await db().selectFrom('chunk_embeddings').select(['space']).where('chunk_id', 'in', chunks.map((c) => c.id)).execute();
    expect(vectors.filter((v) => v.space === spaceOf(EMBEDDING_MODEL, DIMENSIONS))).toHaveLength(3);
    expect(vectors.filter((v) => v.space === spaceOf('embed-large', 12))).toHaveLength(3);
    const after = await json<{ results: { document_id: string; matched: string[] }[] }>(await post('/documents/retrieve', token, { query, k: 1 }), 200);
    expect(lastEmbeddingModel()).toBe('embed-large');
    expect(after.results[0]).toMatchObject({ document_id: doc.id, matched: ['vector', 'keyword'] });
    // A document uploaded now is embedded in the new model only, and found by it.
    const later = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: 'A later note about Porto.', title: 'later' }), 201);
    const laterChunks = await chunksOf(token, later.id);
    expect((await db().selectFrom('chunk_embeddings').select('space').where('chunk_id', '=', laterChunks[0]!.id).execute()).map((v) => v.space)).toEqual([spaceOf('embed-large', 12)]);
  });

  it('cuts documents as the project\'s processor says, and a reingest applies a change of it', async () => {
    const t = await tenant({ embedding: false });
    const token = await t.token();
    const paragraph = Array.from({ length: 60 }, (_, i) => `Sentence ${i} of the long policy says one more thing.`).join(' ');
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: paragraph, title: 'long' }), 201);
    expect(doc.chunk_count).toBe(2);
    const providers = [{ id: 'cred-1', kind: 'openai_compatible', base_url: fake.url, api_key: fake.apiKey, models: ['chat-model'] }];
    expect((await t.reconfigure({ providers, retrieval: { embedding: null, processor: { chunk_tokens: 100, overlap_tokens: 0 } } } as never)).status).toBe(200);
    const again = await json<DocumentOutput>(await post(`/documents/${doc.id}/reingest?wait=20`, token, undefined), 202);
    expect(again.chunk_count).toBeGreaterThanOrEqual(7);
    for (const chunk of await chunksOf(token, doc.id)) expect(chunk.tokens).toBeLessThanOrEqual(100);
  });
});
