// A project's routes through HTTP: reading and changing its ceiling and configuration, and minting tokens that
// the data plane's verifier accepts, with every clamp and warning of SPEC.md's token request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issuerFor } from '@agentplane/lib/tokens/claims';
import { MAX_TRUSTED_KEYS, trustedKeysOf } from '@agentplane/lib/tokens/keys';
import { verifyAccessToken } from '@agentplane/lib/tokens/verify';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import type { ControlApi } from '../app.js';

describe('project routes and minting', () => {
  let api: TestControl;
  let control: ControlApi;
  let projectId: string;
  let tenantId: string;
  let adminKey: string;
  let mintKey: string;

  const call = (path: string, init: RequestInit & { key?: string } = {}) => api.call(path, init);
  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
  const mint = (body: object, key = mintKey) => call(`/api/projects/${projectId}/token`, { method: 'POST', key, body: JSON.stringify(body) });
  const patch = (body: object) => call(`/api/projects/${projectId}`, { method: 'PATCH', key: adminKey, body: JSON.stringify(body) });

  beforeAll(async () => {
    api = await startTestControl({
      AGENTPLANE_OWNER_EMAIL: 'owner@example.com',
      AGENTPLANE_OWNER_PASSWORD: 'a long enough password',
      DATA_PLANE_URL: 'https://data.example.com',
    });
    control = api.control;
    const { token, account } = await control.accounts.signIn('owner@example.com', 'a long enough password', 'test');
    const orgId = (await control.accounts.orgsOf(account.id))[0]!.id;
    const project = await control.projects.create(orgId, account.id, 'support');
    projectId = project.id;
    tenantId = project.tenant_id;
    const caller = { kind: 'account' as const, accountId: account.id };
    adminKey = (await control.keys.create(caller, projectId, { scope: 'admin', name: 'admin' })).key;
    mintKey = (await control.keys.create(caller, projectId, { scope: 'mint', name: 'mint' })).key;
    expect(token).toBeTruthy();
  });
  afterAll(async () => {
    await api?.stop();
  });

  it('starts with a ceiling of every capability; admin keys read the project, mint keys only the ceiling', async () => {
    const project = await json<{ ceiling: { capabilities: string[]; read_only: boolean; max_token_lifetime_seconds: number } }>(call(`/api/projects/${projectId}`, { key: adminKey }));
    expect(project.ceiling.capabilities).toContain('chat');
    expect(project.ceiling.capabilities).toContain('output:video');
    expect(project.ceiling).toMatchObject({ read_only: false, max_token_lifetime_seconds: 86400 });
    expect((await call(`/api/projects/${projectId}`, { key: mintKey })).status).toBe(403);
    const caps = await json<{ capabilities: { name: string; enabled: boolean; per_request_flag: string | null }[]; modalities: object }>(
      call(`/api/projects/${projectId}/capabilities`, { key: mintKey }),
    );
    expect(caps.capabilities.find((c) => c.name === 'documents:read')).toMatchObject({ enabled: true, per_request_flag: 'enable_rag' });
    expect(caps.modalities).toEqual({ input: ['audio', 'file', 'image', 'video'], output: ['audio', 'file', 'image', 'video'] });
  });

  it('changes the ceiling, refusing an unknown capability with a did-you-mean and changing nothing', async () => {
    const refused = await patch({ ceiling: { capabilities: ['chat', 'web-search'] } });
    expect(refused.status).toBe(422);
    expect(await refused.json()).toMatchObject({ detail: [{ loc: ['body', 'ceiling', 'capabilities', 1], msg: "unknown capability 'web-search'; did you mean 'web_search'?" }] });
    expect((await json<{ ceiling: { capabilities: string[] } }>(call(`/api/projects/${projectId}`, { key: adminKey }))).ceiling.capabilities).toContain('browser');

    const changed = await patch({ name: 'support bot', ceiling: { capabilities: ['chat', 'documents:read', 'documents:write', 'web_search', 'output:image'], read_only: true, max_token_lifetime_seconds: 600, max_tool_iterations: 5 } });
    expect(changed.status).toBe(200);
    expect(await changed.json()).toMatchObject({ name: 'support bot', ceiling: { read_only: true, max_tool_iterations: 5, max_token_lifetime_seconds: 600 } });
    const caps = await json<{ capabilities: { name: string; enabled: boolean }[]; modalities: object; read_only: boolean }>(call(`/api/projects/${projectId}/capabilities`, { key: mintKey }));
    expect(caps.capabilities.find((c) => c.name === 'documents:write')!.enabled).toBe(false);
    expect(caps.capabilities.find((c) => c.name === 'browser')!.enabled).toBe(false);
    expect(caps.modalities).toEqual({ input: [], output: ['image'] });
  });

  it('mints a token the data plane verifies, clamped to the ceiling, with every warning SPEC.md names', async () => {
    const res = await mint({
      subject: 'acme:user-42',
      scope: 'acme',
      capabilities: ['chat', 'documents:write', 'browser', 'web-search'],
      roles: ['admin', 'support'],
      maxToolIterations: 50,
      expiresIn: 10_000_000,
    });
    expect(res.status).toBe(200);
    const body = await json<Record<string, unknown> & { access_token: string; warnings: string[] }>(res);
    expect(body).toMatchObject({
      token_type: 'Bearer',
      tenant_id: tenantId,
      scope: 'acme',
      expires_in: 600,
      max_tool_iterations: 5,
      allowed_models: null,
    });
    expect(body.capabilities).toEqual(expect.arrayContaining(['chat']));
    expect(body.capabilities).not.toContain('documents:write');
    expect(body.capabilities).not.toContain('browser');
    expect(body.warnings.join('\n')).toMatch(/did you mean 'web_search'/);
    expect(body.warnings.join('\n')).toMatch(/browser/);
    expect(body.warnings.join('\n')).toMatch(/documents:write/);
    expect(body.warnings.join('\n')).toMatch(/role 'admin' is privileged/);

    const ring = await control.projects.signingKeys(projectId);
    const claims = await verifyAccessToken(body.access_token, { trustedKeys: trustedKeysOf(ring), issuer: issuerFor(projectId), tenantId });
    expect(claims).toMatchObject({ sub: 'acme:user-42', scope: 'acme', tenant_id: tenantId, roles: expect.arrayContaining(['admin', 'support']) });
    expect(claims.exp - claims.iat).toBe(600);
  });

  it('grants a capability the ceiling names though nothing is built behind it yet, and says so in warnings', async () => {
    const body = await json<{ capabilities: string[]; warnings?: string[] }>(mint({ subject: 'acme:user-8', capabilities: ['chat', 'web_search', 'output:image'] }));
    expect(body.capabilities).toEqual(['chat', 'output:image', 'web_search']);
    expect(body.warnings).toEqual(["granted capability 'output:image' has nothing behind it yet"]);
  });

  it('omits warnings when there are none, and defaults the scope to the subject', async () => {
    // Without output:image in the ceiling, no modality with nothing behind it is inherited.
    expect((await patch({ ceiling: { capabilities: ['chat', 'documents:read', 'documents:write', 'web_search'] } })).status).toBe(200);
    const body = await json<Record<string, unknown>>(mint({ subject: 'acme:user-7', capabilities: ['chat'] }));
    expect(body.scope).toBe('acme:user-7');
    expect(body).not.toHaveProperty('warnings');
  });

  it('refuses a scope that is not a prefix of the subject, and an unregistered model, with 400', async () => {
    const scope = await mint({ subject: 'acme:user-1', scope: 'other' });
    expect(scope.status).toBe(400);
    const model = await mint({ subject: 'acme:user-1', models: ['gpt-4o'] });
    expect(model.status).toBe(400);
    expect(await model.json()).toMatchObject({ detail: "model 'gpt-4o' is not available to this project. Registered: " });
  });

  it('stops minting at once when the key is revoked', async () => {
    const caller = { kind: 'key' as const, keyId: 'x', projectId, scope: 'admin' as const };
    const doomed = await control.keys.create(caller, projectId, { scope: 'mint', name: 'doomed' });
    expect((await mint({ subject: 'acme:u' }, doomed.key)).status).toBe(200);
    await control.keys.revoke(caller, projectId, doomed.id);
    expect((await mint({ subject: 'acme:u' }, doomed.key)).status).toBe(401);
  });

  it('sets the system prompt and origins, refusing an origin with a path or plain http', async () => {
    const prompt = await json<{ system_prompt: string }>(call(`/api/projects/${projectId}/system-prompt`, { method: 'PUT', key: adminKey, body: JSON.stringify({ system_prompt: 'Be brief.' }) }));
    expect(prompt.system_prompt).toBe('Be brief.');
    const ok = await call(`/api/projects/${projectId}/origins`, { method: 'PUT', key: adminKey, body: JSON.stringify({ origins: ['https://app.example.com', 'http://localhost:3000', 'https://app.example.com'] }) });
    expect(((await ok.json()) as { origins: string[] }).origins).toEqual(['https://app.example.com', 'http://localhost:3000']);
    for (const bad of ['https://app.example.com/path', 'http://app.example.com', 'app.example.com']) {
      expect((await call(`/api/projects/${projectId}/origins`, { method: 'PUT', key: adminKey, body: JSON.stringify({ origins: [bad] }) })).status, bad).toBe(422);
    }
    expect((await call(`/api/projects/${projectId}/system-prompt`, { method: 'PUT', key: mintKey, body: JSON.stringify({ system_prompt: null }) })).status).toBe(403);
  });

  it('refuses a rotation that would make the trusted set larger than the runtime accepts, saying when one fits, and keeps minting', async () => {
    const rotate = () => call(`/api/projects/${projectId}/signing-keys/rotate`, { method: 'POST', key: adminKey });
    const start = trustedKeysOf(await control.projects.signingKeys(projectId)).keys.length;
    for (let size = start; size < MAX_TRUSTED_KEYS; size += 1) expect((await rotate()).status).toBe(200);
    const versionBefore = (await control.projects.configurationDocument(projectId))!.version;
    const refused = await rotate();
    expect(refused.status).toBe(409);
    const body = await json<{ detail: string; code: string }>(refused);
    expect(body.code).toBe('signing_keys_full');
    expect(body.detail).toMatch(new RegExp(`trusts at most ${MAX_TRUSTED_KEYS} signing keys.*the next rotation fits at \\d{4}-`));
    // Nothing changed: the configuration pushed is the one before, within the runtime's bound.
    const document = (await control.projects.configurationDocument(projectId))!;
    expect(document.version).toBe(versionBefore);
    expect(document.trusted_keys.keys).toHaveLength(MAX_TRUSTED_KEYS);
    expect((await mint({ subject: 'acme:u' })).status).toBe(200);
  });

  it('reports readiness step by step to admin keys: no runtime and no provider here, each naming what it blocks and its fix', async () => {
    expect((await call(`/api/projects/${projectId}/readiness`, { key: mintKey })).status).toBe(403);
    expect((await call(`/api/projects/${crypto.randomUUID()}/readiness`, { key: adminKey })).status).toBe(404);
    const report = await json<{ canAnswer: boolean; ready: boolean; next: string; steps: { id: string; ok: boolean; essential: boolean; fix: string | null }[] }>(
      call(`/api/projects/${projectId}/readiness`, { key: adminKey }),
    );
    expect(report).toMatchObject({ canAnswer: false, ready: false });
    expect(report.next).toMatch(/^runtime: NoRuntime/);
    expect(report.steps.map((step) => [step.id, step.ok])).toEqual([
      ['runtime', false],
      ['configuration', true],
      ['provider', false],
      ['default-model', false],
      // Set by an earlier test. No runtime answers here: the steps that read it (documents, unattended work, failing
      // turns) are left out.
      ['origins', true],
    ]);
    expect(report.steps.find((step) => step.id === 'provider')!.fix).toBe(`POST /api/projects/${projectId}/providers`);
  });

  it('gives the endpoints and a snippet to start from', async () => {
    const connect = await json<{ control_url: string; data_url: string; snippet: string; tenant_id: string }>(call(`/api/projects/${projectId}/connect`, { key: adminKey }));
    expect(connect).toMatchObject({ control_url: api.url, data_url: 'https://data.example.com', tenant_id: tenantId });
    expect(connect.snippet).toContain(`/api/projects/${projectId}/token`);
  });
});
