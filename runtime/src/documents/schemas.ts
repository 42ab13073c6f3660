// The wire shapes of the document routes (docs/decisions/0039): what SPEC.md leaves "not shown" (the record's
// fields, the upload limits) is decided here, once, and the same schemas validate requests and feed /openapi.json.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { DOCUMENT_STATUSES } from './model.js';
import {
  DEFAULT_PART_SIZE,
  DOCUMENT_CONTENT_TYPES,
  MAX_ACL_NAMES,
  MAX_DOCUMENT_BYTES,
  MAX_METADATA_BYTES,
  MAX_PART_SIZE,
  MAX_PARTS_PER_REQUEST,
  MAX_SINGLE_UPLOAD_BYTES,
  MAX_TITLE_LENGTH,
  MIN_PART_SIZE,
  TEXT_CONTENT_TYPES,
  MAX_DOCUMENT_PAGE,
  DEFAULT_DOCUMENT_PAGE,
  MAX_INGEST_WAIT_SECONDS,
  MAX_QUERY_LENGTH,
  MAX_RETRIEVE_K,
  DEFAULT_RETRIEVE_K,
} from './limits.js';

const title = z.string().trim().min(1).max(MAX_TITLE_LENGTH).meta({ description: `At most ${MAX_TITLE_LENGTH} characters; default: the file name` });
const filename = z
  .string()
  .min(1)
  .max(255)
  .refine((value) => !/[/\\]/.test(value), 'must be a file name, not a path')
  .meta({ description: 'The file\'s name, without a path (at most 255 characters)' });
const aclName = z.string().min(1).max(256);
const allowedRoles = z
  .array(aclName)
  .max(MAX_ACL_NAMES)
  .meta({ description: `Only callers carrying one of these roles (or one of allowed_groups) see the document; empty: no such limit. At most ${MAX_ACL_NAMES}` });
const allowedGroups = z.array(aclName).max(MAX_ACL_NAMES).meta({ description: `Only callers in one of these groups (or carrying one of allowed_roles) see the document. At most ${MAX_ACL_NAMES}` });
const metadata = z
  .record(z.string().max(256), z.unknown())
  .refine((value) => Buffer.byteLength(JSON.stringify(value)) <= MAX_METADATA_BYTES, `must be at most ${MAX_METADATA_BYTES} bytes as JSON`)
  .meta({ description: `Your own fields, kept and returned as given; at most ${MAX_METADATA_BYTES} bytes as JSON` });
const visibility = z
  .enum(['scope', 'self'])
  .meta({
    description:
      '`scope` (default): everyone under your token\'s scope, and whoever\'s scope covers you; `self`: only you, not even an admin. The project-wide corpus is uploaded on the control plane',
  });
const contentType = z
  .string()
  .transform((value) => value.split(';')[0]!.trim().toLowerCase())
  .pipe(z.enum(DOCUMENT_CONTENT_TYPES, { error: `must be one of ${DOCUMENT_CONTENT_TYPES.join(', ')}` }))
  .meta({ description: `The file's media type, one of ${DOCUMENT_CONTENT_TYPES.join(', ')} (parameters such as charset are dropped)` });

/** What every new document may say about itself. */
const documentFields = {
  title: title.optional(),
  visibility: visibility.default('scope'),
  allowed_roles: allowedRoles.default([]),
  allowed_groups: allowedGroups.default([]),
  metadata: metadata.default({}),
};

export const InlineDocumentRequest = z
  .strictObject({
    ...documentFields,
    text: z.string().min(1).meta({ description: 'The document\'s text; for files, send a form (multipart/form-data) or use presign-upload' }),
    content_type: z.enum(TEXT_CONTENT_TYPES).default('text/plain').meta({ description: `How to read the text: ${TEXT_CONTENT_TYPES.join(', ')}` }),
    filename: filename.optional(),
  })
  .meta({ id: 'InlineDocumentRequest' });
export type InlineDocumentInput = z.infer<typeof InlineDocumentRequest>;

/** A form's fields are text: lists are comma-separated, metadata is JSON. */
const formList = (schema: z.ZodType<string[], string[]>) =>
  z
    .string()
    .transform((value) => value.split(',').map((item) => item.trim()).filter((item) => item !== ''))
    .pipe(schema);
export const InlineDocumentForm = z.strictObject({
  title: title.optional(),
  visibility: visibility.default('scope'),
  allowed_roles: formList(allowedRoles).default([]),
  allowed_groups: formList(allowedGroups).default([]),
  metadata: z
    .string()
    .transform((value, ctx) => {
      try {
        return JSON.parse(value) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
        return z.NEVER;
      }
    })
    .pipe(metadata)
    .default({}),
});
export type InlineDocumentFormInput = z.infer<typeof InlineDocumentForm>;

export const PresignUploadRequest = z
  .strictObject({
    ...documentFields,
    filename,
    content_type: contentType,
    size: z
      .int()
      .min(1)
      .max(MAX_DOCUMENT_BYTES)
      .meta({ description: `The file's size in bytes, at most ${MAX_DOCUMENT_BYTES}; checked when the upload completes` }),
    multipart: z
      .boolean()
      .optional()
      .meta({ description: `Upload in parts (default: only when size is above ${MAX_SINGLE_UPLOAD_BYTES} bytes, the largest single upload)` }),
    part_size: z
      .int()
      .min(MIN_PART_SIZE)
      .max(MAX_PART_SIZE)
      .optional()
      .meta({ description: `Bytes per part (every part but the last), ${MIN_PART_SIZE} to ${MAX_PART_SIZE}; default ${DEFAULT_PART_SIZE}` }),
  })
  .meta({ id: 'PresignUploadRequest' });
export type PresignUploadInput = z.infer<typeof PresignUploadRequest>;

export const PresignPartsRequest = z
  .strictObject({
    part_numbers: z
      .array(z.int().min(1).max(10_000))
      .min(1)
      .max(MAX_PARTS_PER_REQUEST)
      .meta({ description: `Which parts to sign URLs for, each from 1 to the upload's part_count; at most ${MAX_PARTS_PER_REQUEST} a request` }),
  })
  .meta({ id: 'PresignPartsRequest' });

export const CompleteUploadRequest = z
  .strictObject({
    parts: z
      .array(z.strictObject({ part_number: z.int().min(1).max(10_000), etag: z.string().min(1).max(256) }))
      .max(10_000)
      .optional()
      .meta({ description: 'For an upload in parts: every part, 1 to part_count, with the ETag its PUT answered. Not sent for a single upload' }),
  })
  .meta({ id: 'CompleteUploadRequest' });

export const DocumentUpdate = z
  .strictObject({
    title: title.optional(),
    visibility: visibility.optional(),
    allowed_roles: allowedRoles.optional(),
    allowed_groups: allowedGroups.optional(),
    metadata: metadata.optional().meta({ description: 'Replaces the metadata as a whole' }),
  })
  .refine((value) => Object.values(value).some((field) => field !== undefined), 'name at least one field to change')
  .meta({ id: 'DocumentUpdate' });
export type DocumentUpdateInput = z.infer<typeof DocumentUpdate>;

export const DocumentListQuery = z.object({
  status: z.enum(DOCUMENT_STATUSES).optional().meta({ description: 'Only documents in this state' }),
  limit: queryNumber((n) => n.int().min(1).max(MAX_DOCUMENT_PAGE)).default(DEFAULT_DOCUMENT_PAGE).meta({ description: `Page size, at most ${MAX_DOCUMENT_PAGE}` }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0).meta({ description: 'How many documents to skip: the previous page\'s next_offset' }),
});
export type DocumentListInput = z.infer<typeof DocumentListQuery>;

export const DocumentIdParams = z.object({ id: z.uuid({ error: 'id must be a UUID' }) });

const timestamp = z.iso.datetime();
export const DocumentOut = z
  .object({
    id: z.uuid(),
    title: z.string(),
    filename: z.string().nullable(),
    content_type: z.string(),
    size_bytes: z.int().nullable().meta({ description: 'Null until the upload completes' }),
    status: z.enum(DOCUMENT_STATUSES).meta({
      description:
        '`uploading` until the upload completes; then `uploaded`, `processing` while it is read, chunked and embedded (and while a failed attempt waits to be retried), and `ready`, or `failed` with `failure` saying why',
    }),
    failure: z.string().nullable().meta({
      description:
        'Why the ingest failed (`failed`), or why a reingest failed while the earlier chunks still answer (`ready`); while `processing`, the last attempt\'s error (`attempt N of M failed, retrying: ...`) until an attempt succeeds. Null when nothing failed',
    }),
    ingest_attempts: z.int().min(0).meta({
      description: 'Attempts made at reading the document this time (0 before the first; back to 0 at a reingest). More than 1 means earlier attempts failed and were retried',
    }),
    corpus: z.enum(['tenant', 'project']).meta({ description: '`project`: the project-wide corpus, managed on the control plane' }),
    visibility: z.enum(['project', 'scope', 'self']),
    owner: z.string().nullable().meta({ description: 'The subject that uploaded it; null for the project corpus' }),
    scope: z.string().nullable().meta({ description: 'For visibility `scope`: the subtree that sees it' }),
    allowed_roles: z.array(z.string()),
    allowed_groups: z.array(z.string()),
    metadata: z.record(z.string(), z.unknown()),
    chunk_count: z.int(),
    created_at: timestamp,
    updated_at: timestamp,
    uploaded_at: timestamp.nullable(),
    ingested_at: timestamp.nullable(),
  })
  .meta({ id: 'Document' });
export type DocumentOutput = z.infer<typeof DocumentOut>;

export const DocumentPage = z
  .object({
    documents: z.array(DocumentOut).meta({ description: 'Newest first, ties broken by id' }),
    has_more: z.boolean(),
    next_offset: z.int().nullable(),
  })
  .meta({ id: 'DocumentPage' });

const presignedPut = z.object({
  method: z.literal('PUT'),
  url: z.string(),
  headers: z.record(z.string(), z.string()).meta({ description: 'Send these headers with the PUT, exactly' }),
  expires_at: timestamp,
});

export const PresignedUpload = z
  .object({
    document: DocumentOut,
    upload: z.discriminatedUnion('kind', [
      presignedPut.extend({ kind: z.literal('single') }),
      z.object({
        kind: z.literal('multipart'),
        part_size: z.int(),
        part_count: z.int(),
        expires_at: timestamp.meta({ description: 'The upload is abandoned (and its parts removed) unless completed by then' }),
      }),
    ]),
  })
  .meta({ id: 'PresignedUpload' });

export const PresignedParts = z
  .object({
    parts: z.array(presignedPut.extend({ part_number: z.int() })).meta({ description: 'PUT each part\'s bytes to its URL and keep the ETag header of the answer for complete-upload' }),
  })
  .meta({ id: 'PresignedParts' });

export const DownloadUrl = z.object({ url: z.string(), expires_at: timestamp }).meta({ id: 'DocumentDownloadUrl' });
export const DocumentDeleted = z.object({ id: z.uuid(), deleted: z.literal(true) }).meta({ id: 'DocumentDeleted' });

export const IngestWaitQuery = z.object({
  wait: z.coerce
    .number()
    .int()
    .min(0)
    .max(MAX_INGEST_WAIT_SECONDS)
    .default(0)
    .meta({ description: `Seconds to wait for the document to be read (at most ${MAX_INGEST_WAIT_SECONDS}): the answer is then the document \`ready\`, a 422 if its ingest failed, or the document as it is when the wait ran out. Default 0: answer at once` }),
});

export const ChunkPageQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(MAX_DOCUMENT_PAGE)).default(DEFAULT_DOCUMENT_PAGE).meta({ description: `Page size, at most ${MAX_DOCUMENT_PAGE}` }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
});

export const DocumentChunkOut = z
  .object({
    id: z.uuid(),
    ordinal: z.int().meta({ description: 'Its place in the document, from 0' }),
    text: z.string(),
    heading_path: z.array(z.string()).meta({ description: 'The headings it is under, outermost first' }),
    start: z.int().meta({ description: 'Where it starts in the document\'s text, in characters (UTF-16 code units)' }),
    end: z.int(),
    page: z.int().nullable().meta({ description: 'Its page, for paged formats (PDF)' }),
    tokens: z.int(),
  })
  .meta({ id: 'DocumentChunk' });
export type DocumentChunkOutput = z.infer<typeof DocumentChunkOut>;

export const ChunkPage = z.object({ chunks: z.array(DocumentChunkOut), has_more: z.boolean(), next_offset: z.int().nullable() }).meta({ id: 'DocumentChunkPage' });

export const RetrieveRequest = z
  .strictObject({
    query: z.string().trim().min(1).max(MAX_QUERY_LENGTH).meta({ description: `What to look for, in words (at most ${MAX_QUERY_LENGTH} characters)` }),
    k: z.int().min(1).max(MAX_RETRIEVE_K).default(DEFAULT_RETRIEVE_K).meta({ description: `How many chunks to answer, at most ${MAX_RETRIEVE_K}` }),
    document_ids: z.array(z.uuid()).min(1).max(100).optional().meta({ description: 'Search only these documents (of those this token sees)' }),
  })
  .meta({ id: 'RetrieveRequest' });
export type RetrieveInput = z.infer<typeof RetrieveRequest>;

export const RetrieveResponse = z
  .object({
    results: z.array(
      z.object({
        document_id: z.uuid(),
        title: z.string(),
        chunk_id: z.uuid(),
        ordinal: z.int(),
        text: z.string(),
        heading_path: z.array(z.string()),
        start: z.int(),
        end: z.int(),
        page: z.int().nullable(),
        score: z.number().meta({ description: 'Reciprocal-rank-fused score (or, when `reranked`, the rerank model\'s relevance), higher is better; comparable within one answer' }),
        matched: z.array(z.enum(['vector', 'keyword'])).meta({ description: 'Which searches found the chunk' }),
      }),
    ),
    mode: z.enum(['hybrid', 'keyword']).meta({ description: '`hybrid`: by meaning and by words; `keyword`: by words only (the project has no embedding model)' }),
    reranked: z
      .boolean()
      .meta({ description: 'true: the project\'s rerank model ordered the best candidates, and `score` is its relevance; false: the fused order (no rerank model, or it failed)' }),
  })
  .meta({ id: 'RetrieveResponse' });

// ---------------------------------------------------------------------------------------------------------------
// The project's corpus, on the runtime's admin surface for the control plane (docs/decisions/0043)

export const CorpusDocumentRequest = z
  .strictObject({
    title: title.optional(),
    filename: filename.optional(),
    content_type: contentType.optional().meta({ description: `The media type: with \`text\`, one of ${TEXT_CONTENT_TYPES.join(', ')} (default text/plain); with \`size\`, one of ${DOCUMENT_CONTENT_TYPES.join(', ')}` }),
    allowed_roles: allowedRoles.default([]),
    allowed_groups: allowedGroups.default([]),
    metadata: metadata.default({}),
    text: z.string().min(1).optional().meta({ description: 'The document inline, as text (up to the request body limit). Send this or `size`' }),
    size: z
      .int()
      .min(1)
      .max(MAX_DOCUMENT_BYTES)
      .optional()
      .meta({ description: `For a file: its size in bytes (at most ${MAX_DOCUMENT_BYTES}); the answer holds the URL (or, above ${MAX_SINGLE_UPLOAD_BYTES} bytes, the part URLs) to PUT it to, then complete it` }),
    multipart: z.boolean().optional().meta({ description: 'With `size`: upload in parts (default: only above the largest single upload)' }),
    part_size: z.int().min(MIN_PART_SIZE).max(MAX_PART_SIZE).optional().meta({ description: `With \`size\`: bytes per part, ${MIN_PART_SIZE} to ${MAX_PART_SIZE}; default ${DEFAULT_PART_SIZE}` }),
  })
  .superRefine((value, ctx) => {
    if ((value.text === undefined) === (value.size === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['text'], message: 'send either `text` (the document inline) or `size` (to PUT the file straight to the store)' });
      return;
    }
    if (value.text !== undefined) {
      if (value.content_type !== undefined && !(TEXT_CONTENT_TYPES as readonly string[]).includes(value.content_type)) {
        ctx.addIssue({ code: 'custom', path: ['content_type'], message: `inline text is one of ${TEXT_CONTENT_TYPES.join(', ')}; upload other files with \`size\`` });
      }
      for (const field of ['multipart', 'part_size'] as const) {
        if (value[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `\`${field}\` goes with \`size\`, not with inline \`text\`` });
      }
    } else {
      if (value.content_type === undefined) ctx.addIssue({ code: 'custom', path: ['content_type'], message: 'a file upload needs its media type' });
      if (value.filename === undefined) ctx.addIssue({ code: 'custom', path: ['filename'], message: 'a file upload needs its file name' });
    }
  })
  .meta({ id: 'CorpusDocumentRequest' });
export type CorpusDocumentInput = z.infer<typeof CorpusDocumentRequest>;

export const CorpusDocumentCreated = z
  .object({
    document: DocumentOut,
    upload: PresignedUpload.shape.upload.nullable().meta({ description: 'Null for inline text; otherwise where to PUT the file' }),
    parts: PresignedParts.shape.parts.optional().meta({ description: 'For an upload in parts: every part\'s URL' }),
  })
  .meta({ id: 'CorpusDocumentCreated' });

/** The most parts a corpus upload has: the largest document in parts of the smallest size. */
const MAX_CORPUS_PARTS = Math.ceil(MAX_DOCUMENT_BYTES / MIN_PART_SIZE);

export const CorpusDocumentAction = z
  .discriminatedUnion('action', [
    z.strictObject({
      action: z.literal('complete').meta({ description: 'The file was PUT: check it against what was declared, and read it' }),
      parts: z
        .array(z.strictObject({ part_number: z.int().min(1).max(MAX_CORPUS_PARTS), etag: z.string().min(1).max(256) }))
        .max(MAX_CORPUS_PARTS)
        .optional()
        .meta({ description: 'For an upload in parts: every part, 1 to part_count, with the ETag its PUT answered' }),
    }),
    z.strictObject({ action: z.literal('reingest').meta({ description: 'Read it again with the processor and embedding model in force' }) }),
  ])
  .meta({ id: 'CorpusDocumentAction' });

const tenantIdParam = z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase());
export const CorpusParams = z.object({ tenant_id: tenantIdParam });
export const CorpusDocumentParams = z.object({
  tenant_id: tenantIdParam,
  document_id: z.uuid({ error: 'document_id must be a UUID' }),
});
