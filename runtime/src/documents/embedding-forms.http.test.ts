// Embeddings on every OpenAI-compatible server, through HTTP in both setups: a document is read and found by meaning,
// and what the agent remembers is embedded, whether the project's server honours `encoding_format` or ignores it and
// answers float arrays (or base64) whatever was asked; and a document whose embeddings keep failing says so while it
// is retried (`failure` with the last error, `ingest_attempts`), then is `failed` with the reason once the retry
// budget is spent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer, type EmbeddingFormat } from '@agentplane/test/fakes/openai-server';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';
import type { DocumentOutput } from './schemas.js';

const EMBEDDING_MODEL = 'embed-small';
const DIMENSIONS = 48;
const MAX_ATTEMPTS = 3;

interface Retrieved {
  results: { document_id: string; matched: string[] }[];
  mode: string;
}

describe.each(availableSetups())('embeddings on every OpenAI-compatible server (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  const fakes = new Map<EmbeddingFormat, FakeOpenAIServer>();

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    for (const format of ['requested', 'float', 'base64'] as const) {
      fakes.set(format, await FakeOpenAIServer.start({ apiKey: `sk-test-embedding-form-${format}`, chatModels: ['chat-model'], embeddingModels: { [EMBEDDING_MODEL]: DIMENSIONS }, embeddingFormat: format }));
    }
    // A short retry budget and backoff, so a document that cannot be embedded fails within the test.
    rt = await startTestRuntime({
      env: { ...((await services?.env()) ?? {}), AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', INGEST_MAX_ATTEMPTS: String(MAX_ATTEMPTS), INGEST_RETRY_BASE_MS: '1000' },
    });
  });
  afterAll(async () => {
    await rt?.stop();
    for (const fake of fakes.values()) await fake.stop();
    await services?.stop();
  });

  async function tokenFor(fake: FakeOpenAIServer): Promise<string> {
    const t = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'memory', 'documents:read', 'documents:write'] } });
    const pushed = await t.reconfigure({
      providers: [{ id: 'cred-1', kind: 'openai_compatible', base_url: fake.url, api_key: fake.apiKey, models: ['chat-model'] }],
      retrieval: { embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: DIMENSIONS } },
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    return t.mint({ sub: 'acme:alice', scope: 'acme:alice' });
  }
  const post = (path: string, token: string, body: unknown) => rt.endUser(path, token, { method: 'POST', body: JSON.stringify(body) });
  async function json<T>(response: Response, status: number): Promise<T> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return JSON.parse(text) as T;
  }

  it.each([
    ['honours encoding_format', 'requested'],
    ['ignores encoding_format and answers float arrays', 'float'],
    ['ignores encoding_format and answers base64', 'base64'],
  ] as const)('reads a document, finds it by meaning and embeds what the agent remembers, on a server that %s', async (_, format) => {
    const fake = fakes.get(format)!;
    const token = await tokenFor(fake);
    const before = fake.requestsTo('/embeddings').length;
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: 'Orders ship from Lisbon every weekday.', title: 'Shipping' }), 201);
    expect(doc).toMatchObject({ status: 'ready', failure: null, chunk_count: 1, ingest_attempts: 1 });

    const found = await json<Retrieved>(await post('/documents/retrieve', token, { query: 'Orders ship from Lisbon every weekday.', k: 1 }), 200);
    expect(found.results[0]).toMatchObject({ document_id: doc.id, matched: ['vector', 'keyword'] });
    // Both calls, the chunk's and the query's, asked for the form every compatible server speaks.
    const asked = fake.requestsTo('/embeddings').slice(before).map((request) => (request.body as { encoding_format?: unknown }).encoding_format);
    expect(asked).toEqual(['float', 'float']);

    // What the agent remembers is embedded through the same call, so it is found by meaning too.
    const note = `Alice ships to Lisbon (${format}).`;
    fake.script({ toolCalls: [{ name: 'remember', arguments: { content: note } }] }, 'Noted.');
    const turn = await post('/chat', token, { message: 'Remember that I ship to Lisbon.', model: 'chat-model' });
    expect(turn.status, await turn.clone().text()).toBe(200);
    const remembered = await rt.runtime.database.db.selectFrom('memory_items').select(['content', 'embedding']).where('content', '=', note).execute();
    expect(remembered).toHaveLength(1);
    expect(remembered[0]!.embedding).not.toBeNull();
    expect(JSON.parse(remembered[0]!.embedding!)).toHaveLength(DIMENSIONS);
  });

  it('shows the last error and the attempts while it retries, then fails with the reason once the budget is spent', async () => {
    const fake = fakes.get('requested')!;
    const token = await tokenFor(fake);
    // The server's model changed under the project: its vectors no longer have the dimension that was measured.
    fake.embeddingModels[EMBEDDING_MODEL] = 12;
    try {
      const created = await json<DocumentOutput>(await post('/documents', token, { text: 'Refunds go back to the card that paid.', title: 'Refunds' }), 201);
      const reason = `the embedding model '${EMBEDDING_MODEL}' answered vectors of 12 dimensions, not the ${DIMENSIONS} configured: measure it again on the control plane`;
      const retrying: DocumentOutput[] = [];
      let current = created;
      const deadline = Date.now() + 30_000;
      while (current.status !== 'failed') {
        if (Date.now() > deadline) throw new Error(`the document never failed: ${JSON.stringify(current)}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
        current = await json<DocumentOutput>(await rt.endUser(`/documents/${created.id}`, token), 200);
        if (current.status === 'processing' && current.failure !== null) retrying.push(current);
      }
      // While it was retried, the record said why and how many attempts had been made.
      expect(retrying.length).toBeGreaterThan(0);
      for (const seen of retrying) {
        expect(seen.ingest_attempts).toBeGreaterThanOrEqual(1);
        expect(seen.ingest_attempts).toBeLessThan(MAX_ATTEMPTS + 1);
        expect(seen.failure).toMatch(new RegExp(`^attempt [12] of ${MAX_ATTEMPTS} failed, retrying: `));
        expect(seen.failure!.endsWith(reason)).toBe(true);
      }
      expect(current).toMatchObject({ status: 'failed', failure: `gave up after ${MAX_ATTEMPTS} attempts: ${reason}`, ingest_attempts: MAX_ATTEMPTS, chunk_count: 0 });
      // As for any failed ingest, its chunks answer 422 with the reason.
      const chunks = await rt.endUser(`/documents/${created.id}/chunks`, token);
      expect(chunks.status).toBe(422);
      expect(await chunks.text()).toContain(reason);
    } finally {
      fake.embeddingModels[EMBEDDING_MODEL] = DIMENSIONS;
    }
  });

  it('starts a reingest from no failure and no attempts', async () => {
    const fake = fakes.get('requested')!;
    const token = await tokenFor(fake);
    const doc = await json<DocumentOutput>(await post('/documents?wait=20', token, { text: 'Returns within 30 days.', title: 'Returns' }), 201);
    expect(doc.ingest_attempts).toBe(1);
    const again = await json<DocumentOutput>(await post(`/documents/${doc.id}/reingest`, token, undefined), 202);
    expect(again).toMatchObject({ status: 'processing', failure: null, ingest_attempts: 0 });
    const done = await rt.runtime.documents.awaitIngest(again, 20);
    expect(done).toMatchObject({ status: 'ready', failure: null, ingest_attempts: 1 });
  });
});
