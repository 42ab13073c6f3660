// Chooses the blob store adapter from configuration: the embedded filesystem store or an S3-compatible one.
import { FsBlobStore } from './fs.js';
import type { BlobStore } from './port.js';
import { S3BlobStore, type S3BlobStoreConfig } from './s3.js';
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

export function createBlobStore(config: BlobStoreConfig): BlobStore {
  switch (config.kind) {
    case 'fs':
      return new FsBlobStore({
        root: config.root,
        signer: new BlobUrlSigner({ secret: config.signingSecret, publicBaseUrl: config.publicBaseUrl }),
        maxUploadBytes: config.maxUploadBytes,
      });
    case 's3':
      return new S3BlobStore(config);
  }
}

export { FsBlobStore } from './fs.js';
export { S3BlobStore, type S3BlobStoreConfig } from './s3.js';
export { BLOB_ROUTE_PATH, BlobUrlSigner } from './signed-urls.js';
export { createSignedBlobRouter } from './signed-url-routes.js';
export * from './port.js';
