// Browsers on other origins through HTTP (docs/decisions/0029): end-user routes answer preflights for origins some
// project allows, an allowed origin gets its CORS headers (X-Run-Id readable, SSE included), a browser request from
// an origin the token's project did not allow is 403 after authentication and before any work, a request without
// an Origin (a server) is unaffected, and a pushed configuration moves the list at once. In both setups.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { availableSetups, configuredTenant, ScaleServices, type TestTenant } from '../harness/runtime.js';
import { allEvents } from '../harness/sse.js';
import { chatWorld, type ChatWorld } from './fixture.js';

const APP = 'https://app.example.com';
const LOCAL_APP = 'http://localhost:5173';
const OTHER_APP = 'https://other.example.com';
const NOBODY = 'https://evil.example.net';

describe.each(availableSetups())('CORS and allowed origins (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let other: TestTenant;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    world = await chatWorld((await services?.env()) ?? {}, { configuration: { origins: [APP, LOCAL_APP] } });
    // Another project on the same runtime allows OTHER_APP: its preflights pass, its requests with this project's tokens do not.
    other = await configuredTenant(world.rt, { ceiling: { capabilities: ['chat'] } });
    expect((await other.reconfigure({ origins: [OTHER_APP, 'https://*.example.org'] })).status).toBe(200);
  });
  beforeEach(() => world.fake.clearScripts());
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });

  const preflight = (path: string, origin: string, method = 'POST', headers = 'authorization, content-type, last-event-id') =>
    fetch(`${world.rt.url}${path}`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
    });

  const fromOrigin = (origin: string | undefined, token: string, path: string, body?: Record<string, unknown>) =>
    world.rt.endUser(path, token, {
      method: body ? 'POST' : 'GET',
      headers: origin ? { origin } : {},
      ...(body ? { body: JSON.stringify(body) } : {}),
    });

  const storedSessions = async () =>
    (await world.rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).execute()).length;

  async function expectOriginRefused(res: Response, origin: string) {
    expect(res.status).toBe(403);
    // No CORS headers: the browser hands the page nothing, not even the refusal.
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.headers.get('vary')).toMatch(/\bOrigin\b/);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toEqual({ detail: expect.stringContaining(`origin ${origin} denied`), code: 'origin_not_allowed', request_id: res.headers.get('x-request-id') });
  }

  describe('preflight', () => {
    it('answers an allowed origin on the chat routes with the methods, the request headers a client sends and a max age, without credentials', async () => {
      for (const [path, method] of [
        ['/chat', 'POST'],
        ['/chat/stream', 'POST'],
        ['/chat/stream/run_0123456789abcdef01234567', 'GET'],
        ['/capabilities', 'GET'],
        ['/chat/sessions/7b1c1a52-3d3f-4c52-9a0e-5f8d8c1c0a11', 'DELETE'],
      ] as const) {
        const res = await preflight(path, APP, method);
        expect(res.status, path).toBe(204);
        expect(res.headers.get('access-control-allow-origin'), path).toBe(APP);
        expect(res.headers.get('access-control-allow-methods'), path).toContain(method);
        const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
        expect(allowed, path).toEqual(expect.arrayContaining(['authorization', 'content-type', 'last-event-id']));
        expect(Number(res.headers.get('access-control-max-age')), path).toBeGreaterThan(0);
        expect(res.headers.get('access-control-allow-credentials'), path).toBeNull();
        expect(res.headers.get('vary'), path).toMatch(/\bOrigin\b/);
      }
    });

    it('answers an origin any project on this runtime allows, including a wildcard subdomain, and refuses one no project allows with 403', async () => {
      expect((await preflight('/chat', OTHER_APP)).headers.get('access-control-allow-origin')).toBe(OTHER_APP);
      expect((await preflight('/chat', 'https://team.example.org')).headers.get('access-control-allow-origin')).toBe('https://team.example.org');
      for (const origin of [NOBODY, 'https://example.org', 'http://app.example.com', 'https://app.example.com:8443', 'null']) {
        const res = await preflight('/chat', origin);
        expect(res.status, origin).toBe(403);
        expect(res.headers.get('access-control-allow-origin'), origin).toBeNull();
        expect(await res.json(), origin).toMatchObject({ code: 'origin_not_allowed' });
      }
    });

    it('opens no admin or operational route to browsers', async () => {
      for (const [path, method] of [
        ['/tenants', 'POST'],
        [`/tenants/${world.tenant.tenantId}/configuration`, 'PUT'],
        ['/health', 'GET'],
        ['/metrics', 'GET'],
      ] as const) {
        const res = await preflight(path, APP, method, 'x-admin-key, content-type');
        // Express answers OPTIONS with the path's methods; without Access-Control-Allow-Origin no browser proceeds.
        expect(res.headers.get('access-control-allow-origin'), path).toBeNull();
      }
      const tenants = await world.rt.admin('/tenants', { headers: { origin: APP } });
      expect(tenants.headers.get('access-control-allow-origin')).toBeNull();
    });
  });

  describe('requests', () => {
    it('gives an allowed origin its CORS headers on the blocking and streaming chat, with X-Run-Id exposed', async () => {
      const token = await world.token();
      world.fake.script('hello from the fake');
      const blocking = await fromOrigin(APP, token, '/chat', { message: 'hi' });
      expect(blocking.status).toBe(200);
      expect(blocking.headers.get('access-control-allow-origin')).toBe(APP);
      expect(blocking.headers.get('access-control-expose-headers')).toMatch(/\bX-Run-Id\b/i);
      expect(blocking.headers.get('vary')).toMatch(/\bOrigin\b/);
      expect(blocking.headers.get('x-run-id')).toMatch(/^run_/);
      expect(await blocking.json()).toMatchObject({ content: 'hello from the fake' });

      world.fake.script('streamed');
      const stream = await fromOrigin(LOCAL_APP, token, '/chat/stream', { message: 'hi' });
      expect(stream.status).toBe(200);
      expect(stream.headers.get('access-control-allow-origin')).toBe(LOCAL_APP);
      expect(stream.headers.get('access-control-expose-headers')).toMatch(/\bX-Run-Id\b/i);
      const runId = stream.headers.get('x-run-id')!;
      expect((await allEvents(stream)).at(-1)!.event).toBe('done');

      const replay = await fromOrigin(APP, token, `/chat/stream/${runId}`);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('access-control-allow-origin')).toBe(APP);
      expect((await allEvents(replay)).at(-1)!.event).toBe('done');
    });

    it('refuses with 403 a browser origin the token\'s project did not allow, even one another project allows, doing nothing', async () => {
      const token = await world.token();
      const sessions = await storedSessions();
      const calls = world.fake.chatRequests().length;
      for (const origin of [OTHER_APP, NOBODY, 'https://team.example.org']) {
        await expectOriginRefused(await fromOrigin(origin, token, '/chat', { message: 'hi' }), origin);
        await expectOriginRefused(await fromOrigin(origin, token, '/chat/stream', { message: 'hi' }), origin);
        await expectOriginRefused(await fromOrigin(origin, token, '/capabilities'), origin);
      }
      expect(await storedSessions()).toBe(sessions);
      expect(world.fake.chatRequests()).toHaveLength(calls);
    });

    it('authenticates first: a foreign origin with a bad token is 401; then authorizes the origin before validating the body', async () => {
      const unauthenticated = await fromOrigin(NOBODY, 'not-a-token', '/chat', { message: 'hi' });
      expect(unauthenticated.status).toBe(401);
      // An origin some project allows may read the 401, so its page can fetch a fresh token.
      const allowed401 = await fromOrigin(APP, 'not-a-token', '/chat', { message: 'hi' });
      expect(allowed401.status).toBe(401);
      expect(allowed401.headers.get('access-control-allow-origin')).toBe(APP);

      const token = await world.token();
      await expectOriginRefused(await fromOrigin(NOBODY, token, '/chat', { message: 42 }), NOBODY);
      await expectOriginRefused(await fromOrigin(NOBODY, token, '/chat/sessions/not-a-uuid/messages'), NOBODY);
    });

    it('leaves a request without an Origin, and a same-origin one (the /docs explorer), as it was', async () => {
      const token = await world.token();
      world.fake.script('server to server');
      const server = await fromOrigin(undefined, token, '/chat', { message: 'hi' });
      expect(server.status).toBe(200);
      expect(server.headers.get('access-control-allow-origin')).toBeNull();
      expect(await server.json()).toMatchObject({ content: 'server to server' });

      const sameOrigin = await fromOrigin(world.rt.url, token, '/capabilities');
      expect(sameOrigin.status).toBe(200);
    });

    it('follows the pushed configuration: an origin removed is refused at once, added back is served; no origins means no browser', async () => {
      const token = await world.token();
      expect((await world.tenant.reconfigure({ origins: [LOCAL_APP] })).status).toBe(200);
      await expectOriginRefused(await fromOrigin(APP, token, '/capabilities'), APP);
      expect((await preflight('/chat', APP)).status).toBe(403);
      expect((await fromOrigin(LOCAL_APP, token, '/capabilities')).status).toBe(200);

      expect((await world.tenant.reconfigure({ origins: [] })).status).toBe(200);
      await expectOriginRefused(await fromOrigin(LOCAL_APP, token, '/capabilities'), LOCAL_APP);
      expect((await preflight('/chat', LOCAL_APP)).status).toBe(403);
      expect((await fromOrigin(undefined, token, '/capabilities')).status).toBe(200);

      expect((await world.tenant.reconfigure({ origins: [APP, LOCAL_APP] })).status).toBe(200);
      const back = await fromOrigin(APP, token, '/capabilities');
      expect(back.status).toBe(200);
      expect(back.headers.get('access-control-allow-origin')).toBe(APP);
      expect((await preflight('/chat', APP)).status).toBe(204);
    });

    it('matches origins as browsers send them: a wildcard covers subdomains only, and the scheme and port count', async () => {
      const token = await other.mint();
      expect((await fromOrigin('https://a.b.example.org', token, '/capabilities')).status).toBe(200);
      for (const origin of ['https://example.org', 'http://team.example.org', 'https://team.example.org:444', 'https://example.org.evil.net']) {
        await expectOriginRefused(await fromOrigin(origin, token, '/capabilities'), origin);
      }
    });
  });
});
