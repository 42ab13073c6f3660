// One query or mutation hook per control-plane resource the console shows; pages compose them.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { ControlPlane } from '@agentplane/client';
import { useControlPlane } from './session.js';

export type Me = ControlPlane.components['schemas']['Me'];
export type Project = ControlPlane.components['schemas']['Project'];

const projectsKey = (orgId: string) => ['orgs', orgId, 'projects'] as const;

/** GET /api/me: the account and the orgs it belongs to. */
export function useMe() {
  const client = useControlPlane();
  return useQuery({
    queryKey: ['me'],
    queryFn: async ({ signal }) => (await client.api.GET('/api/me', { signal })).data as Me,
  });
}

/** GET /api/orgs/{orgId}/projects, oldest first. */
export function useOrgProjects(orgId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectsKey(orgId),
    queryFn: async ({ signal }) => ((await client.api.GET('/api/orgs/{orgId}/projects', { params: { path: { orgId } }, signal })).data as { projects: Project[] }).projects,
  });
}

/** POST /api/orgs/{orgId}/projects; the org's list is read again after. */
export function useCreateProject(orgId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (name: string) => (await client.api.POST('/api/orgs/{orgId}/projects', { params: { path: { orgId } }, body: { name } })).data as Project,
    onSuccess: () => queries.invalidateQueries({ queryKey: projectsKey(orgId) }),
  });
}
