// End-user authentication on the data plane through HTTP, in both setups: a token verifies only against the
// keys and issuer its tenant's pushed configuration names, every hostile token is 401, and `GET /capabilities`
// reflects the tenant's current ceiling.
import { randomUUID } from 'node:crypto';
import { CompactSign } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCESS_TOKEN_TYPE, audienceFor } from '@agentplane/lib/tokens/claims';
import { createKeyRing, rotateKeyRing, trustedKeysOf } from '@agentplane/lib/tokens/keys';
import { PROJECT_KEY_ON_DATA_PLANE } from '@agentplane/lib/tokens/verify';
import { eventually } from '@agentplane/test/harness/eventually';
import {
  availableSetups,
  configuredTenant,
  ScaleServices,
  startTestRuntime,
  type TestRuntime,
  type TestTenant,
} from '@agentplane/test/harness/runtime';
import { TENANT_CHANGES_CHANNEL } from '../tenants/change-notices.js';

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const decodePart = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>;
const nowSeconds = () => Math.floor(Date.now() / 1000);

const ceiling = {
  capabilities: ['chat', 'documents:read', 'documents:write', 'memory', 'web_search', 'browser', 'ask_user', 'input:file', 'input:image', 'output:file', 'output:image'],
  maxToolIterations: 5,
  maxContextTokens: 64_000,
  registeredModels: ['gpt-4o', 'gpt-4o-mini', 'llama-3'],
};

/** The switches this build has a feature behind (docs/decisions/0030), with those named on. */
const BUILT_SWITCHES = ['enable_approvals', 'enable_ask_user', 'enable_auto_title', 'enable_browser', 'enable_computer', 'enable_memory', 'enable_plugins', 'enable_rag', 'enable_scheduling', 'enable_subagents', 'enable_todo', 'enable_web_search', 'enable_webhook_tools'];
const switchesWith = (...on: string[]) => Object.fromEntries(BUILT_SWITCHES.map((flag) => [flag, on.includes(flag)]));

describe.each(availableSetups())('end-user authentication (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let env: Record<string, string>;
  let rt: TestRuntime;
  let acme: TestTenant;
  let globex: TestTenant;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    env = (await services?.env()) ?? {};
    rt = await startTestRuntime({ env });
    acme = await configuredTenant(rt, { ceiling });
    globex = await configuredTenant(rt, { ceiling });
  });
  afterAll(async () => {
    await rt?.stop();
    await services?.stop();
  });

  async function capabilities(token: string, headers: Record<string, string> = {}) {
    return rt.endUser('/capabilities', token, { headers });
  }

  async function expectRefused(res: Response, detail: string, code = 'invalid_token') {
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(await res.json()).toMatchObject({ detail, code });
  }

  describe('GET /capabilities', () => {
    it('answers what a valid token holds within the ceiling, with the switches worth setting', async () => {
      const token = await acme.mint({
        sub: 'acme:team-1:alice',
        scope: 'acme:team-1',
        capabilities: ['chat', 'documents:read', 'memory', 'web_search', 'input:file', 'output:image'],
        allowed_models: ['gpt-4o-mini', 'llama-3'],
        max_effort: 'medium',
        max_tool_iterations: 8,
        roles: ['member'],
      });
      const res = await capabilities(token);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        tenant_id: acme.tenantId,
        subject: 'acme:team-1:alice',
        scope: 'acme:team-1',
        capabilities: ['chat', 'documents:read', 'input:file', 'memory', 'output:image', 'web_search'],
        switches: switchesWith('enable_rag', 'enable_memory', 'enable_web_search', 'enable_plugins'),
        allowed_models: ['gpt-4o-mini', 'llama-3'],
        max_effort: 'medium',
        // The tighter of the token's 8 and the project's 5; the context ceiling comes from the project alone.
        max_tool_iterations: 5,
        max_context_tokens: 64_000,
        privileged: false,
        // Chromium is on this machine, so `screenshot_url` is offered (capabilities.test.ts has a runtime without one).
        tools_not_offered: [],
      });
    });

    it('offers only the switches a feature of this build is behind, however many capabilities the token holds', async () => {
      const token = await acme.mint({ capabilities: ['chat', 'documents:read', 'memory', 'web_search', 'browser', 'ask_user'] });
      const body = (await (await capabilities(token)).json()) as { capabilities: string[]; switches: Record<string, boolean> };
      // Each held capability with a feature behind it is a switch worth setting (the browser: Chromium is on this machine).
      expect(body.capabilities).toEqual(['ask_user', 'browser', 'chat', 'documents:read', 'memory', 'web_search']);
      expect(body.switches).toEqual(switchesWith('enable_ask_user', 'enable_browser', 'enable_rag', 'enable_memory', 'enable_web_search', 'enable_plugins'));
      const doc = (await (await fetch(`${rt.url}/openapi.json`)).json()) as { components: { schemas: Record<string, { properties: Record<string, { properties?: object }> }> } };
      expect(Object.keys(doc.components.schemas.Capabilities!.properties.switches!.properties!).sort()).toEqual(BUILT_SWITCHES);
    });

    it('reports a privileged role, and null for limits neither the token nor the project sets', async () => {
      const tenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat'] } });
      const body = (await (await capabilities(await tenant.mint({ roles: ['owner', 'reader'] }))).json()) as Record<string, unknown>;
      expect(body).toMatchObject({
        capabilities: ['chat'],
        allowed_models: null,
        max_effort: null,
        max_tool_iterations: null,
        max_context_tokens: null,
        privileged: true,
      });
      // Other role names carry no privilege.
      expect(await (await capabilities(await tenant.mint({ roles: ['Admin', 'editor'] }))).json()).toMatchObject({ privileged: false });
    });

    it('drops at once what the project removes from its ceiling after the token was minted', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const token = await tenant.mint({ capabilities: ['chat', 'documents:write', 'memory', 'web_search'], allowed_models: ['gpt-4o', 'llama-3'] });
      expect(((await (await capabilities(token)).json()) as { capabilities: string[] }).capabilities).toEqual(['chat', 'documents:write', 'memory', 'web_search']);

      const narrowed = await tenant.reconfigure({
        ceiling: { ...ceiling, capabilities: ceiling.capabilities.filter((c) => c !== 'memory'), readOnly: true, registeredModels: ['gpt-4o'] },
      });
      expect(narrowed.status).toBe(200);
      const body = (await (await capabilities(token)).json()) as Record<string, unknown>;
      // memory left the ceiling; documents:write went with the project turning read-only; llama-3 is unregistered.
      expect(body.capabilities).toEqual(['chat', 'web_search']);
      expect(body.switches).toEqual(switchesWith('enable_web_search', 'enable_plugins'));
      expect(body.allowed_models).toEqual(['gpt-4o']);

      // Widening the ceiling again never adds what the token did not carry.
      await tenant.reconfigure({ ceiling });
      expect(((await (await capabilities(token)).json()) as { capabilities: string[] }).capabilities).toEqual(['chat', 'documents:write', 'memory', 'web_search']);
    });
  });

  describe('keys come from the pushed configuration', () => {
    it('verifies a token of the next key once published, and refuses a retired key once the project drops it', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const oldToken = await tenant.mint();
      const rotated = await rotateKeyRing(tenant.ring);
      expect((await tenant.reconfigure({ trusted_keys: trustedKeysOf(rotated) })).status).toBe(200);
      const newToken = await tenant.mint({}, { key: rotated.active });
      expect((await capabilities(newToken)).status).toBe(200);
      expect((await capabilities(oldToken)).status).toBe(200);

      // Pruned from the trusted set: tokens it signed stop verifying on the next request.
      expect((await tenant.reconfigure({ trusted_keys: { keys: [rotated.active.publicJwk, rotated.next.publicJwk] } })).status).toBe(200);
      await expectRefused(await capabilities(oldToken), 'invalid token');
      expect((await capabilities(newToken)).status).toBe(200);
    });

    it('refuses a token whose issuer is not the one configured', async () => {
      await expectRefused(await capabilities(await acme.mint({}, { issuer: globex.issuer })), 'invalid token');
    });

    it('refuses every token of a tenant once it is erased', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const token = await tenant.mint();
      expect((await capabilities(token)).status).toBe(200);
      expect((await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' })).status).toBe(200);
      await expectRefused(await capabilities(token), 'invalid token');
    });

    it('refuses the old keys\' tokens when an erased tenant is registered again and configured from version 1', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const token = await tenant.mint();
      expect((await capabilities(token)).status).toBe(200);
      // No request in between: a verifier remembered by version alone would still hold the old keys.
      expect((await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' })).status).toBe(200);
      expect((await rt.admin('/tenants', { method: 'POST', body: JSON.stringify({ tenant_id: tenant.tenantId }) })).status).toBe(201);
      const fresh = await createKeyRing();
      const put = await rt.admin(`/tenants/${tenant.tenantId}/configuration`, {
        method: 'PUT',
        body: JSON.stringify({ ...tenant.configuration, version: 1, trusted_keys: trustedKeysOf(fresh) }),
      });
      expect(put.status).toBe(200);
      await expectRefused(await capabilities(token), 'invalid token');
      expect((await capabilities(await tenant.mint({}, { key: fresh.active }))).status).toBe(200);
    });

    it.runIf(setup === 'scale')('takes a push to one replica into account on another at the next request', async () => {
      const replica = await startTestRuntime({ env, adminKey: rt.adminKey });
      // What the replica's own bus delivers on the notice channel, heard beside the replica's listener on the same
      // connection: once a message reaches this, it has reached the replica. Redis delivers a channel's messages in
      // the order they were published.
      const heard: unknown[] = [];
      const stopHearing = await replica.runtime.events.pubsub.subscribe(TENANT_CHANGES_CHANNEL, (message) => heard.push(message));
      try {
        const tenant = await configuredTenant(rt, { ceiling });
        const token = await tenant.mint({ capabilities: ['chat', 'memory'] });
        // Every notice of the tenant's creation reached the replica before this marker did.
        await rt.runtime.events.pubsub.publish(TENANT_CHANGES_CHANNEL, { marker: 'set up' });
        await eventually(() => heard.some((message) => (message as { marker?: string }).marker === 'set up'), { what: 'the set-up notices at the replica' });
        // The replica caches the tenant's stamp here, and would trust it for a while (TRUST_STAMP_MS) if no notice came.
        expect(await (await replica.endUser('/capabilities', token)).json()).toMatchObject({ capabilities: ['chat', 'memory'] });
        const before = heard.length;
        await tenant.reconfigure({ ceiling: { capabilities: ['chat'] } });
        // The push's notice, the only message since: a push that sent none fails here.
        await eventually(() => heard.length > before, { what: "the push's notice at the replica" });
        expect(await (await replica.endUser('/capabilities', token)).json()).toMatchObject({ capabilities: ['chat'] });
      } finally {
        await stopHearing();
        await replica.stop();
      }
    });
  });

  describe('hostile and wrong credentials are 401', () => {
    it('refuses a token signed with another tenant\'s key that claims this tenant', async () => {
      // Everything a real globex token carries, but signed by acme's key: globex's keys alone decide.
      const forged = await globex.mint({}, { key: acme.ring.active });
      await expectRefused(await capabilities(forged), 'invalid token');
      // And acme's genuine token is acme's: it never acts for globex.
      const genuine = await acme.mint();
      expect(await (await capabilities(genuine)).json()).toMatchObject({ tenant_id: acme.tenantId });
    });

    it('refuses a token whose tenant_id was switched to another tenant after signing', async () => {
      const [header, payload, signature] = (await acme.mint()).split('.') as [string, string, string];
      const claims = { ...decodePart(payload), tenant_id: globex.tenantId, aud: audienceFor(globex.tenantId) };
      await expectRefused(await capabilities(`${header}.${b64(claims)}.${signature}`), 'invalid token');
    });

    it('refuses alg none, with or without a signature', async () => {
      const valid = await acme.mint();
      const [, payload, signature] = valid.split('.') as [string, string, string];
      const none = b64({ alg: 'none', typ: ACCESS_TOKEN_TYPE, kid: acme.ring.active.kid });
      await expectRefused(await capabilities(`${none}.${payload}.`), 'invalid token');
      await expectRefused(await capabilities(`${none}.${payload}.${signature}`), 'invalid token');
    });

    it('refuses a token whose claims were changed after signing', async () => {
      const [header, payload, signature] = (await acme.mint({ capabilities: ['chat'] })).split('.') as [string, string, string];
      const widened = { ...decodePart(payload), capabilities: ['chat', 'computer', 'memory'], roles: ['admin'] };
      await expectRefused(await capabilities(`${header}.${b64(widened)}.${signature}`), 'invalid token');
    });

    it('refuses a token that carries its own key, or no key id', async () => {
      const claims = {
        sub: 'acme:alice', scope: 'acme', tenant_id: acme.tenantId, capabilities: ['chat'], roles: [], groups: [],
        iss: acme.issuer, aud: audienceFor(acme.tenantId), iat: nowSeconds(), exp: nowSeconds() + 600, jti: randomUUID(),
      };
      const attacker = await createKeyRing();
      const embedded = await new CompactSign(Buffer.from(JSON.stringify(claims)))
        .setProtectedHeader({ alg: 'EdDSA', typ: ACCESS_TOKEN_TYPE, kid: attacker.active.kid, jwk: attacker.active.publicJwk })
        .sign(attacker.active.privateKey);
      await expectRefused(await capabilities(embedded), 'invalid token');
      const noKid = await new CompactSign(Buffer.from(JSON.stringify(claims)))
        .setProtectedHeader({ alg: 'EdDSA', typ: ACCESS_TOKEN_TYPE })
        .sign(acme.ring.active.privateKey);
      await expectRefused(await capabilities(noKid), 'invalid token');
    });

    it('says an expired token has expired', async () => {
      const expired = await acme.mint({}, { now: new Date(Date.now() - 2 * 3600_000), lifetimeSeconds: 600 });
      await expectRefused(await capabilities(expired), 'token has expired', 'token_expired');
    });

    it('refuses a token signed with a real key but living longer than the project allows', async () => {
      // Nothing we sign outlives the project maximum (a day unless set), so such a token means a leaked key.
      const forever = await acme.mint({}, { lifetimeSeconds: 365 * 24 * 3600 });
      await expectRefused(await capabilities(forever), 'invalid token');
      expect((await capabilities(await acme.mint({}, { lifetimeSeconds: 24 * 3600 }))).status).toBe(200);
    });

    it('refuses a token for a tenant that does not exist or has no configuration, alike', async () => {
      const stranger = await configuredTenant(rt, { ceiling });
      // A real, well-signed token naming a tenant this runtime has never heard of.
      const unknown = await stranger.mint({ tenant_id: randomUUID() });
      await expectRefused(await capabilities(unknown), 'invalid token');
      const bare = await rt.admin('/tenants', { method: 'POST', body: JSON.stringify({}) });
      const { tenant_id } = (await bare.json()) as { tenant_id: string };
      await expectRefused(await capabilities(await stranger.mint({ tenant_id })), 'invalid token');
    });

    it('refuses a project key as a bearer token, bare in Authorization, or in X-API-Key even beside a valid token', async () => {
      const projectKey = `pk_${'a'.repeat(43)}`;
      await expectRefused(await capabilities(projectKey), PROJECT_KEY_ON_DATA_PLANE);
      await expectRefused(await fetch(`${rt.url}/capabilities`, { headers: { authorization: projectKey } }), PROJECT_KEY_ON_DATA_PLANE);
      await expectRefused(await fetch(`${rt.url}/capabilities`, { headers: { 'x-api-key': projectKey } }), PROJECT_KEY_ON_DATA_PLANE);
      await expectRefused(await capabilities(await acme.mint(), { 'x-api-key': projectKey }), PROJECT_KEY_ON_DATA_PLANE);
    });

    it('refuses a missing credential, another scheme, and garbage', async () => {
      await expectRefused(await fetch(`${rt.url}/capabilities`), 'missing bearer token');
      await expectRefused(await fetch(`${rt.url}/capabilities`, { headers: { authorization: 'Basic YWxpY2U6c2VjcmV0' } }), 'missing bearer token');
      await expectRefused(await fetch(`${rt.url}/capabilities`, { headers: { authorization: 'Bearer' } }), 'missing bearer token');
      // X-API-Key is not a way to send a token.
      await expectRefused(await fetch(`${rt.url}/capabilities`, { headers: { 'x-api-key': await acme.mint() } }), 'missing bearer token');
      for (const garbage of ['garbage', 'a.b.c', `${b64({ alg: 'EdDSA' })}.${b64({ tenant_id: acme.tenantId })}.x`, `${b64({ alg: 'EdDSA' })}.not-json.x`]) {
        await expectRefused(await capabilities(garbage), 'invalid token');
      }
    });

    it('takes the scheme name in any case', async () => {
      const res = await fetch(`${rt.url}/capabilities`, { headers: { authorization: `bearer ${await acme.mint()}` } });
      expect(res.status).toBe(200);
    });
  });

  it('documents the bearer scheme and the Capabilities schema in /openapi.json', async () => {
    const doc = (await (await fetch(`${rt.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security: object[]; responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> }>>;
      components: { securitySchemes: Record<string, unknown>; schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(doc.components.securitySchemes.bearer).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' }));
    const operation = doc.paths['/capabilities']!.get!;
    expect(operation.security).toEqual([{ bearer: [] }]);
    expect(operation.responses['200']!.content!['application/json']!.schema.$ref).toBe('#/components/schemas/Capabilities');
    expect(Object.keys(doc.components.schemas.Capabilities!.properties!).sort()).toEqual(
      ['allowed_models', 'capabilities', 'max_context_tokens', 'max_effort', 'max_tool_iterations', 'privileged', 'scope', 'subject', 'switches', 'tenant_id', 'tools_not_offered'].sort(),
    );
  });
});
