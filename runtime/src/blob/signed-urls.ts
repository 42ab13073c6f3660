// Presigned URLs for the filesystem blob store: the runtime signs them with HMAC-SHA256 and serves them itself,
// answering the way S3 does (an ETag on every upload) so a client handles both stores alike.
import { createHmac } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Router, type Request } from 'express';
import { z } from 'zod';
import { permissionDenied } from '../../../lib/src/errors.js';
import { secretsEqual } from '../../../lib/src/crypto/secret-box.js';
import type { FsBlobStore } from './fs.js';

/** Where the app mounts `createSignedBlobRouter`; signed URLs point below `${publicBaseUrl}${BLOB_ROUTE_PATH}`. */
export const BLOB_ROUTE_PATH = '/blobs';

/** What one URL allows: a download, an upload, or the upload of one part of a multipart upload. */
export interface BlobGrant {
  method: 'GET' | 'PUT';
  key: string;
  uploadId?: string;
  partNumber?: number;
  /** For uploads: the `Content-Type` the request must send. */
  contentType?: string;
}

const grantQuery = z
  .object({
    expires: z.coerce.number().int(),
    sig: z.string().min(1),
    uploadId: z.string().min(1).optional(),
    partNumber: z.coerce.number().int().optional(),
    contentType: z.string().optional(),
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
    query.set('sig', this.signature(grant, expires));
    const path = grant.key.split('/').map(encodeURIComponent).join('/');
    return `${this.baseUrl}/${path}?${query}`;
  }

  /** The grant a request carries, or `permission_denied` when its signature is wrong or has expired. */
  verify(method: string, key: string, query: unknown, contentType: string | undefined): BlobGrant {
    const parsed = grantQuery.safeParse(query);
    if (!parsed.success) throw permissionDenied('the blob URL is not signed');
    const { expires, sig, uploadId, partNumber, contentType: signedType } = parsed.data;
    const grant: BlobGrant = { method: method === 'PUT' ? 'PUT' : 'GET', key, uploadId, partNumber, contentType: signedType };
    // Compared as text, not decoded bytes: base64url ignores the last character's low bits, so decoding would
    // accept several spellings of one signature.
    if (!secretsEqual(sig, this.signature(grant, expires))) {
      throw permissionDenied('the blob URL signature does not match');
    }
    if (expires < Date.now() / 1000) throw permissionDenied('the blob URL has expired');
    if (signedType !== undefined && signedType !== contentType) {
      throw permissionDenied(`the upload must be sent with Content-Type ${signedType}`);
    }
    return grant;
  }

  private signature(grant: BlobGrant, expires: number): string {
    // JSON keeps the fields apart, so no key or content type can be crafted to collide with another grant.
    const payload = JSON.stringify([
      grant.method,
      grant.key,
      expires,
      grant.uploadId ?? null,
      grant.partNumber ?? null,
      grant.contentType ?? null,
    ]);
    return createHmac('sha256', this.secret).update(payload).digest('base64url');
  }
}

/**
 * Serves the URLs of `store.signer`: GET downloads, PUT uploads an object or one part. Mount it at
 * BLOB_ROUTE_PATH before any body parser, since the request body is the blob itself. Failures go to the app's
 * error handler.
 */
export function createSignedBlobRouter({ store }: { store: FsBlobStore }): Router {
  const router = Router();

  router.get('/*key', async (req, res) => {
    const key = keyOf(req);
    store.signer.verify('GET', key, req.query, undefined);
    const blob = await store.get(key);
    // setHeader, not res.set: express would append a charset to text types, and S3 answers the stored type as is.
    res.status(200);
    const inline = inlineType(blob.contentType);
    // An inline type is sent in its normalised form only; anything else as the stored type, but as a download.
    res.setHeader('Content-Type', inline ?? safeHeaderType(blob.contentType));
    res.setHeader('Content-Length', blob.size);
    res.setHeader('Cache-Control', 'private, no-store');
    // The uploader chose the type and this is the API's origin: nothing served here may run script or be sniffed
    // into something that does, and only types a browser shows inertly are shown at all.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Security-Policy', "sandbox; default-src 'none'");
    if (!inline) res.setHeader('Content-Disposition', 'attachment');
    // A client that leaves mid-download only ends its own response; pipeline has closed the file.
    await pipeline(blob.body, res).catch(() => undefined);
  });

  router.put('/*key', async (req, res) => {
    try {
      const key = keyOf(req);
      const contentType = req.get('content-type');
      const grant = store.signer.verify('PUT', key, req.query, contentType);
      store.assertUploadFits(Number(req.get('content-length') ?? 0));
      const { etag } =
        grant.uploadId !== undefined && grant.partNumber !== undefined
          ? await store.receivePart(key, grant.uploadId, grant.partNumber, req)
          : await store.receive(key, req, { contentType });
      res.status(200).set('ETag', etag).end();
    } catch (error) {
      // A body refused halfway stays unread and would stall this connection: let it close after the answer.
      if (!req.complete) res.setHeader('Connection', 'close');
      throw error;
    }
  });

  return router;
}

const token = "[a-z0-9!#$&^_.+-]+";
const mediaType = new RegExp(`^(${token})/(${token})$`);

/**
 * The normalised type (`image/png`) when the stored one is a single well-formed media type that a browser shows
 * without running anything; null otherwise. A list such as `image/png, text/html` is not one type: browsers
 * take its last entry, so it must not pass as an image. SVG is an image that can carry script.
 */
function inlineType(contentType: string | undefined): string | null {
  const essence = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const match = mediaType.exec(essence);
  if (!match || essence === 'image/svg+xml') return null;
  const inline = ['image', 'audio', 'video'].includes(match[1]!) || ['application/pdf', 'application/json', 'text/plain'].includes(essence);
  return inline ? essence : null;
}

/** The stored type when it is one well-formed media type (parameters kept), else the neutral octet stream. */
function safeHeaderType(contentType: string | undefined): string {
  const essence = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return contentType && mediaType.test(essence) && !/[\r\n,]/.test(contentType) ? contentType : 'application/octet-stream';
}

function keyOf(req: Request): string {
  const segments = (req.params as { key?: string[] }).key ?? [];
  return segments.join('/');
}
