// The project's unattended work: scheduled tasks, every end-user's, from the control plane (read-only), and webhook
// triggers from the data plane as the console's privileged subject, which sees every trigger and changes its own.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { DataPlane } from '@agentplane/client';
import { useProjectReader } from '../../data-plane.js';
import { projectKey } from '../../queries.js';
import { useControlPlane, useSession } from '../../session.js';

type DataSchemas = DataPlane.components['schemas'];
export type Task = DataSchemas['Task'];
export type Trigger = DataSchemas['Trigger'];
export type TriggerCreate = DataSchemas['TriggerCreate'];
export type TriggerWithUrl = DataSchemas['TriggerWithUrl'];

/** Rows a page of tasks or triggers holds. */
export const PAGE = 50;

/** GET /api/projects/{id}/tasks from `offset`: the runtime's task records, newest first. */
export function useTasks(projectId: string, offset: number) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'tasks', String(offset)),
    queryFn: async ({ signal }) => {
      const page = (await client.api.GET('/api/projects/{id}/tasks', { params: { path: { id: projectId }, query: { limit: PAGE, offset } }, signal })).data!;
      // The control plane passes the runtime's records through; their shape is the data plane's Task.
      return { ...page, tasks: page.tasks as unknown as Task[] };
    },
  });
}

/** The subject the console acts as on the data plane, and its client. */
export function useTriggerSubject(projectId: string) {
  const { session } = useSession();
  const email = session?.email ?? '';
  return { subject: `console:${email}`, reader: useProjectReader(projectId, email) };
}

const triggersKey = (projectId: string) => projectKey(projectId, 'triggers');

/** GET /triggers from `offset` on the data plane: every trigger of the project (never their URLs). */
export function useTriggers(projectId: string, offset: number) {
  const { reader } = useTriggerSubject(projectId);
  return useQuery({
    queryKey: [...triggersKey(projectId), String(offset)],
    queryFn: async ({ signal }) => (await reader.api.GET('/triggers', { params: { query: { limit: PAGE, offset } }, signal })).data as DataSchemas['TriggerList'],
  });
}

/** POST /triggers: the trigger's URL (and a signed one's secret) are in this answer only. */
export function useCreateTrigger(projectId: string) {
  const { reader } = useTriggerSubject(projectId);
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (request: TriggerCreate) => (await reader.api.POST('/triggers', { body: request })).data as TriggerWithUrl,
    onSuccess: () => queries.invalidateQueries({ queryKey: triggersKey(projectId) }),
  });
}

/** POST /triggers/{trigger_id}/rotate: a new URL, this once; the replaced one answers for 24 hours more. */
export function useRotateTrigger(projectId: string) {
  const { reader } = useTriggerSubject(projectId);
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (triggerId: string) => (await reader.api.POST('/triggers/{trigger_id}/rotate', { params: { path: { trigger_id: triggerId } } })).data as TriggerWithUrl,
    onSuccess: () => queries.invalidateQueries({ queryKey: triggersKey(projectId) }),
  });
}

/** DELETE /triggers/{trigger}: its URLs answer no more. Only the subject that made it may. */
export function useDeleteTrigger(projectId: string) {
  const { reader } = useTriggerSubject(projectId);
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (triggerId: string) => (await reader.api.DELETE('/triggers/{trigger}', { params: { path: { trigger: triggerId } } })).data,
    onSuccess: () => queries.invalidateQueries({ queryKey: triggersKey(projectId) }),
  });
}
