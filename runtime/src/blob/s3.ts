// The S3-compatible blob store (AWS S3, MinIO and alike), optionally confined to a key prefix per project.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  paginateListObjectsV2,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { Readable } from 'node:stream';
import { AppError, invalidArgument, notFound, unavailable } from '@agentplane/lib/errors';
import {
  assertBlobKey,
  assertBlobPrefix,
  assertCompletionParts,
  assertPartNumber,
  assertPresignExpiry,
  type BlobBody,
  type BlobHead,
  type BlobStore,
  type StoredBlob,
  type UploadedPart,
} from './port.js';

export interface S3BlobStoreConfig {
  /** Unset for AWS itself; e.g. `http://minio:9000` otherwise. */
  endpoint?: string;
  /** Where clients reach the store when it differs from `endpoint` (a cluster-internal name); presigned URLs use it. */
  publicEndpoint?: string;
  bucket: string;
  region: string;
  /** Unset to use the SDK's default credential chain (environment, web identity, instance role). */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** True for MinIO and most non-AWS stores. */
  forcePathStyle: boolean;
  /** Every key is stored under `prefix/`, so one bucket can hold many projects apart. */
  prefix?: string;
}

/** Streams of unknown length go up in parts of this size (at least S3's 5 MiB floor), so memory stays bounded. */
const STREAM_PART_SIZE = 8 * 1024 * 1024;
const DELETE_BATCH = 1000;
const PING_TIMEOUT_MS = 5_000;

export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  private readonly client: S3Client;
  private readonly presigner: S3Client;
  private readonly bucket: string;
  private readonly root: string;

  constructor(config: S3BlobStoreConfig) {
    const clientConfig: S3ClientConfig = {
      region: config.region,
      forcePathStyle: config.forcePathStyle,
      // Recent SDKs send aws-chunked bodies with trailing checksums that MinIO and others mishandle.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    };
    if (config.accessKeyId !== undefined && config.secretAccessKey !== undefined) {
      clientConfig.credentials = { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey };
    }
    this.client = new S3Client({ ...clientConfig, endpoint: config.endpoint });
    // A URL is signed for the host it names, so URLs for outside clients must be signed for the public host.
    this.presigner =
      config.publicEndpoint === undefined ? this.client : new S3Client({ ...clientConfig, endpoint: config.publicEndpoint });
    this.bucket = config.bucket;
    const prefix = (config.prefix ?? '').replace(/^\/+|\/+$/g, '');
    if (prefix !== '') assertBlobKey(prefix);
    this.root = prefix === '' ? '' : `${prefix}/`;
  }

  async put(key: string, body: BlobBody, options: { contentType?: string } = {}): Promise<{ key: string; size: number }> {
    assertBlobKey(key);
    if (body instanceof Readable) return { key, size: await this.putStream(key, body, options.contentType) };
    const bytes = Buffer.from(body);
    await this.send('put', () =>
      this.client.send(
        new PutObjectCommand({ Bucket: this.bucket, Key: this.root + key, Body: bytes, ContentType: options.contentType }),
      ),
    );
    return { key, size: bytes.length };
  }

  async get(key: string): Promise<StoredBlob> {
    assertBlobKey(key);
    const response = await this.send(
      'get',
      () => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.root + key })),
      key,
    );
    const body = response.Body instanceof Readable ? response.Body : Readable.from([]);
    return { body, size: response.ContentLength ?? 0, contentType: response.ContentType };
  }

  async head(key: string): Promise<BlobHead | null> {
    assertBlobKey(key);
    try {
      const response = await this.send('head', () => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.root + key })), key);
      return { size: response.ContentLength ?? 0, contentType: response.ContentType, etag: response.ETag ?? '' };
    } catch (error) {
      if (error instanceof AppError && error.kind === 'not_found') return null;
      throw error;
    }
  }

  async exists(key: string): Promise<boolean> {
    assertBlobKey(key);
    try {
      await this.send('head', () => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.root + key })), key);
      return true;
    } catch (error) {
      if (error instanceof AppError && error.kind === 'not_found') return false;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    await this.send('delete', () => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.root + key })));
  }

  async deleteByPrefix(prefix: string): Promise<{ deleted: number; abortedUploads: number }> {
    assertBlobPrefix(prefix);
    // Uploads first, so none completes into the prefix once its objects are gone.
    const uploads = await this.send('list uploads', () => this.uploadsUnder(this.root + prefix));
    for (const upload of uploads) {
      await this.send('abort upload', () =>
        this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: upload.key, UploadId: upload.uploadId })),
      ).catch((error: unknown) => {
        // Completed or aborted meanwhile: gone either way.
        if (!(error instanceof AppError && error.kind === 'not_found')) throw error;
      });
    }
    let deleted = 0;
    const pages = paginateListObjectsV2(
      { client: this.client, pageSize: DELETE_BATCH },
      { Bucket: this.bucket, Prefix: this.root + prefix },
    );
    await this.send('delete by prefix', async () => {
      for await (const page of pages) {
        const objects = (page.Contents ?? []).flatMap((object) => (object.Key === undefined ? [] : [{ Key: object.Key }]));
        if (objects.length === 0) continue;
        const result = await this.client.send(
          new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: objects, Quiet: true } }),
        );
        const failures = result.Errors ?? [];
        if (failures.length > 0) {
          throw unavailable(`the blob store failed to delete ${failures.length} keys (${failures[0]?.Code ?? 'unknown'})`);
        }
        deleted += objects.length;
      }
    });
    return { deleted, abortedUploads: uploads.length };
  }

  async presignGet(key: string, options: { expiresInSeconds: number }): Promise<string> {
    assertBlobKey(key);
    assertPresignExpiry(options.expiresInSeconds);
    return getSignedUrl(this.presigner, new GetObjectCommand({ Bucket: this.bucket, Key: this.root + key }), {
      expiresIn: options.expiresInSeconds,
    });
  }

  async presignPut(key: string, options: { expiresInSeconds: number; contentType?: string; ifNoneMatch?: boolean }): Promise<string> {
    assertBlobKey(key);
    assertPresignExpiry(options.expiresInSeconds);
    const command = new PutObjectCommand({
      Bucket: this.bucket,
      Key: this.root + key,
      ContentType: options.contentType,
      // S3's conditional write: the store refuses (412) a PUT while the key holds an object.
      IfNoneMatch: options.ifNoneMatch ? '*' : undefined,
    });
    // Signed as headers, so the upload must send this Content-Type (and If-None-Match), as the filesystem store
    // demands too: a client that leaves the condition out is refused rather than let through unconditionally.
    const signed = [...(options.contentType === undefined ? [] : ['content-type']), ...(options.ifNoneMatch ? ['if-none-match'] : [])];
    return getSignedUrl(this.presigner, command, {
      expiresIn: options.expiresInSeconds,
      signableHeaders: signed.length === 0 ? undefined : new Set(signed),
    });
  }

  async copy(fromKey: string, toKey: string, options: { ifMatch?: string } = {}): Promise<{ size: number }> {
    assertBlobKey(fromKey);
    assertBlobKey(toKey);
    const source = `${this.bucket}/${(this.root + fromKey).split('/').map(encodeURIComponent).join('/')}`;
    await this.send(
      'copy',
      () =>
        this.client.send(
          new CopyObjectCommand({ Bucket: this.bucket, Key: this.root + toKey, CopySource: source, CopySourceIfMatch: options.ifMatch }),
        ),
      fromKey,
    );
    const head = await this.head(toKey);
    if (!head) throw unavailable('the blob store lost an object it had just copied');
    return { size: head.size };
  }

  async createMultipartUpload(key: string, options: { contentType?: string } = {}): Promise<{ uploadId: string }> {
    assertBlobKey(key);
    const response = await this.send('create upload', () =>
      this.client.send(
        new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: this.root + key, ContentType: options.contentType }),
      ),
    );
    if (response.UploadId === undefined) throw unavailable('the blob store returned no upload id');
    return { uploadId: response.UploadId };
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
    const command = new UploadPartCommand({
      Bucket: this.bucket,
      Key: this.root + key,
      UploadId: uploadId,
      PartNumber: partNumber,
    });
    return getSignedUrl(this.presigner, command, { expiresIn: options.expiresInSeconds });
  }

  async completeMultipartUpload(key: string, uploadId: string, parts: UploadedPart[]): Promise<{ size: number }> {
    assertBlobKey(key);
    assertCompletionParts(parts);
    await this.send('complete upload', () =>
      this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.root + key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts.map((part) => ({ PartNumber: part.partNumber, ETag: part.etag })) },
        }),
      ),
    );
    const head = await this.send(
      'head',
      () => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.root + key })),
      key,
    );
    return { size: head.ContentLength ?? 0 };
  }

  async abortMultipartUpload(key: string, uploadId: string): Promise<void> {
    assertBlobKey(key);
    try {
      await this.send('abort upload', () =>
        this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.root + key, UploadId: uploadId })),
      );
    } catch (error) {
      if (!(error instanceof AppError && error.kind === 'not_found')) throw error;
    }
  }

  async ping(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), {
        abortSignal: AbortSignal.timeout(PING_TIMEOUT_MS),
      });
    } catch (error) {
      // A missing bucket is as unready as a missing server.
      throw unavailable(`the blob store did not answer (${reasonOf(error)})`, { cause: error });
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
    this.presigner.destroy();
  }

  /**
   * The multipart uploads in progress whose full key starts with `fullPrefix`. MinIO matches a non-empty
   * `Prefix` only against whole keys, so this lists the bucket's uploads and filters them here.
   */
  private async uploadsUnder(fullPrefix: string): Promise<{ key: string; uploadId: string }[]> {
    const found: { key: string; uploadId: string }[] = [];
    let markers: { KeyMarker?: string; UploadIdMarker?: string } = {};
    for (;;) {
      const page = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.bucket, ...markers }));
      for (const { Key: key, UploadId: uploadId } of page.Uploads ?? []) {
        if (key?.startsWith(fullPrefix) && uploadId !== undefined) found.push({ key, uploadId });
      }
      if (!page.IsTruncated) return found;
      markers = { KeyMarker: page.NextKeyMarker, UploadIdMarker: page.NextUploadIdMarker };
    }
  }

  /** Sends a stream of unknown length: one PUT when it fits in a part, a multipart upload when it does not. */
  private async putStream(key: string, body: Readable, contentType: string | undefined): Promise<number> {
    const parts = partsOf(body, STREAM_PART_SIZE);
    const first = await parts.next();
    const firstBytes = first.done ? Buffer.alloc(0) : first.value;
    const second = first.done ? first : await parts.next();
    if (second.done) {
      await this.put(key, firstBytes, { contentType });
      return firstBytes.length;
    }
    const { uploadId } = await this.createMultipartUpload(key, { contentType });
    try {
      const uploaded: UploadedPart[] = [];
      let size = 0;
      const upload = async (bytes: Buffer) => {
        uploaded.push(await this.uploadPart(key, uploadId, uploaded.length + 1, bytes));
        size += bytes.length;
      };
      await upload(firstBytes);
      await upload(second.value);
      for await (const bytes of parts) await upload(bytes);
      await this.completeMultipartUpload(key, uploadId, uploaded);
      return size;
    } catch (error) {
      body.destroy();
      await this.abortMultipartUpload(key, uploadId).catch(() => undefined);
      throw error;
    }
  }

  private async uploadPart(key: string, uploadId: string, partNumber: number, bytes: Buffer): Promise<UploadedPart> {
    const response = await this.send('upload part', () =>
      this.client.send(
        new UploadPartCommand({ Bucket: this.bucket, Key: this.root + key, UploadId: uploadId, PartNumber: partNumber, Body: bytes }),
      ),
    );
    return { partNumber, etag: response.ETag ?? '' };
  }

  /** Runs one store call, turning the SDK's failures into our error kinds without echoing request details. */
  private async send<T>(action: string, call: () => Promise<T>, key?: string): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw storeError(action, error, key);
    }
  }
}

function storeError(action: string, error: unknown, key: string | undefined): AppError {
  if (error instanceof AppError) return error;
  const failure = error as { name?: string; code?: string; message?: string };
  const name = failure.name ?? 'Error';
  // A key-less call that meets a 404 has lost its bucket, which is the store failing, not the caller.
  if ((name === 'NoSuchKey' || name === 'NotFound') && key !== undefined) {
    return notFound(`blob ${JSON.stringify(key)} not found`, { cause: error });
  }
  switch (name) {
    case 'PreconditionFailed':
      return new AppError('precondition_failed', `the blob store refused a conditional request: ${key === undefined ? 'its condition' : `blob ${JSON.stringify(key)}`} is not as asked`, { cause: error });
    case 'NoSuchUpload':
      return notFound('multipart upload not found', { cause: error });
    case 'InvalidPart':
    case 'InvalidPartOrder':
    case 'EntityTooSmall':
    case 'KeyTooLongError':
      return invalidArgument(`the blob store refused the request: ${failure.message ?? name}`, { cause: error });
  }
  return unavailable(`the blob store failed to ${action} (${reasonOf(error)})`, { cause: error });
}

/** The error's code and HTTP status only: SDK messages may quote request details. */
function reasonOf(error: unknown): string {
  const failure = error as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  const status = failure.$metadata?.httpStatusCode;
  return [failure.code ?? failure.name ?? 'Error', status === undefined ? undefined : `HTTP ${status}`]
    .filter(Boolean)
    .join(', ');
}

/** Cuts a stream into buffers of exactly `size` bytes, the last one shorter; an empty stream gives one empty buffer. */
async function* partsOf(body: Readable, size: number): AsyncGenerator<Buffer, void, undefined> {
  let pending: Buffer[] = [];
  let pendingLength = 0;
  let yielded = false;
  for await (const chunk of body) {
    let bytes: Buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    while (pendingLength + bytes.length >= size) {
      const take = size - pendingLength;
      pending.push(bytes.subarray(0, take));
      yield Buffer.concat(pending);
      yielded = true;
      pending = [];
      pendingLength = 0;
      bytes = bytes.subarray(take);
    }
    if (bytes.length > 0) {
      pending.push(bytes);
      pendingLength += bytes.length;
    }
  }
  if (pendingLength > 0 || !yielded) yield Buffer.concat(pending);
}
