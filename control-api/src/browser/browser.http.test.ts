// A project's browser hand-off settings through HTTP: the defaults until set; a PUT stored whole and pushed in the
// configuration; a check model the project does not register refused (400) and bad values refused (422), with
// nothing changed; a mint key refused and another project hidden.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROWSER_DEFAULTS } from '@agentplane/lib/browser';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';
import type { ControlApi } from '../app.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

describe("a project's browser hand-off settings", () => {
  let api: TestControl;
  let control: ControlApi;
  let provider: FakeOpenAIServer;
  let projectId: string;
  let adminKey: string;
  let mintKey: string;

  const providerKey = 'sk-fake-browser-0123456789abcdef';
  const call = (init: RequestInit & { key?: string } = {}) => api.call(`/api/projects/${projectId}/browser`, { key: adminKey, ...init });
  const put = (body: unknown, init: { key?: string } = {}) => call({ method: 'PUT', body: JSON.stringify(body), ...init });
  const pushed = async () => (await control.projects.configurationDocument(projectId))!;

  beforeAll(async () => {
    provider = await FakeOpenAIServer.start({ apiKey: providerKey, chatModels: ['gpt-4o', 'gpt-4o-mini'] });
    api = await startTestControl({ ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' });
    control = api.control;
    const signedIn = await control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const orgId = (await control.accounts.orgsOf(signedIn.account.id))[0]!.id;
    projectId = (await control.projects.create(orgId, signedIn.account.id, 'support')).id;
    const caller = { kind: 'account' as const, accountId: signedIn.account.id };
    adminKey = (await control.keys.create(caller, projectId, { scope: 'admin', name: 'admin' })).key;
    mintKey = (await control.keys.create(caller, projectId, { scope: 'mint', name: 'mint' })).key;
    const registered = await api.call(`/api/projects/${projectId}/providers`, {
      method: 'POST',
      key: adminKey,
      body: JSON.stringify({ provider: 'openai_compatible', models: ['gpt-4o', 'gpt-4o-mini'], values: { api_key: providerKey, base_url: provider.url } }),
    });
    expect(registered.status, await registered.clone().text()).toBe(201);
  });
  afterAll(async () => {
    await api?.stop();
    await provider?.close();
  });

  it('reads the defaults and pushes nothing until set; a PUT is stored whole and pushed', async () => {
    expect(await (await call()).json()).toEqual({ handoff_check_model: null, ...BROWSER_DEFAULTS });
    expect(await pushed()).not.toHaveProperty('browser');
    const set = await put({ handoff_check_model: 'gpt-4o-mini', handoff_checks_per_minute: 3 });
    expect(set.status, await set.clone().text()).toBe(200);
    expect(await set.json()).toEqual({ handoff_check_model: 'gpt-4o-mini', handoff_checks_per_minute: 3 });
    expect((await pushed()).browser).toEqual({ handoff_check_model: 'gpt-4o-mini', handoff_checks_per_minute: 3 });
    // Whole: a setting left out is its default again.
    expect(await (await put({})).json()).toEqual({ handoff_check_model: null, ...BROWSER_DEFAULTS });
    expect(await (await call()).json()).toEqual({ handoff_check_model: null, ...BROWSER_DEFAULTS });
  });

  it('refuses a model the project does not register, and bad values, changing nothing', async () => {
    await put({ handoff_check_model: 'gpt-4o' });
    const version = (await pushed()).version;
    const unknown = await put({ handoff_check_model: 'claude-9' });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(await unknown.json())).toContain('claude-9');
    for (const [body, field] of [
      [{ handoff_checks_per_minute: 0 }, 'handoff_checks_per_minute'],
      [{ handoff_checks_per_minute: 61 }, 'handoff_checks_per_minute'],
      [{ handoff_checks_per_minute: 1.5 }, 'handoff_checks_per_minute'],
      [{ handoff_check_model: '' }, 'handoff_check_model'],
      [{ handoff_check_model: 'x'.repeat(300) }, 'handoff_check_model'],
      [{ check_model: 'gpt-4o' }, ''],
    ] as const) {
      const res = await put(body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(JSON.stringify(await res.json())).toContain(field);
    }
    expect((await pushed()).version).toBe(version);
    expect((await (await call()).json()) as object).toMatchObject({ handoff_check_model: 'gpt-4o' });
  });

  it('refuses a mint key with 403 on both routes, and hides another project with 404', async () => {
    expect((await call({ key: mintKey })).status).toBe(403);
    expect((await put({}, { key: mintKey })).status).toBe(403);
    expect((await api.call(`/api/projects/${crypto.randomUUID()}/browser`, { key: adminKey })).status).toBe(404);
  });
});
