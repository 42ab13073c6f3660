// The identity path end to end, as a customer walks it: sign in on the control plane, create a project, create
// keys, mint an end-user token, and call the data plane with it. The project's tenant and configuration reach
// the runtime through the outbox and the local provisioner, over the runtime's real admin surface.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_KEY_ON_DATA_PLANE } from '@agentplane/lib/tokens/verify';
import type { ControlApi } from '@agentplane/control-api/app';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { startTestControl, type TestControl } from './harness/control.js';
import { eventually } from './harness/eventually.js';
import { startTestRuntime, type TestRuntime } from './harness/runtime.js';


describe('identity end to end: control plane to data plane', () => {
  let rt: TestRuntime;
  let api: TestControl;
  let control: ControlApi;
  let provider: FakeOpenAIServer;

  const control_ = (path: string, { session, ...init }: RequestInit & { key?: string; session?: string } = {}) =>
    api.call(path, { ...init, ...(session ? { token: session } : {}) });
  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
  const delivered = (projectId: string) => eventually(async () => (await control.relay!.pending(projectId)) === 0, { what: 'the outbox to deliver' });

  beforeAll(async () => {
    rt = await startTestRuntime();
    provider = await FakeOpenAIServer.start({ apiKey: 'sk-customer-own-key-0001', chatModels: ['gpt-test', 'gpt-other'], embeddingModels: { 'embed-test': 384 } });
    api = await startTestControl(
      {
        AGENTPLANE_OWNER_EMAIL: 'owner@example.com',
        AGENTPLANE_OWNER_PASSWORD: 'a long enough password',
        // The fake provider listens on loopback.
        AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
      },
      { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 2000 }) },
    );
    control = api.control;
  });
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
    await provider?.close();
  });

  it('signs in, creates a project and keys, mints a token, and the data plane honours it and later ceiling changes', async () => {
    const { token: session } = await json<{ token: string }>(
      control_('/api/auth/login', { method: 'POST', body: JSON.stringify({ email: 'owner@example.com', password: 'a long enough password' }) }),
    );
    const orgId = (await json<{ orgs: { id: string }[] }>(control_('/api/me', { session }))).orgs[0]!.id;
    const project = await json<{ id: string; tenant_id: string }>(
      control_(`/api/orgs/${orgId}/projects`, { method: 'POST', session, body: JSON.stringify({ name: 'helpdesk' }) }),
    );
    const admin = await json<{ key: string }>(control_(`/api/projects/${project.id}/keys`, { method: 'POST', session, body: JSON.stringify({ scope: 'admin' }) }));
    const mintKey = await json<{ key: string }>(control_(`/api/projects/${project.id}/keys`, { method: 'POST', key: admin.key, body: JSON.stringify({}) }));

    // The customer's own provider: the embedding dimension is measured by a real call, not assumed.
    const registered = await control_(`/api/projects/${project.id}/providers`, {
      method: 'POST',
      key: admin.key,
      body: JSON.stringify({ provider: 'openai_compatible', models: ['gpt-test'], values: { api_key: 'sk-customer-own-key-0001', base_url: provider.url, embedding_model: 'embed-test' } }),
    });
    expect(registered.status).toBe(201);
    expect(((await registered.json()) as { derived: object }).derived).toEqual({ defaultModel: 'gpt-test', embeddingModel: 'embed-test', embeddingDim: 384 });

    const minted = await json<{ access_token: string; capabilities: string[]; allowed_models: string[] }>(
      control_(`/api/projects/${project.id}/token`, {
        method: 'POST',
        key: mintKey.key,
        body: JSON.stringify({ subject: 'helpdesk:alice', capabilities: ['chat', 'documents:read', 'web_search'], models: ['gpt-test'] }),
      }),
    );
    expect(minted.capabilities).toEqual(expect.arrayContaining(['chat', 'documents:read', 'web_search']));
    expect(minted.allowed_models).toEqual(['gpt-test']);
    const unregistered = await control_(`/api/projects/${project.id}/token`, { method: 'POST', key: mintKey.key, body: JSON.stringify({ subject: 'helpdesk:bob', models: ['gpt-other'] }) });
    expect(unregistered.status).toBe(400);
    expect(await unregistered.json()).toMatchObject({ detail: "model 'gpt-other' is not available to this project. Registered: gpt-test" });

    await delivered(project.id);
    const caps = await rt.endUser('/capabilities', minted.access_token);
    expect(caps.status).toBe(200);
    const held = (await caps.json()) as { tenant_id: string; subject: string; capabilities: string[]; switches: Record<string, boolean> };
    expect(held).toMatchObject({ tenant_id: project.tenant_id, subject: 'helpdesk:alice', allowed_models: ['gpt-test'] });
    expect(held.capabilities).toEqual(expect.arrayContaining(['chat', 'documents:read', 'web_search']));
    // Web search is built: its switch is offered, and on while the token holds the capability.
    expect(held.switches.enable_web_search).toBe(true);

    // The project drops web search: the change reaches the runtime and the same token loses it at once.
    const patched = await control_(`/api/projects/${project.id}`, {
      method: 'PATCH',
      key: admin.key,
      body: JSON.stringify({ ceiling: { capabilities: ['chat', 'documents:read'] } }),
    });
    expect(patched.status).toBe(200);
    await delivered(project.id);
    const after = (await (await rt.endUser('/capabilities', minted.access_token)).json()) as { capabilities: string[]; switches: Record<string, boolean> };
    expect(after.capabilities).not.toContain('web_search');
    expect(after.switches.enable_web_search).toBe(false);

    // Rotating the signing key: new tokens carry the new kid; the one minted before keeps working until it expires.
    const rotated = await control_(`/api/projects/${project.id}/signing-keys/rotate`, { method: 'POST', key: admin.key });
    expect(rotated.status).toBe(200);
    const kidOf = (token: string) => (JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid;
    const { active_kid, trusted_kids } = (await rotated.json()) as { active_kid: string; trusted_kids: string[] };
    expect(active_kid).not.toBe(kidOf(minted.access_token));
    expect(trusted_kids).toContain(kidOf(minted.access_token));
    expect((await control_(`/api/projects/${project.id}/signing-keys/rotate`, { method: 'POST', key: mintKey.key })).status).toBe(403);
    await delivered(project.id);
    const fresh = await json<{ access_token: string }>(
      control_(`/api/projects/${project.id}/token`, { method: 'POST', key: mintKey.key, body: JSON.stringify({ subject: 'helpdesk:carol', capabilities: ['chat'] }) }),
    );
    expect(kidOf(fresh.access_token)).toBe(active_kid);
    expect((await rt.endUser('/capabilities', fresh.access_token)).status).toBe(200);
    expect((await rt.endUser('/capabilities', minted.access_token)).status).toBe(200);

    // The project key is a control-plane credential: the data plane refuses it, saying so.
    const withKey = await rt.endUser('/capabilities', mintKey.key);
    expect(withKey.status).toBe(401);
    expect(((await withKey.json()) as { detail: string }).detail).toBe(PROJECT_KEY_ON_DATA_PLANE);
  });

  it('enforces the origins set with PUT /api/projects/:id/origins on the data plane, leaving servers alone', async () => {
    const { token: session } = await control.accounts.signIn('owner@example.com', 'a long enough password', 'test');
    const account = await control.accounts.authenticate(session);
    const orgId = (await control.accounts.orgsOf(account.id))[0]!.id;
    const project = await control.projects.create(orgId, account.id, 'web app');
    const admin = await json<{ key: string }>(control_(`/api/projects/${project.id}/keys`, { method: 'POST', session, body: JSON.stringify({ scope: 'admin' }) }));
    const set = await control_(`/api/projects/${project.id}/origins`, { method: 'PUT', key: admin.key, body: JSON.stringify({ origins: ['https://app.example.com'] }) });
    expect(set.status).toBe(200);
    const { access_token: token } = await json<{ access_token: string }>(
      control_(`/api/projects/${project.id}/token`, { method: 'POST', key: admin.key, body: JSON.stringify({ subject: 'web:alice', capabilities: ['chat'] }) }),
    );
    await delivered(project.id);

    const allowed = await rt.endUser('/capabilities', token, { headers: { origin: 'https://app.example.com' } });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    const foreign = await rt.endUser('/capabilities', token, { headers: { origin: 'https://elsewhere.example.com' } });
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toMatchObject({ code: 'origin_not_allowed' });
    expect((await rt.endUser('/capabilities', token)).status).toBe(200);

    // Cleared on the control plane: no browser origin any more, servers as before.
    expect((await control_(`/api/projects/${project.id}/origins`, { method: 'PUT', key: admin.key, body: JSON.stringify({ origins: [] }) })).status).toBe(200);
    await delivered(project.id);
    expect((await rt.endUser('/capabilities', token, { headers: { origin: 'https://app.example.com' } })).status).toBe(403);
    expect((await rt.endUser('/capabilities', token)).status).toBe(200);
  });

  it('keeps retrying while the runtime is unreachable, and delivers once it answers again', async () => {
    const { token: session } = await control.accounts.signIn('owner@example.com', 'a long enough password', 'test');
    const account = await control.accounts.authenticate(session);
    const orgId = (await control.accounts.orgsOf(account.id))[0]!.id;
    const address = rt.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    rt.server.closeAllConnections();
    await new Promise((resolve) => rt.server.close(resolve));
    try {
      const project = await control.projects.create(orgId, account.id, 'while down');
      const failing = await eventually(async () => {
        const row = await control.database.db
          .withSchema('control')
          .selectFrom('outbox')
          .select(['attempts', 'last_error'])
          .where('project_id', '=', project.id)
          .where('kind', '=', 'register_tenant')
          .executeTakeFirst();
        return row && row.attempts > 0 ? row : false;
      }, { what: 'a failed attempt' });
      expect(failing.last_error).toMatch(/did not answer/);
      expect(await control.relay!.pending(project.id)).toBe(2);
      await new Promise<void>((resolve) => rt.server.listen(port, '127.0.0.1', resolve));
      await eventually(async () => (await control.relay!.pending(project.id)) === 0, { what: 'the outbox to deliver after the outage', timeoutMs: 30_000 });
      expect((await rt.admin(`/tenants/${project.tenant_id}/configuration`)).status).toBe(200);
    } finally {
      if (!rt.server.listening) await new Promise<void>((resolve) => rt.server.listen(port, '127.0.0.1', resolve));
    }
  });
});
