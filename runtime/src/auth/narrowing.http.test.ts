// `POST /auth/token` through HTTP, in both setups: a token narrowed into a child that holds exactly what was asked
// within what the caller holds, that never widens anything, that verifies only with the tenant's narrowing keys
// under the narrowing issuer, on every replica, and that dies with the tenant's erase.
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMasterKey } from '@agentplane/lib/crypto/local-secrets';
import { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { audienceFor, narrowingIssuerFor, type AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { exportSigningKey } from '@agentplane/lib/tokens/keys';
import { signAccessToken } from '@agentplane/lib/tokens/mint';
import { PROJECT_KEY_ON_DATA_PLANE } from '@agentplane/lib/tokens/verify';
import {
  availableSetups,
  configuredTenant,
  ScaleServices,
  startTestRuntime,
  type TestRuntime,
  type TestTenant,
} from '@agentplane/test/harness/runtime';
import { NarrowingKeyRings } from './narrowing-keys.js';

const ceiling = {
  capabilities: ['chat', 'documents:read', 'documents:write', 'memory', 'web_search', 'browser', 'computer', 'input:file', 'input:image', 'output:file', 'output:image'],
  maxTokenLifetimeSeconds: 7200,
  maxToolIterations: 10,
  maxContextTokens: 64_000,
  registeredModels: ['gpt-4o', 'gpt-4o-mini', 'llama-3'],
};

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const decodePart = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>;

interface Narrowed {
  access_token: string;
  token_type: string;
  expires_in: number;
  tenant_id: string;
  capabilities: string[];
  scope: string;
  data_scope: string | null;
  allowed_models: string[] | null;
  max_effort: string | null;
  max_context_tokens: number | null;
  max_tool_iterations: number | null;
  warnings?: string[];
}

describe.each(availableSetups())('token narrowing (%s)', (setup) => {
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

  const narrow = (token: string, body: object = {}, on: TestRuntime = rt) => on.endUser('/auth/token', token, { method: 'POST', body: JSON.stringify(body) });

  async function narrowed(token: string, body: object = {}, on: TestRuntime = rt): Promise<Narrowed> {
    const res = await narrow(token, body, on);
    const answer = (await res.json()) as Narrowed;
    expect(res.status, JSON.stringify(answer)).toBe(200);
    return answer;
  }

  async function capabilities(token: string, on: TestRuntime = rt) {
    const res = await on.endUser('/capabilities', token);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async function expectRefused(res: Response, status: number, detail: string, code?: string) {
    expect(res.status).toBe(status);
    expect(await res.json()).toMatchObject({ detail, ...(code ? { code } : {}) });
  }

  /** A token signed with the tenant's narrowing ring, however the test likes: what only a key thief could make. */
  async function signedWithNarrowingKey(tenant: TestTenant, grant: Partial<AccessTokenGrant>, options: { issuer: string; now?: Date; lifetimeSeconds?: number }) {
    const keys = await rt.runtime.narrowingKeys.currentOrCreate(tenant.tenantId);
    const { token } = await signAccessToken(
      { sub: 'acme:alice', scope: 'acme', tenant_id: tenant.tenantId, capabilities: ['chat'], roles: [], groups: [], ...grant },
      keys!.ring.active,
      { issuer: options.issuer, lifetimeSeconds: options.lifetimeSeconds ?? 600, ...(options.now ? { now: options.now } : {}) },
    );
    return token;
  }

  describe('narrowing', () => {
    it('narrows capabilities, subject, scope, models, effort and limits; the child holds exactly that at /capabilities', async () => {
      const parent = await acme.mint({
        sub: 'acme:team-1:alice',
        scope: 'acme:team-1',
        capabilities: ['chat', 'documents:read', 'memory', 'web_search', 'input:file', 'input:image', 'output:file', 'output:image'],
        allowed_models: ['gpt-4o', 'gpt-4o-mini'],
        max_effort: 'high',
        max_tool_iterations: 8,
        max_context_tokens: 32_000,
      });
      const child = await narrowed(parent, {
        user_ref: 'acme:team-1:alice',
        scope: 'acme:team-1:alice',
        capabilities: ['chat', 'memory', 'output:image'],
        allowed_models: ['gpt-4o-mini'],
        max_effort: 'low',
        max_tool_iterations: 3,
        max_context_tokens: 8000,
        expires_in: 600,
      });
      expect(child).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: 600,
        tenant_id: acme.tenantId,
        // Naming an output side narrows it to exactly what was named; the input side is inherited from the parent.
        capabilities: ['chat', 'input:file', 'input:image', 'memory', 'output:image'],
        scope: 'acme:team-1:alice',
        data_scope: null,
        allowed_models: ['gpt-4o-mini'],
        max_effort: 'low',
        max_context_tokens: 8000,
        max_tool_iterations: 3,
      });

      const seen = await capabilities(child.access_token);
      expect(seen.status).toBe(200);
      expect(seen.body).toMatchObject({
        tenant_id: acme.tenantId,
        subject: 'acme:team-1:alice',
        scope: 'acme:team-1:alice',
        capabilities: ['chat', 'input:file', 'input:image', 'memory', 'output:image'],
        allowed_models: ['gpt-4o-mini'],
        max_effort: 'low',
        max_tool_iterations: 3,
        max_context_tokens: 8000,
        privileged: false,
      });

      // Signed by the tenant's narrowing ring under the narrowing issuer, naming its parent.
      const claims = decodeJwt(child.access_token);
      expect(claims).toMatchObject({ iss: narrowingIssuerFor(acme.tenantId), aud: audienceFor(acme.tenantId), parent_jti: decodeJwt(parent).jti });
      expect(claims.exp! - claims.iat!).toBe(600);
      const keys = await rt.runtime.narrowingKeys.current(acme.tenantId);
      expect(decodeProtectedHeader(child.access_token).kid).toBe(keys!.ring.active.kid);
    });

    it('keeps everything the request leaves out, with a fresh default lifetime of 3600 seconds', async () => {
      const parent = await acme.mint({ capabilities: ['chat', 'documents:read'], roles: ['member'], groups: ['team'], allowed_tools: ['web_search'], max_effort: 'medium' }, { lifetimeSeconds: 60 });
      const child = await narrowed(parent);
      expect(child).toMatchObject({ expires_in: 3600, capabilities: ['chat', 'documents:read'], scope: 'acme', allowed_models: null, max_effort: 'medium', max_tool_iterations: 10 });
      expect(decodeJwt(child.access_token)).toMatchObject({ sub: 'acme:alice', roles: ['member'], groups: ['team'], allowed_tools: ['web_search'] });
    });

    it('applies a limit the parent lacks from the request, within the project\'s', async () => {
      const parent = await acme.mint({ capabilities: ['chat'] });
      for (const claim of ['max_effort', 'max_tool_iterations', 'max_context_tokens', 'allowed_models']) expect(decodeJwt(parent)).not.toHaveProperty(claim);
      const child = await narrowed(parent, { max_effort: 'medium', max_tool_iterations: 4, max_context_tokens: 1000, allowed_models: ['llama-3'] });
      expect(child).toMatchObject({ max_effort: 'medium', max_tool_iterations: 4, max_context_tokens: 1000, allowed_models: ['llama-3'] });
      expect(decodeJwt(child.access_token)).toMatchObject({ max_effort: 'medium', max_tool_iterations: 4, max_context_tokens: 1000, allowed_models: ['llama-3'] });
      // Asked for more than the project allows: the project's limit, not the request's.
      expect(await narrowed(parent, { max_tool_iterations: 50, max_context_tokens: 100_000 })).toMatchObject({ max_tool_iterations: 10, max_context_tokens: 64_000 });
    });

    it('clamps expires_in to the project\'s maximum, not to the parent\'s remaining life', async () => {
      const parent = await acme.mint({}, { lifetimeSeconds: 60 });
      const child = await narrowed(parent, { expires_in: 999_999 });
      expect(child.expires_in).toBe(7200);
      const claims = decodeJwt(child.access_token);
      expect(claims.exp! - claims.iat!).toBe(7200);
      expect(claims.exp!).toBeGreaterThan(decodeJwt(parent).exp!);
      expect((await narrowed(parent, { expires_in: 120 })).expires_in).toBe(120);
    });

    it('narrows a narrowed token again, never wider than its own parent', async () => {
      const root = await acme.mint({ sub: 'acme:team-1:alice', scope: 'acme:team-1', capabilities: ['chat', 'memory', 'web_search'], max_tool_iterations: 8 });
      const child = await narrowed(root, { scope: 'acme:team-1:alice', capabilities: ['chat', 'memory'], max_tool_iterations: 5, max_effort: 'medium' });
      const grandchild = await narrowed(child.access_token, { capabilities: ['chat', 'memory', 'web_search'], max_tool_iterations: 9, max_effort: 'high', expires_in: 300 });
      expect(grandchild).toMatchObject({
        capabilities: ['chat', 'memory'],
        scope: 'acme:team-1:alice',
        max_tool_iterations: 5,
        max_effort: 'medium',
        expires_in: 300,
        warnings: ["capability 'web_search' was not granted: it is not in the calling token"],
      });
      expect(decodeJwt(grandchild.access_token).parent_jti).toBe(decodeJwt(child.access_token).jti);
      expect((await capabilities(grandchild.access_token)).body).toMatchObject({ capabilities: ['chat', 'memory'], max_tool_iterations: 5 });
      // The scope the root had is out of the child's reach.
      await expectRefused(await narrow(child.access_token, { scope: 'acme:team-1' }), 403, "scope 'acme:team-1' is outside the calling token's scope 'acme:team-1:alice'");
    });

    it('drops what the project has taken away since the parent was issued', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const parent = await tenant.mint({ capabilities: ['chat', 'documents:write', 'memory'] });
      expect((await tenant.reconfigure({ ceiling: { ...ceiling, readOnly: true, capabilities: ceiling.capabilities.filter((c) => c !== 'memory') } })).status).toBe(200);
      expect((await narrowed(parent)).capabilities).toEqual(['chat']);
    });
  });

  describe('never widens', () => {
    const parentGrant = {
      sub: 'acme:team-1:alice',
      scope: 'acme:team-1',
      capabilities: ['chat', 'documents:read'],
      roles: ['member'],
      groups: ['team-1'],
      allowed_models: ['gpt-4o'],
      allowed_tools: ['web_search'],
      max_effort: 'low' as const,
      max_tool_iterations: 3,
      max_context_tokens: 8000,
    };

    it('drops capabilities the caller does not hold, with a warning each (200)', async () => {
      const child = await narrowed(await acme.mint(parentGrant), { capabilities: ['chat', 'memory', 'computer', 'memroy'] });
      expect(child.capabilities).toEqual(['chat']);
      expect(child.warnings).toEqual([
        "capability 'computer' was not granted: it is not in the calling token",
        "capability 'memory' was not granted: it is not in the calling token",
        "unknown capability 'memroy' was not granted; did you mean 'memory'?",
      ]);
      expect((await capabilities(child.access_token)).body.capabilities).toEqual(['chat']);
    });

    it('clamps effort and limits to the caller\'s (200, silently)', async () => {
      const child = await narrowed(await acme.mint(parentGrant), { max_effort: 'high', max_tool_iterations: 9, max_context_tokens: 60_000 });
      expect(child).toMatchObject({ max_effort: 'low', max_tool_iterations: 3, max_context_tokens: 8000 });
      expect(child).not.toHaveProperty('warnings');
    });

    it('intersects models, roles, groups and tools with the caller\'s (200; a dropped model is warned)', async () => {
      const child = await narrowed(await acme.mint(parentGrant), {
        allowed_models: ['gpt-4o', 'llama-3'],
        roles: ['member', 'admin'],
        groups: ['team-1', 'team-2'],
        allowed_tools: ['web_search', 'browse_url'],
      });
      expect(child.allowed_models).toEqual(['gpt-4o']);
      expect(child.warnings).toEqual(["model 'llama-3' was not allowed: the calling token may not use it"]);
      expect(decodeJwt(child.access_token)).toMatchObject({ roles: ['member'], groups: ['team-1'], allowed_tools: ['web_search'] });
      expect((await capabilities(child.access_token)).body.privileged).toBe(false);
    });

    it('refuses any other subject with 403, a sibling, a parent or a path under its own, even for a privileged caller', async () => {
      const other = (ref: string) => `user_ref '${ref}' is not the calling token's subject 'acme:team-1:alice': a narrowed token acts as the same subject`;
      for (const roles of [[], ['admin']]) {
        const parent = await acme.mint({ ...parentGrant, roles });
        for (const ref of ['acme:team-1:bob', 'acme:team-1', 'acme:team-1:alice:helper']) {
          await expectRefused(await narrow(parent, { user_ref: ref }), 403, other(ref));
        }
      }
    });

    it('refuses a scope or data_scope outside the caller\'s with 403', async () => {
      const parent = await acme.mint(parentGrant);
      await expectRefused(await narrow(parent, { scope: 'acme' }), 403, "scope 'acme' is outside the calling token's scope 'acme:team-1'");
      await expectRefused(await narrow(parent, { data_scope: 'acme' }), 403, "data_scope 'acme' is outside the calling token's data scope 'acme:team-1'");
      await expectRefused(await narrow(parent, { data_scope: 'acme:team-2' }), 403, "data_scope 'acme:team-2' is outside the calling token's data scope 'acme:team-1'");
      // Within it is fine, and a child of that child cannot climb back out.
      const child = await narrowed(parent, { data_scope: 'acme:team-1:alice' });
      expect(child).toMatchObject({ scope: 'acme:team-1', data_scope: 'acme:team-1:alice' });
      await expectRefused(await narrow(child.access_token, { data_scope: 'acme:team-1' }), 403, "data_scope 'acme:team-1' is outside the calling token's data scope 'acme:team-1:alice'");
    });

    it('answers a malformed request 400 and a request of the wrong shape 422', async () => {
      const parent = await acme.mint(parentGrant);
      await expectRefused(await narrow(parent, { user_ref: 'acme:team-1:alice::x' }), 400, "user_ref 'acme:team-1:alice::x' is not a path of non-empty segments separated by ':'");
      await expectRefused(
        await narrow(parent, { scope: 'acme:team-1:alice:y' }),
        400,
        "scope 'acme:team-1:alice:y' must be the subject 'acme:team-1:alice' or a prefix of it",
      );
      const unlisted = await acme.mint({ capabilities: ['chat'] });
      await expectRefused(await narrow(unlisted, { allowed_models: ['gpt-5'] }), 400, "model 'gpt-5' is not available to this project. Registered: gpt-4o, gpt-4o-mini, llama-3");

      const shapes: [object, (string | number)[]][] = [
        [{ subject: 'acme:team-1:alice' }, ['body']],
        [{ max_effort: 'extreme' }, ['body', 'max_effort']],
        [{ expires_in: 0 }, ['body', 'expires_in']],
        [{ max_tool_iterations: 1.5 }, ['body', 'max_tool_iterations']],
        [{ capabilities: 'chat' }, ['body', 'capabilities']],
      ];
      for (const [body, loc] of shapes) {
        const res = await narrow(parent, body);
        expect(res.status, JSON.stringify(body)).toBe(422);
        expect(((await res.json()) as { detail: { loc: unknown[] }[] }).detail.map((p) => p.loc)).toContainEqual(loc);
      }
    });
  });

  describe('schema and behaviour', () => {
    /** Each SPEC.md narrow-token field: what /openapi.json says of it, a request it describes as kept, one it describes as refused or clamped. */
    const fields: { field: string; description: string; kept: [unknown, Partial<Narrowed>]; other: [unknown, number, Partial<Narrowed> | string] }[] = [
      {
        field: 'user_ref',
        description: "The child's subject: only the calling token's own; any other, a path under it included, is 403 (a narrowed token narrows what the subject may do, not who it is). Omitted: the caller's",
        kept: ['acme:team-1:alice', {}],
        other: ['acme:team-1:alice:helper', 403, "user_ref 'acme:team-1:alice:helper' is not the calling token's subject 'acme:team-1:alice': a narrowed token acts as the same subject"],
      },
      {
        field: 'capabilities',
        description: "Kept where the calling token holds them within the project's current ceiling; any other (unknown, not held, or documents:write on a read-only project) is dropped with a warning (200). Omitted: the caller's",
        kept: [['chat'], { capabilities: ['chat'] }],
        other: [['chat', 'computer'], 200, { capabilities: ['chat'], warnings: ["capability 'computer' was not granted: it is not in the calling token"] }],
      },
      {
        field: 'scope',
        description: "Within the calling token's scope (403 otherwise), and the subject or a prefix of it (400 otherwise). Omitted: the caller's",
        kept: ['acme:team-1:alice', { scope: 'acme:team-1:alice' }],
        other: ['acme', 403, "scope 'acme' is outside the calling token's scope 'acme:team-1'"],
      },
      {
        field: 'data_scope',
        description: "Within the calling token's data scope, its scope when it has none (403 otherwise). Omitted: the caller's",
        kept: ['acme:team-1:alice', { data_scope: 'acme:team-1:alice' }],
        other: ['acme:team-2', 403, "data_scope 'acme:team-2' is outside the calling token's data scope 'acme:team-1'"],
      },
      {
        field: 'allowed_models',
        description: "Intersected with the caller's list (a model it may not use is dropped with a warning); each must be registered by the project (400 otherwise). Omitted: the caller's",
        kept: [['gpt-4o'], { allowed_models: ['gpt-4o'] }],
        other: [['llama-3'], 200, { allowed_models: [], warnings: ["model 'llama-3' was not allowed: the calling token may not use it"] }],
      },
      {
        field: 'max_effort',
        description: "The lower of this and the caller's. Omitted: the caller's",
        kept: ['low', { max_effort: 'low' }],
        other: ['high', 200, { max_effort: 'medium' }],
      },
      {
        field: 'max_tool_iterations',
        description: "The lowest of this, the caller's and the project's; a whole number, 0 or more. Omitted: the caller's",
        kept: [3, { max_tool_iterations: 3 }],
        other: [20, 200, { max_tool_iterations: 8 }],
      },
      {
        field: 'max_context_tokens',
        description: "The lowest of this, the caller's and the project's; a whole number, 1 or more. Omitted: the caller's",
        kept: [8000, { max_context_tokens: 8000 }],
        other: [100_000, 200, { max_context_tokens: 32_000 }],
      },
      {
        field: 'expires_in',
        description: "Seconds, 1 or more; default 3600; clamped to the project's maximum token lifetime, not to the calling token's remaining life",
        kept: [600, { expires_in: 600 }],
        other: [100_000, 200, { expires_in: 7200 }],
      },
    ];

    it('says of every narrow-token field in /openapi.json what the route does with it, both ways', async () => {
      const doc = (await (await fetch(`${rt.url}/openapi.json`)).json()) as { components: { schemas: Record<string, { properties: Record<string, { description?: string }> }> } };
      const properties = doc.components.schemas.TokenRequest!.properties;
      const parent = await acme.mint({
        sub: 'acme:team-1:alice',
        scope: 'acme:team-1',
        capabilities: ['chat', 'documents:read', 'memory'],
        allowed_models: ['gpt-4o', 'gpt-4o-mini'],
        max_effort: 'medium',
        max_tool_iterations: 8,
        max_context_tokens: 32_000,
      });
      for (const { field, description, kept, other } of fields) {
        expect(properties[field]!.description, field).toBe(description);
        const child = await narrowed(parent, { [field]: kept[0] });
        expect(child, field).toMatchObject(kept[1]);
        expect(child.warnings, field).toBeUndefined();
        const [value, status, answer] = other;
        const res = await narrow(parent, { [field]: value });
        expect(res.status, field).toBe(status);
        const body = (await res.json()) as Record<string, unknown>;
        expect(body, field).toMatchObject(typeof answer === 'string' ? { detail: answer } : answer);
      }
      // And out of range is the schema's own 422 for each bounded number.
      for (const [field, value] of [['max_tool_iterations', -1], ['max_context_tokens', 0], ['expires_in', 0], ['max_effort', 'extreme']] as const) {
        expect((await narrow(parent, { [field]: value })).status, field).toBe(422);
      }
    });
  });

  describe('credentials', () => {
    it('refuses a project key in either header with 401, even beside a valid token', async () => {
      const projectKey = `pk_${'a'.repeat(43)}`;
      const post = (headers: Record<string, string>) => fetch(`${rt.url}/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
      for (const res of [
        await narrow(projectKey),
        await post({ authorization: projectKey }),
        await post({ 'x-api-key': projectKey }),
        await post({ authorization: `Bearer ${await acme.mint()}`, 'x-api-key': projectKey }),
      ]) {
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        await expectRefused(res, 401, PROJECT_KEY_ON_DATA_PLANE, 'invalid_token');
      }
      await expectRefused(await post({}), 401, 'missing bearer token', 'invalid_token');
    });

    it('refuses an expired parent, and an expired narrowed token', async () => {
      const expired = await acme.mint({}, { now: new Date(Date.now() - 2 * 3600_000), lifetimeSeconds: 600 });
      await expectRefused(await narrow(expired), 401, 'token has expired', 'token_expired');
      const expiredChild = await signedWithNarrowingKey(acme, {}, { issuer: narrowingIssuerFor(acme.tenantId), now: new Date(Date.now() - 2 * 3600_000) });
      await expectRefused(await narrow(expiredChild), 401, 'token has expired', 'token_expired');
    });

    it('refuses a narrowed token presented for another tenant', async () => {
      const child = await narrowed(await acme.mint());
      expect((await capabilities(child.access_token)).body.tenant_id).toBe(acme.tenantId);
      // Switched to globex after signing.
      const [header, payload, signature] = child.access_token.split('.') as [string, string, string];
      const switched = { ...decodePart(payload), tenant_id: globex.tenantId, aud: audienceFor(globex.tenantId), iss: narrowingIssuerFor(globex.tenantId) };
      await expectRefused(await narrow(`${header}.${b64(switched)}.${signature}`), 401, 'invalid token', 'invalid_token');
      // Signed with acme's narrowing key but naming globex: before globex has a ring of its own, and after.
      const forged = await signedWithNarrowingKey(acme, { tenant_id: globex.tenantId }, { issuer: narrowingIssuerFor(globex.tenantId) });
      await expectRefused(await narrow(forged), 401, 'invalid token', 'invalid_token');
      expect(await rt.runtime.narrowingKeys.current(globex.tenantId)).toBeUndefined();
      await narrowed(await globex.mint());
      await expectRefused(await narrow(forged), 401, 'invalid token', 'invalid_token');
      await expectRefused(await rt.endUser('/capabilities', forged), 401, 'invalid token', 'invalid_token');
    });

    it('never mixes issuers and key sets: the narrowing key under the project issuer, or the reverse, is refused', async () => {
      const genuine = await signedWithNarrowingKey(acme, {}, { issuer: narrowingIssuerFor(acme.tenantId) });
      expect((await capabilities(genuine)).status).toBe(200);
      const projectIssuer = await signedWithNarrowingKey(acme, {}, { issuer: acme.issuer });
      expect((await capabilities(projectIssuer)).status).toBe(401);
      await expectRefused(await narrow(projectIssuer), 401, 'invalid token', 'invalid_token');
      const narrowingIssuer = await acme.mint({}, { issuer: narrowingIssuerFor(acme.tenantId) });
      expect((await capabilities(narrowingIssuer)).status).toBe(401);
      await expectRefused(await narrow(narrowingIssuer), 401, 'invalid token', 'invalid_token');
    });
  });

  describe('the narrowing key ring', () => {
    it('is one per tenant, whichever of two stores creates it first', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const secretBox = new SecretBox(loadMasterKey(rt.config.masterKey, join(rt.config.dataDir, 'secrets')));
      const stores = [new NarrowingKeyRings(rt.runtime.database.db, secretBox), new NarrowingKeyRings(rt.runtime.database.db, secretBox)];
      const rings = await Promise.all([...stores, ...stores].map((store) => store.currentOrCreate(tenant.tenantId)));
      expect(new Set(rings.map((ring) => ring!.keyIds)).size).toBe(1);
      expect((await rt.runtime.narrowingKeys.current(tenant.tenantId))!.keyIds).toBe(rings[0]!.keyIds);
      // Sealed at rest and bound to its tenant: no private key in the row, and it does not open as another tenant's.
      const row = await rt.runtime.database.db.selectFrom('tenant_narrowing_keys').selectAll().where('tenant_id', '=', tenant.tenantId).executeTakeFirstOrThrow();
      const { d } = await exportSigningKey(rings[0]!.ring.active);
      expect(JSON.stringify(row)).not.toContain(d);
      expect(() => secretBox.open(row.sealed_ring, `tenant:${acme.tenantId}:narrowing-keys`)).toThrow();
    });

    it('is not created by verifying, only by narrowing', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const claimsNarrowed = await tenant.mint({}, { issuer: narrowingIssuerFor(tenant.tenantId) });
      expect((await capabilities(claimsNarrowed)).status).toBe(401);
      expect(await rt.runtime.narrowingKeys.current(tenant.tenantId)).toBeUndefined();
    });

    it.runIf(setup === 'scale')('is shared by replicas: each verifies and narrows further what the other narrowed', async () => {
      const replica = await startTestRuntime({ env, adminKey: rt.adminKey });
      try {
        const tenant = await configuredTenant(rt, { ceiling });
        const parent = await tenant.mint({ capabilities: ['chat', 'memory', 'web_search'] });
        // Both replicas narrow the tenant's first tokens at once: both create the ring, one insert wins.
        const [here, there] = await Promise.all([narrowed(parent, { capabilities: ['chat', 'memory'] }), narrowed(parent, { capabilities: ['chat'] }, replica)]);
        expect(decodeProtectedHeader(here.access_token).kid).toBe(decodeProtectedHeader(there.access_token).kid);
        expect((await capabilities(here.access_token, replica)).body.capabilities).toEqual(['chat', 'memory']);
        expect((await capabilities(there.access_token, rt)).body.capabilities).toEqual(['chat']);
        const further = await narrowed(here.access_token, { capabilities: ['chat'] }, replica);
        expect((await capabilities(further.access_token, rt)).status).toBe(200);

        // An erase on one replica ends the narrowed tokens on the other at its next request.
        expect((await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' })).status).toBe(200);
        expect((await capabilities(here.access_token, replica)).status).toBe(401);
      } finally {
        await replica.stop();
      }
    });

    it('goes with the erase: after erase and re-registration with the same configuration, old narrowed tokens are refused', async () => {
      const tenant = await configuredTenant(rt, { ceiling });
      const parent = await tenant.mint();
      const child = await narrowed(parent, { capabilities: ['chat'] });
      const oldKid = decodeProtectedHeader(child.access_token).kid;
      expect((await capabilities(child.access_token)).status).toBe(200);

      const erased = await rt.admin(`/tenants/${tenant.tenantId}`, { method: 'DELETE' });
      expect(((await erased.json()) as { rows_deleted: Record<string, number> }).rows_deleted).toMatchObject({ tenant_narrowing_keys: 1 });
      expect(await rt.runtime.narrowingKeys.current(tenant.tenantId)).toBeUndefined();
      expect((await rt.admin('/tenants', { method: 'POST', body: JSON.stringify({ tenant_id: tenant.tenantId }) })).status).toBe(201);
      // The very configuration it had, keys included: the project's own tokens verify again, narrowed ones do not.
      const put = await rt.admin(`/tenants/${tenant.tenantId}/configuration`, { method: 'PUT', body: JSON.stringify(tenant.configuration) });
      expect(put.status).toBe(200);
      expect((await capabilities(parent)).status).toBe(200);
      await expectRefused(await rt.endUser('/capabilities', child.access_token), 401, 'invalid token', 'invalid_token');

      // Narrowing again makes a new ring; the old child stays refused.
      const fresh = await narrowed(parent, { capabilities: ['chat'] });
      expect(decodeProtectedHeader(fresh.access_token).kid).not.toBe(oldKid);
      expect((await capabilities(fresh.access_token)).status).toBe(200);
      await expectRefused(await narrow(child.access_token), 401, 'invalid token', 'invalid_token');
    });
  });

  it('documents POST /auth/token with the bearer scheme and its schemas in /openapi.json', async () => {
    const doc = (await (await fetch(`${rt.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security: object[]; requestBody: { content: Record<string, { schema: { $ref?: string } }> }; responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    const operation = doc.paths['/auth/token']!.post!;
    expect(operation.security).toEqual([{ bearer: [] }]);
    expect(operation.requestBody.content['application/json']!.schema.$ref).toBe('#/components/schemas/TokenRequest');
    expect(operation.responses['200']!.content!['application/json']!.schema.$ref).toBe('#/components/schemas/TokenResponse');
    expect(Object.keys(operation.responses).sort()).toEqual(['200', '400', '401', '403', '413', '415', '422', '500']);
    expect(Object.keys(doc.components.schemas.TokenRequest!.properties!).sort()).toEqual(
      ['user_ref', 'capabilities', 'scope', 'data_scope', 'allowed_models', 'allowed_tools', 'roles', 'groups', 'max_effort', 'max_tool_iterations', 'max_context_tokens', 'expires_in'].sort(),
    );
  });
});
