// The project corpus's hooks: the documents (read again while any is being read), adding one inline, reading one
// again, deleting one.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { ControlPlane } from '@agentplane/client';
import { projectKey } from '../../queries.js';
import { useControlPlane } from '../../session.js';

type Schemas = ControlPlane.components['schemas'];
export type CorpusDocument = Schemas['CorpusDocument'];
export type CorpusDocumentCreate = Schemas['CorpusDocumentCreate'];

/** Statuses past which a document changes no more by itself. */
const SETTLED: ReadonlySet<CorpusDocument['status']> = new Set(['ready', 'failed']);
/** Documents a page holds. */
export const DOCUMENT_PAGE = 50;

/** GET /api/projects/{id}/documents, one page of `DOCUMENT_PAGE` from `offset`; read again every few seconds while one is not settled. */
export function useDocuments(projectId: string, offset: number) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'documents', String(offset)),
    queryFn: async ({ signal }) =>
      (await client.api.GET('/api/projects/{id}/documents', { params: { path: { id: projectId }, query: { limit: DOCUMENT_PAGE, offset } }, signal })).data as Schemas['CorpusDocumentPage'],
    refetchInterval: (query) => (query.state.data?.documents.some((document) => !SETTLED.has(document.status)) ? 3_000 : false),
  });
}

/** POST /api/projects/{id}/documents with the text inline: stored at once, read afterwards. */
export function useAddDocument(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (request: CorpusDocumentCreate) =>
      (await client.api.POST('/api/projects/{id}/documents', { params: { path: { id: projectId } }, body: request })).data as Schemas['CorpusDocumentCreated'],
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId, 'documents') }),
  });
}

/** POST /api/projects/{id}/documents/{documentId} `reingest`: read again with the processor and embedding model in force. */
export function useReingestDocument(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (documentId: string) =>
      (await client.api.POST('/api/projects/{id}/documents/{documentId}', { params: { path: { id: projectId, documentId } }, body: { action: 'reingest' } })).data as CorpusDocument,
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId, 'documents') }),
  });
}

/** DELETE /api/projects/{id}/documents/{documentId}: its bytes, chunks and vectors. */
export function useDeleteDocument(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (documentId: string) => (await client.api.DELETE('/api/projects/{id}/documents/{documentId}', { params: { path: { id: projectId, documentId } } })).data,
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId, 'documents') }),
  });
}
