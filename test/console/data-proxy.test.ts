// /console/data/{projectId}/...: the console's way to a project's data plane (decision 0085), on a real control plane
// and runtime. End-user tokens of the named project pass, and what comes back is the data plane's answer as it came
// (a stream's frames as they are made, its headers); an account's session token, a project key, another project's
// token, another origin and hostile paths are refused here with a 4xx, never a 5xx, and never reach the runtime.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { startTestControl, type TestControl } from '../harness/control.js';
import { json } from '../harness/project.js';
import { startTestRuntime, type TestRuntime } from '../harness/runtime.js';
import { sseEvents } from '../harness/sse.js';
import { owner } from './harness.js';

describe('the console data-plane route', () => {
  let runtime: TestRuntime;
  let control: TestControl;
  let provider: FakeOpenAIServer;
  let sessionToken: string;
  const projects: { id: string; key: string }[] = [];
  const runtimeRequests: string[] = [];

  beforeAll(async () => {
    provider = await FakeOpenAIServer.start({ apiKey: 'sk-fake-console-proxy-0123', chatModels: ['gpt-4o-mini'] });
    runtime = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' } });
    runtime.server.prependListener('request', (req) => runtimeRequests.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`));
    control = await startTestControl(
      { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', DATA_PLANE_URL: runtime.url },
      { provisioner: new LocalProvisioner({ runtimeUrl: runtime.url, adminKey: runtime.adminKey, timeoutMs: 5000 }) },
    );
    sessionToken = (await json<{ token: string }>(await control.call('/api/auth/login', { method: 'POST', body: JSON.stringify({ email: owner.AGENTPLANE_OWNER_EMAIL, password: owner.AGENTPLANE_OWNER_PASSWORD }) }), 200)).token;
    const me = await json<{ orgs: { id: string }[] }>(await control.call('/api/me', { token: sessionToken }), 200);
    for (const name of ['first', 'second']) {
      const project = await json<{ id: string }>(await control.call(`/api/orgs/${me.orgs[0]!.id}/projects`, { method: 'POST', token: sessionToken, body: JSON.stringify({ name }) }), 201);
      const key = (await json<{ key: string }>(await control.call(`/api/projects/${project.id}/keys`, { method: 'POST', token: sessionToken, body: JSON.stringify({ name: 'admin', scope: 'admin' }) }), 201)).key;
      await json(await control.call(`/api/projects/${project.id}/providers`, { method: 'POST', key, body: JSON.stringify({ provider: 'openai_compatible', models: ['gpt-4o-mini'], values: { api_key: provider.apiKey, base_url: provider.url } }) }), 201);
      projects.push({ id: project.id, key });
    }
  });
  afterAll(async () => {
    await control?.stop();
    await runtime?.stop();
    await provider?.close();
  });

  const mint = async (project: { id: string; key: string }, subject: string) =>
    (await json<{ access_token: string }>(await control.call(`/api/projects/${project.id}/token`, { method: 'POST', key: project.key, body: JSON.stringify({ subject }) }), 200)).access_token;
  const viaConsole = (projectId: string, path: string, init: RequestInit & { token?: string } = {}) => control.call(`/console/data/${projectId}${path}`, init);

  it("streams a turn's frames as they are made and passes the data plane's headers on", async () => {
    const [first] = projects;
    const token = await mint(first!, 'user-1');
    provider.script({ text: 'one two three four five six', dripMs: 40 });
    const sent = Date.now();
    const answer = await viaConsole(first!.id, '/chat/stream', { method: 'POST', token, headers: { accept: 'text/event-stream', origin: control.url }, body: JSON.stringify({ message: 'count' }) });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(answer.headers.get('x-run-id')).toMatch(/.+/);
    const arrivals: { type: string; at: number }[] = [];
    for await (const event of sseEvents(answer)) arrivals.push({ type: (event.data as { type: string }).type, at: Date.now() - sent });
    expect(arrivals[0]!.type).toBe('start');
    expect(arrivals.at(-1)!.type).toBe('done');
    const tokens = arrivals.filter((arrival) => arrival.type === 'token');
    expect(tokens.length).toBeGreaterThanOrEqual(6);
    // Passed on one by one, not held until the turn ended: the first token came well before the last.
    expect(tokens.at(-1)!.at - tokens[0]!.at).toBeGreaterThanOrEqual(150);

    // The session is the subject's, read through the same route.
    const sessions = await json<{ sessions: { user_ref: string }[] }>(await viaConsole(first!.id, '/chat/sessions', { token }), 200);
    expect(sessions.sessions.map((session) => session.user_ref)).toEqual(['user-1']);
  });

  it('refuses every credential but an end-user token of the project, before the runtime sees it', async () => {
    const [first, second] = projects;
    const secondToken = await mint(second!, 'user-2');
    runtimeRequests.length = 0;
    for (const [authorization, status, code] of [
      [undefined, 401, 'unauthenticated'],
      [`Bearer ${sessionToken}`, 401, 'unauthenticated'],
      [`Bearer ${first!.key}`, 401, 'unauthenticated'],
      ['Basic dXNlcjpwYXNz', 401, 'unauthenticated'],
      [`Bearer ${secondToken}`, 403, 'wrong_project'],
    ] as const) {
      const answer = await viaConsole(first!.id, '/chat/sessions', { headers: authorization ? { authorization } : {} });
      const body = await json<{ code: string; detail: string }>(answer, status);
      expect(body.code, authorization).toBe(code);
    }
    // A token that only looks like the project's (its claims written by anyone, unsigned or signed by another key) is
    // refused here, not left to the data plane, and so is an expired one.
    const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    const genuine = await mint(first!, 'user-9');
    const forged = `${genuine.split('.')[0]}.${Buffer.from(JSON.stringify({ ...claims(genuine), sub: 'someone-else' })).toString('base64url')}.`;
    const reSigned = `${genuine.split('.')[0]}.${Buffer.from(JSON.stringify({ ...claims(genuine), sub: 'someone-else' })).toString('base64url')}.${genuine.split('.')[2]}`;
    for (const token of [forged, reSigned]) {
      for (const path of ['/chat/sessions', '/metrics', '/triggers/anything']) {
        const answer = await viaConsole(first!.id, path, { headers: { authorization: `Bearer ${token}` } });
        expect(answer.status, path).toBeGreaterThanOrEqual(401);
        expect(answer.status, path).toBeLessThan(500);
      }
    }
    expect((await json<{ code: string }>(await viaConsole(first!.id, '/chat/sessions', { headers: { authorization: `Bearer ${forged}` } }), 401)).code).toBe('invalid_token');
    // A project key in X-API-Key is not forwarded either: the route still needs a token.
    expect((await control.call(`/console/data/${first!.id}/chat/sessions`, { key: first!.key })).status).toBe(401);
    expect(runtimeRequests.filter((line) => line.includes('/chat/sessions') || line.includes('/metrics') || line.includes('/triggers'))).toEqual([]);
  });

  it('refuses pages of other origins, unknown projects and hostile paths with a 4xx that changes nothing', async () => {
    const [first] = projects;
    const token = await mint(first!, 'user-3');
    const fromElsewhere = await viaConsole(first!.id, '/chat/sessions', { token, headers: { origin: 'https://evil.example' } });
    expect((await json<{ code: string }>(fromElsewhere, 403)).code).toBe('origin_not_allowed');
    expect((await viaConsole('00000000-0000-4000-8000-000000000000', '/chat/sessions', { token })).status).toBe(404);
    for (const projectId of ['not-a-project', '%00', '%E0%A4%A', '%ED%A0%80', 'x'.repeat(5000), '..%2F..%2Fapi']) {
      const answer = await control.call(`/console/data/${projectId}/chat/sessions`, { token });
      expect(answer.status, projectId).toBe(404);
    }
    runtimeRequests.length = 0;
    for (const path of ['/chat/sessions/%00', '/chat/sessions/%E0%A4%A', '/chat/sessions/%ED%A0%80', `/chat/sessions?limit=${'9'.repeat(400)}`, '/..%2F..%2Ftenants', '/%2e%2e%2ftenants']) {
      const answer = await viaConsole(first!.id, path, { token });
      expect(answer.status, path).toBeGreaterThanOrEqual(400);
      expect(answer.status, path).toBeLessThan(500);
    }
    // The data plane's operational routes are not reached through the console, even with a valid token, nor by
    // climbing out of the path; other methods are refused with 405.
    for (const path of ['/metrics', '/ready', '/health', '/openapi.json', '/docs', '/tenants', '/%2e%2e/metrics', '/chat/%2E%2E/%2e%2e/metrics', '/chat%2f..%2fmetrics']) {
      const answer = await viaConsole(first!.id, path, { token });
      expect(answer.status, path).toBe(404);
    }
    const traced = await viaConsole(first!.id, '/chat/sessions', { method: 'OPTIONS', token });
    expect(traced.status).toBe(405);
    // None of them reached the runtime's admin or operational routes.
    expect(runtimeRequests.filter((line) => /\/(tenants|metrics|ready|health|openapi\.json|docs)/.test(line))).toEqual([]);
  });
});
