// The document limits SPEC.md leaves "not shown" (docs/decisions/0039), in one place.
import { MAX_PART_NUMBER, MIN_PART_SIZE as STORE_MIN_PART_SIZE } from '../blob/port.js';

/** The formats ingestion reads (parsers in ./parse). */
export const DOCUMENT_CONTENT_TYPES = [
  'text/plain',
  'text/markdown',
  'text/html',
  'text/csv',
  'application/json',
  'application/pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
] as const;
export type DocumentContentType = (typeof DOCUMENT_CONTENT_TYPES)[number];
/** The formats `POST /documents` takes as JSON text. */
export const TEXT_CONTENT_TYPES = ['text/plain', 'text/markdown', 'text/html', 'text/csv', 'application/json'] as const;

/** The largest document: big enough for a long manual or a year of reports, small enough to ingest in one job. */
export const MAX_DOCUMENT_BYTES = 512 * 1024 ** 2;
/** The largest file `POST /documents` takes inline, through this process; larger ones go straight to the store. */
export const MAX_INLINE_BYTES = 10 * 1024 ** 2;
/** The largest single presigned PUT; a larger document is uploaded in parts. */
export const MAX_SINGLE_UPLOAD_BYTES = 64 * 1024 ** 2;
/** Every part but the last is at least S3's floor. */
export const MIN_PART_SIZE = STORE_MIN_PART_SIZE;
export const MAX_PART_SIZE = 64 * 1024 ** 2;
export const DEFAULT_PART_SIZE = 8 * 1024 ** 2;
export const MAX_PART_COUNT = MAX_PART_NUMBER;
/** Part URLs one presign-parts request signs. */
export const MAX_PARTS_PER_REQUEST = 1_000;

/** How long a presigned upload URL (single or part) lives; parts can be signed again until the upload's deadline. */
export const UPLOAD_URL_SECONDS = 60 * 60;
/** How long an upload may take before it is abandoned and its bytes removed. */
export const UPLOAD_DEADLINE_SECONDS = 24 * 60 * 60;
/** How long a download URL lives. */
export const DOWNLOAD_URL_SECONDS = 5 * 60;

export const MAX_TITLE_LENGTH = 500;
export const MAX_ACL_NAMES = 50;
export const MAX_METADATA_BYTES = 16 * 1024;
export const MAX_DOCUMENT_PAGE = 200;
export const DEFAULT_DOCUMENT_PAGE = 50;
/** The longest a request waits for its document to be read (`?wait=`). */
export const MAX_INGEST_WAIT_SECONDS = 60;
/** Retrieval: the longest query, and how many chunks an answer may hold. */
export const MAX_QUERY_LENGTH = 4_000;
export const MAX_RETRIEVE_K = 50;
export const DEFAULT_RETRIEVE_K = 8;
