// Deleting a project through HTTP with the local provisioner and a real runtime, on the embedded store and on
// PostgreSQL: who may, that its keys stop at once, that its tenant's data is erased from the runtime after the
// project's earlier deliveries, and what GET /api/projects/:id says about the project's runtime meanwhile.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentplane/test/harness/eventually';
import { postgresBinaries, startPostgres, type PostgresServer } from '@agentplane/test/harness/postgres';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import { startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';
import { LocalProvisioner } from './local.js';

const setups = postgresBinaries() ? (['embedded', 'postgres'] as const) : (['embedded'] as const);
const owner = { email: 'owner@example.com', password: 'a long enough password' };

interface Provisioning {
  ready: boolean;
  reason: string;
  message: string;
  data_plane_url: string | null;
  pending_changes: number;
  last_error: string | null;
}

describe.each(setups)('deleting a project (local provisioner, %s store)', (setup) => {
  let postgres: PostgresServer | undefined;
  let rt: TestRuntime;
  let api: TestControl;
  let session: string;
  let orgId: string;

  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
  const createProject = async (name: string) => {
    const res = await api.call(`/api/orgs/${orgId}/projects`, { method: 'POST', token: session, body: JSON.stringify({ name }) });
    expect(res.status).toBe(201);
    return json<{ id: string; tenant_id: string }>(res);
  };
  const createKey = async (projectId: string, scope: 'admin' | 'mint') =>
    (await json<{ key: string }>(api.call(`/api/projects/${projectId}/keys`, { method: 'POST', token: session, body: JSON.stringify({ scope }) }))).key;
  const runtimeHasTenant = async (tenantId: string) => (await rt.admin(`/tenants/${tenantId}`)).status === 200;

  beforeAll(async () => {
    rt = await startTestRuntime();
    const env: Record<string, string> = { AGENTPLANE_OWNER_EMAIL: owner.email, AGENTPLANE_OWNER_PASSWORD: owner.password };
    if (setup === 'postgres') {
      postgres = await startPostgres();
      env.CONTROL_DATABASE_URL = await postgres.createDatabase();
    }
    api = await startTestControl(env, { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 2000 }) });
    const signedIn = await json<{ token: string }>(api.call('/api/auth/login', { method: 'POST', body: JSON.stringify(owner) }));
    session = signedIn.token;
    orgId = (await json<{ orgs: { id: string }[] }>(api.call('/api/me', { token: session }))).orgs[0]!.id;
  });
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
    await postgres?.stop();
  });

  it("shows the project's runtime as ready once its tenant is registered and its configuration delivered", async () => {
    const project = await createProject('support');
    const adminKey = await createKey(project.id, 'admin');
    const provisioning = await eventually(
      async () => {
        const shown = await json<{ provisioning: Provisioning }>(api.call(`/api/projects/${project.id}`, { key: adminKey }));
        return shown.provisioning.ready && shown.provisioning.pending_changes === 0 && shown.provisioning;
      },
      { what: 'the project to be provisioned' },
    );
    expect(provisioning).toMatchObject({ ready: true, reason: 'Registered', data_plane_url: null, last_error: null });
    expect(await runtimeHasTenant(project.tenant_id)).toBe(true);
  });

  it('refuses a project key, even an admin one of the project, and hides the project from other keys and outsiders', async () => {
    const project = await createProject('kept');
    const other = await createProject('other');
    const adminKey = await createKey(project.id, 'admin');
    const otherKey = await createKey(other.id, 'admin');

    const byOwnKey = await api.call(`/api/projects/${project.id}`, { method: 'DELETE', key: adminKey });
    expect(byOwnKey.status).toBe(403);
    expect(((await byOwnKey.json()) as { detail: string }).detail).toMatch(/signed-in account/);
    expect((await api.call(`/api/projects/${project.id}`, { method: 'DELETE', token: adminKey })).status).toBe(403);
    expect((await api.call(`/api/projects/${project.id}`, { method: 'DELETE', key: otherKey })).status).toBe(404);

    await api.control.accounts.createOwner(`outsider-${setup}@example.com`, 'another long password', 'elsewhere');
    const outsider = (await api.control.accounts.signIn(`outsider-${setup}@example.com`, 'another long password', 'test')).token;
    expect((await api.call(`/api/projects/${project.id}`, { method: 'DELETE', token: outsider })).status).toBe(404);

    expect((await api.call(`/api/projects/${project.id}`, { key: adminKey })).status).toBe(200);
  });

  it("deletes the project at once, stops its keys, and erases its tenant's data from the runtime", async () => {
    const project = await createProject('doomed');
    const adminKey = await createKey(project.id, 'admin');
    const mintKey = await createKey(project.id, 'mint');
    await eventually(() => runtimeHasTenant(project.tenant_id), { what: 'the tenant on the runtime' });
    // Something of the tenant's own on the runtime, for the erase to remove.
    expect((await rt.admin(`/tenants/${project.tenant_id}`, { method: 'PATCH', body: JSON.stringify({ settings_json: { plan: 'gold' } }) })).status).toBe(200);

    const deleted = await api.call(`/api/projects/${project.id}`, { method: 'DELETE', token: session });
    expect(deleted.status).toBe(202);
    expect(await deleted.json()).toMatchObject({ id: project.id, tenant_id: project.tenant_id, name: 'doomed', removal: 'queued' });

    expect((await api.call(`/api/projects/${project.id}/token`, { method: 'POST', key: mintKey, body: JSON.stringify({ subject: 'acme:u' }) })).status).toBe(401);
    expect((await api.call(`/api/projects/${project.id}`, { key: adminKey })).status).toBe(401);
    expect((await api.call(`/api/projects/${project.id}`, { token: session })).status).toBe(404);
    expect((await api.call(`/api/projects/${project.id}`, { method: 'DELETE', token: session })).status).toBe(404);
    const listed = await json<{ projects: { id: string }[] }>(api.call(`/api/orgs/${orgId}/projects`, { token: session }));
    expect(listed.projects.map((p) => p.id)).not.toContain(project.id);

    await eventually(async () => !(await runtimeHasTenant(project.tenant_id)), { what: 'the tenant erased from the runtime' });
    await eventually(async () => (await api.control.relay!.pending(project.id)) === 0, { what: 'the removal delivered' });
  });

  it('leaves nothing on the runtime for a project deleted before its tenant was registered', async () => {
    const projects = await Promise.all(['brief-1', 'brief-2', 'brief-3'].map(createProject));
    // Deleted at once, racing the relay: each one's registration is either skipped or undone by the erase after it.
    for (const project of projects) expect((await api.call(`/api/projects/${project.id}`, { method: 'DELETE', token: session })).status).toBe(202);
    for (const project of projects) {
      await eventually(async () => (await api.control.relay!.pending(project.id)) === 0, { what: `project ${project.id}'s entries delivered` });
      expect(await runtimeHasTenant(project.tenant_id)).toBe(false);
    }
  });
});
