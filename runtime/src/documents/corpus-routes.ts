// HTTP adapter for the project's corpus on the runtime's admin surface (`X-Admin-Key`): the control plane's
// `/api/projects/:id/documents` routes call these for the project's tenant (docs/decisions/0043). The tenant is
// found first (404 for an unknown one), then the document (404 for one outside the tenant's corpus), then the body.
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import type { TenantService } from '../tenants/service.js';
import {
  CorpusDocumentAction,
  CorpusDocumentCreated,
  CorpusDocumentParams,
  CorpusDocumentRequest,
  CorpusParams,
  DocumentDeleted,
  DocumentListQuery,
  DocumentOut,
  DocumentPage,
  IngestWaitQuery,
} from './schemas.js';
import { documentOut, type DocumentService } from './service.js';

const unauthorized = { description: 'Missing or wrong X-Admin-Key' };
const notFound = { description: 'No such tenant (`code` `tenant_not_found`), or no such document in its corpus' };
const outOfOrder = { description: 'Upload out of order (`code` `upload_out_of_order`): complete before the file (or every part) arrived' };

export function corpusRoutes(documents: DocumentService, tenants: TenantService): RouteDefinition[] {
  const tenantOf = (tenantId: string) => tenants.existing(tenantId);
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/documents',
      operationId: 'listCorpusDocuments',
      summary: "List the tenant's corpus (project-wide documents), newest first",
      tags: ['tenants'],
      security: ['adminKey'],
      params: CorpusParams,
      query: DocumentListQuery,
      responses: { 200: { description: 'One page', schema: DocumentPage }, 401: unauthorized, 404: notFound },
      async handle({ params, query }) {
        return { body: await documents.listCorpus(await tenantOf(params.tenant_id), query) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tenants/{tenant_id}/documents',
      operationId: 'createCorpusDocument',
      summary: "Add a document to the tenant's corpus: inline text, or a file PUT straight to the store",
      description:
        'With `text`, the document is stored at once and waits to be read. With `size`, the answer holds the URL (or every part\'s URL) to PUT the file to; then complete it with POST /tenants/{tenant_id}/documents/{document_id} `{"action": "complete"}`. Every end-user of the tenant sees the corpus, narrowed by `allowed_roles` and `allowed_groups`.',
      tags: ['tenants'],
      security: ['adminKey'],
      params: CorpusParams,
      query: IngestWaitQuery,
      body: CorpusDocumentRequest,
      responses: {
        201: { description: 'The document, and where to upload its file', schema: CorpusDocumentCreated },
        401: unauthorized,
        404: notFound,
        422: { description: 'Invalid body; or, with `wait`, the ingest failed on the document' },
      },
      async handle({ params, query, body }) {
        const tenantId = await tenantOf(params.tenant_id);
        const fields = { title: body.title, filename: body.filename, allowedRoles: body.allowed_roles, allowedGroups: body.allowed_groups, metadata: body.metadata };
        if (body.text !== undefined) {
          const created = await documents.createCorpusInline(tenantId, { ...fields, contentType: body.content_type ?? 'text/plain' }, Buffer.from(body.text, 'utf8'));
          return { status: 201, body: { document: query.wait > 0 ? await documents.awaitIngest(created, query.wait) : created, upload: null } };
        }
        const presigned = await documents.presignCorpus(tenantId, {
          title: body.title,
          filename: body.filename!,
          content_type: body.content_type!,
          size: body.size!,
          multipart: body.multipart,
          part_size: body.part_size,
          allowed_roles: body.allowed_roles,
          allowed_groups: body.allowed_groups,
          metadata: body.metadata,
        });
        return { status: 201, body: presigned };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/documents/{document_id}',
      operationId: 'getCorpusDocument',
      summary: "Read one document of the tenant's corpus",
      tags: ['tenants'],
      security: ['adminKey'],
      params: CorpusDocumentParams,
      responses: { 200: { description: 'The document', schema: DocumentOut }, 401: unauthorized, 404: notFound },
      async handle({ params }) {
        return { body: documentOut(await documents.corpusDocument(await tenantOf(params.tenant_id), params.document_id)) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tenants/{tenant_id}/documents/{document_id}',
      operationId: 'actOnCorpusDocument',
      summary: 'Complete the upload of a corpus document, or read it again',
      description:
        '`complete`: the file was PUT (every part, listed with its ETag, for an upload in parts); its size and media type are checked against what was declared, and it waits to be read. `reingest`: read it again with the processor and embedding model in force.',
      tags: ['tenants'],
      security: ['adminKey'],
      params: CorpusDocumentParams,
      query: IngestWaitQuery,
      body: CorpusDocumentAction,
      responses: {
        200: { description: 'The document', schema: DocumentOut },
        401: unauthorized,
        404: notFound,
        409: outOfOrder,
        422: { description: 'Invalid body; the upload is not what was declared (the bytes are removed); or, with `wait`, the ingest failed' },
      },
      async handle({ params, query, body }) {
        const row = await documents.corpusDocument(await tenantOf(params.tenant_id), params.document_id);
        const document = body.action === 'complete' ? await documents.completeUpload(row, body.parts) : await documents.reingest(row);
        return { body: query.wait > 0 ? await documents.awaitIngest(document, query.wait) : document };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/tenants/{tenant_id}/documents/{document_id}',
      operationId: 'deleteCorpusDocument',
      summary: 'Delete a corpus document: its bytes (or its upload in progress), chunks and vectors',
      tags: ['tenants'],
      security: ['adminKey'],
      params: CorpusDocumentParams,
      responses: { 200: { description: 'Deleted', schema: DocumentDeleted }, 401: unauthorized, 404: notFound },
      async handle({ params }) {
        return { body: await documents.delete(await documents.corpusDocument(await tenantOf(params.tenant_id), params.document_id)) };
      },
    }),
  ];
}
