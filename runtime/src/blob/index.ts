// Chooses the blob store adapter from configuration: the embedded filesystem store or an S3-compatible one. The
// S3 adapter is imported only when chosen: the AWS SDK costs a process that does not use it tens of MiB at start
// (docs/decisions/0033).
import type { FeatureHost } from '../features.js';
import { tenantBlobPrefix } from '../tenants/keys.js';
import { FsBlobStore } from './fs.js';
import type { BlobStore } from './port.js';
import type { S3BlobStoreConfig } from './s3.js';
import { BlobUrlSigner } from './signed-urls.js';

export type BlobStoreConfig =
  | {
      kind: 'fs';
      root: string;
      /** Where clients reach this runtime; presigned URLs point at `${publicBaseUrl}${BLOB_ROUTE_PATH}/...`. */
      publicBaseUrl: string;
      /** HMAC key for presigned URLs, at least 32 characters; every replica serving the URLs needs the same one. */
      signingSecret: string;
      /** The largest upload a signed URL takes; 5 GiB, S3's single PUT limit, when unset. */
      maxUploadBytes?: number;
    }
  | ({ kind: 's3' } & S3BlobStoreConfig);

/**
 * What stored bytes bring to the composition root: the hourly sweep of uploads abandoned half way and temp files of
 * a crash (the filesystem store, also at start), and deleting a tenant's objects after its rows in a tenant erase.
 */
export function registerBlobs(host: FeatureHost, blobs: BlobStore): void {
  if (blobs instanceof FsBlobStore) host.every('blob sweep', 60 * 60 * 1000, () => blobs.sweep(), { now: true });
  host.eraseStep({
    name: 'stored_bytes',
    phase: 'outside_database',
    run: async (tenantId) => {
      const { deleted, abortedUploads } = await blobs.deleteByPrefix(tenantBlobPrefix(tenantId));
      return { items: deleted + abortedUploads };
    },
  });
}

export async function createBlobStore(config: BlobStoreConfig): Promise<BlobStore> {
  switch (config.kind) {
    case 'fs':
      return new FsBlobStore({
        root: config.root,
        signer: new BlobUrlSigner({ secret: config.signingSecret, publicBaseUrl: config.publicBaseUrl }),
        maxUploadBytes: config.maxUploadBytes,
      });
    case 's3': {
      const { S3BlobStore } = await import('./s3.js');
      return new S3BlobStore(config);
    }
  }
}

export { FsBlobStore } from './fs.js';
export type { S3BlobStore, S3BlobStoreConfig } from './s3.js';
export { BLOB_ROUTE_PATH, BlobUrlSigner } from './signed-urls.js';
export { createSignedBlobRouter } from './signed-url-routes.js';
export * from './port.js';
