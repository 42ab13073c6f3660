// A project's computer through the control plane, with the local provisioner and a real runtime on the real local
// sandbox host (bubblewrap): the settings stored whole, pushed, and held by the runtime; the project's sandboxes
// listed, described and acted on through the runtime's admin surface; another project's key sees none of it; hostile
// input is refused before anything is stored; and `enable_computer` offered only where it would do something.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPUTER_DEFAULTS } from '@agentplane/lib/computer';
import { eventually } from '@agentplane/test/harness/eventually';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import { startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';
import { LocalProvisioner } from '../provisioning/local.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

interface Project {
  id: string;
  tenantId: string;
  adminKey: string;
}

interface Sandbox {
  id: string;
  state: string;
}

/** Both planes, one project or more on them, each with an admin key; the runtime holds each project's tenant. */
async function startPlanes(computerHost: 'local' | 'none', names: string[]): Promise<{ rt: TestRuntime; api: TestControl; projects: Project[] }> {
  const rt = await startTestRuntime({ env: { COMPUTER_HOST: computerHost, COMPUTER_SWEEP_MS: '3600000' } });
  const api = await startTestControl(owner, { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 5000 }) });
  const { account } = await api.control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
  const orgId = (await api.control.accounts.orgsOf(account.id))[0]!.id;
  const projects: Project[] = [];
  for (const name of names) {
    const project = await api.control.projects.create(orgId, account.id, name);
    const adminKey = (await api.control.keys.create({ kind: 'account', accountId: account.id }, project.id, { scope: 'admin', name: 'admin' })).key;
    await eventually(async () => (await rt.admin(`/tenants/${project.tenant_id}`)).status === 200, { what: `project ${name}'s tenant on the runtime` });
    projects.push({ id: project.id, tenantId: project.tenant_id, adminKey });
  }
  return { rt, api, projects };
}

async function json<T>(response: Response | Promise<Response>, status: number): Promise<T> {
  const res = await response;
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

describe("a project's computer through the control plane (local sandbox host)", () => {
  let rt: TestRuntime;
  let api: TestControl;
  let a: Project;
  let b: Project;

  const send = (project: Project, method: string, path: string, body?: unknown, key = project.adminKey) =>
    api.call(`/api/projects/${project.id}${path}`, { method, key, ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
  const computerFlag = async (project: Project) => {
    const caps = await json<{ capabilities: { name: string; per_request_flag: string | null }[] }>(send(project, 'GET', '/capabilities'), 200);
    return caps.capabilities.find((row) => row.name === 'computer')!.per_request_flag;
  };
  const pushedComputer = async (project: Project) => (await rt.runtime.configurations.load(project.tenantId))?.document.computer;
  const makeSandbox = (token: string) => rt.endUser('/computers/sessions', token, { method: 'POST', body: JSON.stringify({ name: 'box' }) });

  beforeAll(async () => {
    const planes = await startPlanes('local', ['alpha', 'beta']);
    ({ rt, api } = planes);
    [a, b] = planes.projects as [Project, Project];
  }, 120_000);
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
  });

  it('reads the defaults, stores a PUT whole and pushes it, answering with the configuration it made', async () => {
    expect(await json(send(a, 'GET', '/computer'), 200)).toEqual(COMPUTER_DEFAULTS);
    // Nothing set: nothing pushed, so the runtime's defaults hold.
    expect(await pushedComputer(a)).toBeUndefined();

    const put = await send(a, 'PUT', '/computer', { max_sandboxes: 1, memory_mib: 256, disk_mib: 64, command_timeout_seconds: 30 });
    const settings = { ...COMPUTER_DEFAULTS, max_sandboxes: 1, memory_mib: 256, disk_mib: 64, command_timeout_seconds: 30 };
    expect(await json(put, 200)).toEqual(settings);
    expect(put.headers.get('x-configuration-version')).toMatch(/^\d+$/);
    expect(put.headers.get('x-configuration-state')).toBe('applied');
    expect(await json(send(a, 'GET', '/computer'), 200)).toEqual(settings);
    expect(await pushedComputer(a)).toEqual(settings);

    // A PUT replaces the section: what it leaves out is the default again, not what was stored.
    expect(await json(send(a, 'PUT', '/computer', { command_timeout_seconds: 45, image: 'registry.example.com/sandbox:1' }), 200)).toEqual({
      ...COMPUTER_DEFAULTS,
      command_timeout_seconds: 45,
      image: 'registry.example.com/sandbox:1',
    });
    expect(await pushedComputer(a)).toMatchObject({ max_sandboxes: COMPUTER_DEFAULTS.max_sandboxes, command_timeout_seconds: 45 });
    await json(send(a, 'PUT', '/computer', settings), 200);
  });

  it('offers enable_computer while the runtime has a sandbox host and the project allows a sandbox, not once it allows none', async () => {
    expect(await computerFlag(a)).toBe('enable_computer');
    await json(send(b, 'PUT', '/computer', { max_sandboxes: 0 }), 200);
    expect(await computerFlag(b)).toBeNull();
    // Other switches are untouched.
    const caps = await json<{ capabilities: { name: string; per_request_flag: string | null }[] }>(send(b, 'GET', '/capabilities'), 200);
    expect(caps.capabilities.find((row) => row.name === 'documents:read')?.per_request_flag).toBe('enable_rag');
    await json(send(b, 'PUT', '/computer', {}), 200);
    expect(await computerFlag(b)).toBe('enable_computer');
  });

  it("has the runtime hold the project to its count, and lists, describes, pauses, resumes and deletes the project's sandbox", async () => {
    await json(send(a, 'PATCH', '', { ceiling: { capabilities: ['chat', 'computer'] } }), 200);
    const minted = await json<{ access_token: string; capabilities: string[] }>(send(a, 'POST', '/token', { subject: 'acme:alice', capabilities: ['chat', 'computer'] }), 200);
    expect(minted.capabilities).toContain('computer');
    const token = minted.access_token;

    const box = await json<Sandbox>(makeSandbox(token), 201);
    // max_sandboxes 1, set on the control plane: the runtime refuses a second.
    expect(await json(makeSandbox(token), 409)).toMatchObject({ code: 'too_many_sandboxes' });

    const host = await json<{ kind: string; network: string }>(send(a, 'GET', '/sandbox-host'), 200);
    expect(host).toMatchObject({ kind: 'local', network: 'none' });

    const listed = await json<{ sandboxes: (Sandbox & { owner: string })[]; has_more: boolean; next_offset: number | null }>(send(a, 'GET', '/sandboxes'), 200);
    expect(listed).toMatchObject({ has_more: false, next_offset: null });
    expect(listed.sandboxes.map((s) => [s.id, s.state, s.owner])).toEqual([[box.id, 'running', 'acme:alice']]);
    expect((await json<{ sandboxes: Sandbox[] }>(send(a, 'GET', '/sandboxes?state=paused&limit=5'), 200)).sandboxes).toEqual([]);

    expect(await json(send(a, 'POST', `/sandboxes/${box.id}/pause`), 200)).toMatchObject({ id: box.id, state: 'paused' });
    expect((await json<{ sandboxes: Sandbox[] }>(send(a, 'GET', '/sandboxes?state=paused'), 200)).sandboxes.map((s) => s.id)).toEqual([box.id]);
    expect(await json(send(a, 'POST', `/sandboxes/${box.id.toUpperCase()}/resume`), 200)).toMatchObject({ id: box.id, state: 'running' });
    expect(await json(send(a, 'POST', `/sandboxes/${box.id}/delete`), 200)).toMatchObject({ id: box.id, state: 'deleted' });
    expect((await json<{ sandboxes: Sandbox[] }>(send(a, 'GET', '/sandboxes'), 200)).sandboxes).toEqual([]);
    // Its place in the count is free again.
    const next = await json<Sandbox>(makeSandbox(token), 201);
    await json(send(a, 'POST', `/sandboxes/${next.id}/delete`), 200);
  });

  it("hides one project's computer from another project's key, and another project's sandbox from its own routes", async () => {
    const minted = await json<{ access_token: string }>(send(a, 'POST', '/token', { subject: 'acme:bob', capabilities: ['chat', 'computer'] }), 200);
    const box = await json<Sandbox>(makeSandbox(minted.access_token), 201);
    const before = await json(send(a, 'GET', '/computer'), 200);

    for (const [method, path, body] of [
      ['GET', '/computer'],
      ['PUT', '/computer', { max_sandboxes: 50 }],
      ['GET', '/sandboxes'],
      ['GET', '/sandbox-host'],
      ['POST', `/sandboxes/${box.id}/pause`],
      ['POST', `/sandboxes/${box.id}/delete`],
    ] as const) {
      const res = await send(a, method, path, body, b.adminKey);
      expect(res.status, `${method} ${path}: ${await res.clone().text()}`).toBe(404);
      expect(JSON.stringify(await res.json())).not.toContain(box.id);
    }
    // Through project b's own routes, project a's sandbox is one b's tenant does not have.
    for (const action of ['pause', 'resume', 'delete']) expect((await send(b, 'POST', `/sandboxes/${box.id}/${action}`)).status, action).toBe(404);
    expect((await json<{ sandboxes: Sandbox[] }>(send(b, 'GET', '/sandboxes'), 200)).sandboxes).toEqual([]);

    // Nothing moved: a's settings and sandbox are as they were.
    expect(await json(send(a, 'GET', '/computer'), 200)).toEqual(before);
    expect((await json<{ sandboxes: Sandbox[] }>(send(a, 'GET', '/sandboxes'), 200)).sandboxes.map((s) => [s.id, s.state])).toEqual([[box.id, 'running']]);
    // A mint key of the project itself may not act either.
    const mintKey = await json<{ key: string }>(send(a, 'POST', '/keys', { scope: 'mint', name: 'minter' }), 201);
    expect((await send(a, 'POST', `/sandboxes/${box.id}/delete`, undefined, mintKey.key)).status).toBe(403);
    expect((await send(a, 'PUT', '/computer', {}, mintKey.key)).status).toBe(403);
    await json(send(a, 'POST', `/sandboxes/${box.id}/delete`), 200);
  });

  it('refuses hostile settings, queries and paths with 422 naming the field, never a 5xx, and stores nothing', async () => {
    const version = async () => (await api.control.projects.configurationDocument(a.id))!.version;
    const stored = await json(send(a, 'GET', '/computer'), 200);
    const versionBefore = await version();
    const bodies: unknown[] = [
      { max_sandboxes: -1 },
      { max_sandboxes: 1.5 },
      { max_sandboxes: 1_001 },
      { max_sandboxes: '1' },
      { command_timeout_seconds: 0 },
      { command_timeout_seconds: 2 ** 53 + 1 },
      { cpus: 1e308 },
      { cpus: null },
      { memory_mib: 'x\u0000y' },
      { idle_pause_seconds: [] },
      { max_lifetime_seconds: {} },
      { image: 'registry.example.com/sandbox:1; rm -rf /' },
      { image: 'x'.repeat(70_000) },
      { image: '\ud800' },
      { unknown: 1 },
      [],
      [{ '\u0000': 1 }],
    ];
    for (const body of bodies) {
      const res = await send(a, 'PUT', '/computer', body);
      const text = await res.text();
      expect(res.status, `${JSON.stringify(body)?.slice(0, 80)}: ${text.slice(0, 300)}`).toBe(422);
    }
    // Text that is no settings object at all is refused too, by the JSON reader or the schema.
    const deep = `${'['.repeat(2_500)}${']'.repeat(2_500)}`;
    for (const text of ['not json', 'null', '"text"', deep, '{"__proto__": {"max_sandboxes": 5}}', '{"max_sandboxes": 1, "max_sandboxes": -1}']) {
      const res = await send(a, 'PUT', '/computer', text);
      expect([400, 422], `${text.slice(0, 80)}: ${await res.clone().text()}`).toContain(res.status);
    }
    const named = await json<{ detail: { loc: (string | number)[] }[] }>(send(a, 'PUT', '/computer', { max_sandboxes: -1 }), 422);
    expect(named.detail[0]!.loc).toEqual(['body', 'max_sandboxes']);

    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'limit=', 'offset=-1', 'offset=1e308', 'state=gone', 'state=%00']) {
      const res = await send(a, 'GET', `/sandboxes?${query}`);
      expect(res.status, `${query}: ${await res.clone().text()}`).toBe(422);
    }
    for (const path of [`/sandboxes/not-a-uuid/pause`, `/sandboxes/${randomUUID()}/explode`, `/sandboxes/%00/pause`, `/sandboxes/${'x'.repeat(3000)}/delete`, `/sandboxes/${randomUUID()}/%ED%A0%80`]) {
      const res = await send(a, 'POST', path);
      expect(res.status, `${path.slice(0, 80)}: ${await res.clone().text()}`).toBeGreaterThanOrEqual(400);
      expect(res.status, path.slice(0, 80)).toBeLessThan(500);
    }
    // A well-formed id no sandbox has is the runtime's 404, relayed.
    expect((await send(a, 'POST', `/sandboxes/${randomUUID()}/pause`)).status).toBe(404);

    expect(await json(send(a, 'GET', '/computer'), 200)).toEqual(stored);
    expect(await version()).toBe(versionBefore);
  });
});

describe("a project's computer where the runtime has no sandbox host", () => {
  let rt: TestRuntime;
  let api: TestControl;
  let project: Project;

  beforeAll(async () => {
    const planes = await startPlanes('none', ['plain']);
    ({ rt, api } = planes);
    project = planes.projects[0]!;
  }, 120_000);
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
  });

  it('offers no enable_computer, describes no host, and still keeps the settings for a runtime that may have one', async () => {
    const send = (method: string, path: string, body?: unknown) =>
      api.call(`/api/projects/${project.id}${path}`, { method, key: project.adminKey, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const caps = await json<{ capabilities: { name: string; enabled: boolean; per_request_flag: string | null }[] }>(send('GET', '/capabilities'), 200);
    // The ceiling still allows the capability; only the switch that would do nothing is not offered.
    expect(caps.capabilities.find((row) => row.name === 'computer')).toMatchObject({ enabled: true, per_request_flag: null });
    expect(await json(send('GET', '/sandbox-host'), 200)).toBeNull();
    expect(await json(send('GET', '/sandboxes'), 200)).toEqual({ sandboxes: [], has_more: false, next_offset: null });
    expect(await json(send('PUT', '/computer', { max_sandboxes: 2 }), 200)).toMatchObject({ max_sandboxes: 2 });
    expect((await rt.runtime.configurations.load(project.tenantId))?.document.computer).toMatchObject({ max_sandboxes: 2 });
  });
});
