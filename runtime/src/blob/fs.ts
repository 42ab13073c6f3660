// The embedded blob store: objects as files under one root directory, written atomically, with presigned
// URLs that the runtime serves itself (signed-urls.ts).
import { createHash, randomUUID } from 'node:crypto';
import { constants, createReadStream, createWriteStream, mkdirSync } from 'node:fs';
import { access, link, mkdir, open, readdir, readFile, rename, rm, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, conflict, invalidArgument, notFound, unavailable } from '@agentplane/lib/errors';
import {
  MAX_UPLOAD_BYTES,
  MIN_PART_SIZE,
  assertBlobKey,
  assertBlobPrefix,
  assertCompletionParts,
  assertPartNumber,
  assertPresignExpiry,
  bareEtag,
  type BlobBody,
  type BlobHead,
  type BlobStore,
  type StoredBlob,
  type UploadedPart,
} from './port.js';
import type { BlobUrlSigner } from './signed-urls.js';

/** What `meta/` keeps of an object; `etag` is absent for objects written before it was kept. */
interface ObjectMeta {
  contentType?: string;
  etag?: string;
}

interface UploadRecord {
  key: string;
  contentType?: string;
}

const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DAY_MS = 24 * 3600 * 1000;

/**
 * Layout under `root`: `objects/<key>` holds the bytes; `meta/<hash of key>` the content type and ETag (hashed so that
 * metadata can never collide with the object tree); `uploads/<uploadId>/` stages multipart parts; `tmp/`
 * holds files being written, renamed into place only once complete.
 */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs' as const;
  readonly signer: BlobUrlSigner;
  /** The largest upload a signed URL takes, whole object or one part. */
  readonly maxUploadBytes: number;
  private readonly objects: string;
  private readonly meta: string;
  private readonly uploads: string;
  private readonly tmp: string;

  constructor(options: { root: string; signer: BlobUrlSigner; maxUploadBytes?: number }) {
    const root = resolve(options.root);
    this.signer = options.signer;
    this.maxUploadBytes = options.maxUploadBytes ?? MAX_UPLOAD_BYTES;
    this.objects = join(root, 'objects');
    this.meta = join(root, 'meta');
    this.uploads = join(root, 'uploads');
    this.tmp = join(root, 'tmp');
    for (const dir of [this.objects, this.meta, this.uploads, this.tmp]) mkdirSync(dir, { recursive: true });
  }

  async put(key: string, body: BlobBody, options: { contentType?: string } = {}): Promise<{ key: string; size: number }> {
    assertBlobKey(key);
    const staged = await this.stage(body instanceof Readable ? body : Readable.from([Buffer.from(body)]));
    await this.commit(key, staged.path, { contentType: options.contentType, etag: `"${staged.md5}"` });
    return { key, size: staged.size };
  }

  /**
   * Stores an upload sent to a signed URL, and returns the ETag S3 would answer (the quoted MD5 of the bytes). With
   * `ifNoneMatch` it only creates: while the key holds an object it is `precondition_failed`, as S3 answers.
   */
  async receive(
    key: string,
    body: Readable,
    options: { contentType?: string; ifNoneMatch?: boolean } = {},
  ): Promise<{ size: number; etag: string }> {
    assertBlobKey(key);
    // Refused before a byte is read; the link below decides a race between two uploads that both got here.
    if (options.ifNoneMatch && (await this.exists(key))) throw keyExists(key);
    const staged = await this.stage(body, this.maxUploadBytes);
    const meta = { contentType: options.contentType, etag: `"${staged.md5}"` };
    if (options.ifNoneMatch) await this.commitNew(key, staged.path, meta);
    else await this.commit(key, staged.path, meta);
    return { size: staged.size, etag: meta.etag };
  }

  /** Refuses a signed upload that declares more than `maxUploadBytes`, before any of it is read. */
  assertUploadFits(declaredBytes: number): void {
    if (declaredBytes > this.maxUploadBytes) throw uploadTooLarge(this.maxUploadBytes);
  }

  async get(key: string): Promise<StoredBlob> {
    assertBlobKey(key);
    const handle = await open(this.objectPath(key), 'r').catch((error: unknown) => {
      throw isMissing(error) ? notFound(`blob ${JSON.stringify(key)} not found`) : error;
    });
    // Once open, the bytes stay readable even if the key is deleted or replaced meanwhile.
    const info = await handle.stat();
    if (!info.isFile()) {
      await handle.close();
      throw notFound(`blob ${JSON.stringify(key)} not found`);
    }
    const { contentType } = await this.readMeta(key);
    return { body: handle.createReadStream(), size: info.size, contentType };
  }

  async head(key: string): Promise<BlobHead | null> {
    assertBlobKey(key);
    const info = await stat(this.objectPath(key)).catch((error: unknown) => {
      if (isMissing(error)) return null;
      throw error;
    });
    if (!info?.isFile()) return null;
    const meta = await this.readMeta(key);
    // An object kept before ETags were, or read in the instant between a create-only upload's link and its meta.
    const etag = meta.etag ?? `"${await this.md5Of(key)}"`;
    return { size: info.size, contentType: meta.contentType, etag };
  }

  async copy(fromKey: string, toKey: string, options: { ifMatch?: string } = {}): Promise<{ size: number }> {
    assertBlobKey(fromKey);
    assertBlobKey(toKey);
    const source = await this.get(fromKey);
    const staged = await this.stage(source.body);
    // The MD5 of the bytes copied, not of the source as it was a moment ago: what lands is exactly what matched.
    if (options.ifMatch !== undefined && staged.md5 !== bareEtag(options.ifMatch)) {
      await rm(staged.path, { force: true });
      throw sourceChanged(fromKey);
    }
    await this.commit(toKey, staged.path, { contentType: source.contentType, etag: `"${staged.md5}"` });
    return { size: staged.size };
  }

  async exists(key: string): Promise<boolean> {
    assertBlobKey(key);
    const info = await stat(this.objectPath(key)).catch((error: unknown) => {
      if (isMissing(error)) return null;
      throw error;
    });
    return info?.isFile() ?? false;
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    await this.unlinkObject(key);
    await this.pruneEmptyDirs(dirname(this.objectPath(key)));
  }

  async deleteByPrefix(prefix: string): Promise<{ deleted: number; abortedUploads: number }> {
    assertBlobPrefix(prefix);
    // Uploads first, so none completes into the prefix once its objects are gone.
    let abortedUploads = 0;
    for (const uploadId of await readdir(this.uploads)) {
      if (!(await this.readUpload(uploadId))?.key.startsWith(prefix)) continue;
      await rm(join(this.uploads, uploadId), { recursive: true, force: true });
      abortedUploads += 1;
    }
    // `a/b/c` lists directory `a/b/` and takes the entries whose names start with `c`, like S3's string prefix.
    const cut = prefix.lastIndexOf('/') + 1;
    return { deleted: await this.deleteUnder(prefix.slice(0, cut), prefix.slice(cut)), abortedUploads };
  }

  async presignGet(key: string, options: { expiresInSeconds: number }): Promise<string> {
    assertBlobKey(key);
    assertPresignExpiry(options.expiresInSeconds);
    return this.signer.url({ method: 'GET', key }, options.expiresInSeconds);
  }

  async presignPut(key: string, options: { expiresInSeconds: number; contentType?: string; ifNoneMatch?: boolean }): Promise<string> {
    assertBlobKey(key);
    assertPresignExpiry(options.expiresInSeconds);
    const grant = { method: 'PUT' as const, key, contentType: options.contentType, ...(options.ifNoneMatch ? { ifNoneMatch: true } : {}) };
    return this.signer.url(grant, options.expiresInSeconds);
  }

  async createMultipartUpload(key: string, options: { contentType?: string } = {}): Promise<{ uploadId: string }> {
    assertBlobKey(key);
    const uploadId = randomUUID();
    const record: UploadRecord = { key, contentType: options.contentType };
    await mkdir(join(this.uploads, uploadId));
    // Temp file then rename: a crash mid-write must not leave a half record that every erase then trips over.
    const recordPath = join(this.uploads, uploadId, 'upload.json');
    await writeFile(`${recordPath}.tmp`, JSON.stringify(record));
    await rename(`${recordPath}.tmp`, recordPath);
    return { uploadId };
  }

  async presignPart(
    key: string,
    uploadId: string,
    partNumber: number,
    options: { expiresInSeconds: number },
  ): Promise<string> {
    assertBlobKey(key);
    assertPartNumber(partNumber);
    assertPresignExpiry(options.expiresInSeconds);
    if (!UPLOAD_ID.test(uploadId)) throw invalidArgument('uploadId is not one this store issued');
    return this.signer.url({ method: 'PUT', key, uploadId, partNumber }, options.expiresInSeconds);
  }

  /** Stages one part of a multipart upload; uploading the same part number again replaces it, as in S3. */
  async receivePart(key: string, uploadId: string, partNumber: number, body: Readable): Promise<{ etag: string }> {
    assertBlobKey(key);
    assertPartNumber(partNumber);
    await this.openUpload(key, uploadId);
    const staged = await this.stage(body, this.maxUploadBytes);
    await rename(staged.path, this.partPath(uploadId, partNumber)).catch(async (error: unknown) => {
      await rm(staged.path, { force: true });
      throw isMissing(error) ? notFound('multipart upload not found') : error;
    });
    return { etag: `"${staged.md5}"` };
  }

  async completeMultipartUpload(key: string, uploadId: string, parts: UploadedPart[]): Promise<{ size: number }> {
    assertBlobKey(key);
    assertCompletionParts(parts);
    const upload = await this.openUpload(key, uploadId);
    for (const [index, part] of parts.entries()) {
      const info = await stat(this.partPath(uploadId, part.partNumber)).catch((error: unknown) => {
        throw isMissing(error) ? invalidArgument(`part ${part.partNumber} was not uploaded`) : error;
      });
      if (index < parts.length - 1 && info.size < MIN_PART_SIZE) {
        throw invalidArgument(`part ${part.partNumber} is smaller than ${MIN_PART_SIZE} bytes and is not the last part`);
      }
    }
    const partPath = (partNumber: number) => this.partPath(uploadId, partNumber);
    const staged = await this.stage(
      (async function* () {
        for (const part of parts) {
          const md5 = createHash('md5');
          for await (const chunk of createReadStream(partPath(part.partNumber))) {
            md5.update(chunk as Buffer);
            yield chunk as Buffer;
          }
          if (md5.digest('hex') !== bareEtag(part.etag)) {
            throw invalidArgument(`part ${part.partNumber} does not match its ETag`);
          }
        }
      })(),
    );
    await this.commit(key, staged.path, { contentType: upload.contentType, etag: `"${staged.md5}"` });
    await rm(join(this.uploads, uploadId), { recursive: true, force: true });
    return { size: staged.size };
  }

  async abortMultipartUpload(key: string, uploadId: string): Promise<void> {
    assertBlobKey(key);
    try {
      await this.openUpload(key, uploadId);
    } catch (error) {
      if (error instanceof AppError && error.kind === 'not_found') return;
      throw error;
    }
    await rm(join(this.uploads, uploadId), { recursive: true, force: true });
  }

  async ping(): Promise<void> {
    try {
      await access(this.objects, constants.R_OK | constants.W_OK);
      await access(this.tmp, constants.R_OK | constants.W_OK);
    } catch (error) {
      throw unavailable('the blob store directory is not accessible', { cause: error });
    }
  }

  async close(): Promise<void> {}

  /**
   * Removes what crashes and abandoned uploads leave: temp files and multipart uploads untouched for
   * `olderThanMs`. Anything younger may still be in use.
   */
  async sweep(olderThanMs = DAY_MS): Promise<{ removed: number }> {
    const cutoff = Date.now() - olderThanMs;
    let removed = 0;
    for (const dir of [this.tmp, this.uploads]) {
      for (const name of await readdir(dir)) {
        // A temp file changes with each write, and an upload's directory with each part it takes.
        const info = await stat(join(dir, name)).catch((error: unknown) => {
          if (isMissing(error)) return undefined;
          throw error;
        });
        if (info === undefined || info.mtimeMs > cutoff) continue;
        await rm(join(dir, name), { recursive: true, force: true });
        removed += 1;
      }
    }
    return { removed };
  }

  private objectPath(key: string): string {
    const path = join(this.objects, ...key.split('/'));
    // assertBlobKey already rules out escapes; this keeps it true should those rules ever loosen.
    if (!path.startsWith(this.objects + sep)) throw invalidArgument(`blob key ${JSON.stringify(key)} leaves the store`);
    return path;
  }

  private metaPath(key: string): string {
    const hash = createHash('sha256').update(key).digest('hex');
    return join(this.meta, hash.slice(0, 2), hash);
  }

  private partPath(uploadId: string, partNumber: number): string {
    return join(this.uploads, uploadId, String(partNumber));
  }

  private async openUpload(key: string, uploadId: string): Promise<UploadRecord> {
    const record = UPLOAD_ID.test(uploadId) ? await this.readUpload(uploadId) : undefined;
    if (record?.key !== key) throw notFound('multipart upload not found');
    return record;
  }

  /** The record of an upload, or undefined for anything that is not a readable one (a stray file, a torn write). */
  private async readUpload(uploadId: string): Promise<UploadRecord | undefined> {
    const text = await readFile(join(this.uploads, uploadId, 'upload.json'), 'utf8').catch((error: unknown) => {
      if (isMissing(error) || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
      throw error;
    });
    if (text === undefined) return undefined;
    try {
      const record = JSON.parse(text) as UploadRecord;
      return typeof record.key === 'string' ? record : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes a body to a fresh temp file, flushed to disk, counting and hashing it on the way. */
  private async stage(
    body: AsyncIterable<Buffer | string>,
    maxBytes = Infinity,
  ): Promise<{ path: string; size: number; md5: string }> {
    const path = join(this.tmp, randomUUID());
    const md5 = createHash('md5');
    const file = createWriteStream(path, { flags: 'wx', flush: true });
    let size = 0;
    try {
      await pipeline(
        body,
        async function* (source: AsyncIterable<Buffer | string>) {
          for await (const chunk of source) {
            const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
            size += bytes.length;
            if (size > maxBytes) throw uploadTooLarge(maxBytes);
            md5.update(bytes);
            yield bytes;
          }
        },
        file,
      );
    } catch (error) {
      // A pipeline that fails early may settle while the file is still being opened; remove it once closed.
      if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()));
      await rm(path, { force: true });
      throw error;
    }
    return { path, size, md5: md5.digest('hex') };
  }

  /** Moves a staged file under its key; the metadata goes first so the object never appears without it. */
  private async commit(key: string, stagedPath: string, meta: ObjectMeta): Promise<void> {
    const metaStaged = join(this.tmp, randomUUID());
    try {
      await writeFile(metaStaged, JSON.stringify(meta));
      await this.moveInto(metaStaged, this.metaPath(key), key);
      await this.moveInto(stagedPath, this.objectPath(key), key);
    } catch (error) {
      await Promise.all([rm(stagedPath, { force: true }), rm(metaStaged, { force: true })]);
      throw error;
    }
  }

  /**
   * Puts a staged file under its key only if no object is there, atomically (a hard link fails on an existing name,
   * where a rename would replace it); the metadata follows, since writing it first could overwrite another's.
   */
  private async commitNew(key: string, stagedPath: string, meta: ObjectMeta): Promise<void> {
    try {
      await this.moveInto(stagedPath, this.objectPath(key), key, { exclusive: true });
    } finally {
      await rm(stagedPath, { force: true });
    }
    const metaStaged = join(this.tmp, randomUUID());
    await writeFile(metaStaged, JSON.stringify(meta));
    await this.moveInto(metaStaged, this.metaPath(key), key).catch(async (error: unknown) => {
      await rm(metaStaged, { force: true });
      throw error;
    });
  }

  private async moveInto(from: string, to: string, key: string, options: { exclusive?: boolean } = {}): Promise<void> {
    // A concurrent delete may prune the freshly made parent directory before the rename; make it again.
    for (let attempt = 1; ; attempt++) {
      try {
        await mkdir(dirname(to), { recursive: true });
        await (options.exclusive ? link(from, to) : rename(from, to));
        return;
      } catch (error) {
        const code = errorCode(error);
        if (code === 'ENAMETOOLONG') throw invalidArgument('a segment of the blob key is too long for the filesystem store');
        if (options.exclusive && code === 'EEXIST' && (await stat(to).catch(() => undefined))?.isFile()) throw keyExists(key);
        if (code === 'ENOTDIR' || code === 'EEXIST' || code === 'EISDIR') {
          throw conflict(`blob key ${JSON.stringify(key)} clashes with an existing key that is a prefix of it, or under it`);
        }
        if (code !== 'ENOENT' || attempt === 3) throw error;
      }
    }
  }

  private async readMeta(key: string): Promise<ObjectMeta> {
    const text = await readFile(this.metaPath(key), 'utf8').catch((error: unknown) => {
      if (isMissing(error)) return undefined;
      throw error;
    });
    return text === undefined ? {} : (JSON.parse(text) as ObjectMeta);
  }

  private async md5Of(key: string): Promise<string> {
    const md5 = createHash('md5');
    for await (const chunk of createReadStream(this.objectPath(key))) md5.update(chunk as Buffer);
    return md5.digest('hex');
  }

  private async unlinkObject(key: string): Promise<void> {
    await unlink(this.objectPath(key)).catch((error: unknown) => {
      if (!isMissing(error)) throw error;
    });
    await rm(this.metaPath(key), { force: true });
  }

  /** Deletes the objects in directory `dirKey` (`''` or ending in `/`) whose names start with `namePrefix`. */
  private async deleteUnder(dirKey: string, namePrefix: string): Promise<number> {
    const dir = dirKey === '' ? this.objects : this.objectPath(dirKey.slice(0, -1));
    const entries = await readdir(dir, { withFileTypes: true }).catch((error: unknown) => {
      if (isMissing(error)) return [];
      throw error;
    });
    let deleted = 0;
    for (const entry of entries) {
      if (!entry.name.startsWith(namePrefix)) continue;
      const key = dirKey + entry.name;
      if (entry.isDirectory()) {
        deleted += await this.deleteUnder(`${key}/`, '');
      } else {
        await this.unlinkObject(key);
        deleted += 1;
      }
    }
    await this.pruneEmptyDirs(dir);
    return deleted;
  }

  /** Removes `dir` and its parents while empty, so a later key may take a name a deleted directory held. */
  private async pruneEmptyDirs(dir: string): Promise<void> {
    for (let current = dir; current.startsWith(this.objects + sep); current = dirname(current)) {
      const removed = await rmdir(current).then(
        () => true,
        () => false,
      );
      if (!removed) return;
    }
  }
}

/** S3's answer to a create-only upload (`If-None-Match: *`) on a key that holds an object. */
function keyExists(key: string): AppError {
  return new AppError('precondition_failed', `blob ${JSON.stringify(key)} exists, and this upload may only create it`);
}

/** S3's answer to a copy whose source no longer has the ETag it was asked for. */
function sourceChanged(key: string): AppError {
  return new AppError('precondition_failed', `blob ${JSON.stringify(key)} changed: its ETag is no longer the one asked for`);
}

function uploadTooLarge(maxBytes: number): AppError {
  return new AppError('payload_too_large', `an upload may be at most ${maxBytes} bytes`);
}

function errorCode(error: unknown): string | undefined {
  return error instanceof Error && 'code' in error ? String(error.code) : undefined;
}

/** The path, or a directory on it, does not exist as the file a key names. */
function isMissing(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'ENAMETOOLONG';
}
