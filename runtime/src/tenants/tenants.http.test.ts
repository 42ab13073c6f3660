// Tenant administration through HTTP, in both setups: embedded (PGlite, files, in-process events) and scale
// (real PostgreSQL, MinIO, Redis). Bad input gets the documented status and stores nothing.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyRing, exportSigningKey, trustedKeysOf } from '@agentplane/lib/tokens/keys';
import { availableSetups, ScaleServices, startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';
import { digestOf, providerFor } from './configuration.js';
import { tenantBlobPrefix, tenantEventPrefix } from './keys.js';

const json = (value: unknown) => JSON.stringify(value);

describe.each(availableSetups())('tenants (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    rt = await startTestRuntime({ env: (await services?.env()) ?? {} });
  });
  afterAll(async () => {
    await rt?.stop();
    await services?.stop();
  });

  async function createTenant(body: Record<string, unknown> = {}) {
    const res = await rt.admin('/tenants', { method: 'POST', body: json({ name: 'acme', ...body }) });
    expect(res.status).toBe(201);
    return (await res.json()) as { tenant_id: string; name: string; settings_json: Record<string, unknown>; webhook_secret: string };
  }

  async function tenantCount() {
    return (await rt.runtime.tenants.list()).length;
  }

  describe('admin key', () => {
    it('refuses a missing, wrong or differently sized key with 401, storing nothing', async () => {
      const before = await tenantCount();
      for (const adminKey of [null, 'wrong', `${rt.adminKey}x`, rt.adminKey.slice(0, -1)]) {
        const res = await rt.admin('/tenants', { method: 'POST', adminKey, body: json({ name: 'x' }) });
        expect(res.status).toBe(401);
        expect(await res.json()).toMatchObject({ detail: 'missing or invalid X-Admin-Key' });
      }
      expect((await rt.admin('/tenants', { adminKey: null })).status).toBe(401);
      expect(await tenantCount()).toBe(before);
    });

    it('checks the key before the body, so a bad body without a key is 401 not 422', async () => {
      const res = await rt.admin('/tenants', { method: 'POST', adminKey: null, body: json({ tenant_id: 'nope' }) });
      expect(res.status).toBe(401);
    });
  });

  describe('create and read', () => {
    it('creates a tenant with a generated id, a webhook secret, and secret settings shown redacted', async () => {
      const created = await createTenant({ settings_json: { litellm_key: 'sk-live-0123456789abcdef', default_model: 'gpt-4o', plan: 'pro' } });
      expect(created.tenant_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(created.webhook_secret).toMatch(/^whsec_/);
      expect(created.settings_json).toEqual({ litellm_key: '****cdef', default_model: 'gpt-4o', plan: 'pro' });

      const listed = (await (await rt.admin('/tenants')).json()) as { tenant_id: string }[];
      expect(listed.map((t) => t.tenant_id)).toContain(created.tenant_id);
      const one = await (await rt.admin(`/tenants/${created.tenant_id}`)).json();
      expect(one).toMatchObject({ tenant_id: created.tenant_id, name: 'acme', settings_json: created.settings_json });
      expect(one).not.toHaveProperty('webhook_secret');

      // Routing reads the key in clear; the database holds it only sealed.
      expect(await rt.runtime.tenants.routing(created.tenant_id)).toEqual({ litellmKey: 'sk-live-0123456789abcdef', defaultModel: 'gpt-4o' });
      const raw = await sql<{ row: string }>`select row_to_json(t)::text as row from tenants t where tenant_id = ${created.tenant_id}`.execute(rt.runtime.database.db);
      expect(raw.rows[0]!.row).not.toContain('sk-live-0123456789abcdef');
      expect(raw.rows[0]!.row).not.toContain(created.webhook_secret);
    });

    it('takes a caller-chosen tenant id, and answers 409 when it is taken', async () => {
      const tenantId = crypto.randomUUID();
      await createTenant({ tenant_id: tenantId });
      const again = await rt.admin('/tenants', { method: 'POST', body: json({ tenant_id: tenantId }) });
      expect(again.status).toBe(409);
      expect(await again.json()).toMatchObject({ detail: `tenant ${tenantId} already exists` });
    });

    it('answers 422 with {loc, msg} for a tenant_id that is not a UUID or an unknown field, storing nothing', async () => {
      const before = await tenantCount();
      const res = await rt.admin('/tenants', { method: 'POST', body: json({ tenant_id: 'not-a-uuid', colour: 'red' }) });
      expect(res.status).toBe(422);
      const body = (await res.json()) as { detail: { loc: unknown[]; msg: string }[] };
      expect(body.detail).toEqual(
        expect.arrayContaining([
          { loc: ['body', 'tenant_id'], msg: 'tenant_id must be a UUID' },
          expect.objectContaining({ loc: ['body'], msg: expect.stringContaining('colour') }),
        ]),
      );
      expect(await tenantCount()).toBe(before);
    });

    it('answers 400 for malformed JSON and 413 for a body over the limit, storing nothing', async () => {
      const before = await tenantCount();
      const malformed = await rt.admin('/tenants', { method: 'POST', body: '{"name": "acme",' });
      expect(malformed.status).toBe(400);
      expect(await malformed.json()).toMatchObject({ detail: 'request body is not valid JSON' });
      const huge = await rt.admin('/tenants', { method: 'POST', body: json({ name: 'x', settings_json: { blob: 'y'.repeat(70 * 1024) } }) });
      expect(huge.status).toBe(413);
      expect(((await huge.json()) as { detail: string }).detail).toMatch(/larger than the limit of 65536 bytes/);
      expect(await tenantCount()).toBe(before);
    });

    it('answers 415 for a body that is not sent as JSON, storing nothing', async () => {
      const before = await tenantCount();
      for (const contentType of ['text/plain', 'application/octet-stream', 'application/x-www-form-urlencoded']) {
        const res = await rt.admin('/tenants', { method: 'POST', headers: { 'content-type': contentType }, body: '{"name": bad' });
        expect(res.status).toBe(415);
        expect(await res.json()).toMatchObject({ detail: 'request body must be JSON, sent with Content-Type: application/json' });
      }
      expect(await tenantCount()).toBe(before);
    });

    it('treats an upper-case tenant id as the same tenant, in every route and in the erase', async () => {
      const lower = crypto.randomUUID();
      const upper = lower.toUpperCase();
      const created = await createTenant({ tenant_id: upper, settings_json: { litellm_key: 'sk-upper-case-0000001' } });
      expect(created.tenant_id).toBe(lower);
      expect((await rt.admin('/tenants')).status).toBe(200);
      expect(await (await rt.admin(`/tenants/${upper}`)).json()).toMatchObject({ tenant_id: lower });
      expect((await rt.admin('/tenants', { method: 'POST', body: json({ tenant_id: lower }) })).status).toBe(409);
      expect(((await (await rt.admin(`/tenants/${upper}/webhook-secret`)).json()) as { webhook_secret: string }).webhook_secret).toBe(created.webhook_secret);
      await rt.runtime.blobs.put(`${tenantBlobPrefix(lower)}x.txt`, 'x');
      const erased = (await (await rt.admin(`/tenants/${upper}`, { method: 'DELETE' })).json()) as { tenant_id: string };
      expect(erased.tenant_id).toBe(lower);
      expect(await rt.runtime.blobs.exists(`${tenantBlobPrefix(lower)}x.txt`)).toBe(false);
    });

    it('answers 404 for a tenant that does not exist and 422 for a path id that is not a UUID', async () => {
      const missing = crypto.randomUUID();
      const res = await rt.admin(`/tenants/${missing}`);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ detail: `tenant ${missing} not found` });
      const bad = await rt.admin('/tenants/123', { method: 'PATCH', body: json({ settings_json: {} }) });
      expect(bad.status).toBe(422);
      expect(await bad.json()).toMatchObject({ detail: [{ loc: ['path', 'tenant_id'], msg: 'tenant_id must be a UUID' }] });
    });
  });

  describe('settings', () => {
    it('merges keys into settings_json, removes a key set to null, and keeps the rest', async () => {
      const { tenant_id } = await createTenant({ settings_json: { litellm_key: 'sk-first-000000000000', default_model: 'a', keep: { nested: true } } });
      const res = await rt.admin(`/tenants/${tenant_id}`, {
        method: 'PATCH',
        body: json({ settings_json: { default_model: 'b', litellm_key: 'sk-second-11111111111', extra: 3 } }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { settings_json: unknown }).settings_json).toEqual({
        default_model: 'b',
        litellm_key: '****1111',
        keep: { nested: true },
        extra: 3,
      });
      expect(await rt.runtime.tenants.routing(tenant_id)).toEqual({ litellmKey: 'sk-second-11111111111', defaultModel: 'b' });

      const removed = await rt.admin(`/tenants/${tenant_id}`, { method: 'PATCH', body: json({ name: 'renamed', settings_json: { litellm_key: null, extra: null } }) });
      expect(await removed.json()).toMatchObject({ name: 'renamed', settings_json: { default_model: 'b', keep: { nested: true } } });
      expect(await rt.runtime.tenants.routing(tenant_id)).toEqual({ litellmKey: undefined, defaultModel: 'b' });
    });

    it('refuses a routing key of the wrong type with 422 and changes nothing', async () => {
      const { tenant_id } = await createTenant({ settings_json: { default_model: 'a' } });
      const res = await rt.admin(`/tenants/${tenant_id}`, { method: 'PATCH', body: json({ settings_json: { default_model: 42, other: 'x' } }) });
      expect(res.status).toBe(422);
      expect(((await res.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc).toEqual(['body', 'settings_json', 'default_model']);
      expect((await rt.runtime.tenants.get(tenant_id)).settings_json).toEqual({ default_model: 'a' });
    });

    it('seals and redacts every setting whose name looks like a credential', async () => {
      const names = [
        'openai-api-key', 'openai.apikey', 'apikey', 'openaiApiKey', 'client_secret_value', 'db_password', 'access_token',
        'credentials', 'private_key_pem', 'openai_key_2', 'signing_key_v2', 'authorization', 'passphrase', 'session_cookie', 'dsn',
      ];
      const settings = Object.fromEntries(names.map((name) => [name, `value-of-${name}-0123456789`]));
      const { tenant_id, settings_json } = await createTenant({ settings_json: { ...settings, region: 'eu-west-1', keyboard_layout: 'dvorak' } });
      for (const name of names) expect(settings_json[name], name).toBe('****6789');
      expect(settings_json.region).toBe('eu-west-1');
      expect(settings_json.keyboard_layout).toBe('dvorak');
      const raw = await sql<{ row: string }>`select row_to_json(t)::text as row from tenants t where tenant_id = ${tenant_id}`.execute(rt.runtime.database.db);
      for (const name of names) expect(raw.rows[0]!.row).not.toContain(`value-of-${name}`);
    });

    it('refuses reserved setting names, and settings that would grow past the limit once merged', async () => {
      const before = await tenantCount();
      const proto = await rt.admin('/tenants', { method: 'POST', body: '{"settings_json": {"\\u005f_proto__": {"polluted": true}}}' });
      expect(proto.status).toBe(400);
      expect(await proto.json()).toMatchObject({ detail: 'request body may not contain the key __proto__' });
      const reserved = await rt.admin('/tenants', { method: 'POST', body: json({ settings_json: { constructor: 1 } }) });
      expect(reserved.status).toBe(422);
      expect(await reserved.json()).toMatchObject({ detail: [{ loc: ['body', 'settings_json', 'constructor'], msg: 'invalid name: this setting name is reserved' }] });
      expect(await tenantCount()).toBe(before);
      const { tenant_id } = await createTenant();
      const chunk = 'y'.repeat(20 * 1024);
      for (const name of ['a', 'b', 'c']) {
        const res = await rt.admin(`/tenants/${tenant_id}`, { method: 'PATCH', body: json({ settings_json: { [name]: chunk } }) });
        expect(res.status).toBe(200);
      }
      const over = await rt.admin(`/tenants/${tenant_id}`, { method: 'PATCH', body: json({ settings_json: { d: chunk } }) });
      expect(over.status).toBe(422);
      expect(await over.json()).toMatchObject({ detail: [{ loc: ['body', 'settings_json'], msg: 'settings_json would be larger than 65536 bytes once merged' }] });
      expect(Object.keys((await rt.runtime.tenants.get(tenant_id)).settings_json).sort()).toEqual(['a', 'b', 'c']);
    });

    it('refuses a secret setting in the redacted form it hands out (****...) with 422, keeping the stored secret', async () => {
      const { tenant_id, settings_json } = await createTenant({ settings_json: { litellm_key: 'sk-live-0123456789abcdef' } });
      expect(settings_json.litellm_key).toBe('****cdef');
      const res = await rt.admin(`/tenants/${tenant_id}`, { method: 'PATCH', body: json({ settings_json: { litellm_key: settings_json.litellm_key, plan: 'pro' } }) });
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({
        detail: [{ loc: ['body', 'settings_json', 'litellm_key'], msg: 'litellm_key is a redacted secret (`****...`, as secrets are shown); send the secret itself' }],
      });
      expect((await rt.runtime.tenants.get(tenant_id)).settings_json).toEqual({ litellm_key: '****cdef' });
      // A setting that is no credential may hold any text.
      expect((await rt.admin(`/tenants/${tenant_id}`, { method: 'PATCH', body: json({ settings_json: { banner: '**** stars ****' } }) })).status).toBe(200);
    });

    it('answers 404 when patching a tenant that does not exist', async () => {
      const res = await rt.admin(`/tenants/${crypto.randomUUID()}`, { method: 'PATCH', body: json({ settings_json: { a: 1 } }) });
      expect(res.status).toBe(404);
    });
  });

  describe('webhook secret', () => {
    it('reads the secret given at creation, and rotation replaces it at once', async () => {
      const created = await createTenant();
      const read = (await (await rt.admin(`/tenants/${created.tenant_id}/webhook-secret`)).json()) as { webhook_secret: string; rotated_at: string };
      expect(read.webhook_secret).toBe(created.webhook_secret);
      const rotated = await rt.admin(`/tenants/${created.tenant_id}/webhook-secret/rotate`, { method: 'POST' });
      expect(rotated.status).toBe(200);
      const fresh = (await rotated.json()) as { webhook_secret: string; rotated_at: string };
      expect(fresh.webhook_secret).toMatch(/^whsec_/);
      expect(fresh.webhook_secret).not.toBe(created.webhook_secret);
      const after = (await (await rt.admin(`/tenants/${created.tenant_id}/webhook-secret`)).json()) as { webhook_secret: string };
      expect(after.webhook_secret).toBe(fresh.webhook_secret);
      expect((await rt.admin(`/tenants/${crypto.randomUUID()}/webhook-secret/rotate`, { method: 'POST' })).status).toBe(404);
    });
  });

  describe('configuration', () => {
    const keys = async () => trustedKeysOf(await createKeyRing());
    const configuration = async (overrides: Record<string, unknown> = {}) => ({
      version: 1,
      issuer: 'agentplane:project:11111111-2222-4333-8444-555555555555',
      trusted_keys: await keys(),
      ceiling: { capabilities: ['memory', 'chat', 'documents:read'], maxToolIterations: 10, registeredModels: ['gpt-4o'] },
      system_prompt: 'Be brief.',
      origins: ['https://app.example.com'],
      ...overrides,
    });
    const put = (tenantId: string, body: unknown) => rt.admin(`/tenants/${tenantId}/configuration`, { method: 'PUT', body: json(body) });
    const stored = async (tenantId: string) => (await rt.admin(`/tenants/${tenantId}/configuration`)).json() as Promise<Record<string, unknown>>;

    it('stores a pushed configuration and reads it back with its version, sets in sorted order and defaults filled in', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      const res = await put(tenant_id, body);
      expect(res.status).toBe(200);
      const answer = (await res.json()) as Record<string, unknown>;
      expect(answer).toEqual({
        tenant_id,
        version: 1,
        issuer: body.issuer,
        trusted_keys: body.trusted_keys,
        ceiling: { capabilities: ['chat', 'documents:read', 'memory'], readOnly: false, maxToolIterations: 10, defaultRoles: [], defaultGroups: [], registeredModels: ['gpt-4o'] },
        system_prompt: 'Be brief.',
        origins: ['https://app.example.com'],
        updated_at: expect.any(String),
      });
      expect(await stored(tenant_id)).toEqual(answer);
    });

    it('answers a repeated push of the same version 200 without changing anything, even in another order', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      const first = (await (await put(tenant_id, body)).json()) as { updated_at: string };
      const reordered = { ...body, ceiling: { ...body.ceiling, capabilities: ['documents:read', 'chat', 'memory', 'chat'] }, origins: [...body.origins] };
      const again = await put(tenant_id, reordered);
      expect(again.status).toBe(200);
      expect(((await again.json()) as { updated_at: string }).updated_at).toBe(first.updated_at);
      expect(await stored(tenant_id)).toEqual({ tenant_id, ...first });
    });

    it('refuses the same version with other content with 409, changing nothing', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      await put(tenant_id, body);
      const before = await stored(tenant_id);
      const res = await put(tenant_id, { ...body, system_prompt: 'Be verbose.' });
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({
        detail: 'configuration version 1 is already stored with different content',
        code: 'configuration_version_conflict',
        stored_version: 1,
        stored_digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      expect(await stored(tenant_id)).toEqual(before);
    });

    it('replaces the whole configuration with a higher version, and refuses an older one with 409, changing nothing', async () => {
      const { tenant_id } = await createTenant();
      await put(tenant_id, await configuration());
      const v3 = await configuration({ version: 3, ceiling: { capabilities: ['chat'] }, origins: [] });
      expect((await put(tenant_id, v3)).status).toBe(200);
      const after = await stored(tenant_id);
      // Replaced whole: what v3 does not carry falls back to the defaults, nothing is merged from v1.
      expect(after).toMatchObject({ version: 3, ceiling: { capabilities: ['chat'], readOnly: false, defaultRoles: [], defaultGroups: [] }, system_prompt: 'Be brief.', origins: [] });
      expect(after.ceiling).not.toHaveProperty('registeredModels');

      const older = await put(tenant_id, await configuration({ version: 2, system_prompt: null }));
      expect(older.status).toBe(409);
      expect(await older.json()).toMatchObject({
        detail: 'configuration version 2 is older than the stored version 3',
        code: 'configuration_outdated',
        stored_version: 3,
        stored_digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      expect(await stored(tenant_id)).toEqual(after);
    });

    it('replaces a newer version, or other content at the same version, when the push names the stored digest', async () => {
      const { tenant_id } = await createTenant();
      await put(tenant_id, await configuration({ version: 9, system_prompt: 'restored from elsewhere' }));
      const ours = await configuration({ version: 4 });
      const refused = await put(tenant_id, ours);
      expect(refused.status).toBe(409);
      const { stored_digest } = (await refused.json()) as { stored_digest: string };

      // A digest that is not the stored one replaces nothing.
      const stale = await rt.admin(`/tenants/${tenant_id}/configuration?replace_digest=${'0'.repeat(64)}`, { method: 'PUT', body: json(ours) });
      expect(stale.status).toBe(409);
      expect(await stale.json()).toMatchObject({ code: 'configuration_changed', stored_version: 9, stored_digest });
      expect(await stored(tenant_id)).toMatchObject({ version: 9, system_prompt: 'restored from elsewhere' });

      const replaced = await rt.admin(`/tenants/${tenant_id}/configuration?replace_digest=${stored_digest}`, { method: 'PUT', body: json(ours) });
      expect(replaced.status).toBe(200);
      expect(await stored(tenant_id)).toMatchObject({ version: 4, system_prompt: 'Be brief.' });

      // The same version with other content, brought back the same way; and the replacement repeated is a no-op.
      const other = await put(tenant_id, { ...ours, system_prompt: 'Be verbose.' });
      const digest = ((await other.json()) as { stored_digest: string }).stored_digest;
      const again = { ...ours, system_prompt: 'Be verbose.' };
      expect((await rt.admin(`/tenants/${tenant_id}/configuration?replace_digest=${digest}`, { method: 'PUT', body: json(again) })).status).toBe(200);
      expect((await rt.admin(`/tenants/${tenant_id}/configuration?replace_digest=${digest}`, { method: 'PUT', body: json(again) })).status).toBe(200);
      expect(await stored(tenant_id)).toMatchObject({ version: 4, system_prompt: 'Be verbose.' });

      const malformed = await rt.admin(`/tenants/${tenant_id}/configuration?replace_digest=abc`, { method: 'PUT', body: json(ours) });
      expect(malformed.status).toBe(422);
      expect(((await malformed.json()) as { detail: { loc: unknown[] }[] }).detail.map((p) => p.loc)).toContainEqual(['query', 'replace_digest']);
    });

    it('answers 404 for an unknown tenant, and 404 not_configured for a tenant never configured', async () => {
      const missing = crypto.randomUUID();
      const putMissing = await put(missing, await configuration());
      expect(putMissing.status).toBe(404);
      expect(await putMissing.json()).toMatchObject({ detail: `tenant ${missing} not found` });
      expect((await rt.admin(`/tenants/${missing}/configuration`)).status).toBe(404);
      const { tenant_id } = await createTenant();
      const none = await rt.admin(`/tenants/${tenant_id}/configuration`);
      expect(none.status).toBe(404);
      expect(await none.json()).toMatchObject({ detail: `tenant ${tenant_id} has no configuration yet`, code: 'not_configured' });
    });

    it('refuses without the admin key, and refuses invalid documents with 422, storing nothing', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      expect((await rt.admin(`/tenants/${tenant_id}/configuration`, { method: 'PUT', adminKey: null, body: json(body) })).status).toBe(401);
      expect((await rt.admin(`/tenants/${tenant_id}/configuration`, { adminKey: null })).status).toBe(401);

      const privateKey = await exportSigningKey((await createKeyRing()).active);
      const invalid: [string, unknown, (string | number)[]][] = [
        ['version 0', { ...body, version: 0 }, ['body', 'version']],
        ['a fractional version', { ...body, version: 1.5 }, ['body', 'version']],
        ['an unknown capability', { ...body, ceiling: { capabilities: ['chat', 'telepathy'] } }, ['body', 'ceiling', 'capabilities', 1]],
        ['a private key among the trusted keys', { ...body, trusted_keys: { keys: [privateKey] } }, ['body', 'trusted_keys', 'keys', 0]],
        ['an empty key set', { ...body, trusted_keys: { keys: [] } }, ['body', 'trusted_keys', 'keys']],
        ['an origin with a path', { ...body, origins: ['https://app.example.com/login'] }, ['body', 'origins', 0]],
        ['a section this runtime does not know', { ...body, skills: [] }, ['body']],
        ['a ceiling without capabilities', { ...body, ceiling: { readOnly: true } }, ['body', 'ceiling', 'capabilities']],
        ['the runtime\'s own narrowing issuer', { ...body, issuer: `agentplane:tenant:${tenant_id}:narrowing` }, ['body', 'issuer']],
      ];
      for (const [name, document, loc] of invalid) {
        const res = await put(tenant_id, document);
        expect(res.status, name).toBe(422);
        const problems = ((await res.json()) as { detail: { loc: unknown[] }[] }).detail;
        expect(problems.map((p) => p.loc), name).toContainEqual(loc);
      }
      expect((await rt.admin(`/tenants/${tenant_id}/configuration`)).status).toBe(404);
    });
  });

  describe('configuration: providers, default model and limits', () => {
    const openaiKey = 'sk-proj-openai-0123456789abcdefWXYZ';
    const gatewayKey = 'sk-gateway-9876543210zyxwQRST';
    const openai = (overrides: Record<string, unknown> = {}) => ({
      id: 'cred-openai',
      kind: 'openai',
      base_url: 'https://api.openai.com/v1',
      api_key: openaiKey,
      models: ['gpt-4o-mini', 'gpt-4o', 'gpt-4o'],
      prices: { 'gpt-4o': { input_per_million_usd: 2.5, output_per_million_usd: 10 } },
      ...overrides,
    });
    const gateway = (overrides: Record<string, unknown> = {}) => ({
      id: 'cred-gateway',
      kind: 'openai_compatible',
      base_url: 'https://llm.internal.example.com/v1',
      api_key: gatewayKey,
      models: ['llama-3.1-8b'],
      ...overrides,
    });
    const configuration = async (overrides: Record<string, unknown> = {}) => ({
      version: 1,
      issuer: 'agentplane:project:11111111-2222-4333-8444-555555555555',
      trusted_keys: trustedKeysOf(await createKeyRing()),
      ceiling: { capabilities: ['chat'], registeredModels: ['gpt-4o', 'gpt-4o-mini', 'llama-3.1-8b'] },
      providers: [openai(), gateway()],
      default_model: 'gpt-4o',
      limits: { rpm_limit: 60, tpm_limit: 100_000, budget: { amount_usd: 25, window: 'month' } },
      ...overrides,
    });
    const put = (tenantId: string, body: unknown) => rt.admin(`/tenants/${tenantId}/configuration`, { method: 'PUT', body: json(body) });
    const storedRow = async (tenantId: string) =>
      (await sql<{ row: string }>`select row_to_json(c)::text as row from tenant_configurations c where tenant_id = ${tenantId}`.execute(rt.runtime.database.db)).rows[0]!.row;

    it('stores the keys sealed, answers them redacted, and load() gives the engine the keys in clear', async () => {
      const { tenant_id } = await createTenant();
      const res = await put(tenant_id, await configuration());
      expect(res.status).toBe(200);
      const answerText = await res.text();
      expect(answerText).not.toContain(openaiKey);
      const answer = JSON.parse(answerText) as Record<string, unknown>;
      expect(answer).toMatchObject({
        providers: [
          { ...openai(), models: ['gpt-4o', 'gpt-4o-mini'], api_key: '****WXYZ' },
          { ...gateway(), api_key: '****QRST' },
        ],
        default_model: 'gpt-4o',
        limits: { rpm_limit: 60, tpm_limit: 100_000, budget: { amount_usd: 25, window: 'month' } },
      });

      const read = await rt.admin(`/tenants/${tenant_id}/configuration`);
      const readText = await read.text();
      expect(readText).not.toContain(openaiKey);
      expect(readText).not.toContain(gatewayKey);
      expect(JSON.parse(readText)).toEqual(answer);

      // The table holds no key in clear, only sealed values.
      const row = await storedRow(tenant_id);
      expect(row).not.toContain(openaiKey);
      expect(row).not.toContain(gatewayKey);
      expect(row).toMatch(/"sealed_api_key": ?"v1\./);

      const loaded = await rt.runtime.configurations.load(tenant_id);
      expect(loaded!.document.providers!.map((p) => p.api_key)).toEqual([openaiKey, gatewayKey]);
      expect(providerFor(loaded!.document, 'gpt-4o')).toEqual({
        providerId: 'cred-openai',
        kind: 'openai',
        baseUrl: 'https://api.openai.com/v1',
        apiKey: openaiKey,
        price: { input_per_million_usd: 2.5, output_per_million_usd: 10 },
      });
      expect(providerFor(loaded!.document, 'llama-3.1-8b')).toMatchObject({ providerId: 'cred-gateway', apiKey: gatewayKey, price: undefined });
      expect(providerFor(loaded!.document, 'claude-3')).toBeUndefined();
      expect(loaded!.document.default_model).toBe('gpt-4o');
      expect(loaded!.document.limits).toEqual({ rpm_limit: 60, tpm_limit: 100_000, budget: { amount_usd: 25, window: 'month' } });
    });

    it('recognises a retried identical push (200, unchanged), and refuses the same version with another key (409)', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      const first = (await (await put(tenant_id, body)).json()) as { updated_at: string };
      const rowBefore = await storedRow(tenant_id);
      const stampBefore = await rt.runtime.configurations.stamp(tenant_id);

      // The same content in another spelling: models in another order, the same keys.
      const again = await put(tenant_id, { ...body, providers: [openai({ models: ['gpt-4o-mini', 'gpt-4o'] }), gateway()] });
      expect(again.status).toBe(200);
      expect(((await again.json()) as { updated_at: string }).updated_at).toBe(first.updated_at);
      expect(await storedRow(tenant_id)).toBe(rowBefore);

      const rotated = await put(tenant_id, { ...body, providers: [openai({ api_key: 'sk-proj-openai-rotated-00000000AAAA' }), gateway()] });
      expect(rotated.status).toBe(409);
      expect(await rotated.json()).toMatchObject({ code: 'configuration_version_conflict', stored_version: 1 });
      expect(await storedRow(tenant_id)).toBe(rowBefore);
      expect(await rt.runtime.configurations.stamp(tenant_id)).toEqual(stampBefore);

      // The digest is keyed: it is no plain hash of a document holding the key.
      const { version: _version, ...document } = body;
      expect(stampBefore!.digest).not.toBe(digestOf(document));
    });

    it('refuses a provider key in the redacted form it hands out (****...) with 422, keeping the stored key', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      expect((await put(tenant_id, body)).status).toBe(200);
      const shown = (await (await rt.admin(`/tenants/${tenant_id}/configuration`)).json()) as { providers: { api_key: string }[] };
      expect(shown.providers[0]!.api_key).toBe('****WXYZ');
      // A client that read the configuration and sent it back as a newer version.
      for (const masked of [shown.providers[0]!.api_key, '****']) {
        const res = await put(tenant_id, { ...body, version: 2, providers: [openai({ api_key: masked }), gateway()] });
        expect(res.status, masked).toBe(422);
        expect(((await res.json()) as { detail: { loc: unknown[]; msg: string }[] }).detail).toContainEqual({
          loc: ['body', 'providers', 0, 'api_key'],
          msg: 'api_key is a redacted secret (`****...`, as secrets are shown); send the secret itself',
        });
      }
      const loaded = await rt.runtime.configurations.load(tenant_id);
      expect(loaded!.version).toBe(1);
      expect(loaded!.document.providers![0]!.api_key).toBe(openaiKey);
    });

    it('takes a configuration without these sections, and a null default model', async () => {
      const { tenant_id } = await createTenant();
      const { providers: _p, default_model: _d, limits: _l, ...bare } = await configuration();
      expect((await put(tenant_id, bare)).status).toBe(200);
      const read = await (await rt.admin(`/tenants/${tenant_id}/configuration`)).json();
      expect(read).not.toHaveProperty('providers');
      expect(read).not.toHaveProperty('limits');
      expect((await put(tenant_id, { ...bare, version: 2, providers: [gateway()], default_model: null, limits: {} })).status).toBe(200);
      const loaded = await rt.runtime.configurations.load(tenant_id);
      expect(loaded!.document).toMatchObject({ default_model: null, limits: {} });
      expect(loaded!.document.providers![0]!.api_key).toBe(gatewayKey);
      // A default its provider no longer serves, or with no provider left, is kept: a turn on it answers
      // no_provider rather than no_model (docs/decisions/0030).
      expect((await put(tenant_id, { ...bare, version: 3, providers: [gateway()], default_model: 'gpt-4o' })).status).toBe(200);
      expect((await put(tenant_id, { ...bare, version: 4, default_model: 'gpt-4o' })).status).toBe(200);
      expect((await rt.runtime.configurations.load(tenant_id))!.document).toMatchObject({ default_model: 'gpt-4o' });
    });

    it('refuses invalid provider, default model and limit sections with 422, storing nothing and echoing no key', async () => {
      const { tenant_id } = await createTenant();
      const body = await configuration();
      const invalid: [string, unknown, (string | number)[]][] = [
        ['a model under two providers', { ...body, providers: [openai(), gateway({ models: ['llama-3.1-8b', 'gpt-4o'] })] }, ['body', 'providers', 1, 'models']],
        ['the same provider id twice', { ...body, providers: [openai(), gateway({ id: 'cred-openai' })] }, ['body', 'providers', 1, 'id']],
        ['an unknown provider kind', { ...body, providers: [openai({ kind: 'anthropic' })] }, ['body', 'providers', 0, 'kind']],
        ['a base_url that is not http(s)', { ...body, providers: [openai({ base_url: 'ftp://api.example.com' })] }, ['body', 'providers', 0, 'base_url']],
        ['a base_url with credentials', { ...body, providers: [openai({ base_url: 'https://user:secret@api.example.com/v1' })] }, ['body', 'providers', 0, 'base_url']],
        ['an empty key', { ...body, providers: [openai({ api_key: '' })] }, ['body', 'providers', 0, 'api_key']],
        ['a key over 4096 characters', { ...body, providers: [openai({ api_key: `sk-${'k'.repeat(4100)}` })] }, ['body', 'providers', 0, 'api_key']],
        ['a price for a model the provider does not serve', { ...body, providers: [openai({ prices: { 'gpt-5': { input_per_million_usd: 1, output_per_million_usd: 1 } } })] }, ['body', 'providers', 0, 'prices', 'gpt-5']],
        ['a negative price', { ...body, providers: [openai({ prices: { 'gpt-4o': { input_per_million_usd: -1, output_per_million_usd: 1 } } })] }, ['body', 'providers', 0, 'prices', 'gpt-4o', 'input_per_million_usd']],
        ['65 providers', { ...body, default_model: null, providers: Array.from({ length: 65 }, (_, i) => gateway({ id: `c${i}`, models: [`m${i}`] })) }, ['body', 'providers']],
        ['an rpm limit of 0', { ...body, limits: { rpm_limit: 0 } }, ['body', 'limits', 'rpm_limit']],
        ['a fractional tpm limit', { ...body, limits: { tpm_limit: 1.5 } }, ['body', 'limits', 'tpm_limit']],
        ['a budget of 0', { ...body, limits: { budget: { amount_usd: 0, window: 'day' } } }, ['body', 'limits', 'budget', 'amount_usd']],
        ['a budget per week', { ...body, limits: { budget: { amount_usd: 5, window: 'week' } } }, ['body', 'limits', 'budget', 'window']],
        ['an unknown limit', { ...body, limits: { rph_limit: 5 } }, ['body', 'limits']],
      ];
      for (const [name, document, loc] of invalid) {
        const res = await put(tenant_id, document);
        expect(res.status, name).toBe(422);
        const text = await res.text();
        expect(text, name).not.toContain(openaiKey);
        const problems = (JSON.parse(text) as { detail: { loc: unknown[] }[] }).detail;
        expect(problems.map((p) => p.loc), name).toContainEqual(loc);
      }
      expect((await rt.admin(`/tenants/${tenant_id}/configuration`)).status).toBe(404);
    });
  });

  describe('erase', () => {
    async function seed(tenantId: string) {
      await rt.runtime.blobs.put(`${tenantBlobPrefix(tenantId)}documents/a.txt`, 'alpha');
      await rt.runtime.blobs.put(`${tenantBlobPrefix(tenantId)}documents/b.txt`, 'beta');
      await rt.runtime.events.logs.append(`${tenantEventPrefix(tenantId)}runs/r1`, { type: 'start' });
    }

    it('purges rows, then stored bytes and run logs, reporting each step in order, and leaves other tenants alone', async () => {
      const doomed = await createTenant();
      const kept = await createTenant();
      await seed(doomed.tenant_id);
      await seed(kept.tenant_id);
      for (const { tenant_id } of [doomed, kept]) {
        const configured = await rt.admin(`/tenants/${tenant_id}/configuration`, {
          method: 'PUT',
          body: json({ version: 1, issuer: 'agentplane:project:p', trusted_keys: trustedKeysOf(await createKeyRing()), ceiling: { capabilities: ['chat'] } }),
        });
        expect(configured.status).toBe(200);
        // What the tenant's first narrowed token (POST /auth/token) would create.
        expect(await rt.runtime.narrowingKeys.currentOrCreate(tenant_id)).toBeDefined();
      }

      const res = await rt.admin(`/tenants/${doomed.tenant_id}`, { method: 'DELETE' });
      expect(res.status).toBe(200);
      const report = (await res.json()) as Record<string, unknown>;
      expect(report).toMatchObject({ tenant_id: doomed.tenant_id, erased: true, complete: true });
      // Other features register their own tables and steps; this tenant had rows only in these three, and the
      // audit log's entry of its configuration's PUT (written before the purge, which takes it too).
      const rowsDeleted = report.rows_deleted as Record<string, number>;
      expect(rowsDeleted).toMatchObject({ tenant_configurations: 1, tenant_narrowing_keys: 1, tenants: 1, audit_log: 1 });
      expect(Object.values(rowsDeleted).reduce((sum, n) => sum + n, 0)).toBe(4);
      const steps = report.steps as { step: string; phase: string; outcome: string; items?: number }[];
      expect(steps.every((step) => step.outcome === 'done')).toBe(true);
      expect(steps.filter((step) => ['rows', 'run_logs', 'stored_bytes'].includes(step.step))).toEqual([
        { step: 'rows', phase: 'rows', outcome: 'done', items: 4 },
        { step: 'run_logs', phase: 'outside_database', outcome: 'done', items: 1 },
        { step: 'stored_bytes', phase: 'outside_database', outcome: 'done', items: 2 },
      ]);

      expect((await rt.admin(`/tenants/${doomed.tenant_id}`)).status).toBe(404);
      expect((await rt.admin(`/tenants/${doomed.tenant_id}/configuration`)).status).toBe(404);
      expect(await rt.runtime.configurations.stamp(doomed.tenant_id)).toBeUndefined();
      expect(await rt.runtime.narrowingKeys.current(doomed.tenant_id)).toBeUndefined();
      expect(await rt.runtime.narrowingKeys.current(kept.tenant_id)).toBeDefined();
      expect((await rt.admin(`/tenants/${kept.tenant_id}/configuration`)).status).toBe(200);
      expect(await rt.runtime.blobs.exists(`${tenantBlobPrefix(doomed.tenant_id)}documents/a.txt`)).toBe(false);
      expect((await rt.runtime.events.logs.read(`${tenantEventPrefix(doomed.tenant_id)}runs/r1`, 0)).state).toBe('missing');
      expect(await rt.runtime.blobs.exists(`${tenantBlobPrefix(kept.tenant_id)}documents/a.txt`)).toBe(true);
      expect((await rt.runtime.events.logs.read(`${tenantEventPrefix(kept.tenant_id)}runs/r1`, 0)).state).not.toBe('missing');
      expect((await rt.admin(`/tenants/${kept.tenant_id}`)).status).toBe(200);
    });

    it('answers a repeated DELETE with a fresh report that retries the best-effort steps, and 404 for an unknown id', async () => {
      const { tenant_id } = await createTenant();
      expect((await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' })).status).toBe(200);
      // Something written under the tenant's prefix after the erase (a late upload) goes on the retry.
      await rt.runtime.blobs.put(`${tenantBlobPrefix(tenant_id)}late.bin`, 'late');
      const again = await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' });
      expect(again.status).toBe(200);
      const report = (await again.json()) as { steps: { step: string; outcome: string; items?: number }[]; rows_deleted: object };
      expect(report.rows_deleted).toEqual({});
      expect(report.steps.find((s) => s.step === 'rows')).toEqual({ step: 'rows', phase: 'rows', outcome: 'already_done' });
      expect(report.steps.find((s) => s.step === 'stored_bytes')).toMatchObject({ outcome: 'done', items: 1 });
      expect((await rt.admin(`/tenants/${crypto.randomUUID()}`, { method: 'DELETE' })).status).toBe(404);
    });

    it('reports a failed best-effort step without failing the erase, and a retry completes it', async () => {
      const { tenant_id } = await createTenant();
      let failing = true;
      rt.runtime.eraser.registerStep({
        name: 'flaky_vectors',
        phase: 'outside_database',
        run: async () => {
          if (failing) throw new Error('vector index unreachable');
          return { items: 0 };
        },
      });
      const first = (await (await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' })).json()) as { complete: boolean; steps: object[] };
      expect(first.complete).toBe(false);
      expect(first.steps).toContainEqual({ step: 'flaky_vectors', phase: 'outside_database', outcome: 'failed', error: 'vector index unreachable' });
      failing = false;
      const second = (await (await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' })).json()) as { complete: boolean };
      expect(second.complete).toBe(true);
    });

    it('runs the steps in order: work stopped and sandboxes gone while rows exist, outside data after the purge', async () => {
      const { tenant_id } = await createTenant();
      const rowsSeenBy: Record<string, boolean> = {};
      const recordRows = (name: string) => async (id: string) => {
        if (id === tenant_id) rowsSeenBy[name] = Boolean(await rt.runtime.database.db.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', id).executeTakeFirst());
        return {};
      };
      // Registered out of phase order on purpose: the phase decides when a step runs, not registration.
      rt.runtime.eraser.registerStep({ name: 'vectors_probe', phase: 'outside_database', run: recordRows('vectors_probe') });
      rt.runtime.eraser.registerStep({ name: 'sandboxes_probe', phase: 'sandboxes', run: recordRows('sandboxes_probe') });
      rt.runtime.eraser.registerStep({ name: 'schedules_probe', phase: 'stop_work', run: recordRows('schedules_probe') });
      const report = (await (await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' })).json()) as { steps: { step: string }[] };
      const order = report.steps.map((s) => s.step);
      expect(order.indexOf('schedules_probe')).toBeLessThan(order.indexOf('sandboxes_probe'));
      expect(order.indexOf('sandboxes_probe')).toBeLessThan(order.indexOf('rows'));
      expect(order.indexOf('rows')).toBeLessThan(order.indexOf('vectors_probe'));
      expect(rowsSeenBy).toEqual({ schedules_probe: true, sandboxes_probe: true, vectors_probe: false });
    });

    it('stops before the rows when stopping work fails: 500 naming the step, with the report, every row and byte kept', async () => {
      const { tenant_id } = await createTenant();
      await seed(tenant_id);
      let failing = true;
      rt.runtime.eraser.registerStep({
        name: 'schedules',
        phase: 'stop_work',
        run: async (id) => {
          if (failing && id === tenant_id) throw new Error('scheduler unreachable');
          return {};
        },
      });
      const res = await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' });
      expect(res.status).toBe(500);
      const body = (await res.json()) as { detail: string; code: string; report: { erased: boolean; steps: { step: string; outcome: string }[] } };
      expect(body.code).toBe('erase_incomplete');
      expect(body.detail).toContain("step 'schedules' failed (scheduler unreachable)");
      expect(body.report.erased).toBe(false);
      expect(body.report.steps).toContainEqual({ step: 'schedules', phase: 'stop_work', outcome: 'failed', error: 'scheduler unreachable' });
      expect(body.report.steps).toContainEqual({ step: 'rows', phase: 'rows', outcome: 'not_run' });
      expect((await rt.admin(`/tenants/${tenant_id}`)).status).toBe(200);
      expect(await rt.runtime.blobs.exists(`${tenantBlobPrefix(tenant_id)}documents/a.txt`)).toBe(true);
      failing = false;
      expect((await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' })).status).toBe(200);
      expect((await rt.admin(`/tenants/${tenant_id}`)).status).toBe(404);
    });

    it('keeps every row and byte when the row purge fails part way, answering 500 without internals', async () => {
      const { tenant_id } = await createTenant({ settings_json: { default_model: 'm' } });
      await seed(tenant_id);
      const configured = await rt.admin(`/tenants/${tenant_id}/configuration`, {
        method: 'PUT',
        body: json({ version: 1, issuer: 'agentplane:project:p', trusted_keys: trustedKeysOf(await createKeyRing()), ceiling: { capabilities: ['chat'] } }),
      });
      expect(configured.status).toBe(200);
      const narrowingKeys = await rt.runtime.narrowingKeys.currentOrCreate(tenant_id);
      // The first purge really deletes the tenant's row; the second then fails: the transaction must undo both.
      rt.runtime.eraser.registerRows({
        table: 'early_feature',
        purge: async (trx, id) => Number((await trx.deleteFrom('tenants').where('tenant_id', '=', id).executeTakeFirst()).numDeletedRows),
      });
      rt.runtime.eraser.registerRows({
        table: 'broken_feature',
        purge: async (trx, id) => {
          if (id !== tenant_id) return 0;
          await sql`select no_such_function_for_internal_detail()`.execute(trx);
          return 0;
        },
      });
      const res = await rt.admin(`/tenants/${tenant_id}`, { method: 'DELETE' });
      expect(res.status).toBe(500);
      const body = (await res.json()) as { detail: string; request_id: string };
      expect(body.detail).toBe('internal server error');
      expect(JSON.stringify(body)).not.toContain('no_such_function');
      expect(body.request_id).toBe(res.headers.get('x-request-id'));

      expect(await (await rt.admin(`/tenants/${tenant_id}`)).json()).toMatchObject({ settings_json: { default_model: 'm' } });
      expect(await (await rt.admin(`/tenants/${tenant_id}/configuration`)).json()).toMatchObject({ version: 1 });
      expect((await rt.runtime.narrowingKeys.current(tenant_id))?.keyIds).toBe(narrowingKeys?.keyIds);
      expect(await rt.runtime.blobs.exists(`${tenantBlobPrefix(tenant_id)}documents/a.txt`)).toBe(true);
      expect((await rt.runtime.events.logs.read(`${tenantEventPrefix(tenant_id)}runs/r1`, 0)).state).not.toBe('missing');
    });
  });
});
