// HTTP adapter for the project's corpus (admin key or a signed-in member): the project is found first (404 for
// one the caller may not see), then the body is checked for its shape here and in full by the runtime, which keeps
// the documents (docs/decisions/0043).
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import type { KnowledgeService } from './service.js';

const DocumentParams = ProjectParams.extend({ documentId: z.uuid({ error: 'documentId must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const text = (max: number) => z.string().max(max);
const names = z.array(text(256)).max(50);

const CorpusDocumentOut = z
  .object({
    id: z.uuid(),
    title: z.string(),
    filename: z.string().nullable(),
    content_type: z.string(),
    size_bytes: z.int().nullable(),
    status: z.enum(['uploading', 'uploaded', 'processing', 'ready', 'failed']).meta({ description: '`processing` also while a failed attempt waits to be retried' }),
    failure: z.string().nullable().meta({
      description: "Why the ingest failed (`failed`), or why a reingest failed while the earlier chunks still answer (`ready`); while `processing`, the last attempt's error until an attempt succeeds",
    }),
    ingest_attempts: z.int().min(0).meta({ description: 'Attempts made at reading the document this time (0 before the first; back to 0 at a reingest)' }),
    corpus: z.literal('project'),
    visibility: z.literal('project'),
    owner: z.null(),
    scope: z.null(),
    allowed_roles: z.array(z.string()),
    allowed_groups: z.array(z.string()),
    metadata: z.record(z.string(), z.unknown()),
    chunk_count: z.int(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
    uploaded_at: z.iso.datetime().nullable(),
    ingested_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'CorpusDocument' });

const presignedPut = z.object({ method: z.literal('PUT'), url: z.string(), headers: z.record(z.string(), z.string()), expires_at: z.iso.datetime() });

const CorpusDocumentCreate = z
  .strictObject({
    title: text(500).optional().meta({ description: 'At most 500 characters; default: the file name' }),
    filename: text(255).optional().meta({ description: 'The file\'s name, without a path; needed with `size`' }),
    content_type: text(200)
      .optional()
      .meta({ description: 'With `text`: text/plain (default), text/markdown, text/html, text/csv or application/json. With `size`: one of those, application/pdf, or DOCX' }),
    allowed_roles: names.optional().meta({ description: 'Only end-users carrying one of these roles (or in one of allowed_groups) see it; empty (default): every end-user of the project' }),
    allowed_groups: names.optional(),
    metadata: z.record(z.string(), z.unknown()).optional().meta({ description: 'Your own fields, at most 16 KiB as JSON' }),
    text: z.string().optional().meta({ description: 'The document inline. Send this or `size`' }),
    size: z.int().min(1).optional().meta({ description: 'For a file: its size in bytes (at most 512 MiB). The answer says where to PUT it; then POST {"action": "complete"} to the document' }),
    multipart: z.boolean().optional().meta({ description: 'With `size`: upload in parts (default only above 64 MiB); every part\'s URL comes back' }),
    part_size: z.int().optional().meta({ description: 'With `size`: bytes per part, 5 MiB to 64 MiB; default 8 MiB' }),
  })
  .meta({ id: 'CorpusDocumentCreate' });

const CorpusDocumentCreated = z
  .object({
    document: CorpusDocumentOut,
    upload: z
      .discriminatedUnion('kind', [
        presignedPut.extend({ kind: z.literal('single') }),
        z.object({ kind: z.literal('multipart'), part_size: z.int(), part_count: z.int(), expires_at: z.iso.datetime() }),
      ])
      .nullable()
      .meta({ description: 'Null for inline text; otherwise where to PUT the file' }),
    parts: z.array(presignedPut.extend({ part_number: z.int() })).optional().meta({ description: 'For an upload in parts: each part\'s URL; keep the ETag each PUT answers' }),
  })
  .meta({ id: 'CorpusDocumentCreated' });

const MAX_CORPUS_PARTS = 103;
const CorpusDocumentAction = z
  .discriminatedUnion('action', [
    z.strictObject({
      action: z.literal('complete').meta({ description: 'The file was PUT: check it against what was declared, and read it' }),
      parts: z
        .array(z.strictObject({ part_number: z.int().min(1).max(MAX_CORPUS_PARTS), etag: text(256).min(1) }))
        .max(MAX_CORPUS_PARTS)
        .optional()
        .meta({ description: 'For an upload in parts: every part with the ETag its PUT answered' }),
    }),
    z.strictObject({ action: z.literal('reingest').meta({ description: 'Read it again with the processor and embedding model in force' }) }),
  ])
  .meta({ id: 'CorpusDocumentAction' });

const ListQuery = z.object({
  status: z.enum(['uploading', 'uploaded', 'processing', 'ready', 'failed']).optional(),
  limit: queryNumber((n) => n.int().min(1).max(200)).default(50),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
});
const WaitQuery = z.object({
  wait: queryNumber((n) => n.int().min(0).max(60)).default(0).meta({ description: 'Seconds to wait for the document to be read (at most 60); 0: answer at once' }),
});

const WikiPageOut = z
  .object({
    id: z.uuid(),
    kind: z.literal('wiki'),
    title: z.string(),
    content: z.string(),
    scope: z.string().meta({ description: 'Who sees it: this subtree of end-users, whoever\'s scope covers it, and privileged roles' }),
    author: z.string().meta({ description: 'The end-user whose turn wrote it last' }),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'WikiPage' });
const WikiParams = ProjectParams.extend({ itemId: z.uuid({ error: 'itemId must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const WikiQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(200)).default(100),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
});

const unavailable = { description: 'The project\'s runtime did not answer, or has not registered the project\'s tenant yet' };

export function knowledgeRoutes(knowledge: KnowledgeService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/documents',
      operationId: 'listCorpusDocuments',
      summary: "The project's corpus: documents every end-user of the project may search, newest first",
      tags: ['documents'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: ListQuery,
      responses: {
        200: { description: 'One page', schema: z.object({ documents: z.array(CorpusDocumentOut), has_more: z.boolean(), next_offset: z.int().nullable() }).meta({ id: 'CorpusDocumentPage' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        500: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: await knowledge.listDocuments(params.id, query) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/documents',
      operationId: 'createCorpusDocument',
      summary: 'Add a document to the project\'s corpus: inline text, or a file PUT straight to the store',
      description:
        'With `text`, the document is stored at once and waits to be read (`wait` to wait for it). With `size`, the answer holds the URL to PUT the file to, with the headers to send (`If-None-Match: *` among them: the URL only creates, and refuses every PUT, 412, once the upload is completed or deleted; in parts: every part\'s URL); then POST `{"action": "complete"}` to /api/projects/{id}/documents/{documentId}. The bytes never pass through the control plane.',
      tags: ['documents'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: WaitQuery,
      body: CorpusDocumentCreate,
      responses: {
        201: { description: 'The document, and where to upload its file', schema: CorpusDocumentCreated },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        422: { description: 'Invalid body (checked in full by the runtime), or, with `wait`, the ingest failed' },
        500: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query, body }) {
        return { status: 201, body: await knowledge.createDocument(params.id, body, query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/documents/{documentId}',
      operationId: 'getCorpusDocument',
      summary: 'One document of the project\'s corpus',
      tags: ['documents'],
      security: ['apiKey', 'session'],
      params: DocumentParams,
      responses: { 200: { description: 'The document', schema: CorpusDocumentOut }, 403: mintKeyOnAdminRoute, 404: projectHidden, 500: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await knowledge.getDocument(params.id, params.documentId) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/documents/{documentId}',
      operationId: 'actOnCorpusDocument',
      summary: 'Complete a corpus document\'s upload, or read it again',
      description:
        '`complete`: the file\'s size and media type are checked against what was declared (a mismatch is a 422 and the bytes are removed), and it waits to be read. 409 `upload_out_of_order` when the file (or a part) has not arrived.',
      tags: ['documents'],
      security: ['apiKey', 'session'],
      params: DocumentParams,
      query: WaitQuery,
      body: CorpusDocumentAction,
      responses: {
        200: { description: 'The document', schema: CorpusDocumentOut },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        409: { description: 'Upload out of order' },
        422: { description: 'Invalid body, an upload other than declared, or, with `wait`, a failed ingest' },
        500: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query, body }) {
        return { body: await knowledge.actOnDocument(params.id, params.documentId, body, query) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/documents/{documentId}',
      operationId: 'deleteCorpusDocument',
      summary: 'Delete a corpus document: its bytes (or upload in progress), chunks and vectors',
      tags: ['documents'],
      security: ['apiKey', 'session'],
      params: DocumentParams,
      responses: {
        200: { description: 'Deleted', schema: z.object({ id: z.uuid(), deleted: z.literal(true) }).meta({ id: 'CorpusDocumentDeleted' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        500: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await knowledge.deleteDocument(params.id, params.documentId) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/wiki',
      operationId: 'listWikiPages',
      summary: 'The pages the agent wrote in the project wiki, most recently updated first',
      tags: ['memory'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: WikiQuery,
      responses: {
        200: { description: 'One page', schema: z.object({ pages: z.array(WikiPageOut), has_more: z.boolean(), next_offset: z.int().nullable() }).meta({ id: 'WikiPageList' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        500: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: await knowledge.listWiki(params.id, query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/wiki/{itemId}',
      operationId: 'getWikiPage',
      summary: 'One page of the project wiki',
      tags: ['memory'],
      security: ['apiKey', 'session'],
      params: WikiParams,
      responses: { 200: { description: 'The page', schema: WikiPageOut }, 403: mintKeyOnAdminRoute, 404: projectHidden, 500: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await knowledge.getWikiPage(params.id, params.itemId) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/wiki/{itemId}',
      operationId: 'deleteWikiPage',
      summary: 'Delete a page of the project wiki',
      tags: ['memory'],
      security: ['apiKey', 'session'],
      params: WikiParams,
      responses: {
        200: { description: 'Deleted', schema: z.object({ id: z.uuid(), deleted: z.literal(true) }).meta({ id: 'WikiPageDeleted' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        500: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await knowledge.deleteWikiPage(params.id, params.itemId) };
      },
    }),
  ];
}
