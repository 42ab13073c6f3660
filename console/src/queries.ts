// One query or mutation hook per control-plane resource the console shows; sections compose them. Query keys start
// with ['projects', id, ...], so what a write changes is read again by invalidating its resource's key.
import { useMutation, useQuery, useQueryClient, type QueryKey } from '@tanstack/react-query';
import type { ControlPlane } from '@agentplane/client';
import { useControlPlane } from './session.js';

type Schemas = ControlPlane.components['schemas'];
export type Me = Schemas['Me'];
export type Project = Schemas['Project'];
export type ProjectDetail = Schemas['ProjectDetail'];
export type ProjectKey = Schemas['ProjectKey'];
export type ProjectKeyCreated = Schemas['ProjectKeyCreated'];
export type ReadinessReport = Schemas['ReadinessReport'];
export type Provider = Schemas['Provider'];
export type ProviderRegister = Schemas['ProviderRegister'];
export type Connect = Schemas['Connect'];
export type AuditPage = Schemas['ControlAuditPage'];
export type AuditEntry = AuditPage['entries'][number];

/** The key of one of a project's resources. */
export const projectKey = (projectId: string, ...resource: string[]): QueryKey => ['projects', projectId, ...resource];

/** The answer's body: a failed call has thrown already (the client turns failures into errors). */
export const body = <T,>(result: { data?: unknown }) => result.data as T;

const projectsKey = (orgId: string) => ['orgs', orgId, 'projects'] as const;

/** GET /api/me: the account and the orgs it belongs to. */
export function useMe() {
  const client = useControlPlane();
  return useQuery({
    queryKey: ['me'],
    queryFn: async ({ signal }) => body<Me>(await client.api.GET('/api/me', { signal })),
  });
}

/** GET /api/orgs/{orgId}/projects, oldest first. */
export function useOrgProjects(orgId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectsKey(orgId),
    queryFn: async ({ signal }) => body<{ projects: Project[] }>(await client.api.GET('/api/orgs/{orgId}/projects', { params: { path: { orgId } }, signal })).projects,
  });
}

/** POST /api/orgs/{orgId}/projects; the org's list is read again after. */
export function useCreateProject(orgId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (name: string) => body<Project>(await client.api.POST('/api/orgs/{orgId}/projects', { params: { path: { orgId } }, body: { name } })),
    onSuccess: () => queries.invalidateQueries({ queryKey: projectsKey(orgId) }),
  });
}

/** GET /api/projects/{id}: the project with its ceiling. */
export function useProject(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId),
    queryFn: async ({ signal }) => body<ProjectDetail>(await client.api.GET('/api/projects/{id}', { params: { path: { id: projectId } }, signal })),
  });
}

/** GET /api/projects/{id}/readiness: the checklist, read again every few seconds while a step is not done. */
export function useReadiness(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'readiness'),
    queryFn: async ({ signal }) => body<ReadinessReport>(await client.api.GET('/api/projects/{id}/readiness', { params: { path: { id: projectId } }, signal })),
    refetchInterval: (query) => (query.state.data?.ready ? false : 3_000),
  });
}

/** GET /api/projects/{id}/connect: the endpoints and the starting snippet. */
export function useConnect(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'connect'),
    queryFn: async ({ signal }) => body<Connect>(await client.api.GET('/api/projects/{id}/connect', { params: { path: { id: projectId } }, signal })),
  });
}

/** GET /api/projects/{id}/keys: revoked keys too, with when. */
export function useKeys(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'keys'),
    queryFn: async ({ signal }) => body<{ keys: ProjectKey[] }>(await client.api.GET('/api/projects/{id}/keys', { params: { path: { id: projectId } }, signal })).keys,
  });
}

/** POST /api/projects/{id}/keys: the answer carries the key itself, this once. */
export function useCreateKey(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (request: { name: string; scope: 'mint' | 'admin' }) =>
      body<ProjectKeyCreated>(await client.api.POST('/api/projects/{id}/keys', { params: { path: { id: projectId } }, body: request })),
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId) }),
  });
}

/** DELETE /api/projects/{id}/keys/{keyId}. */
export function useRevokeKey(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (keyId: string) => body<ProjectKey>(await client.api.DELETE('/api/projects/{id}/keys/{keyId}', { params: { path: { id: projectId, keyId } } })),
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId) }),
  });
}

/** The chat models the project's providers registered, each once, in the order registered. */
export function useRegisteredModels(projectId: string): string[] {
  const providers = useProviders(projectId);
  return [...new Set(providers.data?.flatMap((provider) => provider.models) ?? [])];
}

/** GET /api/projects/{id}/providers. */
export function useProviders(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'providers'),
    queryFn: async ({ signal }) => body<{ providers: Provider[] }>(await client.api.GET('/api/projects/{id}/providers', { params: { path: { id: projectId } }, signal })).providers,
  });
}

/** Every write to a project's providers or model changes its readiness and models: the whole project is read again. */
function useProjectWrite<A, R>(projectId: string, write: (argument: A) => Promise<R>) {
  const queries = useQueryClient();
  return useMutation({ mutationFn: write, onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId) }) });
}

/** POST /api/projects/{id}/providers: the key is tried against the provider before anything is stored. */
export function useRegisterProvider(projectId: string) {
  const client = useControlPlane();
  return useProjectWrite(projectId, async (request: ProviderRegister) =>
    body<Provider>(await client.api.POST('/api/projects/{id}/providers', { params: { path: { id: projectId } }, body: request })),
  );
}

/** POST /api/projects/{id}/providers/{credId}/refresh: the catalog read again and the embedding dimension measured. */
export function useRefreshProvider(projectId: string) {
  const client = useControlPlane();
  return useProjectWrite(projectId, async (credId: string) =>
    body<Schemas['ProviderRefreshed']>(await client.api.POST('/api/projects/{id}/providers/{credId}/refresh', { params: { path: { id: projectId, credId } } })),
  );
}

/** DELETE /api/projects/{id}/providers/{credId}. */
export function useDeleteProvider(projectId: string) {
  const client = useControlPlane();
  return useProjectWrite(projectId, async (credId: string) =>
    body<unknown>(await client.api.DELETE('/api/projects/{id}/providers/{credId}', { params: { path: { id: projectId, credId } } })),
  );
}

/** GET /api/projects/{id}/default-model. */
export function useDefaultModel(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'default-model'),
    queryFn: async ({ signal }) => body<Schemas['DefaultModel']>(await client.api.GET('/api/projects/{id}/default-model', { params: { path: { id: projectId } }, signal })),
  });
}

/** POST /api/projects/{id}/default-model. */
export function useSetDefaultModel(projectId: string) {
  const client = useControlPlane();
  return useProjectWrite(projectId, async (model: string | null) =>
    body<Schemas['DefaultModel']>(await client.api.POST('/api/projects/{id}/default-model', { params: { path: { id: projectId } }, body: { model } })),
  );
}

/** PUT /api/projects/{id}/origins: the browser origins the data plane lets call it. */
export function useSetOrigins(projectId: string) {
  const client = useControlPlane();
  return useProjectWrite(projectId, async (origins: string[]) =>
    body<Schemas['Origins']>(await client.api.PUT('/api/projects/{id}/origins', { params: { path: { id: projectId } }, body: { origins } })),
  );
}

/** PUT /api/projects/{id}/webhook: where the project's events are delivered. */
export function useSetWebhook(projectId: string) {
  const client = useControlPlane();
  return useProjectWrite(projectId, async (url: string | null) =>
    body<Schemas['ProjectWebhook']>(await client.api.PUT('/api/projects/{id}/webhook', { params: { path: { id: projectId } }, body: { url } })),
  );
}

/** A session as the runtime shows it (the control plane passes its records on). */
export type SessionRecord = { id: string; title: string; user_ref: string; status: string; model: string | null; parent_session_id: string | null; requires_action: boolean; created_at: string; updated_at: string };
export type MessageRecord = { id: string; role: 'user' | 'assistant' | 'tool'; content: string; subject: string; name: string | null; model: string | null; created_at: string; tool_calls: { id: string; name: string; arguments: unknown }[] | null };

export interface SessionFilter {
  includeSubagents: boolean;
  subject: string;
}

/** GET /api/projects/{id}/sessions: every subject's, newest first, a page of 20 at a time. */
export function useProjectSessions(projectId: string, filter: SessionFilter, offset: number) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'sessions', JSON.stringify(filter), String(offset)),
    queryFn: async ({ signal }) => {
      const query = { include_subagents: filter.includeSubagents ? ('true' as const) : ('false' as const), limit: 20, offset, ...(filter.subject ? { user_ref: filter.subject } : {}) };
      const page = body<{ sessions: SessionRecord[]; has_more: boolean; next_offset: number | null }>(await client.api.GET('/api/projects/{id}/sessions', { params: { path: { id: projectId }, query }, signal }));
      return page;
    },
    placeholderData: (previous) => previous,
  });
}

/** GET /api/projects/{id}/sessions/{sessionId}/messages: oldest first, up to 500. */
export function useSessionMessages(projectId: string, sessionId: string | null) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'sessions', 'messages', sessionId ?? ''),
    enabled: sessionId !== null,
    queryFn: async ({ signal }) =>
      body<MessageRecord[]>(await client.api.GET('/api/projects/{id}/sessions/{sessionId}/messages', { params: { path: { id: projectId, sessionId: sessionId! }, query: { limit: 500 } }, signal })),
  });
}

export interface AuditFilter {
  action: string;
  actor: string;
}

/** GET /api/projects/{id}/audit: newest first, a page of 50 before `before`. */
export function useAudit(projectId: string, filter: AuditFilter, before: string | undefined) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'audit', JSON.stringify(filter), before ?? ''),
    queryFn: async ({ signal }) => {
      const query = { limit: 50, ...(filter.action ? { action: filter.action } : {}), ...(filter.actor ? { actor: filter.actor } : {}), ...(before ? { before } : {}) };
      return body<AuditPage>(await client.api.GET('/api/projects/{id}/audit', { params: { path: { id: projectId }, query }, signal }));
    },
    placeholderData: (previous) => previous,
  });
}
