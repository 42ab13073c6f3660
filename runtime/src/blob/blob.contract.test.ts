// One contract for every blob store adapter: the filesystem store behind a real HTTP server for its signed URLs,
// and the S3 store against a real MinIO.
import express from 'express';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorHandler } from '@agentplane/lib/http/errors';
import { silentLogger } from '@agentplane/lib/logging';
import { startMinio, type MinioServer } from '@agentplane/test/harness/minio';
import { freePort, makeTempDir, requireBinary } from '@agentplane/test/harness/process';
import {
  BLOB_ROUTE_PATH,
  BlobUrlSigner,
  FsBlobStore,
  MIN_PART_SIZE,
  createBlobStore,
  createSignedBlobRouter,
  type BlobStore,
  type BlobStoreConfig,
} from './index.js';

interface ContractTarget {
  store: BlobStore;
  /** A store of the same kind whose backend is gone. */
  unreachable: BlobStore;
}

const MiB = 1024 * 1024;

/** A fresh namespace per test, so tests sharing one store never see each other's keys. */
const namespace = () => `t-${randomUUID()}/`;

async function read(store: BlobStore, key: string): Promise<string> {
  return (await buffer((await store.get(key)).body)).toString();
}

/** A stream that sends some bytes, then fails the way a client that disconnects mid-upload does. */
function failingStream(): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(Buffer.alloc(64 * 1024, 'x'));
      } else {
        this.destroy(new Error('client went away'));
      }
    },
  });
}

async function putThrough(url: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'PUT', body, headers });
}

/** A PUT whose body is sent in chunks without a Content-Length, as a client streaming a file does. */
async function streamThrough(url: string, chunks: Buffer[]): Promise<Response> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  return fetch(url, { method: 'PUT', body, duplex: 'half' });
}

/** Starts a multipart upload and sends its one part through a presigned URL. */
async function startUpload(store: BlobStore, key: string, part: string) {
  const { uploadId } = await store.createMultipartUpload(key);
  const response = await putThrough(await store.presignPart(key, uploadId, 1, { expiresInSeconds: 60 }), part);
  return { key, uploadId, parts: [{ partNumber: 1, etag: response.headers.get('etag') ?? '' }] };
}

function blobStoreContract(name: string, target: () => ContractTarget) {
  describe(`blob store contract: ${name}`, () => {
    const store = () => target().store;

    it('stores a Buffer, a string and a stream, keeping content type and size', async () => {
      const ns = namespace();
      const bytes = randomBytes(1000);
      expect(await store().put(`${ns}buffer.bin`, bytes, { contentType: 'application/octet-stream' })).toEqual({
        key: `${ns}buffer.bin`,
        size: 1000,
      });
      expect(await store().put(`${ns}text.txt`, 'héllo', { contentType: 'text/plain; charset=utf-8' })).toEqual({
        key: `${ns}text.txt`,
        size: 6,
      });
      const streamed = await store().put(`${ns}stream.json`, Readable.from(['{"a":', Buffer.from('1}')]), {
        contentType: 'application/json',
      });
      expect(streamed.size).toBe(7);

      const buffered = await store().get(`${ns}buffer.bin`);
      expect(buffered).toMatchObject({ size: 1000, contentType: 'application/octet-stream' });
      expect((await buffer(buffered.body)).equals(bytes)).toBe(true);
      const text = await store().get(`${ns}text.txt`);
      expect(text).toMatchObject({ size: 6, contentType: 'text/plain; charset=utf-8' });
      expect((await buffer(text.body)).toString()).toBe('héllo');
      const streamedBack = await store().get(`${ns}stream.json`);
      expect(streamedBack).toMatchObject({ size: 7, contentType: 'application/json' });
      expect((await buffer(streamedBack.body)).toString()).toBe('{"a":1}');
    });

    it('stores a stream longer than one upload part whole', async () => {
      const key = `${namespace()}big.bin`;
      const chunk = randomBytes(MiB);
      const chunks = [...Array.from({ length: 8 }, () => chunk), Buffer.from('tail')];
      expect((await store().put(key, Readable.from(chunks))).size).toBe(8 * MiB + 4);
      const stored = await buffer((await store().get(key)).body);
      expect(stored.equals(Buffer.concat(chunks))).toBe(true);
    });

    it('keeps the previous object when an upload fails midway', async () => {
      const ns = namespace();
      await store().put(`${ns}kept`, 'v1');
      await expect(store().put(`${ns}kept`, failingStream())).rejects.toThrow('client went away');
      await expect(store().put(`${ns}new`, failingStream())).rejects.toThrow('client went away');
      expect(await read(store(), `${ns}kept`)).toBe('v1');
      expect(await store().exists(`${ns}new`)).toBe(false);
    });

    it('answers not_found for a missing key, and exists says whether a key is there', async () => {
      const key = `${namespace()}missing`;
      await expect(store().get(key)).rejects.toMatchObject({ kind: 'not_found' });
      expect(await store().exists(key)).toBe(false);
      expect(await store().head(key)).toBeNull();
      await store().put(key, 'now here', { contentType: 'text/plain' });
      expect(await store().exists(key)).toBe(true);
      expect(await store().head(key)).toEqual({ size: 8, contentType: 'text/plain', etag: expect.stringMatching(/^"[0-9a-f]{32}"$/) });
    });

    it('deletes idempotently', async () => {
      const key = `${namespace()}doomed`;
      await store().put(key, 'x');
      await store().delete(key);
      await store().delete(key);
      expect(await store().exists(key)).toBe(false);
      // A key may later take the name of a directory that deleting emptied.
      await store().put(`${key}/child`, 'y');
      await store().delete(`${key}/child`);
      await store().put(key, 'back');
      expect(await read(store(), key)).toBe('back');
    });

    it('deletes by prefix exactly the keys that start with it, and counts them', async () => {
      const ns = namespace();
      for (const key of ['a/b/1', 'a/b/deep/2', 'a/bc', 'other/x']) await store().put(ns + key, key);

      expect(await store().deleteByPrefix(`${ns}a/b/`)).toEqual({ deleted: 2, abortedUploads: 0 });
      expect(await store().exists(`${ns}a/b/1`)).toBe(false);
      expect(await store().exists(`${ns}a/b/deep/2`)).toBe(false);
      expect(await store().exists(`${ns}a/bc`)).toBe(true);

      // Without a trailing slash the prefix is a plain string prefix, as in S3.
      expect(await store().deleteByPrefix(`${ns}a/b`)).toEqual({ deleted: 1, abortedUploads: 0 });
      expect(await store().exists(`${ns}a/bc`)).toBe(false);
      expect(await store().deleteByPrefix(`${ns}a/`)).toEqual({ deleted: 0, abortedUploads: 0 });
      expect(await read(store(), `${ns}other/x`)).toBe('other/x');
      expect(await store().deleteByPrefix(ns)).toEqual({ deleted: 1, abortedUploads: 0 });
    });

    it('aborts the multipart uploads in progress under a deleted prefix, and only those', async () => {
      const [erased, kept] = [namespace(), namespace()];
      const doomed = await startUpload(store(), `${erased}deep/doc`, 'part');
      await store().createMultipartUpload(`${erased}no-parts-yet`);
      const survivor = await startUpload(store(), `${kept}doc`, 'part');

      expect(await store().deleteByPrefix(erased)).toEqual({ deleted: 0, abortedUploads: 2 });
      await expect(store().completeMultipartUpload(doomed.key, doomed.uploadId, doomed.parts)).rejects.toMatchObject({
        kind: 'not_found',
      });
      expect(await store().completeMultipartUpload(survivor.key, survivor.uploadId, survivor.parts)).toEqual({ size: 4 });
    });

    it('takes keys with spaces, unicode and URL-special characters, also through presigned URLs', async () => {
      const key = `${namespace()}my files/résumé ✓ 文件 a+b%20c?d#e&f=g.txt`;
      await store().put(key, 'unicode', { contentType: 'text/plain' });
      expect(await read(store(), key)).toBe('unicode');
      const response = await fetch(await store().presignGet(key, { expiresInSeconds: 60 }));
      expect(response.status).toBe(200);
      expect(await response.text()).toBe('unicode');
      const upload = await putThrough(await store().presignPut(key, { expiresInSeconds: 60 }), 'replaced');
      expect(upload.status).toBe(200);
      expect(await read(store(), key)).toBe('replaced');
    });

    it('refuses keys that are not relative paths of plain segments', async () => {
      for (const key of ['', '../x', 'a/../../x', '/etc/passwd', './x', 'a//b', 'a/', 'a\0b', 'x'.repeat(1025)]) {
        await expect(store().put(key, 'x'), JSON.stringify(key)).rejects.toMatchObject({ kind: 'invalid_argument' });
        await expect(store().get(key)).rejects.toMatchObject({ kind: 'invalid_argument' });
        await expect(store().delete(key)).rejects.toMatchObject({ kind: 'invalid_argument' });
        await expect(store().presignGet(key, { expiresInSeconds: 60 })).rejects.toMatchObject({ kind: 'invalid_argument' });
      }
      await expect(store().deleteByPrefix('../')).rejects.toMatchObject({ kind: 'invalid_argument' });
    });

    it('serves a presigned GET with content type and length, and refuses it once expired', async () => {
      const key = `${namespace()}report.csv`;
      await store().put(key, 'a,b\n1,2\n', { contentType: 'text/csv' });
      const response = await fetch(await store().presignGet(key, { expiresInSeconds: 60 }));
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/csv');
      expect(response.headers.get('content-length')).toBe('8');
      expect(await response.text()).toBe('a,b\n1,2\n');

      const expiring = await store().presignGet(key, { expiresInSeconds: 1 });
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      expect((await fetch(expiring)).status).toBe(403);
    });

    it('takes an upload through a presigned PUT only with the signed content type', async () => {
      const key = `${namespace()}upload.json`;
      const url = await store().presignPut(key, { expiresInSeconds: 60, contentType: 'application/json' });
      expect((await putThrough(url, '<html>', { 'content-type': 'text/html' })).status).toBe(403);
      expect((await putThrough(url, '{"ok":false}')).status).toBe(403);
      expect(await store().exists(key)).toBe(false);
      const response = await putThrough(url, '{"ok":true}', { 'content-type': 'application/json' });
      expect(response.status).toBe(200);
      expect(response.headers.get('etag')).toMatch(/^"[0-9a-f]{32}"$/);
      const stored = await store().get(key);
      expect(stored).toMatchObject({ size: 11, contentType: 'application/json' });
      expect((await buffer(stored.body)).toString()).toBe('{"ok":true}');
    });

    it('takes a create-only presigned PUT once: then 412 while the key holds an object, and none without If-None-Match', async () => {
      const key = `${namespace()}staged.txt`;
      const url = await store().presignPut(key, { expiresInSeconds: 60, contentType: 'text/plain', ifNoneMatch: true });
      const headers = { 'content-type': 'text/plain', 'if-none-match': '*' };
      // A header the URL signed, left out: S3 and the fs store answer 403, MinIO 400 (AccessDenied, unsigned headers).
      const unconditional = await putThrough(url, 'no condition', { 'content-type': 'text/plain' });
      expect([400, 403]).toContain(unconditional.status);
      expect(await store().exists(key)).toBe(false);

      const first = await putThrough(url, 'checked bytes', headers);
      expect(first.status).toBe(200);
      expect((await store().head(key))?.etag).toBe(first.headers.get('etag'));
      const second = await putThrough(url, 'replaced bytes, larger than the first', headers);
      expect(second.status).toBe(412);
      expect(await read(store(), key)).toBe('checked bytes');

      // The store's own writes replace it (a tombstone), and the URL still creates nothing over that.
      await store().put(key, Buffer.alloc(0));
      expect((await putThrough(url, 'after the tombstone', headers)).status).toBe(412);
      expect(await read(store(), key)).toBe('');
      // Emptied by the store, the key takes the URL's upload again.
      await store().delete(key);
      expect((await putThrough(url, 'again', headers)).status).toBe(200);
      expect(await read(store(), key)).toBe('again');
    });

    it('lets exactly one of concurrent create-only PUTs land, and keeps its bytes', async () => {
      const key = `${namespace()}raced.txt`;
      const url = await store().presignPut(key, { expiresInSeconds: 60, contentType: 'text/plain', ifNoneMatch: true });
      const bodies = Array.from({ length: 6 }, (_, i) => `upload number ${i} `.repeat(1000));
      const answers = await Promise.all(bodies.map((body) => putThrough(url, body, { 'content-type': 'text/plain', 'if-none-match': '*' })));
      const landed = answers.flatMap((answer, i) => (answer.status === 200 ? [i] : []));
      expect(landed).toHaveLength(1);
      expect(answers.filter((answer) => answer.status !== 200).map((answer) => answer.status)).toEqual(Array(5).fill(412));
      expect(await read(store(), key)).toBe(bodies[landed[0]!]);
      expect((await store().head(key))?.etag).toBe(answers[landed[0]!]!.headers.get('etag'));
    });

    it('copies an object inside the store with its content type, only while the source has the ETag named', async () => {
      const from = `${namespace()}staging/upload`;
      const to = `${namespace()}documents/doc`;
      await store().put(from, 'first version', { contentType: 'text/markdown' });
      const head = await store().head(from);
      expect(head).toMatchObject({ size: 13, contentType: 'text/markdown', etag: expect.stringMatching(/^"[0-9a-f]{32}"$/) });
      expect(await store().copy(from, to, { ifMatch: head!.etag })).toEqual({ size: 13 });
      expect(await store().head(to)).toMatchObject({ size: 13, contentType: 'text/markdown' });
      expect(await read(store(), to)).toBe('first version');

      await store().put(from, 'second version', { contentType: 'text/markdown' });
      await expect(store().copy(from, to, { ifMatch: head!.etag })).rejects.toMatchObject({ kind: 'precondition_failed' });
      expect(await read(store(), to)).toBe('first version');
      await expect(store().copy(`${namespace()}missing`, to)).rejects.toMatchObject({ kind: 'not_found' });
    });

    it('joins the parts of a multipart upload sent through presigned URLs', async () => {
      const key = `${namespace()}video.mp4`;
      const parts = [randomBytes(MIN_PART_SIZE), randomBytes(1234)];
      const { uploadId } = await store().createMultipartUpload(key, { contentType: 'video/mp4' });
      const uploaded = [];
      for (const [index, part] of parts.entries()) {
        const url = await store().presignPart(key, uploadId, index + 1, { expiresInSeconds: 60 });
        const response = await putThrough(url, part);
        expect(response.status).toBe(200);
        uploaded.push({ partNumber: index + 1, etag: response.headers.get('etag') ?? '' });
      }
      expect(await store().exists(key)).toBe(false);

      expect(await store().completeMultipartUpload(key, uploadId, uploaded)).toEqual({ size: MIN_PART_SIZE + 1234 });
      const stored = await store().get(key);
      expect(stored).toMatchObject({ size: MIN_PART_SIZE + 1234, contentType: 'video/mp4' });
      expect((await buffer(stored.body)).equals(Buffer.concat(parts))).toBe(true);
    });

    it('refuses to complete with parts S3 would refuse', async () => {
      const key = `${namespace()}parts`;
      const { uploadId } = await store().createMultipartUpload(key);
      const etags: string[] = [];
      for (const partNumber of [1, 2]) {
        const url = await store().presignPart(key, uploadId, partNumber, { expiresInSeconds: 60 });
        etags.push((await putThrough(url, `part ${partNumber}`)).headers.get('etag') ?? '');
      }
      const wrongEtag = [{ partNumber: 1, etag: `"${'0'.repeat(32)}"` }];
      await expect(store().completeMultipartUpload(key, uploadId, wrongEtag)).rejects.toMatchObject({
        kind: 'invalid_argument',
      });
      const tooSmall = etags.map((etag, index) => ({ partNumber: index + 1, etag }));
      await expect(store().completeMultipartUpload(key, uploadId, tooSmall)).rejects.toMatchObject({
        kind: 'invalid_argument',
      });
      expect(await store().exists(key)).toBe(false);
      await store().abortMultipartUpload(key, uploadId);
    });

    it('forgets an aborted multipart upload', async () => {
      const key = `${namespace()}abandoned`;
      const { uploadId } = await store().createMultipartUpload(key);
      const url = await store().presignPart(key, uploadId, 1, { expiresInSeconds: 60 });
      const etag = (await putThrough(url, 'part')).headers.get('etag') ?? '';

      await store().abortMultipartUpload(key, uploadId);
      await store().abortMultipartUpload(key, uploadId);
      await expect(store().completeMultipartUpload(key, uploadId, [{ partNumber: 1, etag }])).rejects.toMatchObject({
        kind: 'not_found',
      });
      expect((await putThrough(url, 'late part')).status).toBe(404);
      expect(await store().exists(key)).toBe(false);
    });

    it('answers ping while the store is up, and fails it when the store is gone', async () => {
      await expect(store().ping()).resolves.toBeUndefined();
      await expect(target().unreachable.ping()).rejects.toMatchObject({ kind: 'unavailable' });
    });
  });
}

// --- the filesystem store, with its signed URLs served over real HTTP ------------------------------------------

function fsConfig(root: string, port: number, maxUploadBytes?: number): BlobStoreConfig {
  return {
    kind: 'fs',
    root,
    publicBaseUrl: `http://127.0.0.1:${port}`,
    signingSecret: randomBytes(32).toString('hex'),
    maxUploadBytes,
  };
}

interface ServedFsStore {
  store: FsBlobStore;
  root: string;
  stop(): Promise<void>;
}

/** An fs store in a fresh root, its signed URLs served as the app serves them: the router, then the error handler. */
async function serveFsStore(options: { maxUploadBytes?: number } = {}): Promise<ServedFsStore> {
  const root = makeTempDir('blobs');
  const port = await freePort();
  const store = await createBlobStore(fsConfig(root, port, options.maxUploadBytes));
  if (!(store instanceof FsBlobStore)) throw new Error('expected the filesystem store');
  const app = express();
  app.use(BLOB_ROUTE_PATH, createSignedBlobRouter({ store }));
  app.use(errorHandler(silentLogger()));
  const server = app.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return {
    store,
    root,
    stop: async () => {
      try {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await store.close();
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}

let fsTarget: ContractTarget & { root: string };
let fsServed: ServedFsStore;

describe('fs blob store', () => {
  beforeAll(async () => {
    fsServed = await serveFsStore();
    const goneRoot = makeTempDir('blobs-gone');
    const unreachable = await createBlobStore(fsConfig(goneRoot, 1));
    rmSync(goneRoot, { recursive: true, force: true });
    fsTarget = { store: fsServed.store, unreachable, root: fsServed.root };
  });

  afterAll(async () => {
    await fsServed?.stop();
  });

  blobStoreContract('fs', () => fsTarget);

  it('refuses a presigned URL whose signature, method or key was changed', async () => {
    const { store } = fsTarget;
    const key = `${namespace()}secret.txt`;
    await store.put(key, 'secret');
    const url = new URL(await store.presignGet(key, { expiresInSeconds: 60 }));

    const tampered = new URL(url);
    const sig = tampered.searchParams.get('sig') ?? '';
    const middle = Math.floor(sig.length / 2);
    tampered.searchParams.set('sig', `${sig.slice(0, middle)}${sig[middle] === 'A' ? 'B' : 'A'}${sig.slice(middle + 1)}`);
    const refused = await fetch(tampered);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ detail: expect.any(String) });

    // The last character of a base64url HMAC carries padding bits: another spelling of it must not verify.
    const respelled = new URL(url);
    const last = sig.at(-1)!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sameBits = alphabet[(alphabet.indexOf(last) & ~3) + ((alphabet.indexOf(last) + 1) & 3)]!;
    respelled.searchParams.set('sig', `${sig.slice(0, -1)}${sameBits}`);
    expect((await fetch(respelled)).status).toBe(403);

    const otherKey = new URL(url);
    otherKey.pathname = otherKey.pathname.replace('secret.txt', 'other.txt');
    expect((await fetch(otherKey)).status).toBe(403);

    const unsigned = new URL(url);
    unsigned.search = '';
    expect((await fetch(unsigned)).status).toBe(403);

    expect((await putThrough(url.toString(), 'overwritten')).status).toBe(403);
    expect(await read(store, key)).toBe('secret');

    // A create-only upload URL stripped of its condition is not a plain upload URL: its signature no longer holds.
    const createOnly = new URL(await store.presignPut(key, { expiresInSeconds: 60, ifNoneMatch: true }));
    createOnly.searchParams.delete('ifNoneMatch');
    expect((await putThrough(createOnly.toString(), 'overwritten')).status).toBe(403);
    expect(await read(store, key)).toBe('secret');
  });

  it('answers 404 with a detail for a signed URL to a missing key', async () => {
    const url = await fsTarget.store.presignGet(`${namespace()}never-written`, { expiresInSeconds: 60 });
    const response = await fetch(url);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ detail: expect.any(String) });
  });

  it('leaves no partial file behind when an upload fails', async () => {
    await expect(fsTarget.store.put(`${namespace()}partial`, failingStream())).rejects.toThrow('client went away');
    expect(readdirSync(join(fsTarget.root, 'tmp'))).toEqual([]);
  });

  it('removes the staged parts once an upload completes, is aborted or its prefix is deleted', async () => {
    const { store } = fsTarget;
    const ns = namespace();
    for (const ending of ['complete', 'abort', 'erase'] as const) {
      const { key, uploadId, parts } = await startUpload(store, `${ns}${ending}/file`, ending);
      expect(readdirSync(join(fsTarget.root, 'uploads', uploadId))).toEqual(['1', 'upload.json']);
      if (ending === 'complete') await store.completeMultipartUpload(key, uploadId, parts);
      else if (ending === 'abort') await store.abortMultipartUpload(key, uploadId);
      else await store.deleteByPrefix(`${ns}${ending}/`);
      expect(readdirSync(join(fsTarget.root, 'uploads'))).not.toContain(uploadId);
    }
    expect(await read(store, `${ns}complete/file`)).toBe('complete');
  });

  it('serves stored files so that a browser never runs them as part of the API', async () => {
    const { store } = fsTarget;
    const ns = namespace();
    // name, stored type, expected disposition, expected Content-Type as served
    const cases: [string, string | undefined, string | null, string][] = [
      ['page.html', 'text/html; charset=utf-8', 'attachment', 'text/html; charset=utf-8'],
      ['drawing.svg', 'image/svg+xml', 'attachment', 'image/svg+xml'],
      ['script.js', 'text/javascript', 'attachment', 'text/javascript'],
      ['untyped', undefined, 'attachment', 'application/octet-stream'],
      // Browsers take the last type of a list: this must not pass as an image.
      ['listed', 'image/png, text/html', 'attachment', 'application/octet-stream'],
      ['photo.png', 'image/png', null, 'image/png'],
      ['notes.txt', 'Text/Plain; charset=utf-8', null, 'text/plain'],
      ['data.json', 'application/json', null, 'application/json'],
      ['paper.pdf', 'application/pdf', null, 'application/pdf'],
      ['clip.mp4', 'video/mp4', null, 'video/mp4'],
    ];
    for (const [name, contentType, disposition, served] of cases) {
      await store.put(ns + name, '<script>alert(document.cookie)</script>', { contentType });
      const response = await fetch(await store.presignGet(ns + name, { expiresInSeconds: 60 }));
      expect(response.status).toBe(200);
      expect(response.headers.get('content-disposition'), name).toBe(disposition);
      expect(response.headers.get('content-type'), name).toBe(served);
      expect(response.headers.get('x-content-type-options'), name).toBe('nosniff');
      expect(response.headers.get('content-security-policy'), name).toBe("sandbox; default-src 'none'");
      await response.body?.cancel();
    }
  });

  it('erases past a torn upload record or a stray file under uploads/', async () => {
    const { store } = fsTarget;
    const ns = namespace();
    mkdirSync(join(fsTarget.root, 'uploads', 'torn-record'));
    writeFileSync(join(fsTarget.root, 'uploads', 'torn-record', 'upload.json'), '{"key": "ten');
    writeFileSync(join(fsTarget.root, 'uploads', 'stray-file'), 'not an upload');
    await store.put(`${ns}doc`, 'bytes');
    expect(await store.deleteByPrefix(ns)).toMatchObject({ deleted: 1 });
    rmSync(join(fsTarget.root, 'uploads', 'torn-record'), { recursive: true });
    rmSync(join(fsTarget.root, 'uploads', 'stray-file'));
  });

  it('sweeps temp files and multipart uploads left untouched for longer than the threshold', async () => {
    // Its own root: a sweep with a tiny threshold would take the shared store's uploads in flight.
    const root = makeTempDir('blobs-sweep');
    const signer = new BlobUrlSigner({ secret: randomBytes(32).toString('hex'), publicBaseUrl: 'http://127.0.0.1:1' });
    const store = new FsBlobStore({ root, signer });
    try {
      await store.put('kept', 'object');
      writeFileSync(join(root, 'tmp', 'left-by-a-crash'), 'half');
      const { uploadId } = await store.createMultipartUpload('abandoned');
      await store.receivePart('abandoned', uploadId, 1, Readable.from(['part']));

      expect(await store.sweep()).toEqual({ removed: 0 });
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(await store.sweep(10)).toEqual({ removed: 2 });
      expect(readdirSync(join(root, 'tmp'))).toEqual([]);
      expect(readdirSync(join(root, 'uploads'))).toEqual([]);
      expect(await read(store, 'kept')).toBe('object');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('fs blob store with an upload cap', () => {
  const cap = 1024;
  let capped: ServedFsStore;

  beforeAll(async () => {
    capped = await serveFsStore({ maxUploadBytes: cap });
  });

  afterAll(async () => {
    await capped?.stop();
  });

  it('refuses a signed upload that declares more than the cap, and takes one of exactly the cap', async () => {
    const key = `${namespace()}big`;
    const url = await capped.store.presignPut(key, { expiresInSeconds: 60 });
    const refused = await putThrough(url, Buffer.alloc(cap + 1));
    expect(refused.status).toBe(413);
    expect(await refused.json()).toMatchObject({ detail: expect.any(String) });
    expect(await capped.store.exists(key)).toBe(false);
    expect((await putThrough(url, Buffer.alloc(cap))).status).toBe(200);
  });

  it('refuses a streamed object or part once it passes the cap, and keeps none of it', async () => {
    const ns = namespace();
    const { uploadId } = await capped.store.createMultipartUpload(`${ns}parts`);
    const urls = [
      await capped.store.presignPut(`${ns}whole`, { expiresInSeconds: 60 }),
      await capped.store.presignPart(`${ns}parts`, uploadId, 1, { expiresInSeconds: 60 }),
    ];
    for (const url of urls) {
      const refused = await streamThrough(url, Array.from({ length: 8 }, () => Buffer.alloc(cap / 4, 'x')));
      expect(refused.status).toBe(413);
      expect(await refused.json()).toMatchObject({ detail: expect.any(String) });
    }
    expect(await capped.store.exists(`${ns}whole`)).toBe(false);
    expect(readdirSync(join(capped.root, 'tmp'))).toEqual([]);
    expect(readdirSync(join(capped.root, 'uploads', uploadId))).toEqual(['upload.json']);
    // The connection that carried a refused body is not reused mid-body; the next upload goes through.
    expect((await streamThrough(urls[0]!, [Buffer.alloc(cap / 2, 'y')])).status).toBe(200);
  });
});

// --- the S3 store against a real MinIO ----------------------------------------------------------------------------

const minioBinary = requireBinary('minio');

describe.skipIf(minioBinary === null)('s3 blob store', () => {
  let minio: MinioServer;
  let s3Target: ContractTarget;
  /** Every store made here, closed after. */
  const stores: BlobStore[] = [];

  const s3Store = async (prefix?: string, endpoint = minio.endpoint): Promise<BlobStore> => {
    const store = await createBlobStore({
      kind: 's3',
      endpoint,
      bucket: minio.bucket,
      region: minio.region,
      accessKeyId: minio.accessKeyId,
      secretAccessKey: minio.secretAccessKey,
      forcePathStyle: true,
      prefix,
    });
    stores.push(store);
    return store;
  };

  beforeAll(async () => {
    minio = await startMinio(minioBinary ?? 'minio');
    const deadEndpoint = `http://127.0.0.1:${await freePort()}`;
    s3Target = { store: await s3Store('contract'), unreachable: await s3Store('contract', deadEndpoint) };
  });

  afterAll(async () => {
    try {
      await Promise.all(stores.map((store) => store.close()));
    } finally {
      await minio?.stop();
    }
  });

  blobStoreContract('s3', () => s3Target);

  it('keeps stores with different key prefixes apart on one bucket', async () => {
    const tenantA = await s3Store('tenant-a');
    const tenantB = await s3Store('tenant-b/');
    const whole = await s3Store();

    await tenantA.put('shared/name.txt', 'from a');
    await tenantB.put('shared/name.txt', 'from b');
    expect(await read(tenantA, 'shared/name.txt')).toBe('from a');
    expect(await read(tenantB, 'shared/name.txt')).toBe('from b');
    expect(await read(whole, 'tenant-a/shared/name.txt')).toBe('from a');
    await tenantB.put('only-b.txt', 'b');
    expect(await tenantA.exists('only-b.txt')).toBe(false);

    expect(await tenantA.deleteByPrefix('')).toEqual({ deleted: 1, abortedUploads: 0 });
    expect(await tenantA.exists('shared/name.txt')).toBe(false);
    expect(await read(tenantB, 'shared/name.txt')).toBe('from b');
    expect(await tenantB.exists('only-b.txt')).toBe(true);
  });

  it('releases its connections on close', async () => {
    const store = await s3Store('closing');
    const opened: Socket[] = [];
    const onSocket = (message: unknown) => opened.push((message as { socket: Socket }).socket);
    subscribe('net.client.socket', onSocket);
    try {
      await store.put('x', 'kept alive');
    } finally {
      unsubscribe('net.client.socket', onSocket);
    }
    expect(opened.some((socket) => !socket.destroyed)).toBe(true);
    await store.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(opened.every((socket) => socket.destroyed)).toBe(true);
  });
});
