// Document states and where a document's bytes are kept.
import { tenantBlobPrefix } from '../tenants/keys.js';

export const DOCUMENT_STATUSES = ['uploading', 'uploaded', 'processing', 'ready', 'failed'] as const;

/** Where a document's bytes are: under its tenant's prefix (so the tenant erase finds them), or the project's. */
export const documentBlobKey = (tenantId: string | null, documentId: string) =>
  tenantId === null ? `project/documents/${documentId}` : `${tenantBlobPrefix(tenantId)}documents/${documentId}`;

/**
 * Where a presigned single upload's bytes land before complete checks them and copies them to the document's key
 * (docs/decisions/0073): a key of this upload alone, never the document's, so the URL can never replace what was
 * checked. Under the tenant's prefix, so the tenant erase finds it.
 */
export const uploadStagingKey = (tenantId: string, documentId: string) => `${tenantBlobPrefix(tenantId)}uploads/${documentId}`;
