// The project's corpus from the control plane to an end-user's search: an admin adds a document on
// /api/projects/:id/documents (inline, or a file PUT straight to the store), the runtime keeps it in the project's
// tenant, and an end-user the project mints finds it. The runtime's refusals come back as they were. And, generated
// from the control plane's own route description: every route of a project answers another project's admin key
// exactly as a made-up project (404, before its body is read), and a mint key on an admin route gets 403.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { startTestControl, type TestControl } from './harness/control.js';
import { eventually } from './harness/eventually.js';
import { startTestRuntime, type TestRuntime } from './harness/runtime.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

describe('the project corpus on the control plane', () => {
  let rt: TestRuntime;
  let api: TestControl;
  let projectId: string;
  let otherProjectId: string;
  let adminKey: string;
  let otherAdminKey: string;
  let mintKey: string;

  const call = (path: string, init: RequestInit & { key?: string } = {}) => api.call(`/api/projects/${projectId}${path}`, { key: adminKey, ...init });
  const post = (path: string, body: unknown) => call(path, { method: 'POST', body: JSON.stringify(body) });
  async function json<T>(response: Response, status: number): Promise<T> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return JSON.parse(text) as T;
  }
  const endUser = async (capabilities = ['documents:read']) =>
    (await json<{ access_token: string }>(await post('/token', { subject: 'acme:alice', capabilities }), 200)).access_token;

  beforeAll(async () => {
    rt = await startTestRuntime();
    api = await startTestControl(owner, { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 5000 }) });
    const { account } = await api.control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const orgId = (await api.control.accounts.orgsOf(account.id))[0]!.id;
    const caller = { kind: 'account' as const, accountId: account.id };
    const project = await api.control.projects.create(orgId, account.id, 'support');
    const other = await api.control.projects.create(orgId, account.id, 'elsewhere');
    projectId = project.id;
    otherProjectId = other.id;
    adminKey = (await api.control.keys.create(caller, projectId, { scope: 'admin', name: 'admin' })).key;
    mintKey = (await api.control.keys.create(caller, projectId, { scope: 'mint', name: 'mint' })).key;
    otherAdminKey = (await api.control.keys.create(caller, otherProjectId, { scope: 'admin', name: 'admin' })).key;
    const ceiling = await call('', { method: 'PATCH', body: JSON.stringify({ ceiling: { capabilities: ['chat', 'documents:read', 'documents:write'] } }) });
    expect(ceiling.status, await ceiling.clone().text()).toBe(200);
    // The outbox registers the tenant and delivers the ceiling: then the corpus is reachable and tokens carry it.
    await eventually(async () => (await call('/documents')).status === 200 && (await rt.runtime.configurations.load(project.tenant_id))?.document.ceiling.capabilities.includes('documents:read') === true, {
      what: 'the tenant on the runtime',
    });
  }, 120_000);
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
  });

  it('adds a document every end-user of the project finds, and deletes it', async () => {
    const created = await json<{ document: { id: string; status: string; corpus: string }; upload: null }>(
      await post('/documents?wait=20', { title: 'Warranty', text: 'Every kettle carries a two-year warranty.' }),
      201,
    );
    expect(created.document).toMatchObject({ status: 'ready', corpus: 'project' });
    expect(created.upload).toBeNull();
    const token = await endUser();
    const found = await json<{ results: { document_id: string }[] }>(
      await rt.endUser('/documents/retrieve', token, { method: 'POST', body: JSON.stringify({ query: 'kettle warranty' }) }),
      200,
    );
    expect(found.results.map((r) => r.document_id)).toEqual([created.document.id]);
    const listed = await json<{ documents: { id: string }[] }>(await call('/documents'), 200);
    expect(listed.documents.map((d) => d.id)).toContain(created.document.id);
    expect(await json(await call(`/documents/${created.document.id}`), 200)).toMatchObject({ id: created.document.id, title: 'Warranty' });

    expect(await json(await call(`/documents/${created.document.id}`, { method: 'DELETE' }), 200)).toEqual({ id: created.document.id, deleted: true });
    expect((await call(`/documents/${created.document.id}`)).status).toBe(404);
    expect((await rt.endUser(`/documents/${created.document.id}`, token)).status).toBe(404);
  });

  it('hands the URL to PUT a file to, and completes it; completing early is 409; the URL writes nothing after', async () => {
    const bytes = Buffer.from('<h1>Returns</h1><p>Thirty days, no questions asked.</p>');
    const created = await json<{ document: { id: string }; upload: { url: string; headers: Record<string, string> } }>(
      await post('/documents', { filename: 'returns.html', content_type: 'text/html', size: bytes.length }),
      201,
    );
    const early = await json<{ code: string; detail: string }>(await post(`/documents/${created.document.id}`, { action: 'complete' }), 409);
    expect(early.code).toBe('upload_out_of_order');
    expect(early.detail).toMatch(/^upload out of order/);
    expect((await fetch(created.upload.url, { method: 'PUT', headers: created.upload.headers, body: bytes })).status).toBeLessThan(300);
    const done = await json<{ status: string; size_bytes: number }>(await post(`/documents/${created.document.id}?wait=20`, { action: 'complete' }), 200);
    expect(done).toMatchObject({ status: 'ready', size_bytes: bytes.length });

    // The URL only created: replaced HTML is refused, and end-users download the page that was checked.
    const replaced = await fetch(created.upload.url, { method: 'PUT', headers: created.upload.headers, body: '<script>steal(document.cookie)</script>' });
    expect(replaced.status).toBe(412);
    const { url } = await json<{ url: string }>(await rt.endUser(`/documents/${created.document.id}/download-url`, await endUser()), 200);
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(bytes)).toBe(true);
    await json(await call(`/documents/${created.document.id}`, { method: 'DELETE' }), 200);
    expect((await fetch(created.upload.url, { method: 'PUT', headers: created.upload.headers, body: 'again' })).status).toBe(412);
  });

  it("relays the runtime's refusals as they were: a field named in a 422, an unknown document 404", async () => {
    const refused = await json<{ code: string; detail: { loc: string[]; msg: string }[] }>(await post('/documents', { text: 'x', size: 5 }), 422);
    expect(refused.code).toBe('validation_failed');
    expect(refused.detail[0]!.loc).toEqual(['body', 'text']);
    const unknown = randomUUID();
    expect(await json(await call(`/documents/${unknown}`), 404)).toMatchObject({ detail: `document ${unknown} not found` });
    // An end-user's own document is not the project's corpus.
    const own = await json<{ id: string }>(await rt.endUser('/documents', await endUser(['documents:read', 'documents:write']), { method: 'POST', body: JSON.stringify({ text: 'mine' }) }), 201);
    expect((await call(`/documents/${own.id}`)).status).toBe(404);
    expect((await call(`/documents/${own.id}`, { method: 'DELETE' })).status).toBe(404);
  });

  it('lists, reads and deletes the pages the agent wrote in the project wiki', async () => {
    const db = rt.runtime.database.db;
    const tenantId = (await api.control.projects.targetOf(projectId)).tenantId;
    const id = randomUUID();
    const now = new Date();
    await db
      .insertInto('wiki_pages')
      .values({ id, tenant_id: tenantId, scope: 'acme', title: 'Escalations', content: 'Call the duty manager.', author: 'acme:alice', created_at: now, updated_at: now })
      .execute();
    const listed = await json<{ pages: { id: string; title: string; scope: string }[] }>(await call('/wiki'), 200);
    expect(listed.pages.map((page) => [page.id, page.title, page.scope])).toEqual([[id, 'Escalations', 'acme']]);
    expect(await json(await call(`/wiki/${id}`), 200)).toMatchObject({ id, content: 'Call the duty manager.', author: 'acme:alice' });
    expect(await json(await call(`/wiki/${id}`, { method: 'DELETE' }), 200)).toEqual({ id, deleted: true });
    expect(await json(await call(`/wiki/${id}`), 404)).toMatchObject({ detail: `wiki page ${id} not found` });
  });

  it("answers every project route to another project's admin key as for a made-up project, and a mint key on an admin route 403", async () => {
    const description = (await (await fetch(`${api.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security?: Record<string, unknown>[]; responses: Record<string, { description: string }> }>>;
    };
    const routes = Object.entries(description.paths)
      .filter(([path]) => path.startsWith('/api/projects/{id}'))
      .flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })));
    expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(expect.arrayContaining(['GET /api/projects/{id}/documents', 'DELETE /api/projects/{id}/documents/{documentId}', 'DELETE /api/projects/{id}/wiki/{itemId}']));
    const failures: string[] = [];
    for (const { method, path, operation } of routes) {
      // Path values well formed (they are checked before the caller is: docs/architecture.md), ids made up.
      const concrete = (project: string) => path.replace('{id}', project).replace('{action}', 'pause').replace(/\{[^}]+\}/g, () => randomUUID());
      const body = method === 'GET' || method === 'DELETE' ? {} : { body: '{', headers: { 'content-type': 'application/json' } };
      const elsewhere = await api.call(concrete(projectId), { method, key: otherAdminKey, ...body });
      if (elsewhere.status !== 404) failures.push(`${method} ${path} with another project's key: ${elsewhere.status}`);
      const detail = ((await elsewhere.json()) as { detail?: string }).detail;
      if (detail !== `project ${projectId} not found`) failures.push(`${method} ${path} with another project's key said: ${detail}`);
      if (operation.responses['403']?.description === 'A mint-scope key on an admin route') {
        const minted = await api.call(concrete(projectId), { method, key: mintKey, ...body });
        if (minted.status !== 403) failures.push(`${method} ${path} with a mint key: ${minted.status}`);
      }
    }
    expect(failures).toEqual([]);
  });
});
