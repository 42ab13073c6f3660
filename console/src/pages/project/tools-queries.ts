// The project's tools' hooks: webhook tools (made and rotated with a secret answered once), MCP servers (registered on
// the control plane; what the runtime finds of them read from the data plane as the console's privileged reader),
// and skill packages (sent as a form).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { ControlPlane, DataPlane } from '@agentplane/client';
import { useProjectReader } from '../../data-plane.js';
import { projectKey } from '../../queries.js';
import { useControlPlane, useSession } from '../../session.js';

type Schemas = ControlPlane.components['schemas'];
export type WebhookTool = Schemas['WebhookTool'];
export type WebhookToolCreate = Schemas['WebhookToolCreate'];
export type WebhookToolCreated = Schemas['WebhookToolCreated'];
export type WebhookToolRotated = Schemas['WebhookToolRotated'];
export type McpServer = Schemas['McpServer'];
export type McpServerCreate = Schemas['McpServerCreate'];
export type McpProbeResult = DataPlane.components['schemas']['McpProbeResult'];
export type ToolListing = DataPlane.components['schemas']['ToolListing'];

/** A skill package as the runtime keeps it: the control plane passes the data plane's record through. */
export type SkillPackage = DataPlane.components['schemas']['Plugin'];

/** Every write to a project's tools changes what its turns are offered: the tools' keys are read again. */
function useToolWrite<A, R>(projectId: string, write: (argument: A) => Promise<R>) {
  const queries = useQueryClient();
  return useMutation({ mutationFn: write, onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId, 'tools') }) });
}

/** GET /api/projects/{id}/webhook-tools (never their secrets). */
export function useWebhookTools(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'tools', 'webhook'),
    queryFn: async ({ signal }) =>
      ((await client.api.GET('/api/projects/{id}/webhook-tools', { params: { path: { id: projectId } }, signal })).data as Schemas['WebhookToolList']).tools,
  });
}

/** POST /api/projects/{id}/webhook-tools: the answer carries the signing secret, this once. */
export function useCreateWebhookTool(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (request: WebhookToolCreate) =>
    (await client.api.POST('/api/projects/{id}/webhook-tools', { params: { path: { id: projectId } }, body: request })).data as WebhookToolCreated,
  );
}

/** POST /api/projects/{id}/webhook-tools/{toolId}/rotate: a new secret, this once; the old one signs for 24 hours more. */
export function useRotateWebhookTool(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (toolId: string) =>
    (await client.api.POST('/api/projects/{id}/webhook-tools/{toolId}/rotate', { params: { path: { id: projectId, toolId } } })).data as WebhookToolRotated,
  );
}

/** DELETE /api/projects/{id}/webhook-tools/{toolId}. */
export function useDeleteWebhookTool(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (toolId: string) => (await client.api.DELETE('/api/projects/{id}/webhook-tools/{toolId}', { params: { path: { id: projectId, toolId } } })).data);
}

/** GET /api/projects/{id}/mcp (never their headers' values). */
export function useMcpServers(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'tools', 'mcp'),
    queryFn: async ({ signal }) => ((await client.api.GET('/api/projects/{id}/mcp', { params: { path: { id: projectId } }, signal })).data as Schemas['McpServerList']).servers,
  });
}

/** POST /api/projects/{id}/mcp: stored without being reached; the runtime connects to it once the change is pushed. */
export function useAddMcpServer(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (request: McpServerCreate) => (await client.api.POST('/api/projects/{id}/mcp', { params: { path: { id: projectId } }, body: request })).data as McpServer);
}

/** DELETE /api/projects/{id}/mcp/{mcpId}. */
export function useDeleteMcpServer(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (mcpId: string) => (await client.api.DELETE('/api/projects/{id}/mcp/{mcpId}', { params: { path: { id: projectId, mcpId } } })).data);
}

/** The data-plane client the console reads the project's tools with: the signed-in account's privileged subject. */
function useReader(projectId: string) {
  const { session } = useSession();
  return useProjectReader(projectId, session?.email ?? '');
}

/**
 * POST /tools/mcp/probe on the data plane: the server reached once, without storing it, by the same loader the turns
 * use; needs capability `mcp:manage` in the project's ceiling.
 */
export function useProbeMcpServer(projectId: string) {
  const reader = useReader(projectId);
  return useMutation({
    mutationFn: async (request: Pick<McpServerCreate, 'url' | 'transport' | 'headers'>) => (await reader.api.POST('/tools/mcp/probe', { body: request })).data as McpProbeResult,
  });
}

/**
 * GET /tools on the data plane: what the runtime found of each MCP server, read once servers are registered
 * (`expected`), and again every few seconds while one is not in it yet: a change reaches the runtime shortly after.
 */
export function useToolListing(projectId: string, expected: readonly string[]) {
  const reader = useReader(projectId);
  return useQuery({
    queryKey: projectKey(projectId, 'tools', 'listing'),
    queryFn: async ({ signal }) => (await reader.api.GET('/tools', { signal })).data as ToolListing,
    enabled: expected.length > 0,
    refetchInterval: (query) => {
      const found = new Set(query.state.data?.mcp_servers.filter((server) => server.origin === 'project').map((server) => server.name) ?? []);
      return expected.some((name) => !found.has(name)) ? 3_000 : false;
    },
  });
}

/** GET /api/projects/{id}/skills: the project's packages and each end-user's own. */
export function useSkills(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'tools', 'skills'),
    queryFn: async ({ signal }) => ((await client.api.GET('/api/projects/{id}/skills', { params: { path: { id: projectId } }, signal })).data as unknown as { plugins: SkillPackage[] }).plugins,
  });
}

/** POST /api/projects/{id}/skills: one file (a .zip, a .tar.gz or a SKILL.md) sent as the form's part `file`. */
export function useUploadSkills(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (file: File) => {
    const form = new FormData();
    form.append('file', file, file.name);
    // The route takes a form, which its typed description does not spell; a form is sent as it is, and the browser
    // gives it its media type.
    return (await client.api.POST('/api/projects/{id}/skills', { params: { path: { id: projectId } }, body: form as never })).data as unknown as SkillPackage;
  });
}

/** DELETE /api/projects/{id}/skills/{pluginId}. */
export function useDeleteSkills(projectId: string) {
  const client = useControlPlane();
  return useToolWrite(projectId, async (pluginId: string) => (await client.api.DELETE('/api/projects/{id}/skills/{pluginId}', { params: { path: { id: projectId, pluginId } } })).data);
}
