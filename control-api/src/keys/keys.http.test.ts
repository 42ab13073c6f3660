// Project keys through HTTP: who may create, list and revoke them, scopes, and what a revoked key can do.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControl, type TestControl } from '@agentplane/test/harness/control';
import type { ControlApi } from '../app.js';

describe('project keys', () => {
  let api: TestControl;
  let control: ControlApi;
  let session: string;
  let projectId: string;
  let otherProjectId: string;

  const call = (path: string, init: RequestInit & { key?: string; token?: string } = {}) => api.call(path, init);
  const createKey = async (auth: { key?: string; token?: string }, body: object = {}, project = projectId) =>
    call(`/api/projects/${project}/keys`, { method: 'POST', body: JSON.stringify(body), ...auth });

  beforeAll(async () => {
    api = await startTestControl({ AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' });
    control = api.control;
    session = (await control.accounts.signIn('owner@example.com', 'a long enough password', 'test')).token;
    const orgId = (await control.accounts.orgsOf((await control.accounts.authenticate(session)).id))[0]!.id;
    const accountId = (await control.accounts.authenticate(session)).id;
    projectId = (await control.projects.create(orgId, accountId, 'one')).id;
    otherProjectId = (await control.projects.create(orgId, accountId, 'two')).id;
  });
  afterAll(async () => {
    await api?.stop();
  });

  it('lets a signed-in account create the first key, mint scope by default, shown once and stored as a hash', async () => {
    const res = await createKey({ token: session }, { name: 'server' });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; key: string; scope: string; last_four: string };
    expect(created.key).toMatch(/^pk_[A-Za-z0-9_-]{43}$/);
    expect(created.scope).toBe('mint');
    expect(created.last_four).toBe(created.key.slice(-4));
    const listed = (await (await call(`/api/projects/${projectId}/keys`, { token: session })).json()) as { keys: object[] };
    expect(listed.keys).toEqual([expect.objectContaining({ id: created.id, scope: 'mint', revoked_at: null })]);
    expect(JSON.stringify(listed)).not.toContain(created.key);
    const stored = await sql<{ row: string }>`select row_to_json(k)::text as row from control.project_keys k`.execute(control.database.db);
    expect(stored.rows.map((r) => r.row).join()).not.toContain(created.key);
  });

  it('refuses admin routes to a mint key with 403 that says so; an admin key may create keys', async () => {
    const mint = ((await (await createKey({ token: session })).json()) as { key: string }).key;
    for (const res of [await createKey({ key: mint }), await call(`/api/projects/${projectId}/keys`, { key: mint })]) {
      expect(res.status).toBe(403);
      expect(((await res.json()) as { detail: string }).detail).toBe(
        'this route needs an admin-scope project key; the key used has scope mint (mint tokens and read the ceiling only)',
      );
    }
    const admin = ((await (await createKey({ token: session }, { scope: 'admin' })).json()) as { key: string }).key;
    const byAdmin = await createKey({ key: admin }, { scope: 'admin', name: 'rotated' });
    expect(byAdmin.status).toBe(201);
    expect((await call(`/api/projects/${projectId}/keys`, { key: admin })).status).toBe(200);
    // Also as a bearer: a pk_ key is recognised either way.
    expect((await call(`/api/projects/${projectId}/keys`, { token: admin })).status).toBe(200);
  });

  it('refuses a mint key on admin routes with 403 whatever its body: authorization before validation', async () => {
    const mint = ((await (await createKey({ token: session })).json()) as { key: string }).key;
    const bodies = ['{', JSON.stringify({ nonsense: true, name: 42 })];
    const routes: [string, string][] = [
      ['PATCH', `/api/projects/${projectId}`],
      ['POST', `/api/projects/${projectId}/keys`],
      ['PUT', `/api/projects/${projectId}/origins`],
      ['POST', `/api/projects/${projectId}/providers`],
    ];
    for (const [method, path] of routes) {
      for (const body of bodies) {
        const res = await call(path, { method, key: mint, body, headers: { 'content-type': 'application/json' } });
        expect(res.status, `${method} ${path} ${body}`).toBe(403);
      }
      // Another project's key learns nothing either: the project is not found, whatever the body.
      const elsewhere = await call(path.replace(projectId, otherProjectId), { method, key: mint, body: '{', headers: { 'content-type': 'application/json' } });
      expect(elsewhere.status, `${method} ${path} elsewhere`).toBe(404);
    }
  });

  it('refuses a wrong project key sent beside a valid signed-in session with 401, acting as neither', async () => {
    for (const wrong of ['pk_not-a-key-of-anyone', 'not even a pk_ key']) {
      const res = await call(`/api/projects/${projectId}/keys`, { key: wrong, token: session });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'unauthenticated', request_id: expect.any(String) });
    }
    expect((await call(`/api/projects/${projectId}/keys`, { token: session })).status).toBe(200);
  });

  it("answers 404 for another project's keys, as for a project that does not exist", async () => {
    const admin = ((await (await createKey({ token: session }, { scope: 'admin' })).json()) as { key: string }).key;
    for (const project of [otherProjectId, crypto.randomUUID()]) {
      const res = await call(`/api/projects/${project}/keys`, { key: admin });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ detail: `project ${project} not found` });
    }
  });

  it('revokes a key at once, idempotently; a revoked or unknown key is 401', async () => {
    const admin = ((await (await createKey({ token: session }, { scope: 'admin' })).json()) as { key: string; id: string });
    const first = await call(`/api/projects/${projectId}/keys/${admin.id}`, { method: 'DELETE', token: session });
    expect(first.status).toBe(200);
    const revokedAt = ((await first.json()) as { revoked_at: string }).revoked_at;
    expect(revokedAt).not.toBeNull();
    const again = (await (await call(`/api/projects/${projectId}/keys/${admin.id}`, { method: 'DELETE', token: session })).json()) as { revoked_at: string };
    expect(again.revoked_at).toBe(revokedAt);

    const refused = await call(`/api/projects/${projectId}/keys`, { key: admin.key });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ detail: 'this project key was revoked' });
    expect((await call(`/api/projects/${projectId}/keys`, { key: 'pk_unknown' })).status).toBe(401);
    expect((await call(`/api/projects/${projectId}/keys`, { key: 'sk-not-a-project-key' })).status).toBe(401);
    expect((await call(`/api/projects/${projectId}/keys`)).status).toBe(401);
    expect((await call(`/api/projects/${projectId}/keys/${crypto.randomUUID()}`, { method: 'DELETE', token: session })).status).toBe(404);
  });

  it("hides a project from an account outside its org", async () => {
    const outsider = await control.accounts.createOwner('outsider@example.com', 'another long password', 'elsewhere');
    const token = (await control.accounts.signIn('outsider@example.com', 'another long password', 'test')).token;
    expect(outsider.orgId).toBeTruthy();
    expect((await createKey({ token })).status).toBe(404);
  });
});
