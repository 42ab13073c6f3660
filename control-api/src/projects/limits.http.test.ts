// A project's usage caps through HTTP: read and changed by admin keys and sessions only, omitted members kept and
// null clearing, bad values refused with nothing changed, every change bumping the configuration version with the
// caps in the pushed document, and a warning when a budget cannot count a model that has no price.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';
import type { ControlApi } from '../app.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

describe('project usage limits', () => {
  let api: TestControl;
  let control: ControlApi;
  let provider: FakeOpenAIServer;
  let projectId: string;
  let adminKey: string;
  let mintKey: string;
  let session: string;

  const providerKey = 'sk-fake-limits-0123456789abcdef';
  const call = (init: RequestInit & { key?: string; token?: string } = {}) => api.call(`/api/projects/${projectId}/limits`, { key: adminKey, ...init });
  const put = (body: unknown, init: { key?: string; token?: string } = {}) => call({ method: 'PUT', body: JSON.stringify(body), ...init });
  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
  const pushed = async () => (await control.projects.configurationDocument(projectId))!;

  beforeAll(async () => {
    provider = await FakeOpenAIServer.start({ apiKey: providerKey, chatModels: ['gpt-4o', 'gpt-4o-mini', 'llama-3.1-8b'] });
    api = await startTestControl({ ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' });
    control = api.control;
    const signedIn = await control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    session = signedIn.token;
    const orgId = (await control.accounts.orgsOf(signedIn.account.id))[0]!.id;
    projectId = (await control.projects.create(orgId, signedIn.account.id, 'support')).id;
    const caller = { kind: 'account' as const, accountId: signedIn.account.id };
    adminKey = (await control.keys.create(caller, projectId, { scope: 'admin', name: 'admin' })).key;
    mintKey = (await control.keys.create(caller, projectId, { scope: 'mint', name: 'mint' })).key;
  });
  afterAll(async () => {
    await api?.stop();
    await provider?.close();
  });

  it('starts with no caps, and pushes no limits section', async () => {
    expect(await json(call())).toEqual({ rpmLimit: null, tpmLimit: null, budget: null });
    expect(await pushed()).not.toHaveProperty('limits');
  });

  it('sets caps, keeps omitted members, clears with null, and pushes each change', async () => {
    const v0 = (await pushed()).version;
    const set = await put({ rpmLimit: 60, tpmLimit: 100_000, budget: { amountUsd: 25.5, window: 'month' } });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ rpmLimit: 60, tpmLimit: 100_000, budget: { amountUsd: 25.5, window: 'month' } });
    expect(await pushed()).toMatchObject({ version: v0 + 1, limits: { rpm_limit: 60, tpm_limit: 100_000, budget: { amount_usd: 25.5, window: 'month' } } });

    // A signed-in session may change them too.
    const partial = await put({ tpmLimit: null, budget: { amountUsd: 3, window: 'day' } }, { key: '', token: session });
    expect(partial.status).toBe(200);
    expect(await partial.json()).toEqual({ rpmLimit: 60, tpmLimit: null, budget: { amountUsd: 3, window: 'day' } });
    expect(await json(call())).toEqual({ rpmLimit: 60, tpmLimit: null, budget: { amountUsd: 3, window: 'day' } });
    expect((await pushed()).limits).toEqual({ rpm_limit: 60, budget: { amount_usd: 3, window: 'day' } });

    expect(await json(put({ rpmLimit: null, budget: null }))).toEqual({ rpmLimit: null, tpmLimit: null, budget: null });
    const cleared = await pushed();
    expect(cleared.version).toBe(v0 + 3);
    expect(cleared).not.toHaveProperty('limits');
  });

  it('refuses bad caps with 422 and changes nothing', async () => {
    await put({ rpmLimit: 10 });
    const version = (await pushed()).version;
    const invalid: [unknown, (string | number)[]][] = [
      [{ rpmLimit: 0 }, ['body', 'rpmLimit']],
      [{ rpmLimit: 2.5 }, ['body', 'rpmLimit']],
      [{ tpmLimit: -1 }, ['body', 'tpmLimit']],
      [{ tpmLimit: 2_147_483_648 }, ['body', 'tpmLimit']],
      [{ tpmLimit: '100' }, ['body', 'tpmLimit']],
      [{ budget: { amountUsd: 0, window: 'day' } }, ['body', 'budget', 'amountUsd']],
      [{ budget: { amountUsd: 5, window: 'week' } }, ['body', 'budget', 'window']],
      [{ budget: { amountUsd: 5 } }, ['body', 'budget', 'window']],
      [{ rpm_limit: 5 }, ['body']],
    ];
    for (const [body, loc] of invalid) {
      const res = await put(body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(((await res.json()) as { detail: { loc: unknown[] }[] }).detail.map((p) => p.loc), JSON.stringify(body)).toContainEqual(loc);
    }
    expect(await json(call())).toEqual({ rpmLimit: 10, tpmLimit: null, budget: null });
    expect((await pushed()).version).toBe(version);
  });

  it('refuses a mint key with 403 on both routes, and hides another project with 404', async () => {
    const version = (await pushed()).version;
    expect((await call({ key: mintKey })).status).toBe(403);
    expect((await put({ rpmLimit: 1 }, { key: mintKey })).status).toBe(403);
    expect((await pushed()).version).toBe(version);
    const other = await api.call(`/api/projects/${crypto.randomUUID()}/limits`, { key: adminKey });
    expect(other.status).toBe(404);
  });

  it('warns, under a budget, about registered models without a price (they count no cost)', async () => {
    const register = (models: string[], prices?: object) =>
      api.call(`/api/projects/${projectId}/providers`, {
        method: 'POST',
        key: adminKey,
        body: JSON.stringify({ provider: 'openai_compatible', models, values: { api_key: providerKey, base_url: provider.url }, ...(prices ? { prices } : {}) }),
      });
    expect((await register(['gpt-4o', 'gpt-4o-mini'], { 'gpt-4o': { inputPerMillionUsd: 2.5, outputPerMillionUsd: 10 } })).status).toBe(201);
    expect((await register(['llama-3.1-8b'])).status).toBe(201);

    // No budget: nothing to warn about.
    expect(await json(call())).not.toHaveProperty('warnings');
    const withBudget = await json<{ warnings?: string[] }>(put({ budget: { amountUsd: 10, window: 'day' } }));
    expect(withBudget.warnings).toEqual([
      "no price is set for 'gpt-4o-mini', 'llama-3.1-8b': calls to them count no cost against the budget. Register the provider again with `prices` to count them",
    ]);
    expect((await json<{ warnings?: string[] }>(call())).warnings).toEqual(withBudget.warnings);
    expect((await pushed()).providers!.map((p) => p.prices ?? null)).toEqual([{ 'gpt-4o': { input_per_million_usd: 2.5, output_per_million_usd: 10 } }, null]);
  });
});
