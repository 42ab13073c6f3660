// The blob store port: where the runtime keeps files, and the rules every adapter shares so that code
// written against the embedded filesystem store behaves the same against S3.
import type { Readable } from 'node:stream';
import { invalidArgument } from '@agentplane/lib/errors';

export type BlobBody = Buffer | string | Readable;

export interface StoredBlob {
  body: Readable;
  size: number;
  contentType: string | undefined;
}

export interface BlobHead {
  size: number;
  contentType: string | undefined;
  /** Quoted, as S3 answers it; names these bytes, so a conditional copy takes exactly them. */
  etag: string;
}

export interface UploadedPart {
  partNumber: number;
  /** The `ETag` response header of the part's upload, quoted or not. */
  etag: string;
}

export interface BlobStore {
  readonly kind: 'fs' | 's3';
  put(key: string, body: BlobBody, options?: { contentType?: string }): Promise<{ key: string; size: number }>;
  /** Throws `not_found` when the key does not exist. The body must be consumed or destroyed. */
  get(key: string): Promise<StoredBlob>;
  exists(key: string): Promise<boolean>;
  /** The object's size, content type and ETag without its bytes; null when the key does not exist. */
  head(key: string): Promise<BlobHead | null>;
  /** Succeeds whether or not the key exists. */
  delete(key: string): Promise<void>;
  /**
   * Deletes every key that starts with `prefix` as a string (`a/b` also matches `a/bc`; `a/b/` does not), and
   * aborts the multipart uploads in progress under it, whose parts are stored bytes too.
   */
  deleteByPrefix(prefix: string): Promise<{ deleted: number; abortedUploads: number }>;
  presignGet(key: string, options: { expiresInSeconds: number }): Promise<string>;
  /**
   * When `contentType` is given, the upload must send exactly that `Content-Type`. With `ifNoneMatch`, it must send
   * `If-None-Match: *` too, and is refused (412, as S3 answers) while an object exists at the key: a URL that cannot
   * be revoked then cannot replace what is there.
   */
  presignPut(key: string, options: { expiresInSeconds: number; contentType?: string; ifNoneMatch?: boolean }): Promise<string>;
  /**
   * Copies an object inside the store, content type kept, without its bytes passing through this process. With
   * `ifMatch`, only while the source's ETag is still that one (`precondition_failed` otherwise); a missing source is
   * `not_found`.
   */
  copy(fromKey: string, toKey: string, options?: { ifMatch?: string }): Promise<{ size: number }>;
  createMultipartUpload(key: string, options?: { contentType?: string }): Promise<{ uploadId: string }>;
  /** A URL the client PUTs one part to; the `ETag` response header is what `completeMultipartUpload` wants. */
  presignPart(key: string, uploadId: string, partNumber: number, options: { expiresInSeconds: number }): Promise<string>;
  completeMultipartUpload(key: string, uploadId: string, parts: UploadedPart[]): Promise<{ size: number }>;
  /** Succeeds whether or not the upload still exists. */
  abortMultipartUpload(key: string, uploadId: string): Promise<void>;
  /** Resolves when the store answers; used by readiness checks. */
  ping(): Promise<void>;
  /** Releases connections; the store is not used after. */
  close(): Promise<void>;
}

/** S3's floor for every part but the last; the filesystem store enforces it too, so both refuse the same uploads. */
export const MIN_PART_SIZE = 5 * 1024 * 1024;
export const MAX_PART_NUMBER = 10_000;
/** S3's largest single PUT and largest part; the filesystem store's signed uploads are capped there by default. */
export const MAX_UPLOAD_BYTES = 5 * 1024 ** 3;
/** S3 refuses presigned URLs that live longer than a week. */
export const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;
const MAX_KEY_BYTES = 1024;

/**
 * Keys are `/`-separated paths of non-empty segments, never `.` or `..`, without control characters. Both
 * adapters refuse the rest, so a key that works on one works on the other and none can leave the fs root.
 */
export function assertBlobKey(key: string): void {
  if (key === '') throw invalidArgument('blob key must not be empty');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw invalidArgument(`blob key is longer than ${MAX_KEY_BYTES} bytes`);
  assertSegments(key, key.split('/'));
}

/** A prefix is a key, or a key's start: its complete segments follow the key rules; the last may be partial or empty. */
export function assertBlobPrefix(prefix: string): void {
  if (prefix === '') return;
  const segments = prefix.split('/');
  const partial = segments.pop() ?? '';
  if (segments.length > 0) assertSegments(prefix, segments);
  if (hasControlCharacter(partial)) throw invalidArgument('blob prefix must not contain control characters');
}

function assertSegments(key: string, segments: string[]): void {
  if (hasControlCharacter(key)) throw invalidArgument('blob key must not contain control characters');
  for (const segment of segments) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw invalidArgument(`blob key ${JSON.stringify(key)} must be a relative path of non-empty segments without . or ..`);
    }
  }
}

function hasControlCharacter(value: string): boolean {
  return /[\u0000-\u001f\u007f]/.test(value);
}

export function assertPresignExpiry(expiresInSeconds: number): void {
  if (!Number.isInteger(expiresInSeconds) || expiresInSeconds < 1 || expiresInSeconds > MAX_PRESIGN_SECONDS) {
    throw invalidArgument(`expiresInSeconds must be an integer from 1 to ${MAX_PRESIGN_SECONDS}`);
  }
}

export function assertPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
    throw invalidArgument(`partNumber must be an integer from 1 to ${MAX_PART_NUMBER}`);
  }
}

/** Parts of a completion must be listed once each, in ascending order, as S3 requires. */
export function assertCompletionParts(parts: UploadedPart[]): void {
  if (parts.length === 0) throw invalidArgument('a multipart upload needs at least one part');
  let previous = 0;
  for (const part of parts) {
    assertPartNumber(part.partNumber);
    if (part.partNumber <= previous) throw invalidArgument('parts must be listed in ascending partNumber order, once each');
    previous = part.partNumber;
  }
}

/** ETags travel quoted in headers; compare them without the quotes. */
export function bareEtag(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"|"$/g, '');
}
