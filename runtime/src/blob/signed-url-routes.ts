// The HTTP side of the filesystem store's signed URLs: downloads and uploads that carry their grant in the query.
import { pipeline } from 'node:stream/promises';
import { Router, type Request } from 'express';
import type { FsBlobStore } from './fs.js';

/**
 * Serves the URLs of `store.signer`: GET downloads, PUT uploads an object or one part. Mount it at
 * BLOB_ROUTE_PATH before any body parser, since the request body is the blob itself. Failures go to the app's
 * error handler.
 */
export function createSignedBlobRouter({ store }: { store: FsBlobStore }): Router {
  const router = Router();

  router.get('/*key', async (req, res) => {
    const key = keyOf(req);
    store.signer.verify('GET', key, req.query, { contentType: undefined });
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
      const grant = store.signer.verify('PUT', key, req.query, { contentType, ifNoneMatch: req.get('if-none-match') });
      store.assertUploadFits(Number(req.get('content-length') ?? 0));
      const { etag } =
        grant.uploadId !== undefined && grant.partNumber !== undefined
          ? await store.receivePart(key, grant.uploadId, grant.partNumber, req)
          : await store.receive(key, req, { contentType, ifNoneMatch: grant.ifNoneMatch });
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
