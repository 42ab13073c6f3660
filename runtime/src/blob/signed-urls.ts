// Presigned URLs for the filesystem blob store: the runtime signs them with HMAC-SHA256 and serves them itself,
// answering the way S3 does (an ETag on every upload) so a client handles both stores alike.
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { permissionDenied } from '@agentplane/lib/errors';
import { secretsEqual } from '@agentplane/lib/crypto/secret-box';

/** Where the app mounts `createSignedBlobRouter` (./signed-url-routes.ts); signed URLs point below `${publicBaseUrl}${BLOB_ROUTE_PATH}`. */
export const BLOB_ROUTE_PATH = '/blobs';

/** What one URL allows: a download, an upload, or the upload of one part of a multipart upload. */
export interface BlobGrant {
  method: 'GET' | 'PUT';
  key: string;
  uploadId?: string;
  partNumber?: number;
  /** For uploads: the `Content-Type` the request must send. */
  contentType?: string;
  /** For uploads: the request must send `If-None-Match: *`, and only creates the object (S3's conditional write). */
  ifNoneMatch?: boolean;
}

const grantQuery = z
  .object({
    expires: queryNumber((n) => n.int()),
    sig: z.string().min(1),
    uploadId: z.string().min(1).optional(),
    partNumber: queryNumber((n) => n.int()).optional(),
    contentType: z.string().optional(),
    ifNoneMatch: z.literal('*').optional(),
  })
  .refine((q) => (q.uploadId === undefined) === (q.partNumber === undefined));

const MIN_SECRET_LENGTH = 32;

export class BlobUrlSigner {
  private readonly secret: string;
  private readonly baseUrl: string;

  constructor(options: { secret: string; publicBaseUrl: string }) {
    if (options.secret.length < MIN_SECRET_LENGTH) {
      throw new Error(`the blob signing secret must be at least ${MIN_SECRET_LENGTH} characters`);
    }
    this.secret = options.secret;
    this.baseUrl = `${options.publicBaseUrl.replace(/\/+$/, '')}${BLOB_ROUTE_PATH}`;
  }

  url(grant: BlobGrant, expiresInSeconds: number): string {
    const expires = Math.floor(Date.now() / 1000) + expiresInSeconds;
    const query = new URLSearchParams({ expires: String(expires) });
    if (grant.uploadId !== undefined) query.set('uploadId', grant.uploadId);
    if (grant.partNumber !== undefined) query.set('partNumber', String(grant.partNumber));
    if (grant.contentType !== undefined) query.set('contentType', grant.contentType);
    if (grant.ifNoneMatch) query.set('ifNoneMatch', '*');
    query.set('sig', this.signature(grant, expires));
    const path = grant.key.split('/').map(encodeURIComponent).join('/');
    return `${this.baseUrl}/${path}?${query}`;
  }

  /** The grant a request carries, or `permission_denied` when its signature is wrong or has expired. */
  verify(method: string, key: string, query: unknown, headers: { contentType: string | undefined; ifNoneMatch?: string | undefined }): BlobGrant {
    const parsed = grantQuery.safeParse(query);
    if (!parsed.success) throw permissionDenied('the blob URL is not signed');
    const { expires, sig, uploadId, partNumber, contentType: signedType, ifNoneMatch } = parsed.data;
    const grant: BlobGrant = {
      method: method === 'PUT' ? 'PUT' : 'GET',
      key,
      uploadId,
      partNumber,
      contentType: signedType,
      ...(ifNoneMatch === undefined ? {} : { ifNoneMatch: true }),
    };
    // Compared as text, not decoded bytes: base64url ignores the last character's low bits, so decoding would
    // accept several spellings of one signature.
    if (!secretsEqual(sig, this.signature(grant, expires))) {
      throw permissionDenied('the blob URL signature does not match');
    }
    if (expires < Date.now() / 1000) throw permissionDenied('the blob URL has expired');
    if (signedType !== undefined && signedType !== headers.contentType) {
      throw permissionDenied(`the upload must be sent with Content-Type ${signedType}`);
    }
    // As S3 refuses a request without a header its URL signed: the client learns the rule on its first upload.
    if (grant.ifNoneMatch && headers.ifNoneMatch?.trim() !== '*') {
      throw permissionDenied('the upload must be sent with If-None-Match: *');
    }
    return grant;
  }

  private signature(grant: BlobGrant, expires: number): string {
    // JSON keeps the fields apart, so no key or content type can be crafted to collide with another grant. The
    // create-only flag is appended only when set, so URLs signed before it existed keep their signatures.
    const payload = JSON.stringify([
      grant.method,
      grant.key,
      expires,
      grant.uploadId ?? null,
      grant.partNumber ?? null,
      grant.contentType ?? null,
      ...(grant.ifNoneMatch ? [true] : []),
    ]);
    return createHmac('sha256', this.secret).update(payload).digest('base64url');
  }
}
