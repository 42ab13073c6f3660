// Providers through HTTP against a fake OpenAI-compatible server on loopback: registering measures the embedding
// dimension for real, keys are sealed and never returned or logged, provider failures map to 400/502/504 with
// nothing stored, the default model and minting follow the registered models, and the URL guard holds when
// private addresses are not allowed.
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@agentplane/lib/logging';
import { startTestControl } from '@agentplane/test/harness/control';
import { freePort } from '@agentplane/test/harness/process';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';

interface Provider {
  id: string;
  provider: string;
  models: string[];
  base_url: string;
  key_last_four: string | null;
  prices: Record<string, { inputPerMillionUsd: number; outputPerMillionUsd: number }> | null;
  created_at: string;
  refreshed_at: string;
  derived: { defaultModel: string | null; embeddingModel: string | null; embeddingDim: number | null };
  warnings?: string[];
}

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

/** A control-api on a free port with one project, an admin key and a mint key. */
async function startControl(env: Record<string, string>, logger = silentLogger()) {
  const api = await startTestControl({ ...owner, ...env }, { logger });
  const { control } = api;
  const { account } = await control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
  const orgId = (await control.accounts.orgsOf(account.id))[0]!.id;
  const projectId = (await control.projects.create(orgId, account.id, 'support')).id;
  const caller = { kind: 'account' as const, accountId: account.id };
  const adminKey = (await control.keys.create(caller, projectId, { scope: 'admin', name: 'admin' })).key;
  const mintKey = (await control.keys.create(caller, projectId, { scope: 'mint', name: 'mint' })).key;
  const call = (path: string, init: RequestInit & { key?: string } = {}) => api.call(`/api/projects/${projectId}${path}`, { ...init, key: init.key ?? adminKey });
  return {
    control,
    projectId,
    adminKey,
    mintKey,
    call,
    register: (body: object, key?: string) => call('/providers', { method: 'POST', body: JSON.stringify(body), ...(key ? { key } : {}) }),
    storedProviders: async () => (await sql<{ row: string }>`select row_to_json(p)::text as row from control.providers p`.execute(control.database.db)).rows.map((r) => r.row),
    version: async () => (await control.projects.configurationDocument(projectId))!.version,
    stop: () => api.stop(),
  };
}

describe('providers (bring your own keys)', () => {
  const chatKey = 'sk-fake-chat-0123456789abcdefWXYZ';
  const openaiKey = 'sk-fake-openai-9876543210zyxwQRST';
  let compatible: FakeOpenAIServer;
  let openai: FakeOpenAIServer;
  let env: Awaited<ReturnType<typeof startControl>>;
  let logText = '';
  let first: Provider;
  let second: Provider;

  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;

  beforeAll(async () => {
    compatible = await FakeOpenAIServer.start({ apiKey: chatKey, chatModels: ['llama-3.1-8b', 'qwen-2.5'], embeddingModels: { 'nomic-embed': 384 } });
    openai = await FakeOpenAIServer.start({ apiKey: openaiKey, chatModels: ['gpt-4o-mini', 'gpt-4o'], embeddingModels: { 'text-embedding-3-small': 1536 } });
    // Every level, no redaction: the proof is that nothing of ours ever hands the key to a logger at all.
    const captured = new Writable({
      write(chunk, _encoding, done) {
        logText += String(chunk);
        done();
      },
    });
    env = await startControl({ AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', PROVIDER_TIMEOUT_MS: '500' }, pino({ level: 'trace' }, captured));
  });
  afterAll(async () => {
    await env?.stop();
    await compatible?.close();
    await openai?.close();
  });

  it('registers an OpenAI-compatible provider, measuring the embedding dimension with a real call', async () => {
    const before = await env.version();
    const res = await env.register({ provider: 'openai_compatible', models: ['llama-3.1-8b'], values: { api_key: chatKey, base_url: `${compatible.url}/`, embedding_model: 'nomic-embed' } });
    expect(res.status).toBe(201);
    first = await json<Provider>(res);
    expect(first).toMatchObject({
      provider: 'openai_compatible',
      models: ['llama-3.1-8b'],
      base_url: compatible.url,
      key_last_four: 'WXYZ',
      prices: null,
      derived: { defaultModel: 'llama-3.1-8b', embeddingModel: 'nomic-embed', embeddingDim: 384 },
    });
    expect(JSON.stringify(first)).not.toContain(chatKey);
    // Measured: the fake saw the catalog read and an embeddings call for that model, with the customer's key.
    expect(compatible.requestsTo('/models')).toHaveLength(1);
    const [embedding] = compatible.requestsTo('/embeddings');
    expect(embedding!.body).toMatchObject({ model: 'nomic-embed', encoding_format: 'float' });
    expect(embedding!.headers.authorization).toBe(`Bearer ${chatKey}`);
    expect(await env.version()).toBe(before + 1);
  });

  it("registers openai with the default embedding model, measuring another dimension; an existing default stands", async () => {
    const prices = { 'gpt-4o': { inputPerMillionUsd: 2.5, outputPerMillionUsd: 10 } };
    const res = await env.register({ provider: 'openai', models: ['gpt-4o', 'gpt-4o-mini', 'gpt-4o'], values: { api_key: openaiKey, base_url: openai.url }, prices });
    expect(res.status).toBe(201);
    second = await json<Provider>(res);
    expect(second).toMatchObject({
      provider: 'openai',
      models: ['gpt-4o', 'gpt-4o-mini'],
      prices,
      derived: { defaultModel: 'llama-3.1-8b', embeddingModel: 'text-embedding-3-small', embeddingDim: 1536 },
    });
    expect(openai.requestsTo('/embeddings')[0]!.body).toMatchObject({ model: 'text-embedding-3-small' });
  });

  it('lists providers without their keys and stores the keys only sealed, bound to their row', async () => {
    const listed = await env.call('/providers');
    expect(listed.status).toBe(200);
    const text = await listed.text();
    expect(text).not.toContain(chatKey);
    expect(text).not.toContain(openaiKey);
    expect((JSON.parse(text) as { providers: Provider[] }).providers.map((p) => p.id)).toEqual([first.id, second.id]);

    const rows = await env.storedProviders();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row).not.toContain(chatKey);
      expect(row).not.toContain(openaiKey);
      expect(row).toMatch(/"api_key":"v1\./);
    }
    expect(await env.control.providers.apiKeyOf(env.projectId, first.id)).toBe(chatKey);
    // A sealed key copied onto another credential's row does not open there.
    const db = env.control.database.db;
    await sql`update control.providers set api_key = (select api_key from control.providers where id = ${first.id}) where id = ${second.id}`.execute(db);
    await expect(env.control.providers.apiKeyOf(env.projectId, second.id)).rejects.toThrow();
    await sql`update control.providers set api_key = ${sealedOf(rows, second.id)} where id = ${second.id}`.execute(db);
    expect(await env.control.providers.apiKeyOf(env.projectId, second.id)).toBe(openaiKey);
  });

  it('pushes the union of the registered models, and minting allows exactly those', async () => {
    const document = await env.control.projects.configurationDocument(env.projectId);
    expect(document!.ceiling.registeredModels).toEqual(['gpt-4o', 'gpt-4o-mini', 'llama-3.1-8b']);
    const mint = (models: string[]) => env.call('/token', { method: 'POST', key: env.mintKey, body: JSON.stringify({ subject: 'acme:user-1', models }) });
    const ok = await mint(['gpt-4o', 'llama-3.1-8b']);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { allowed_models: string[] }).allowed_models).toEqual(['gpt-4o', 'llama-3.1-8b']);
    const refused = await mint(['claude-3']);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ detail: "model 'claude-3' is not available to this project. Registered: gpt-4o, gpt-4o-mini, llama-3.1-8b" });
  });

  it('refuses a wrong key with 400, without echoing it, and stores nothing', async () => {
    const wrong = 'sk-wrong-key-5555555555aaaaBBBB';
    const [rows, version] = [await env.storedProviders(), await env.version()];
    const res = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: wrong, base_url: compatible.url } });
    expect(res.status).toBe(400);
    const body = await res.text();
    expect(JSON.parse(body)).toMatchObject({ detail: expect.stringMatching(/^the provider refused the API key \(401\)/), code: 'provider_rejected' });
    // The fake echoed the key it got, as real providers do; it is not passed on.
    expect(compatible.requests.at(-1)!.headers.authorization).toBe(`Bearer ${wrong}`);
    expect(body).not.toContain(wrong);
    expect(await env.storedProviders()).toEqual(rows);
    expect(await env.version()).toBe(version);
  });

  it('refuses a key no HTTP header can carry (a line break, non-ASCII) with 400 naming it, calling nothing and storing nothing', async () => {
    const [rows, version, calls] = [await env.storedProviders(), await env.version(), compatible.requests.length];
    for (const api_key of ['sk-first-half\nsk-second-half', 'sk-\u201cquoted\u201d', 'sk-ümlaut-key']) {
      const res = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key, base_url: compatible.url } });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ detail: expect.stringContaining('values.api_key'), code: 'invalid_argument' });
    }
    expect(compatible.requests.length).toBe(calls);
    expect(await env.storedProviders()).toEqual(rows);
    expect(await env.version()).toBe(version);
  });

  it('answers 502 when the provider fails, 502 when it cannot be reached, 504 when it does not answer; nothing stored', async () => {
    const [rows, version] = [await env.storedProviders(), await env.version()];
    const attempt = (baseUrl = compatible.url) => env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: chatKey, base_url: baseUrl } });

    compatible.fail(500, { message: `the backend fell over while serving ${chatKey}` }, { times: 1 });
    const failed = await attempt();
    expect(failed.status).toBe(502);
    const failedBody = await failed.text();
    expect(JSON.parse(failedBody).detail).toBe('the provider failed (500): the backend fell over while serving [redacted]');

    compatible.fail(503, { message: 'overloaded' }, { path: '/embeddings', times: 1 });
    const embeddingsFailed = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: chatKey, base_url: compatible.url, embedding_model: 'nomic-embed' } });
    expect(embeddingsFailed.status).toBe(502);

    const closed = await freePort();
    const unreachable = await attempt(`http://127.0.0.1:${closed}/v1`);
    expect(unreachable.status).toBe(502);
    expect((await unreachable.json()) as object).toMatchObject({ detail: `could not reach the provider at http://127.0.0.1:${closed}` });

    compatible.hang({ times: 1 });
    const hung = await attempt();
    expect(hung.status).toBe(504);
    expect(((await hung.json()) as { detail: string }).detail).toBe('the upstream request timed out');
    // The control plane let go of the connection to the silent provider.
    expect(await compatible.ended(compatible.requests.at(-1)!)).toBe('client_closed');

    expect(await env.storedProviders()).toEqual(rows);
    expect(await env.version()).toBe(version);
  });

  it('refuses models the provider does not offer, models another provider serves, and an embedding model that does not work', async () => {
    const rows = await env.storedProviders();
    const notOffered = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5', 'qwen-3'], values: { api_key: chatKey, base_url: compatible.url } });
    expect(notOffered.status).toBe(400);
    expect(((await notOffered.json()) as { detail: string }).detail).toBe("the provider does not offer 'qwen-3' (not in GET /models). Offered: llama-3.1-8b, nomic-embed, qwen-2.5");

    const taken = await env.register({ provider: 'openai_compatible', models: ['llama-3.1-8b'], values: { api_key: chatKey, base_url: compatible.url } });
    expect(taken.status).toBe(409);
    expect(((await taken.json()) as { detail: string }).detail).toBe(`model 'llama-3.1-8b' is already registered by provider ${first.id}; remove it there first`);

    const badEmbedding = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: chatKey, base_url: compatible.url, embedding_model: 'no-such-embed' } });
    expect(badEmbedding.status).toBe(400);
    expect(((await badEmbedding.json()) as { detail: string }).detail).toMatch(/^embedding_model 'no-such-embed' could not be used: the provider refused the embeddings call \(404\)/);

    const strayPrice = await env.register({
      provider: 'openai_compatible',
      models: ['qwen-2.5'],
      values: { api_key: chatKey, base_url: compatible.url },
      prices: { 'qwen-2.5': { inputPerMillionUsd: 0.1, outputPerMillionUsd: 0.2 }, 'qwen-3': { inputPerMillionUsd: 1, outputPerMillionUsd: 1 } },
    });
    expect(strayPrice.status).toBe(400);
    expect(await strayPrice.json()).toMatchObject({ detail: "prices name 'qwen-3', not among the models registered here: qwen-2.5" });
    const negativePrice = await env.register({
      provider: 'openai_compatible',
      models: ['qwen-2.5'],
      values: { api_key: chatKey, base_url: compatible.url },
      prices: { 'qwen-2.5': { inputPerMillionUsd: -1, outputPerMillionUsd: 0.2 } },
    });
    expect(negativePrice.status).toBe(422);
    expect(((await negativePrice.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc).toEqual(['body', 'prices', 'qwen-2.5', 'inputPerMillionUsd']);

    const noBaseUrl = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: chatKey } });
    expect(noBaseUrl.status).toBe(422);
    expect(await noBaseUrl.json()).toMatchObject({ detail: [{ loc: ['body', 'values', 'base_url'], msg: 'base_url is required for provider openai_compatible' }] });

    // A key in the redacted form secrets are shown in would be refused by the runtime at every push: refused here.
    const redacted = await env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: '****WXYZ', base_url: compatible.url } });
    expect(redacted.status).toBe(422);
    expect(await redacted.json()).toMatchObject({
      detail: [{ loc: ['body', 'values', 'api_key'], msg: 'api_key is a redacted secret (`****...`, as secrets are shown); send the secret itself' }],
    });
    expect(await env.storedProviders()).toEqual(rows);
  });

  it('records no embedding model, rather than assuming one, when the provider has none', async () => {
    const bare = await FakeOpenAIServer.start({ apiKey: 'short', chatModels: ['tiny-chat', 'tiny-chat-2'] });
    try {
      const compatibleOnly = await json<Provider>(env.register({ provider: 'openai_compatible', models: ['tiny-chat'], values: { api_key: 'short', base_url: bare.url } }));
      expect(compatibleOnly).toMatchObject({ key_last_four: null, derived: { embeddingModel: null, embeddingDim: null } });
      expect(bare.requestsTo('/embeddings')).toHaveLength(0);

      // openai's default embedding model is tried, and when the provider refuses it there is none.
      const res = await env.register({ provider: 'openai', models: ['tiny-chat-2'], values: { api_key: 'short', base_url: bare.url } });
      expect(res.status).toBe(201);
      const openaiLike = await json<Provider>(res);
      expect(openaiLike.derived).toMatchObject({ embeddingModel: null, embeddingDim: null });
      expect(openaiLike.warnings?.[0]).toMatch(/^no embedding model: the provider refused 'text-embedding-3-small'/);
      expect(bare.requestsTo('/embeddings')).toHaveLength(1);
      for (const id of [compatibleOnly.id, openaiLike.id]) expect((await env.call(`/providers/${id}`, { method: 'DELETE' })).status).toBe(200);
    } finally {
      await bare.close();
    }
  });

  it('measures the dimension on a server that ignores encoding_format, whichever form it answers in', async () => {
    for (const format of ['float', 'base64'] as const) {
      const server = await FakeOpenAIServer.start({ apiKey: chatKey, chatModels: [`chat-${format}`], embeddingModels: { 'gateway-embed': 48 }, embeddingFormat: format });
      try {
        const res = await env.register({ provider: 'openai_compatible', models: [`chat-${format}`], values: { api_key: chatKey, base_url: server.url, embedding_model: 'gateway-embed' } });
        const registered = await json<Provider>(res);
        expect(res.status, JSON.stringify(registered)).toBe(201);
        expect(registered.derived).toMatchObject({ embeddingModel: 'gateway-embed', embeddingDim: 48 });
        expect((await env.call(`/providers/${registered.id}`, { method: 'DELETE' })).status).toBe(200);
      } finally {
        await server.close();
      }
    }
  });

  it('sets the default model only to a registered one, with SPEC.md wording otherwise', async () => {
    expect(await json(env.call('/default-model'))).toEqual({ model: 'llama-3.1-8b' });
    const version = await env.version();
    const refused = await env.call('/default-model', { method: 'POST', body: JSON.stringify({ model: 'gpt-5' }) });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ detail: "model 'gpt-5' is not available to this project. Registered: gpt-4o, gpt-4o-mini, llama-3.1-8b" });
    expect(await env.version()).toBe(version);

    const set = await env.call('/default-model', { method: 'POST', body: JSON.stringify({ model: 'gpt-4o' }) });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ model: 'gpt-4o' });
    expect(await json(env.call('/default-model'))).toEqual({ model: 'gpt-4o' });
    expect(await env.version()).toBe(version + 1);
  });

  it('refresh re-reads the catalog and re-measures the dimension, reporting what went missing and that prices are unknown', async () => {
    compatible.embeddingModels['nomic-embed'] = 768;
    compatible.chatModels = ['qwen-2.5'];
    const version = await env.version();
    const res = await env.call(`/providers/${first.id}/refresh`, { method: 'POST' });
    expect(res.status).toBe(200);
    const refreshed = await json<Provider & { missing_models: string[]; prices: null; prices_note: string }>(res);
    expect(refreshed).toMatchObject({ id: first.id, derived: { embeddingModel: 'nomic-embed', embeddingDim: 768 }, missing_models: ['llama-3.1-8b'], prices: null });
    // Prices are the customer's, kept as registered: a refresh has none to read.
    const refreshedOpenai = await json<Provider>(env.call(`/providers/${second.id}/refresh`, { method: 'POST' }));
    expect(refreshedOpenai.prices).toEqual(second.prices);
    expect(refreshed.prices_note).toMatch(/publish no prices/);
    expect(Date.parse(refreshed.refreshed_at)).toBeGreaterThan(Date.parse(first.refreshed_at));
    expect(compatible.requestsTo('/embeddings').at(-1)!.headers.authorization).toBe(`Bearer ${chatKey}`);
    expect(await env.version()).toBe(version + 2);
    compatible.chatModels = ['llama-3.1-8b', 'qwen-2.5'];
  });

  it('removes a provider with its models; a default it served is kept and still pushed, so turns on it answer no_provider, not no_model', async () => {
    const version = await env.version();
    const res = await env.call(`/providers/${second.id}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: second.id, derived: { defaultModel: 'gpt-4o' } });
    expect(await json(env.call('/default-model'))).toEqual({ model: 'gpt-4o' });
    expect(await env.version()).toBe(version + 1);
    const document = (await env.control.projects.configurationDocument(env.projectId))!;
    expect(document.ceiling.registeredModels).toEqual(['llama-3.1-8b']);
    expect(document.default_model).toBe('gpt-4o');
    expect(document.providers!.flatMap((p) => p.models)).not.toContain('gpt-4o');
    const readiness = await json<{ canAnswer: boolean; steps: { id: string; ok: boolean; detail: string }[] }>(env.call('/readiness'));
    expect(readiness.canAnswer).toBe(false);
    expect(readiness.steps.find((step) => step.id === 'default-model')).toMatchObject({ ok: false, detail: expect.stringContaining('gpt-4o has no provider') });
    expect((await env.call(`/providers/${second.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await json<{ providers: Provider[] }>(env.call('/providers'))).providers.map((p) => p.id)).toEqual([first.id]);
    const mint = await env.call('/token', { method: 'POST', key: env.mintKey, body: JSON.stringify({ subject: 'acme:user-1', models: ['gpt-4o'] }) });
    expect(await mint.json()).toMatchObject({ detail: "model 'gpt-4o' is not available to this project. Registered: llama-3.1-8b" });
    // A rotation (the provider registered again) serves the kept default at once.
    const rotated = await json<Provider>(env.register({ provider: 'openai', models: ['gpt-4o'], values: { api_key: openaiKey, base_url: openai.url } }));
    expect(rotated.derived.defaultModel).toBe('gpt-4o');
    expect((await env.call(`/providers/${rotated.id}`, { method: 'DELETE' })).status).toBe(200);
    // A provider that does not serve it replaces a default nothing serves with its first model, as a first provider does.
    const other = await json<Provider>(env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: chatKey, base_url: compatible.url } }));
    expect(other.derived.defaultModel).toBe('qwen-2.5');
    expect((await env.call(`/providers/${other.id}`, { method: 'DELETE' })).status).toBe(200);
  });

  it('refuses a mint key on every provider route with 403', async () => {
    const asMint = { key: env.mintKey };
    const answers = await Promise.all([
      env.call('/providers', asMint),
      env.register({ provider: 'openai_compatible', models: ['qwen-2.5'], values: { api_key: chatKey, base_url: compatible.url } }, env.mintKey),
      env.call(`/providers/${first.id}`, { method: 'DELETE', ...asMint }),
      env.call(`/providers/${first.id}/refresh`, { method: 'POST', ...asMint }),
      env.call('/default-model', asMint),
      env.call('/default-model', { method: 'POST', body: JSON.stringify({ model: 'llama-3.1-8b' }), ...asMint }),
    ]);
    expect(answers.map((res) => res.status)).toEqual([403, 403, 403, 403, 403, 403]);
  });

  it('never writes a key to the log', () => {
    // The 5xx answers above were logged, so the stream did capture the failures.
    expect(logText).toMatch(/request failed/);
    for (const key of [chatKey, openaiKey, 'sk-wrong-key-5555555555aaaaBBBB']) expect(logText).not.toContain(key);
  });
});

describe('providers with private URLs not allowed (the default)', () => {
  let env: Awaited<ReturnType<typeof startControl>>;
  let fake: FakeOpenAIServer;

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-fake-guarded-0000000000abcd', chatModels: ['m'] });
    env = await startControl({});
  });
  afterAll(async () => {
    await env?.stop();
    await fake?.close();
  });

  it('refuses a loopback base_url with the guard\'s message, calls nothing and stores nothing', async () => {
    const attempt = (baseUrl: string) => env.register({ provider: 'openai_compatible', models: ['m'], values: { api_key: 'sk-fake-guarded-0000000000abcd', base_url: baseUrl } });
    const plain = await attempt(fake.url);
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ detail: 'base_url must use https, not http', code: 'url_refused' });
    const port = new URL(fake.url).port;
    const tls = await attempt(`https://127.0.0.1:${port}/v1`);
    expect(tls.status).toBe(400);
    expect(await tls.json()).toMatchObject({
      detail: 'base_url points to a loopback address (127.0.0.1); set AGENTPLANE_ALLOW_PRIVATE_URLS=true for local development',
      code: 'url_refused',
    });
    expect(fake.requests).toHaveLength(0);
    expect(await env.storedProviders()).toEqual([]);
    expect(await json(env.call('/default-model'))).toEqual({ model: null });
  });

  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
});

function sealedOf(rows: string[], id: string): string {
  const row = rows.map((text) => JSON.parse(text) as { id: string; api_key: string }).find((r) => r.id === id);
  return row!.api_key;
}
