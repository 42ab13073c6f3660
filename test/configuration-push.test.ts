// What a project's runtime is told about its models, end to end: the outbox and the local provisioner push the
// providers (keys in clear over the admin channel), the default model, prices and limits to a real runtime, which
// stores the keys sealed and hands them to the turn engine in clear; a removed provider leaves the next push.
import type { Kysely } from 'kysely';
import type { ControlSchema } from '@agentplane/control-api/store/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerFor } from '@agentplane/runtime/tenants/configuration';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { FakePineconeServer } from './fakes/pinecone-server.js';
import { startTestControl, type TestControl } from './harness/control.js';
import { eventually } from './harness/eventually.js';
import { captureLogs } from './harness/logs.js';
import { startTestRuntime, type TestRuntime } from './harness/runtime.js';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { createKeyRing, trustedKeysOf } from '@agentplane/lib/tokens/keys';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };


describe('configuration push: providers, default model, prices and limits', () => {
  const gatewayKey = 'sk-fake-gateway-0123456789abcdefWXYZ';
  const openaiKey = 'sk-fake-openai-9876543210zyxwQRST';
  let rt: TestRuntime;
  let api: TestControl;
  let gateway: FakeOpenAIServer;
  let openai: FakeOpenAIServer;
  let projectId: string;
  let tenantId: string;
  let adminKey: string;
  const logs = captureLogs();

  const call = (path: string, init: RequestInit = {}) => api.call(`/api/projects/${projectId}${path}`, { ...init, key: adminKey });
  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
  /** The runtime's configuration once the control plane's current version has reached it. */
  const delivered = async () => {
    const version = (await api.control.projects.configurationDocument(projectId))!.version;
    return eventually(async () => {
      const loaded = await rt.runtime.configurations.load(tenantId);
      return loaded && loaded.version === version ? loaded : false;
    }, { what: `version ${version} at the runtime` });
  };

  beforeAll(async () => {
    rt = await startTestRuntime();
    gateway = await FakeOpenAIServer.start({ apiKey: gatewayKey, chatModels: ['llama-3.1-8b', 'qwen-2.5'] });
    openai = await FakeOpenAIServer.start({ apiKey: openaiKey, chatModels: ['gpt-4o', 'gpt-4o-mini'], embeddingModels: { 'text-embedding-3-small': 1536, 'text-embedding-3-large': 3072 }, rerankModels: ['rerank-v1'] });
    api = await startTestControl(
      { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' },
      { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 2000 }), logger: logs.logger },
    );
    const { account } = await api.control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const orgId = (await api.control.accounts.orgsOf(account.id))[0]!.id;
    const project = await api.control.projects.create(orgId, account.id, 'support');
    projectId = project.id;
    tenantId = project.tenant_id;
    adminKey = (await api.control.keys.create({ kind: 'account', accountId: account.id }, projectId, { scope: 'admin', name: 'admin' })).key;
  });
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
    await gateway?.close();
    await openai?.close();
  });

  /** POST /chat on the runtime as an end-user the project mints. */
  const chat = async (body: Record<string, unknown>) => {
    const minted = await json<{ access_token: string }>(call('/token', { method: 'POST', body: JSON.stringify({ subject: 'acme:user-1', capabilities: ['chat'] }) }));
    return rt.endUser('/chat', minted.access_token, { method: 'POST', body: JSON.stringify(body) });
  };

  it('pushes nothing of the sort for a project without providers or limits, and a turn there ends no_model', async () => {
    const loaded = await delivered();
    expect(loaded.document).not.toHaveProperty('providers');
    expect(loaded.document).not.toHaveProperty('default_model');
    expect(loaded.document).not.toHaveProperty('limits');
    const turn = await chat({ message: 'anyone?' });
    expect(turn.status).toBe(200);
    expect(await turn.json()).toMatchObject({ finish_reason: 'no_model', content: '' });
  });

  it('pushes each provider with its key, as the runtime then holds it, the default model, prices and limits', async () => {
    const registered = await call('/providers', {
      method: 'POST',
      body: JSON.stringify({ provider: 'openai_compatible', models: ['llama-3.1-8b'], values: { api_key: gatewayKey, base_url: gateway.url } }),
    });
    expect(registered.status).toBe(201);
    const first = await json<{ id: string }>(registered);
    const second = await json<{ id: string }>(
      call('/providers', {
        method: 'POST',
        body: JSON.stringify({
          provider: 'openai',
          models: ['gpt-4o', 'gpt-4o-mini'],
          values: { api_key: openaiKey, base_url: openai.url },
          prices: { 'gpt-4o': { inputPerMillionUsd: 2.5, outputPerMillionUsd: 10 }, 'gpt-4o-mini': { inputPerMillionUsd: 0.15, outputPerMillionUsd: 0.6 } },
        }),
      }),
    );
    expect((await call('/default-model', { method: 'POST', body: JSON.stringify({ model: 'gpt-4o' }) })).status).toBe(200);
    expect((await call('/limits', { method: 'PUT', body: JSON.stringify({ rpmLimit: 60, tpmLimit: 50_000, budget: { amountUsd: 20, window: 'month' } }) })).status).toBe(200);

    const loaded = await delivered();
    expect(loaded.document.providers).toEqual([
      { id: first.id, kind: 'openai_compatible', base_url: gateway.url, api_key: gatewayKey, models: ['llama-3.1-8b'] },
      {
        id: second.id,
        kind: 'openai',
        base_url: openai.url,
        api_key: openaiKey,
        models: ['gpt-4o', 'gpt-4o-mini'],
        prices: {
          'gpt-4o': { input_per_million_usd: 2.5, output_per_million_usd: 10 },
          'gpt-4o-mini': { input_per_million_usd: 0.15, output_per_million_usd: 0.6 },
        },
      },
    ]);
    expect(loaded.document.default_model).toBe('gpt-4o');
    expect(loaded.document.limits).toEqual({ rpm_limit: 60, tpm_limit: 50_000, budget: { amount_usd: 20, window: 'month' } });
    expect(loaded.document.ceiling.registeredModels).toEqual(['gpt-4o', 'gpt-4o-mini', 'llama-3.1-8b']);
    expect(providerFor(loaded.document, 'gpt-4o-mini')).toMatchObject({ providerId: second.id, apiKey: openaiKey, price: { input_per_million_usd: 0.15, output_per_million_usd: 0.6 } });
    // Documents are embedded with the measured model of the oldest provider that has one (the gateway has none).
    expect(loaded.document.retrieval).toEqual({ embedding: { provider: second.id, model: 'text-embedding-3-small', dimensions: 1536 } });

    // The runtime's own answer shows the keys redacted.
    const shown = await rt.admin(`/tenants/${tenantId}/configuration`);
    const text = await shown.text();
    expect(text).not.toContain(gatewayKey);
    expect(text).not.toContain(openaiKey);
    expect((JSON.parse(text) as { providers: { api_key: string }[] }).providers.map((p) => p.api_key)).toEqual(['****WXYZ', '****QRST']);
  });

  it('lets the project choose its embedding model, measured by a real call, pushes it, and goes back to the provider\'s own', async () => {
    const before = await delivered();
    const openaiId = before.document.providers!.find((p) => p.kind === 'openai')!.id;
    const probed = await call('/retrieval/probe', { method: 'POST', body: JSON.stringify({ provider_id: openaiId, model: 'text-embedding-3-large' }) });
    expect(await json(probed)).toEqual({ provider_id: openaiId, model: 'text-embedding-3-large', dimensions: 3072 });
    expect((await delivered()).version).toBe(before.version);

    const refused = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ embedding: { provider_id: openaiId, model: 'no-such-embedder' } }) });
    expect(refused.status).toBe(400);
    expect((await json<{ code: string }>(refused)).code).toBe('provider_rejected');
    const unknown = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ embedding: { provider_id: '00000000-0000-4000-8000-000000000000', model: 'x' } }) });
    expect(unknown.status).toBe(404);

    const chosen = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ embedding: { provider_id: openaiId, model: 'text-embedding-3-large' } }) });
    expect(await json(chosen)).toEqual({ embedding: { provider_id: openaiId, model: 'text-embedding-3-large', dimensions: 3072 }, chosen: true, rerank: null, auto_context: false, vector_index: null });
    const pushed = await delivered();
    expect(pushed.version).toBeGreaterThan(before.version);
    expect(pushed.document.retrieval).toEqual({ embedding: { provider: openaiId, model: 'text-embedding-3-large', dimensions: 3072 } });

    const back = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ embedding: null }) });
    expect(await json(back)).toEqual({ embedding: { provider_id: openaiId, model: 'text-embedding-3-small', dimensions: 1536 }, chosen: false, rerank: null, auto_context: false, vector_index: null });
    expect((await delivered()).document.retrieval).toEqual({ embedding: { provider: openaiId, model: 'text-embedding-3-small', dimensions: 1536 } });

    // Automatic context alone leaves the model as it is; nothing named changes nothing and pushes nothing.
    const auto = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ auto_context: true }) });
    expect(await json(auto)).toMatchObject({ embedding: { model: 'text-embedding-3-small' }, chosen: false, auto_context: true });
    const withContext = await delivered();
    expect(withContext.document.retrieval).toEqual({ embedding: { provider: openaiId, model: 'text-embedding-3-small', dimensions: 1536 }, auto_context: true });
    expect(await json(call('/retrieval', { method: 'PUT', body: JSON.stringify({}) }))).toMatchObject({ auto_context: true });
    expect((await delivered()).version).toBe(withContext.version);
    expect((await call('/retrieval', { method: 'PUT', body: JSON.stringify({ auto_context: 'yes' }) })).status).toBe(422);
    expect(await json(call('/retrieval', { method: 'PUT', body: JSON.stringify({ auto_context: false }) }))).toMatchObject({ auto_context: false });
    expect((await delivered()).document.retrieval).not.toHaveProperty('auto_context');

    // A rerank model is tried with a real call first: one the provider refuses is a 400 naming it, and nothing is stored.
    const rejected = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ rerank: { provider_id: openaiId, model: 'no-such-reranker' } }) });
    expect(rejected.status).toBe(400);
    expect(await json(rejected)).toMatchObject({ code: 'provider_rejected', detail: expect.stringContaining("rerank model 'no-such-reranker'") });
    const reranked = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ rerank: { provider_id: openaiId, model: 'rerank-v1' } }) });
    expect(await json(reranked)).toMatchObject({ rerank: { provider_id: openaiId, model: 'rerank-v1' }, embedding: { model: 'text-embedding-3-small' } });
    expect((await delivered()).document.retrieval).toMatchObject({ rerank: { provider: openaiId, model: 'rerank-v1' } });
    expect(await json(call('/retrieval', { method: 'PUT', body: JSON.stringify({ rerank: null }) }))).toMatchObject({ rerank: null });
    expect((await delivered()).document.retrieval).not.toHaveProperty('rerank');

    // The citation style travels in the same section.
    expect(await json(call('/citations', { method: 'PUT', body: JSON.stringify({ style: 'list' }) }))).toEqual({ style: 'list' });
    expect((await delivered()).document.retrieval).toEqual({ embedding: { provider: openaiId, model: 'text-embedding-3-small', dimensions: 1536 }, citations: 'list' });
    expect((await call('/citations', { method: 'PUT', body: JSON.stringify({ style: 'footnotes' }) })).status).toBe(422);

    // So does the document processor; null goes back to the runtime's default and leaves the section.
    const processor = { chunk_tokens: 200, overlap_tokens: 20 };
    expect(await json(call('/document-processor', { method: 'PUT', body: JSON.stringify({ processor }) }))).toEqual(processor);
    expect((await delivered()).document.retrieval).toMatchObject({ processor, citations: 'list' });
    expect((await call('/document-processor', { method: 'PUT', body: JSON.stringify({ processor: { chunk_tokens: 200, overlap_tokens: 150 } }) })).status).toBe(422);
    expect(await json(call('/document-processor', { method: 'PUT', body: JSON.stringify({ processor: null }) }))).toEqual({ chunk_tokens: 400, overlap_tokens: 60 });
    expect((await delivered()).document.retrieval).not.toHaveProperty('processor');
  });

  it("takes the project's own Pinecone index once it answered with the key and the model's dimension, seals its key, pushes it, and goes back to the deployment's", async () => {
    const pineconeKey = 'pcsk-project-index-key-0123LMNO';
    const index = await FakePineconeServer.start({ apiKey: pineconeKey, dimension: 1536 });
    const wide = await FakePineconeServer.start({ apiKey: pineconeKey, dimension: 3072 });
    try {
      const before = await delivered();
      const openaiId = before.document.providers!.find((p) => p.kind === 'openai')!.id;
      const put = (vector_index: unknown) => call('/retrieval', { method: 'PUT', body: JSON.stringify({ vector_index }) });

      // Refused, each naming why, and nothing stored or pushed: a wrong key, a host that is not an index, the
      // cloud's metadata address, an index of another dimension than the embedding model's, a malformed body.
      const wrongKey = await put({ provider: 'pinecone', index_host: index.host, api_key: 'pcsk-not-the-key-0000' });
      expect(wrongKey.status).toBe(400);
      expect(await json(wrongKey)).toMatchObject({ code: 'provider_rejected', detail: expect.stringContaining('refused the API key') });
      const metadata = await put({ provider: 'pinecone', index_host: 'http://169.254.169.254', api_key: pineconeKey });
      expect(metadata.status).toBe(400);
      expect(await json(metadata)).toMatchObject({ detail: expect.stringContaining('vector_index.index_host') });
      const mismatch = await put({ provider: 'pinecone', index_host: wide.host, api_key: pineconeKey });
      expect(mismatch.status).toBe(400);
      expect(await json(mismatch)).toMatchObject({ code: 'dimension_mismatch', detail: expect.stringContaining('3072 dimensions') });
      expect((await put({ provider: 'weaviate', index_host: index.host, api_key: pineconeKey })).status).toBe(422);
      expect((await put({ provider: 'pinecone', index_host: index.host, api_key: 'two\nlines' })).status).toBe(422);
      expect((await delivered()).version).toBe(before.version);

      const taken = await put({ provider: 'pinecone', index_host: `${index.host}/`, api_key: pineconeKey });
      expect(taken.status).toBe(200);
      const settings = await taken.text();
      expect(settings).not.toContain(pineconeKey);
      expect(JSON.parse(settings)).toMatchObject({ vector_index: { provider: 'pinecone', index_host: index.host, dimension: 1536, key_last_four: 'LMNO' } });
      const pushed = await delivered();
      expect(pushed.version).toBeGreaterThan(before.version);
      expect(pushed.document.retrieval?.vector_index).toEqual({ provider: 'pinecone', index_host: index.host, api_key: pineconeKey });
      // Sealed at rest on both planes, and never logged.
      const row = await (api.control.database.db as Kysely<ControlSchema>).withSchema('control').selectFrom('projects').select('vector_index').where('id', '=', projectId).executeTakeFirstOrThrow();
      expect(JSON.stringify(row)).not.toContain(pineconeKey);
      expect(logs.text()).not.toContain(pineconeKey);

      // A model of another dimension than the index's is refused while the index is set.
      const wider = await call('/retrieval', { method: 'PUT', body: JSON.stringify({ embedding: { provider_id: openaiId, model: 'text-embedding-3-large' } }) });
      expect(wider.status).toBe(400);
      expect((await json<{ code: string }>(wider)).code).toBe('dimension_mismatch');

      expect(await json(put(null))).toMatchObject({ vector_index: null });
      expect((await delivered()).document.retrieval).not.toHaveProperty('vector_index');
    } finally {
      await Promise.all([index.stop(), wide.stop()]);
    }
  });

  it('leaves a removed provider out of the next push, keeping the default it served, so a turn answers 409 no_provider', async () => {
    const before = await delivered();
    const openaiId = before.document.providers!.find((p) => p.kind === 'openai')!.id;
    expect((await call(`/providers/${openaiId}`, { method: 'DELETE' })).status).toBe(200);
    const after = await delivered();
    expect(after.version).toBeGreaterThan(before.version);
    expect(after.document.providers!.map((p) => p.id)).toEqual([before.document.providers![0]!.id]);
    expect(after.document.default_model).toBe('gpt-4o');
    expect(providerFor(after.document, 'gpt-4o')).toBeUndefined();
    // Its embedding model went with it: documents are searched by their words until another provider has one (the
    // citation style chosen above stays).
    expect(after.document.retrieval).toEqual({ embedding: null, citations: 'list' });
    expect(after.document.ceiling.registeredModels).toEqual(['llama-3.1-8b']);

    // The last provider gone: no providers section, the default still named, and a turn on it is 409 no_provider
    // naming cause and fix, not a free no_model that stores the message.
    expect((await call(`/providers/${after.document.providers![0]!.id}`, { method: 'DELETE' })).status).toBe(200);
    const none = await delivered();
    expect(none.document).not.toHaveProperty('providers');
    expect(none.document.default_model).toBe('gpt-4o');
    expect(none.document.limits).toEqual({ rpm_limit: 60, tpm_limit: 50_000, budget: { amount_usd: 20, window: 'month' } });
    const turn = await chat({ message: 'after removal' });
    expect(turn.status).toBe(409);
    const body = (await turn.json()) as { code: string; detail: string };
    expect(body.code).toBe('no_provider');
    expect(body.detail).toMatch(/^no provider serves model 'gpt-4o': its credential was removed or rotated out\. Register a provider/);
    expect(await rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', tenantId).execute()).toHaveLength(1);
  });

  it('delivered every push (nothing stuck on a refusal) and never logged a key', async () => {
    await eventually(async () => (await api.control.relay!.pending(projectId)) === 0, { what: 'the outbox to be empty' });
    expect(logs.text()).not.toMatch(/delivery to the runtime failed/);
    for (const key of [gatewayKey, openaiKey]) expect(logs.text()).not.toContain(key);
  });
});

describe('configuration push: the control plane is the source of truth (docs/decisions/0025)', () => {
  let rt: TestRuntime;
  let api: TestControl;
  let projectId: string;
  let tenantId: string;
  let adminKey: string;
  let mintKey: string;

  const call = (path: string, init: RequestInit = {}) => api.call(`/api/projects/${projectId}${path}`, { ...init, key: adminKey });
  const controlVersion = async () => (await api.control.projects.configurationDocument(projectId))!.version;
  /** The runtime's stored version and trusted key ids, read through its admin surface. */
  const runtimeHolds = async () => {
    const res = await rt.admin(`/tenants/${tenantId}/configuration`);
    if (res.status === 404) return { version: 0, kids: [] };
    const stored = (await res.json()) as { version: number; trusted_keys: { keys: { kid: string }[] } };
    return { version: stored.version, kids: stored.trusted_keys.keys.map((key) => key.kid) };
  };
  /** Waits until the runtime holds exactly the control plane's current configuration and nothing is pending. */
  const converged = async () => {
    const document = (await api.control.projects.configurationDocument(projectId))!;
    const kids = document.trusted_keys.keys.map((key) => (key as { kid: string }).kid);
    return eventually(async () => {
      const held = await runtimeHolds();
      const pending = await api.control.relay!.pending(projectId);
      return held.version === document.version && JSON.stringify(held.kids) === JSON.stringify(kids) && pending === 0 ? held : false;
    }, { what: `the runtime to hold version ${document.version}` });
  };
  /** A token minted now, and the data plane's answer to it. */
  const mintAndUse = async () => {
    const minted = await api.call(`/api/projects/${projectId}/token`, { method: 'POST', key: mintKey, body: JSON.stringify({ subject: 'acme:user-1' }) });
    expect(minted.status).toBe(200);
    const { access_token } = (await minted.json()) as { access_token: string };
    return (await rt.endUser('/capabilities', access_token)).status;
  };
  /** Puts another configuration on the runtime behind the control plane's back, as a restore from a backup would. */
  const replaceOnRuntime = async (version: number) => {
    await rt.runtime.database.db.deleteFrom('tenant_configurations').where('tenant_id', '=', tenantId).execute();
    const other = { ...(await api.control.projects.configurationDocument(projectId))!, version, trusted_keys: trustedKeysOf(await createKeyRing()), system_prompt: 'restored' };
    const res = await rt.admin(`/tenants/${tenantId}/configuration`, { method: 'PUT', body: JSON.stringify(other) });
    expect(res.status).toBe(200);
    expect(await mintAndUse()).toBe(401);
  };

  beforeAll(async () => {
    rt = await startTestRuntime();
    api = await startTestControl(owner, { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 2000 }) });
    const { account } = await api.control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const orgId = (await api.control.accounts.orgsOf(account.id))[0]!.id;
    const project = await api.control.projects.create(orgId, account.id, 'rotations');
    projectId = project.id;
    tenantId = project.tenant_id;
    const caller = { kind: 'account' as const, accountId: account.id };
    adminKey = (await api.control.keys.create(caller, projectId, { scope: 'admin', name: 'admin' })).key;
    mintKey = (await api.control.keys.create(caller, projectId, { scope: 'mint', name: 'mint' })).key;
    await converged();
  });
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
  });

  it('keeps pushing through 40 rotations within a token lifetime, and a token minted afterwards works', async () => {
    expect(await mintAndUse()).toBe(200);
    for (let rotation = 0; rotation < 40; rotation += 1) {
      expect((await call('/signing-keys/rotate', { method: 'POST' })).status).toBe(200);
    }
    const held = await converged();
    // Every retired key may still verify a live token: none is dropped early, and none blocks the push.
    expect(held.kids).toHaveLength(42);
    expect(await mintAndUse()).toBe(200);
    const { provisioning } = (await (await call('')).json()) as { provisioning: { ready: boolean; pending_changes: number; last_error: string | null } };
    expect(provisioning).toMatchObject({ ready: true, pending_changes: 0, last_error: null });
  });

  it('brings back a runtime that holds a newer version than the control plane', async () => {
    await replaceOnRuntime((await controlVersion()) + 100);
    expect((await call('/system-prompt', { method: 'PUT', body: JSON.stringify({ system_prompt: 'Be brief.' }) })).status).toBe(200);
    const held = await converged();
    expect(held.version).toBe(await controlVersion());
    expect(await mintAndUse()).toBe(200);
  });

  it('brings back a runtime restored to an older version, or holding other content at the same version, without any change', async () => {
    for (const behind of [1, 0]) {
      await replaceOnRuntime((await controlVersion()) - behind);
      expect(await api.control.relay!.resync()).toBe(1);
      await converged();
      expect(await mintAndUse()).toBe(200);
      const stored = (await (await rt.admin(`/tenants/${tenantId}/configuration`)).json()) as { system_prompt: string };
      expect(stored.system_prompt).toBe('Be brief.');
    }
  });
});

describe('configuration push: a push that keeps failing', () => {
  let rt: TestRuntime;
  let api: TestControl;

  /** The runtime is up and has the tenant, but refuses every configuration. */
  class RefusingProvisioner extends LocalProvisioner {
    override async pushConfiguration(): Promise<void> {
      throw new Error('the runtime refused to push configuration: 422 refused for the test');
    }
  }

  beforeAll(async () => {
    rt = await startTestRuntime();
    api = await startTestControl(owner, { provisioner: new RefusingProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 2000 }) });
  });
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
  });

  it('shows the project not ready, with the reason, in its provisioning status', async () => {
    const { account } = await api.control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const orgId = (await api.control.accounts.orgsOf(account.id))[0]!.id;
    const project = await api.control.projects.create(orgId, account.id, 'stuck');
    const adminKey = (await api.control.keys.create({ kind: 'account', accountId: account.id }, project.id, { scope: 'admin', name: 'admin' })).key;
    type Shown = { provisioning: { ready: boolean; reason: string; message: string; pending_changes: number; last_error: string | null } };
    const shown = await eventually(async () => {
      const body = (await (await api.call(`/api/projects/${project.id}`, { key: adminKey })).json()) as Shown;
      return body.provisioning.reason === 'ConfigurationNotDelivered' ? body.provisioning : false;
    }, { what: 'the failing push to show' });
    expect(shown).toMatchObject({ ready: false, pending_changes: 1, last_error: expect.stringMatching(/422 refused for the test/) });
    expect(shown.message).toMatch(/have not reached the runtime after \d+ attempts/);

    type Report = { canAnswer: boolean; ready: boolean; next: string | null; steps: { id: string; ok: boolean; essential: boolean; detail: string }[] };
    const report = (await (await api.call(`/api/projects/${project.id}/readiness`, { key: adminKey })).json()) as Report;
    expect(report).toMatchObject({ canAnswer: false, ready: false });
    expect(report.next).toMatch(/^configuration: .*422 refused for the test/);
    expect(report.steps.find((step) => step.id === 'runtime')).toMatchObject({ ok: true, essential: true });
    expect(report.steps.find((step) => step.id === 'configuration')).toMatchObject({ ok: false, essential: true, detail: expect.stringMatching(/422 refused for the test/) });
  });
});
