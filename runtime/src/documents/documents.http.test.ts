// Documents through HTTP, in both setups (the embedded filesystem store serving its own signed URLs; PostgreSQL with
// a real MinIO): inline uploads as JSON and as a form, presigned single and multipart uploads with their 409s for
// steps out of order and their 422s for bytes other than declared, download URLs, abort, delete and the sweep of
// abandoned uploads leaving no bytes behind, and who sees and who changes what.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import { minimalPdf } from '@agentplane/test/fakes/documents';
import { uploadStagingKey } from './model.js';
import type { DocumentOutput } from './schemas.js';

const ceiling = { capabilities: ['chat', 'documents:read', 'documents:write'] };
const MiB = 1024 * 1024;

describe.each(availableSetups())('documents (%s)', (setup) => {
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

  type Minter = TestTenant & { token(grant?: Partial<AccessTokenGrant>): Promise<string> };
  /** A tenant whose default token is `acme:sales:alice`, scoped to herself, reading and writing documents. */
  async function tenant(): Promise<Minter> {
    const t = await configuredTenant(rt, { ceiling });
    return Object.assign(t, { token: (grant: Partial<AccessTokenGrant> = {}) => t.mint({ sub: 'acme:sales:alice', scope: 'acme:sales:alice', ...grant }) });
  }

  const post = (path: string, token: string, body: unknown) => rt.endUser(path, token, { method: 'POST', body: JSON.stringify(body) });
  async function json<T>(response: Response, status: number): Promise<T> {
    const text = await response.text();
    expect(response.status, text).toBe(status);
    return JSON.parse(text) as T;
  }
  /** A small document, read before the answer (so its record no longer changes under the test). */
  async function inline(token: string, body: Record<string, unknown> = {}): Promise<DocumentOutput> {
    return json<DocumentOutput>(await post('/documents?wait=20', token, { text: 'Our refund window is 30 days.', title: 'Refunds', ...body }), 201);
  }
  const stored = (doc: { id: string }) => rt.runtime.database.db.selectFrom('documents').select(['blob_key']).where('id', '=', doc.id).executeTakeFirst();
  async function bytesAt(key: string): Promise<Buffer | null> {
    const head = await rt.runtime.blobs.head(key);
    if (!head) return null;
    const blob = await rt.runtime.blobs.get(key);
    const chunks: Buffer[] = [];
    for await (const chunk of blob.body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  describe('inline uploads', () => {
    it('stores JSON text as a document its owner sees, and downloads the same bytes', async () => {
      const t = await tenant();
      const token = await t.token();
      const doc = await inline(token, { content_type: 'text/markdown', filename: 'refunds.md', metadata: { source: 'wiki' }, allowed_groups: ['support'] });
      expect(doc).toMatchObject({
        title: 'Refunds',
        filename: 'refunds.md',
        content_type: 'text/markdown',
        size_bytes: Buffer.byteLength('Our refund window is 30 days.'),
        status: 'ready',
        failure: null,
        corpus: 'tenant',
        visibility: 'scope',
        owner: 'acme:sales:alice',
        scope: 'acme:sales:alice',
        allowed_roles: [],
        allowed_groups: ['support'],
        metadata: { source: 'wiki' },
        chunk_count: 1,
      });
      expect(await json(await rt.endUser(`/documents/${doc.id}`, token), 200)).toEqual(doc);
      const { url, expires_at: expiresAt } = await json<{ url: string; expires_at: string }>(await rt.endUser(`/documents/${doc.id}/download-url`, token), 200);
      expect(new Date(expiresAt).getTime() - Date.now()).toBeLessThanOrEqual(5 * 60 * 1000);
      const download = await fetch(url);
      expect(download.status).toBe(200);
      expect(await download.text()).toBe('Our refund window is 30 days.');
    });

    it('takes a file in a form, with its fields as text', async () => {
      const t = await tenant();
      const token = await t.token();
      const form = new FormData();
      form.set('file', new Blob(['a,b\n1,2\n'], { type: 'text/csv' }), 'sheet.csv');
      form.set('title', 'Sheet');
      form.set('allowed_roles', 'analyst, lead');
      form.set('metadata', '{"quarter":"Q3"}');
      const doc = await json<DocumentOutput>(await rt.endUser('/documents', token, { method: 'POST', body: form }), 201);
      expect(doc).toMatchObject({ title: 'Sheet', filename: 'sheet.csv', content_type: 'text/csv', size_bytes: 8, allowed_roles: ['analyst', 'lead'], metadata: { quarter: 'Q3' } });
      expect((await bytesAt((await stored(doc))!.blob_key))?.toString()).toBe('a,b\n1,2\n');
    });

    it('refuses forms it cannot take with a 4xx naming why, and stores nothing', async () => {
      const t = await tenant();
      const token = await t.token();
      const count = async () => Number((await rt.runtime.database.db.selectFrom('documents').select((eb) => eb.fn.countAll().as('n')).where('tenant_id', '=', t.tenantId).executeTakeFirstOrThrow()).n);
      const send = (body: string | FormData, contentType?: string) => rt.endUser('/documents', token, { method: 'POST', body, ...(contentType ? { headers: { 'content-type': contentType } } : {}) });
      const withFile = (parts: Record<string, string | Blob>) => {
        const form = new FormData();
        for (const [name, value] of Object.entries(parts)) form.set(name, value);
        return form;
      };

      const big = await send(withFile({ file: new Blob([Buffer.alloc(10 * MiB + 1)], { type: 'text/plain' }) }));
      expect(big.status).toBe(413);
      expect(((await big.json()) as { detail: string }).detail).toContain('presign-upload');
      const wrongType = await send(withFile({ file: new Blob(['MZ'], { type: 'application/x-msdownload' }) }));
      expect(wrongType.status).toBe(422);
      expect(JSON.stringify(await wrongType.json())).toContain('application/pdf');
      expect((await send(withFile({ title: 'no file' }))).status).toBe(422);
      expect((await send(withFile({ file: new Blob(['x'], { type: 'text/plain' }), extra: 'field' }))).status).toBe(422);
      expect((await send(withFile({ file: new Blob(['x'], { type: 'text/plain' }), metadata: '{not json' }))).status).toBe(422);
      expect((await send(withFile({ file: new Blob(['x'], { type: 'text/plain' }), title: 'bad\u0000title' }))).status).toBe(422);
      // No boundary, a body cut short, and a media type that is neither JSON nor a form.
      expect((await send('--x\r\n', 'multipart/form-data')).status).toBe(400);
      const truncated = await send('--b\r\ncontent-disposition: form-data; name="file"; filename="a.txt"\r\ncontent-type: text/plain\r\n\r\nhello', 'multipart/form-data; boundary=b');
      expect(truncated.status).toBeGreaterThanOrEqual(400);
      expect(truncated.status).toBeLessThan(500);
      expect((await send('text', 'text/plain')).status).toBe(415);
      expect(await count()).toBe(0);
    });
  });

  describe('presigned uploads', () => {
    it('uploads in one piece: the PUT, then complete, which checks the size; completing again answers the same', async () => {
      const t = await tenant();
      const token = await t.token();
      const body = Buffer.from('A guide uploaded in one piece.');
      const started = await json<{ document: DocumentOutput; upload: { kind: string; url: string; headers: Record<string, string> } }>(
        await post('/documents/presign-upload', token, { filename: 'guide.txt', content_type: 'text/plain', size: body.length }),
        201,
      );
      expect(started.document).toMatchObject({ status: 'uploading', title: 'guide.txt', size_bytes: null });
      expect(started.upload).toMatchObject({ kind: 'single', headers: { 'content-type': 'text/plain', 'if-none-match': '*' } });

      // Out of order: nothing has arrived yet, and there are no bytes to download.
      const early = await post(`/documents/${started.document.id}/complete-upload`, token, {});
      expect(early.status).toBe(409);
      expect(((await early.json()) as { detail: string }).detail).toMatch(/^upload out of order: /);
      expect((await rt.endUser(`/documents/${started.document.id}/download-url`, token)).status).toBe(409);

      // Bytes other than declared are refused and removed; the same URL takes the right ones after.
      const short = await fetch(started.upload.url, { method: 'PUT', headers: started.upload.headers, body: body.subarray(0, 5) });
      expect(short.status).toBe(200);
      const mismatch = await post(`/documents/${started.document.id}/complete-upload`, token, {});
      expect(mismatch.status).toBe(422);
      expect(JSON.stringify(await mismatch.json())).toContain(`were declared`);
      expect(await bytesAt((await stored(started.document))!.blob_key)).toBeNull();
      expect((await fetch(started.upload.url, { method: 'PUT', headers: started.upload.headers, body })).status).toBe(200);
      const done = await json<DocumentOutput>(await post(`/documents/${started.document.id}/complete-upload?wait=20`, token, {}), 200);
      expect(done).toMatchObject({ status: 'ready', size_bytes: body.length, chunk_count: 1 });
      expect(done.uploaded_at).not.toBeNull();
      expect(await json(await post(`/documents/${started.document.id}/complete-upload`, token, {}), 200)).toEqual(done);
      expect((await post(`/documents/${started.document.id}/abort-upload`, token, undefined)).status).toBe(409);
    });

    it('refuses every write to a single upload\'s URL once it is completed, aborted or deleted; downloads and reingests serve the checked bytes', async () => {
      const t = await tenant();
      const token = await t.token();
      // A manager whose scope covers the uploader: sees the document, does not own it.
      const reader = await t.mint({ sub: 'acme:boss', scope: 'acme' });
      type Presigned = { document: DocumentOutput; upload: { url: string; headers: Record<string, string> } };
      const presign = async (body: Buffer) =>
        json<Presigned>(await post('/documents/presign-upload', token, { filename: 'note.txt', content_type: 'text/plain', size: body.length }), 201);
      const replacement = Buffer.from('<html><body><script>alert(document.cookie)</script></body></html>'.padEnd(64 * 1024, ' '));
      const putAgain = async (upload: Presigned['upload']) => {
        const response = await fetch(upload.url, { method: 'PUT', headers: upload.headers, body: replacement });
        await response.arrayBuffer();
        return response.status;
      };
      const download = async (id: string, as: string) => {
        const { url } = await json<{ url: string }>(await rt.endUser(`/documents/${id}/download-url`, as), 200);
        return Buffer.from(await (await fetch(url)).arrayBuffer());
      };

      // Completed: the URL refuses a second PUT (and one that leaves out the header it signed), and what was checked
      // is what is downloaded, read again and kept.
      const original = Buffer.from('Hello world');
      const done = await presign(original);
      expect((await fetch(done.upload.url, { method: 'PUT', headers: done.upload.headers, body: original })).status).toBe(200);
      expect(await json(await post(`/documents/${done.document.id}/complete-upload?wait=20`, token, {}), 200)).toMatchObject({ status: 'ready', size_bytes: 11 });
      expect(await putAgain(done.upload)).toBe(412);
      const withoutCondition = await fetch(done.upload.url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: replacement });
      await withoutCondition.arrayBuffer();
      // The header is signed: the fs store and S3 answer 403, MinIO 400.
      expect([400, 403]).toContain(withoutCondition.status);
      expect((await download(done.document.id, reader)).equals(original)).toBe(true);
      expect(await json(await post(`/documents/${done.document.id}/reingest?wait=20`, token, {}), 202)).toMatchObject({ status: 'ready', size_bytes: 11 });
      const chunks = await json<{ chunks: { text: string }[] }>(await rt.endUser(`/documents/${done.document.id}/chunks`, reader), 200);
      expect(chunks.chunks.map((chunk) => chunk.text)).toEqual(['Hello world']);
      expect((await bytesAt((await stored(done.document))!.blob_key))!.equals(original)).toBe(true);

      // Deleted after completing: the URL re-creates nothing.
      const staging = uploadStagingKey(t.tenantId, done.document.id);
      expect(await json(await rt.endUser(`/documents/${done.document.id}`, token, { method: 'DELETE' }), 200)).toMatchObject({ deleted: true });
      expect(await putAgain(done.upload)).toBe(412);
      expect(await bytesAt((await stored(done.document))?.blob_key ?? `tenants/${t.tenantId}/documents/${done.document.id}`)).toBeNull();
      expect((await bytesAt(staging))?.length).toBe(0);

      // Aborted, before or after its bytes arrived; deleted while still uploading.
      const abortedEarly = await presign(original);
      await json(await post(`/documents/${abortedEarly.document.id}/abort-upload`, token, undefined), 200);
      expect(await putAgain(abortedEarly.upload)).toBe(412);
      const abortedLate = await presign(original);
      expect((await fetch(abortedLate.upload.url, { method: 'PUT', headers: abortedLate.upload.headers, body: original })).status).toBe(200);
      await json(await post(`/documents/${abortedLate.document.id}/abort-upload`, token, undefined), 200);
      expect(await putAgain(abortedLate.upload)).toBe(412);
      const deletedEarly = await presign(original);
      await json(await rt.endUser(`/documents/${deletedEarly.document.id}`, token, { method: 'DELETE' }), 200);
      expect(await putAgain(deletedEarly.upload)).toBe(412);
      for (const gone of [abortedEarly, abortedLate, deletedEarly]) expect((await bytesAt(uploadStagingKey(t.tenantId, gone.document.id)))?.length).toBe(0);

      // Once the URLs have expired, the sweep removes what held their keys.
      const reservations = rt.runtime.database.db.updateTable('upload_staging').set({ sweep_after: new Date(Date.now() - 1000) }).where('tenant_id', '=', t.tenantId);
      await reservations.execute();
      await rt.runtime.documents.sweepAbandoned();
      for (const gone of [done, abortedEarly, abortedLate, deletedEarly]) expect(await bytesAt(uploadStagingKey(t.tenantId, gone.document.id))).toBeNull();
      expect(await rt.runtime.database.db.selectFrom('upload_staging').select('key').where('tenant_id', '=', t.tenantId).execute()).toEqual([]);
    });

    it('completes one upload once when two completes race: one set of checked bytes, and the URL stays closed', async () => {
      const t = await tenant();
      const token = await t.token();
      const body = Buffer.from('Raced to completion.');
      const started = await json<{ document: DocumentOutput; upload: { url: string; headers: Record<string, string> } }>(
        await post('/documents/presign-upload', token, { filename: 'race.txt', content_type: 'text/plain', size: body.length }),
        201,
      );
      expect((await fetch(started.upload.url, { method: 'PUT', headers: started.upload.headers, body })).status).toBe(200);
      const answers = await Promise.all([1, 2, 3].map(() => post(`/documents/${started.document.id}/complete-upload`, token, {})));
      for (const answer of answers) expect(await json<DocumentOutput>(answer, 200)).toMatchObject({ id: started.document.id, size_bytes: body.length });
      expect((await bytesAt((await stored(started.document))!.blob_key))!.equals(body)).toBe(true);
      const late = await fetch(started.upload.url, { method: 'PUT', headers: started.upload.headers, body: 'replaced after the race' });
      expect(late.status).toBe(412);
    });

    it('refuses a file whose bytes are not its media type, inline or at complete, naming the field, and keeps the upload open', async () => {
      const t = await tenant();
      const token = await t.token();
      const pdf = minimalPdf(['A real PDF page.']);
      const form = (bytes: Buffer | string, type: string) => {
        const body = new FormData();
        body.set('file', new Blob([bytes], { type }), 'file');
        return body;
      };
      for (const [bytes, type, says] of [
        [pdf, 'text/plain', 'it is a PDF'],
        ['just words', 'application/pdf', '%PDF-'],
        ['PK\u0003\u0004 zipped', 'text/markdown', 'ZIP archive'],
        [Buffer.from([0x41, 0x00, 0x42]), 'text/csv', 'NUL bytes'],
        ['plain', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'ZIP archive'],
      ] as const) {
        const refused = await json<{ detail: { loc: string[]; msg: string }[] }>(await rt.endUser('/documents', token, { method: 'POST', body: form(bytes, type) }), 422);
        expect(refused.detail[0]!.loc).toEqual(['body', 'file']);
        expect(refused.detail[0]!.msg).toContain(says);
      }
      const started = await json<{ document: DocumentOutput; upload: { url: string; headers: Record<string, string> } }>(
        await post('/documents/presign-upload', token, { filename: 'policy.pdf', content_type: 'application/pdf', size: pdf.length }),
        201,
      );
      expect((await fetch(started.upload.url, { method: 'PUT', headers: started.upload.headers, body: Buffer.alloc(pdf.length, 'x') })).status).toBe(200);
      const mislabelled = await json<{ detail: { loc: string[]; msg: string }[] }>(await post(`/documents/${started.document.id}/complete-upload`, token, {}), 422);
      expect(mislabelled.detail[0]!.loc).toEqual(['body', 'content_type']);
      expect(mislabelled.detail[0]!.msg).toContain('%PDF-');
      expect(await bytesAt((await stored(started.document))!.blob_key)).toBeNull();
      expect((await fetch(started.upload.url, { method: 'PUT', headers: started.upload.headers, body: pdf })).status).toBe(200);
      expect(await json(await post(`/documents/${started.document.id}/complete-upload?wait=20`, token, {}), 200)).toMatchObject({ status: 'ready' });
    });

    it('uploads in parts: part URLs, each part PUT, complete with the ETags; parts outside the upload or missing are out of order', async () => {
      const t = await tenant();
      const token = await t.token();
      const size = 11 * MiB + 7;
      const bytes = Buffer.alloc(size, 7);
      bytes.write('plain text at the start', 0);
      const started = await json<{ document: DocumentOutput; upload: { kind: string; part_size: number; part_count: number } }>(
        await post('/documents/presign-upload', token, { filename: 'big.txt', content_type: 'text/plain; charset=utf-8', size, multipart: true, part_size: 5 * MiB }),
        201,
      );
      expect(started.upload).toMatchObject({ kind: 'multipart', part_size: 5 * MiB, part_count: 3 });
      expect(started.document.content_type).toBe('text/plain');
      const id = started.document.id;

      const outside = await post(`/documents/${id}/presign-parts`, token, { part_numbers: [1, 4] });
      expect(outside.status).toBe(409);
      expect(((await outside.json()) as { detail: string }).detail).toBe(`upload out of order: part 4 is outside 1 to 3, the parts of document ${id}`);
      const { parts } = await json<{ parts: { part_number: number; url: string; headers: Record<string, string> }[] }>(await post(`/documents/${id}/presign-parts`, token, { part_numbers: [3, 1, 2] }), 200);
      expect(parts.map((part) => part.part_number)).toEqual([1, 2, 3]);
      const etags: { part_number: number; etag: string }[] = [];
      for (const part of parts) {
        const slice = bytes.subarray((part.part_number - 1) * 5 * MiB, Math.min(size, part.part_number * 5 * MiB));
        const put = await fetch(part.url, { method: 'PUT', headers: part.headers, body: slice });
        expect(put.status).toBe(200);
        etags.push({ part_number: part.part_number, etag: put.headers.get('etag')! });
      }
      const missing = await post(`/documents/${id}/complete-upload`, token, { parts: etags.slice(0, 2) });
      expect(missing.status).toBe(409);
      expect(((await missing.json()) as { detail: string }).detail).toBe(`upload out of order: part 3 of document ${id} is not listed; all 3 must have arrived`);
      const done = await json<DocumentOutput>(await post(`/documents/${id}/complete-upload`, token, { parts: etags }), 200);
      expect(done).toMatchObject({ status: 'uploaded', size_bytes: size });
      expect((await bytesAt((await stored(done))!.blob_key))!.equals(bytes)).toBe(true);

      // Completed, the upload is gone: a part URL takes nothing, and the stored bytes stay the checked ones.
      const late = await fetch(parts[0]!.url, { method: 'PUT', headers: parts[0]!.headers, body: 'a part after complete' });
      await late.arrayBuffer();
      expect(late.status).toBe(404);
      expect((await bytesAt((await stored(done))!.blob_key))!.equals(bytes)).toBe(true);
    });

    it('refuses what it cannot take before creating anything: unknown types, sizes beyond the limits', async () => {
      const t = await tenant();
      const token = await t.token();
      expect((await post('/documents/presign-upload', token, { filename: 'a.exe', content_type: 'application/x-msdownload', size: 10 })).status).toBe(422);
      expect((await post('/documents/presign-upload', token, { filename: 'a.txt', content_type: 'text/plain', size: 513 * MiB })).status).toBe(422);
      expect((await post('/documents/presign-upload', token, { filename: 'a.txt', content_type: 'text/plain', size: 65 * MiB, multipart: false })).status).toBe(422);
      expect((await post('/documents/presign-upload', token, { filename: '../a.txt', content_type: 'text/plain', size: 10 })).status).toBe(422);
      expect((await post('/documents/presign-upload', token, { filename: 'a.txt', content_type: 'text/plain', size: 10, visibility: 'project' })).status).toBe(422);
      const list = await json<{ documents: unknown[] }>(await rt.endUser('/documents', token), 200);
      expect(list.documents).toEqual([]);
    });

    it('leaves no bytes behind: abort, delete, and the sweep of uploads abandoned past their deadline', async () => {
      const t = await tenant();
      const token = await t.token();
      const prefix = `tenants/${t.tenantId}/`;
      const keysUnder = async () => {
        const rows = await rt.runtime.database.db.selectFrom('documents').select(['blob_key']).where('tenant_id', '=', t.tenantId).execute();
        const present = [];
        for (const row of rows) if (await rt.runtime.blobs.head(row.blob_key)) present.push(row.blob_key);
        return present;
      };

      // Abort: a part that arrived goes with the upload.
      const parts = await json<{ document: DocumentOutput }>(await post('/documents/presign-upload', token, { filename: 'p.txt', content_type: 'text/plain', size: 6 * MiB, multipart: true }), 201);
      const [part] = (await json<{ parts: { url: string }[] }>(await post(`/documents/${parts.document.id}/presign-parts`, token, { part_numbers: [1] }), 200)).parts;
      expect((await fetch(part!.url, { method: 'PUT', body: Buffer.alloc(5 * MiB) })).status).toBe(200);
      expect(await json(await post(`/documents/${parts.document.id}/abort-upload`, token, undefined), 200)).toEqual({ id: parts.document.id, deleted: true });
      expect((await rt.endUser(`/documents/${parts.document.id}`, token)).status).toBe(404);

      // Delete: the record and its bytes.
      const doc = await inline(token);
      const key = (await stored(doc))!.blob_key;
      expect(await bytesAt(key)).not.toBeNull();
      expect(await json(await rt.endUser(`/documents/${doc.id}`, token, { method: 'DELETE' }), 200)).toEqual({ id: doc.id, deleted: true });
      expect(await bytesAt(key)).toBeNull();
      expect((await rt.endUser(`/documents/${doc.id}`, token)).status).toBe(404);

      // The sweep: a single upload whose bytes arrived but which was never completed, past its deadline.
      const single = await json<{ document: DocumentOutput; upload: { url: string; headers: Record<string, string> } }>(
        await post('/documents/presign-upload', token, { filename: 's.txt', content_type: 'text/plain', size: 3 }),
        201,
      );
      expect((await fetch(single.upload.url, { method: 'PUT', headers: single.upload.headers, body: 'abc' })).status).toBe(200);
      const kept = await inline(token, { title: 'kept' });
      expect(await rt.runtime.documents.sweepAbandoned()).toBe(0);
      await rt.runtime.database.db.updateTable('documents').set({ upload_expires_at: new Date(Date.now() - 1000) }).where('id', '=', single.document.id).execute();
      expect(await rt.runtime.documents.sweepAbandoned()).toBe(1);
      expect((await rt.endUser(`/documents/${single.document.id}`, token)).status).toBe(404);
      expect(await keysUnder()).toEqual([`${prefix}documents/${kept.id}`]);
      const { deleted, abortedUploads } = await rt.runtime.blobs.deleteByPrefix(`${prefix}documents/`);
      expect({ deleted, abortedUploads }).toEqual({ deleted: 1, abortedUploads: 0 });
    });
  });

  describe('who sees and who changes what', () => {
    it('shows each caller exactly the documents the rule admits, on every read route', async () => {
      const t = await tenant();
      const alice = await t.token();
      const docs = {
        shared: await inline(alice, { title: 'shared' }),
        own: await inline(alice, { title: 'own', visibility: 'self' }),
        leads: await inline(alice, { title: 'leads', allowed_roles: ['lead'] }),
        support: await inline(alice, { title: 'support', allowed_groups: ['support'] }),
      };
      const team = await inline(await t.token({ sub: 'acme:sales:bob', scope: 'acme:sales' }), { title: 'team' });
      const callers: Record<string, Promise<string>> = {
        alice: Promise.resolve(alice),
        'bob (scope acme:sales)': t.token({ sub: 'acme:sales:bob', scope: 'acme:sales' }),
        'carol (acme:sales:carol, herself)': t.token({ sub: 'acme:sales:carol', scope: 'acme:sales:carol' }),
        'dave (manager, scope acme)': t.token({ sub: 'acme:dave', scope: 'acme' }),
        'erin (support, lead)': t.token({ sub: 'acme:support:erin', scope: 'acme:support:erin', roles: ['lead'], groups: ['support'] }),
        'admin (elsewhere)': t.token({ sub: 'acme:it:root', scope: 'acme:it:root', roles: ['admin'] }),
        'alice (scope acme:sales) narrowed to acme:sales:bob': t.token({ scope: 'acme:sales', data_scope: 'acme:sales:bob' }),
      };
      const expected: Record<string, string[]> = {
        alice: ['shared', 'own', 'leads', 'support', 'team'],
        'bob (scope acme:sales)': ['shared', 'team'],
        'carol (acme:sales:carol, herself)': ['team'],
        'dave (manager, scope acme)': ['shared', 'team'],
        'erin (support, lead)': [],
        'admin (elsewhere)': ['shared', 'leads', 'support', 'team'],
        'alice (scope acme:sales) narrowed to acme:sales:bob': ['team'],
      };
      const all = [...Object.values(docs), team];
      for (const [who, tokenPromise] of Object.entries(callers)) {
        const token = await tokenPromise;
        const listed = (await json<{ documents: DocumentOutput[] }>(await rt.endUser('/documents', token), 200)).documents.map((d) => d.title);
        expect(listed.sort(), who).toEqual([...expected[who]!].sort());
        for (const doc of all) {
          const visible = expected[who]!.includes(doc.title);
          expect((await rt.endUser(`/documents/${doc.id}`, token)).status, `${who} GET ${doc.title}`).toBe(visible ? 200 : 404);
          expect((await rt.endUser(`/documents/${doc.id}/download-url`, token)).status, `${who} download ${doc.title}`).toBe(visible ? 200 : 404);
        }
      }
      // Another tenant sees none of them, and the 404 is worded as for a made-up id.
      const other = await (await tenant()).token({ roles: ['admin'] });
      const foreign = await rt.endUser(`/documents/${docs.shared.id}`, other);
      const madeUp = randomUUID();
      const unknown = await rt.endUser(`/documents/${madeUp}`, other);
      expect(foreign.status).toBe(404);
      expect(((await foreign.json()) as { detail: string }).detail).toBe(`document ${docs.shared.id} not found`);
      expect(((await unknown.json()) as { detail: string }).detail).toBe(`document ${madeUp} not found`);
    });

    it('lets only the owner change or delete; a caller who only sees gets 403, one who does not see gets 404 before its body is read', async () => {
      const t = await tenant();
      const alice = await t.token();
      const doc = await inline(alice, { title: 'mine' });
      const hidden = await inline(alice, { title: 'hidden', visibility: 'self' });
      const bob = await t.token({ sub: 'acme:sales:bob', scope: 'acme:sales' });
      const admin = await t.token({ sub: 'acme:it:root', scope: 'acme:it:root', roles: ['admin'] });
      for (const token of [bob, admin]) {
        const patch = await rt.endUser(`/documents/${doc.id}`, token, { method: 'PATCH', body: JSON.stringify({ title: 'theirs' }) });
        expect(patch.status).toBe(403);
        expect(((await patch.json()) as { code: string }).code).toBe('not_owner');
        expect((await rt.endUser(`/documents/${doc.id}`, token, { method: 'DELETE' })).status).toBe(403);
        expect((await post(`/documents/${doc.id}/complete-upload`, token, {})).status).toBe(403);
        // Not visible: 404, even for a body that would not validate.
        expect((await rt.endUser(`/documents/${hidden.id}`, token, { method: 'PATCH', body: JSON.stringify({ title: 42 }) })).status).toBe(404);
      }
      expect((await rt.endUser(`/documents/${doc.id}`, alice, { method: 'PATCH', body: JSON.stringify({ title: 42 }) })).status).toBe(422);
      expect((await rt.endUser(`/documents/${doc.id}`, alice, { method: 'PATCH', body: JSON.stringify({}) })).status).toBe(422);
      const changed = await json<DocumentOutput>(
        await rt.endUser(`/documents/${doc.id}`, alice, { method: 'PATCH', body: JSON.stringify({ title: 'renamed', visibility: 'self', metadata: { v: 2 } }) }),
        200,
      );
      expect(changed).toMatchObject({ title: 'renamed', visibility: 'self', scope: null, metadata: { v: 2 } });
      expect((await rt.endUser(`/documents/${doc.id}`, bob)).status).toBe(404);
      expect((await rt.runtime.database.db.selectFrom('documents').select('title').where('id', '=', doc.id).executeTakeFirstOrThrow()).title).toBe('renamed');
    });

    it('asks for documents:read to read and documents:write to change', async () => {
      const t = await tenant();
      const alice = await t.token();
      const doc = await inline(alice);
      const readOnly = await t.token({ capabilities: ['chat', 'documents:read'] });
      const writeOnly = await t.token({ capabilities: ['documents:write'] });
      const denied = async (response: Response) => {
        expect(response.status).toBe(403);
        expect(((await response.json()) as { code: string }).code).toBe('capability_denied');
      };
      await denied(await post('/documents', readOnly, { text: 'x' }));
      await denied(await post('/documents/presign-upload', readOnly, { filename: 'a.txt', content_type: 'text/plain', size: 1 }));
      await denied(await rt.endUser(`/documents/${doc.id}`, readOnly, { method: 'DELETE' }));
      await denied(await rt.endUser('/documents', writeOnly));
      await denied(await rt.endUser(`/documents/${doc.id}`, writeOnly));
      expect((await rt.endUser(`/documents/${doc.id}`, readOnly)).status).toBe(200);
    });

    it('is erased with its tenant: rows and bytes', async () => {
      const t = await tenant();
      const alice = await t.token();
      const doc = await inline(alice);
      const key = (await stored(doc))!.blob_key;
      const erased = await rt.admin(`/tenants/${t.tenantId}`, { method: 'DELETE' });
      expect(erased.status, await erased.clone().text()).toBe(200);
      expect(await stored(doc)).toBeUndefined();
      expect(await bytesAt(key)).toBeNull();
    });
  });
});
