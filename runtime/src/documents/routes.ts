// HTTP adapter for documents (bearer; capabilities `documents:read` and `documents:write`): parse, call the document
// service, answer. Every route finds its document through the service's authorization first, so a document the
// caller may not see answers 404 before its body is looked at.
import { ValidationError } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { principalOf } from '../auth/guard.js';
import { DOCUMENT_CONTENT_TYPES, MAX_INLINE_BYTES } from './limits.js';
import {
  ChunkPage,
  ChunkPageQuery,
  CompleteUploadRequest,
  DocumentDeleted,
  DocumentIdParams,
  DocumentListQuery,
  DocumentOut,
  DocumentPage,
  DocumentUpdate,
  DownloadUrl,
  IngestWaitQuery,
  InlineDocumentForm,
  InlineDocumentRequest,
  PresignedParts,
  PresignedUpload,
  PresignPartsRequest,
  PresignUploadRequest,
  RetrieveRequest,
  RetrieveResponse,
  type DocumentOutput,
  type InlineDocumentFormInput,
} from './schemas.js';
import { documentOut, type DocumentRow, type DocumentService } from './service.js';

const readDenied = { description: 'The token lacks capability `documents:read` (`code` `capability_denied`)' };
const writeDenied = {
  description:
    'The token lacks capability `documents:write` (`code` `capability_denied`), or the document is another subject\'s or the project corpus\'s: this token may read it, not change it (`code` `not_owner`)',
};
const notFound = { description: 'No such document, or one this token may not see (the same answer)' };
const ingestFailed = { description: 'With `wait`: the ingest failed on the document (its record, readable with GET, says why)' };
const outOfOrder = { description: 'Upload out of order (`code` `upload_out_of_order`): a step before its time, a part number outside the upload, or parts not all arrived' };

/** The row the route's authorization found, for its handler. */
const FOUND = 'document';
const found = (res: { locals: Record<string, unknown> }) => res.locals[FOUND] as DocumentRow;

export function documentRoutes(documents: DocumentService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/documents',
      operationId: 'listDocuments',
      summary: 'List the documents this token sees, newest first',
      description:
        'Your own documents, those shared with a scope you are in (or that covers their owner), and the project corpus; allowed roles and groups narrow what is shared. A privileged token (role admin, owner or service) sees every document but other subjects\' `self` ones. Page with `offset`.',
      tags: ['documents'],
      security: ['bearer'],
      query: DocumentListQuery,
      responses: { 200: { description: 'One page', schema: DocumentPage }, 403: readDenied },
      authorize: ({ res }) => documents.authorizeList(principalOf(res)),
      async handle({ query, res }) {
        return { body: await documents.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents',
      operationId: 'createDocument',
      summary: 'Add a small document inline: JSON text, or a file in a form',
      description:
        `JSON: \`text\` with its \`content_type\`, up to the request body limit. A form (multipart/form-data): the file in part \`file\` (at most ${MAX_INLINE_BYTES} bytes, one of ${DOCUMENT_CONTENT_TYPES.join(', ')}), ` +
        'and the same fields as text (`allowed_roles` and `allowed_groups` comma-separated, `metadata` as JSON). Larger files go straight to the store: POST /documents/presign-upload. The document is `uploaded` and waits to be read.',
      tags: ['documents'],
      security: ['bearer'],
      query: IngestWaitQuery,
      body: InlineDocumentRequest,
      multipart: { file: 'file', maxFileBytes: MAX_INLINE_BYTES, fields: InlineDocumentForm },
      responses: {
        201: { description: 'The document', schema: DocumentOut },
        403: writeDenied,
        422: ingestFailed,
        413: { description: 'The file is larger than an inline upload takes' },
        415: { description: 'Neither JSON nor a form' },
      },
      authorize: ({ res }) => documents.authorizeCreate(principalOf(res)),
      async handle({ body, form, query, res }) {
        const principal = principalOf(res);
        const settled = async (created: DocumentOutput) => ({ status: 201, body: query.wait > 0 ? await documents.awaitIngest(created, query.wait) : created });
        if (form) {
          const fields = form.fields as InlineDocumentFormInput;
          if (!form.file) throw new ValidationError([{ loc: ['body', 'file'], msg: 'a form needs the file in part `file`' }]);
          const contentType = form.file.contentType.split(';')[0]!.trim().toLowerCase();
          if (!(DOCUMENT_CONTENT_TYPES as readonly string[]).includes(contentType)) {
            throw new ValidationError([{ loc: ['body', 'file'], msg: `the file is ${form.file.contentType}; documents are ${DOCUMENT_CONTENT_TYPES.join(', ')}` }]);
          }
          if (form.file.bytes.length === 0) throw new ValidationError([{ loc: ['body', 'file'], msg: 'the file is empty' }]);
          const created = await documents.createInline(
            principal,
            {
              title: fields.title,
              filename: safeFilename(form.file.filename),
              contentType,
              visibility: fields.visibility,
              allowedRoles: fields.allowed_roles,
              allowedGroups: fields.allowed_groups,
              metadata: fields.metadata as Record<string, unknown>,
            },
            form.file.bytes,
          );
          return settled(created);
        }
        const created = await documents.createInline(
          principal,
          {
            title: body.title,
            filename: body.filename,
            contentType: body.content_type,
            visibility: body.visibility,
            allowedRoles: body.allowed_roles,
            allowedGroups: body.allowed_groups,
            metadata: body.metadata,
          },
          Buffer.from(body.text, 'utf8'),
        );
        return settled(created);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents/retrieve',
      operationId: 'retrieveDocuments',
      summary: 'The chunks of the documents this token sees that best answer a query',
      description:
        'By meaning (the project\'s embedding model) and by words, fused by reciprocal rank; the same search the agent\'s document tool makes. Documents the token may not see are never searched, so `k` visible chunks come back when there are that many.',
      tags: ['documents'],
      security: ['bearer'],
      body: RetrieveRequest,
      responses: { 200: { description: 'The best chunks, best first', schema: RetrieveResponse }, 403: readDenied },
      authorize: ({ res }) => documents.authorizeList(principalOf(res)),
      async handle({ body, res }) {
        return { body: await documents.retrieve(principalOf(res), body) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents/presign-upload',
      operationId: 'presignDocumentUpload',
      summary: 'Start an upload straight to the store: one presigned PUT, or an upload in parts',
      description:
        'Creates the document (`uploading`) and answers how to send its bytes. Single: PUT them to `upload.url` with `upload.headers` (`If-None-Match: *` among them: the URL only creates, so a second PUT is 412 once bytes arrived, and for good once the upload is completed, aborted or deleted), then POST /documents/{id}/complete-upload. ' +
        'In parts: POST /documents/{id}/presign-parts for part URLs, PUT each part, then complete-upload with every part\'s ETag. An upload not completed by `upload.expires_at` is abandoned and removed.',
      tags: ['documents'],
      security: ['bearer'],
      body: PresignUploadRequest,
      responses: { 201: { description: 'The document and its upload', schema: PresignedUpload }, 403: writeDenied },
      authorize: ({ res }) => documents.authorizeCreate(principalOf(res)),
      async handle({ body, res }) {
        return { status: 201, body: await documents.presignUpload(principalOf(res), body) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents/{id}/presign-parts',
      operationId: 'presignDocumentParts',
      summary: 'URLs to PUT parts of an upload to',
      description: 'Each URL lives an hour; ask again for a part whose URL expired, until the upload\'s deadline.',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      body: PresignPartsRequest,
      responses: { 200: { description: 'One URL per part asked for', schema: PresignedParts }, 403: writeDenied, 404: notFound, 409: outOfOrder },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeChange(principalOf(res), params.id)),
      async handle({ body, res }) {
        return { body: await documents.presignParts(found(res), body.part_numbers) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents/{id}/complete-upload',
      operationId: 'completeDocumentUpload',
      summary: 'End an upload: its bytes are checked against what was declared, and the document waits to be read',
      description:
        'For an upload in parts, list every part with the ETag its PUT answered. A size or media type other than declared is a 422 and the bytes are removed (a single upload\'s URL then takes a new PUT). Completing again answers the document as it is.',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      query: IngestWaitQuery,
      body: CompleteUploadRequest,
      responses: {
        200: { description: 'The document, `uploaded` (or, with `wait`, read)', schema: DocumentOut },
        403: writeDenied,
        404: notFound,
        409: outOfOrder,
        422: { description: 'The bytes that arrived are not what was declared (size or media type); or, with `wait`, the ingest failed' },
      },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeChange(principalOf(res), params.id)),
      async handle({ body, query, res }) {
        const completed = await documents.completeUpload(found(res), body.parts);
        return { body: query.wait > 0 ? await documents.awaitIngest(completed, query.wait) : completed };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents/{id}/abort-upload',
      operationId: 'abortDocumentUpload',
      summary: 'Give up an upload: the document and every byte or part that arrived are removed',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      responses: { 200: { description: 'Removed', schema: DocumentDeleted }, 403: writeDenied, 404: notFound, 409: { description: 'The upload is over: delete the document instead' } },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeChange(principalOf(res), params.id)),
      async handle({ res }) {
        return { body: await documents.abortUpload(found(res)) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/documents/{id}',
      operationId: 'getDocument',
      summary: 'One document',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      responses: { 200: { description: 'The document', schema: DocumentOut }, 403: readDenied, 404: notFound },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeRead(principalOf(res), params.id)),
      async handle({ res }) {
        return { body: documentOut(found(res)) };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/documents/{id}',
      operationId: 'updateDocument',
      summary: 'Change a document\'s title, metadata or who sees it (its owner only)',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      body: DocumentUpdate,
      responses: { 200: { description: 'The document', schema: DocumentOut }, 403: writeDenied, 404: notFound },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeChange(principalOf(res), params.id)),
      async handle({ body, res }) {
        return { body: await documents.update(principalOf(res), found(res), body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/documents/{id}',
      operationId: 'deleteDocument',
      summary: 'Delete a document and its bytes (its owner only)',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      responses: { 200: { description: 'Deleted', schema: DocumentDeleted }, 403: writeDenied, 404: notFound },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeChange(principalOf(res), params.id)),
      async handle({ res }) {
        return { body: await documents.delete(found(res)) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/documents/{id}/reingest',
      operationId: 'reingestDocument',
      summary: 'Read the document again (its owner only): after the reader, the document processor or the embedding model changed',
      description: 'The chunks it serves now keep answering until the new ones are complete. A reingest that fails leaves them, and says why in `failure`.',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      query: IngestWaitQuery,
      responses: {
        202: { description: 'The document, `processing` (or, with `wait`, read)', schema: DocumentOut },
        403: writeDenied,
        404: notFound,
        409: { description: 'The upload is not complete yet: nothing to read' },
        422: ingestFailed,
      },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeChange(principalOf(res), params.id)),
      async handle({ query, res }) {
        const queued = await documents.reingest(found(res));
        return { status: 202, body: query.wait > 0 ? await documents.awaitIngest(queued, query.wait) : queued };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/documents/{id}/chunks',
      operationId: 'listDocumentChunks',
      summary: 'The chunks the document is searched by, in order, each with its place in the document',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      query: ChunkPageQuery,
      responses: { 200: { description: 'One page', schema: ChunkPage }, 403: readDenied, 404: notFound, 422: { description: 'The ingest failed on the document: `failure` on the document says why' } },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeRead(principalOf(res), params.id)),
      async handle({ query, res }) {
        return { body: await documents.chunks(found(res), query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/documents/{id}/download-url',
      operationId: 'documentDownloadUrl',
      summary: 'A short-lived URL to download the document\'s bytes',
      description: 'The URL lives five minutes.',
      tags: ['documents'],
      security: ['bearer'],
      params: DocumentIdParams,
      responses: { 200: { description: 'The URL', schema: DownloadUrl }, 403: readDenied, 404: notFound, 409: { description: 'The upload is not complete yet: no bytes to download' } },
      authorize: async ({ params, res }) => void (res.locals[FOUND] = await documents.authorizeRead(principalOf(res), params.id)),
      async handle({ res }) {
        return { body: await documents.downloadUrl(found(res)) };
      },
    }),
  ];
}

/** A form's file name as a name, never a path, and only when it is printable text of a sane length. */
function safeFilename(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const base = name.split(/[/\\]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex
  if (base === '' || base.length > 255 || /[\u0000-\u001f\u007f]/.test(base) || /[\uD800-\uDFFF]/.test(base.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''))) return undefined;
  return base;
}
