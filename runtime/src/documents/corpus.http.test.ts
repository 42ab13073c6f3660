// The project's corpus on the runtime's admin surface (X-Admin-Key), in both setups: documents the control plane
// adds (inline, or PUT straight to the store in one piece or in parts, then completed) are seen by every end-user
// of the tenant (narrowed by allowed roles and groups) and by no other tenant's; end-users read them but never
// change them; the admin routes reach only corpus documents of the named tenant.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import type { DocumentOutput } from './schemas.js';

const ceiling = { capabilities: ['chat', 'documents:read', 'documents:write'] };
const MiB = 1024 * 1024;

describe.each(availableSetups())('the project corpus (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  let tenant: TestTenant;
  let other: TestTenant;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    rt = await startTestRuntime({ env: (await services?.env()) ?? {} });
    tenant = await configuredTenant(rt, { ceiling });
    other = await configuredTenant(rt, { ceiling });
  });
  afterAll(async () => {
    await rt?.stop();
    await services?.stop();
  });

  const corpus = (path: string, init: RequestInit = {}, tenantId = tenant.tenantId) => rt.admin(`/tenants/${tenantId}/documents${path}`, init);
  const post = (path: string, body: unknown, tenantId?: string) => corpus(path, { method: 'POST', body: JSON.stringify(body) }, tenantId);
  async function json<T>(response: Response, status: number): Promise<T> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return JSON.parse(text) as T;
  }
  const user = (grant: Record<string, unknown> = {}, t = tenant) => t.mint({ sub: 'acme:sales:alice', scope: 'acme:sales:alice', ...grant });

  it('adds inline text that every end-user of the tenant sees and searches, and no other tenant does', async () => {
    const { document, upload } = await json<{ document: DocumentOutput; upload: null }>(
      await post('?wait=20', { title: 'Warranty', text: '# Warranty\nEvery kettle carries a two-year warranty.', content_type: 'text/markdown' }),
      201,
    );
    expect(upload).toBeNull();
    expect(document).toMatchObject({ title: 'Warranty', status: 'ready', corpus: 'project', visibility: 'project', owner: null, scope: null, chunk_count: 1 });

    const alice = await user();
    const bob = await user({ sub: 'globex:bob', scope: 'globex:bob' });
    for (const token of [alice, bob]) {
      expect(await json(await rt.endUser(`/documents/${document.id}`, token), 200)).toEqual(document);
      const found = await json<{ results: { document_id: string }[] }>(
        await rt.endUser('/documents/retrieve', token, { method: 'POST', body: JSON.stringify({ query: 'kettle warranty' }) }),
        200,
      );
      expect(found.results.map((r) => r.document_id)).toContain(document.id);
    }
    const stranger = await user({}, other);
    expect((await rt.endUser(`/documents/${document.id}`, stranger)).status).toBe(404);
    const theirs = await json<{ documents: { id: string }[] }>(await rt.endUser('/documents', stranger), 200);
    expect(theirs.documents.map((d) => d.id)).not.toContain(document.id);
    // Nor does the other tenant's admin route reach it.
    expect((await corpus(`/${document.id}`, {}, other.tenantId)).status).toBe(404);

    const listed = await json<{ documents: { id: string }[] }>(await corpus(''), 200);
    expect(listed.documents.map((d) => d.id)).toContain(document.id);
  });

  it('narrows the corpus to allowed roles and groups, and lets end-users read it but never change it', async () => {
    const { document } = await json<{ document: DocumentOutput }>(await post('', { title: 'Escalations', text: 'Call the duty manager.', allowed_roles: ['support'] }), 201);
    const outsider = await user({ capabilities: ['documents:read', 'documents:write'] });
    expect((await rt.endUser(`/documents/${document.id}`, outsider)).status).toBe(404);
    const agent = await user({ roles: ['support'] });
    expect((await rt.endUser(`/documents/${document.id}`, agent)).status).toBe(200);
    for (const [method, path, body] of [
      ['PATCH', '', { title: 'Mine now' }],
      ['DELETE', '', undefined],
      ['POST', '/reingest', undefined],
    ] as const) {
      const refused = await rt.endUser(`/documents/${document.id}${path}`, agent, { method, ...(body ? { body: JSON.stringify(body) } : {}) });
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(((await refused.json()) as { code: string }).code).toBe('not_owner');
    }
    expect(await json<DocumentOutput>(await corpus(`/${document.id}`), 200)).toMatchObject({ title: 'Escalations', allowed_roles: ['support'] });
  });

  it('reaches only corpus documents: an end-user\'s own document and an unknown tenant are 404', async () => {
    const alice = await user();
    const own = await json<{ id: string }>(await rt.endUser('/documents', alice, { method: 'POST', body: JSON.stringify({ text: 'mine' }) }), 201);
    expect((await corpus(`/${own.id}`)).status).toBe(404);
    expect((await corpus(`/${own.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await post(`/${own.id}`, { action: 'reingest' })).status).toBe(404);
    const unknown = await corpus('', {}, '00000000-0000-4000-8000-00000000abcd');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { code: string }).code).toBe('tenant_not_found');
    expect((await rt.admin(`/tenants/${tenant.tenantId}/documents`, { adminKey: 'wrong-key-wrong-key-wrong-key-00' })).status).toBe(401);
  });

  it('takes a file PUT straight to the store, in one piece, and refuses completing it before it arrived', async () => {
    const bytes = Buffer.from('Name,Plan\nAcme,Gold\nGlobex,Silver\n');
    const created = await json<{ document: DocumentOutput; upload: { kind: string; url: string; headers: Record<string, string> } }>(
      await post('', { filename: 'plans.csv', content_type: 'text/csv', size: bytes.length }),
      201,
    );
    expect(created.document).toMatchObject({ status: 'uploading', title: 'plans.csv', corpus: 'project' });
    expect(created.upload.kind).toBe('single');
    const early = await post(`/${created.document.id}`, { action: 'complete' });
    expect(early.status).toBe(409);
    expect(((await early.json()) as { code: string }).code).toBe('upload_out_of_order');
    expect((await fetch(created.upload.url, { method: 'PUT', headers: created.upload.headers, body: bytes })).status).toBeLessThan(300);
    const done = await json<DocumentOutput>(await post(`/${created.document.id}?wait=20`, { action: 'complete' }), 200);
    expect(done).toMatchObject({ status: 'ready', size_bytes: bytes.length });
    const { url } = await json<{ url: string }>(await rt.endUser(`/documents/${done.id}/download-url`, await user()), 200);
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(bytes)).toBe(true);

    const again = await json<DocumentOutput>(await post(`/${done.id}?wait=20`, { action: 'reingest' }), 200);
    expect(again.status).toBe('ready');
    const key = (await rt.runtime.database.db.selectFrom('documents').select('blob_key').where('id', '=', done.id).executeTakeFirstOrThrow()).blob_key;
    expect(await json(await corpus(`/${done.id}`, { method: 'DELETE' }), 200)).toEqual({ id: done.id, deleted: true });
    expect(await rt.runtime.blobs.head(key)).toBeNull();
    expect((await corpus(`/${done.id}`)).status).toBe(404);
  });

  it('closes a file\'s upload URL once completed or deleted: end-users download and the ingest reads only the checked bytes', async () => {
    const bytes = Buffer.from('Refunds within 30 days.');
    const replacement = Buffer.from('<html><body><script>steal()</script></body></html>'.padEnd(64 * 1024, ' '));
    type Created = { document: DocumentOutput; upload: { url: string; headers: Record<string, string> } };
    const create = async () => json<Created>(await post('', { filename: 'refunds.txt', content_type: 'text/plain', size: bytes.length }), 201);
    const putAgain = async (upload: Created['upload']) => {
      const response = await fetch(upload.url, { method: 'PUT', headers: upload.headers, body: replacement });
      await response.arrayBuffer();
      return response.status;
    };
    const created = await create();
    expect(created.upload.headers).toEqual({ 'content-type': 'text/plain', 'if-none-match': '*' });
    expect((await fetch(created.upload.url, { method: 'PUT', headers: created.upload.headers, body: bytes })).status).toBe(200);
    await json(await post(`/${created.document.id}?wait=20`, { action: 'complete' }), 200);
    expect(await putAgain(created.upload)).toBe(412);

    const { url } = await json<{ url: string }>(await rt.endUser(`/documents/${created.document.id}/download-url`, await user()), 200);
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(bytes)).toBe(true);
    expect(await json(await post(`/${created.document.id}?wait=20`, { action: 'reingest' }), 200)).toMatchObject({ status: 'ready', size_bytes: bytes.length });
    const chunks = await json<{ chunks: { text: string }[] }>(await rt.endUser(`/documents/${created.document.id}/chunks`, await user()), 200);
    expect(chunks.chunks.map((chunk) => chunk.text)).toEqual([bytes.toString()]);

    await json(await corpus(`/${created.document.id}`, { method: 'DELETE' }), 200);
    expect(await putAgain(created.upload)).toBe(412);
    const abandoned = await create();
    await json(await corpus(`/${abandoned.document.id}`, { method: 'DELETE' }), 200);
    expect(await putAgain(abandoned.upload)).toBe(412);
    const keys = await rt.runtime.database.db.selectFrom('documents').select('blob_key').where('id', 'in', [created.document.id, abandoned.document.id]).execute();
    expect(keys).toEqual([]);
    for (const id of [created.document.id, abandoned.document.id]) {
      expect(await rt.runtime.blobs.head(`tenants/${tenant.tenantId}/documents/${id}`)).toBeNull();
    }
  });

  it('hands every part\'s URL of an upload in parts at once, and completes it from the ETags', async () => {
    const size = 5 * MiB + 1000;
    const bytes = Buffer.alloc(size, 'a');
    const created = await json<{ document: DocumentOutput; upload: { kind: string; part_count: number }; parts: { part_number: number; url: string; headers: Record<string, string> }[] }>(
      await post('', { filename: 'big.txt', content_type: 'text/plain', size, multipart: true, part_size: 5 * MiB }),
      201,
    );
    expect(created.upload).toMatchObject({ kind: 'multipart', part_count: 2 });
    expect(created.parts.map((p) => p.part_number)).toEqual([1, 2]);
    const etags = [];
    for (const part of created.parts) {
      const slice = bytes.subarray((part.part_number - 1) * 5 * MiB, part.part_number * 5 * MiB);
      const put = await fetch(part.url, { method: 'PUT', headers: part.headers, body: slice });
      expect(put.status).toBeLessThan(300);
      etags.push({ part_number: part.part_number, etag: put.headers.get('etag')! });
    }
    const done = await json<DocumentOutput>(await post(`/${created.document.id}`, { action: 'complete', parts: etags }), 200);
    expect(done).toMatchObject({ status: expect.stringMatching(/uploaded|processing|ready/), size_bytes: size });
    // The upload is over: its part URLs take nothing, and an end-user downloads the bytes that were checked.
    const late = await fetch(created.parts[0]!.url, { method: 'PUT', headers: created.parts[0]!.headers, body: 'a part after complete' });
    await late.arrayBuffer();
    expect(late.status).toBe(404);
    const { url } = await json<{ url: string }>(await rt.endUser(`/documents/${done.id}/download-url`, await user()), 200);
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(bytes)).toBe(true);
    await json(await corpus(`/${done.id}`, { method: 'DELETE' }), 200);
  });

  it('refuses a body with both text and size, or neither, naming the field, and changes nothing', async () => {
    const before = (await json<{ documents: unknown[] }>(await corpus('?limit=200'), 200)).documents.length;
    for (const body of [{ text: 'x', size: 10 }, { title: 'nothing' }, { text: 'x', content_type: 'application/pdf' }, { size: 10, content_type: 'text/plain' }]) {
      const refused = await json<{ detail: { loc: string[] }[] }>(await post('', body), 422);
      expect(refused.detail[0]!.loc[0]).toBe('body');
    }
    expect((await json<{ documents: unknown[] }>(await corpus('?limit=200'), 200)).documents.length).toBe(before);
  });
});
