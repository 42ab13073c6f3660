// Document states and where a document's bytes are kept.
import { tenantBlobPrefix } from '../tenants/keys.js';

export const DOCUMENT_STATUSES = ['uploading', 'uploaded', 'processing', 'ready', 'failed'] as const;

/** Where a document's bytes are: under its tenant's prefix (so the tenant erase finds them), or the project's. */
export const documentBlobKey = (tenantId: string | null, documentId: string) =>
  tenantId === null ? `project/documents/${documentId}` : `${tenantBlobPrefix(tenantId)}documents/${documentId}`;
