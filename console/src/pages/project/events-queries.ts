// The hooks of the "Events and deliveries" section: the project's outbound event deliveries and sending one again,
// its webhook-tool calls, and the webhook URL and the secret that signs deliveries. The delivery lists are loose in
// the OpenAPI document (they keep the runtime's shape): their types here are the runtime's
// (runtime/src/deliveries/routes.ts, runtime/src/tools/routes.ts).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { ControlPlane } from '@agentplane/client';
import { body, projectKey } from '../../queries.js';
import { useControlPlane } from '../../session.js';

type Schemas = ControlPlane.components['schemas'];
export type WebhookSecret = Schemas['ProjectWebhookSecret'];

export const DELIVERY_STATUSES = ['pending', 'delivered', 'dead'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface EventDelivery {
  id: string;
  /** X-Delivery-Id: the same for every target and attempt of one event. */
  event_id: string;
  type: 'turn.stopped' | 'scheduled_task.fired';
  /** The project's webhook URL, or a task's callback URL. */
  target: 'project' | 'callback';
  url: string;
  status: DeliveryStatus;
  attempts: number;
  attempt_log: { at: string; status: number | null; error: string | null; duration_ms: number }[];
  next_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
}

export interface ToolDelivery {
  id: string;
  at: string;
  tool: string;
  tool_id: string;
  session_id: string;
  run_id: string;
  subject: string;
  /** The handler's HTTP status; null when none answered. */
  status: number | null;
  ok: boolean;
  attempts: number;
  duration_ms: number;
  /** The start of what the agent was given. */
  result: string;
  error: string | null;
}

/** The lists are the newest `limit` (the API takes no offset): a further page is a larger limit, up to the API's 1,000. */
export const PAGE_SIZE = 25;
export const MAX_LIMIT = 1_000;


/** GET /api/projects/{id}/events?limit=&status=: newest first, read again every few seconds while one is pending. */
export function useEventDeliveries(projectId: string, limit: number, status: DeliveryStatus | undefined) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'events', String(limit), status ?? 'all'),
    queryFn: async ({ signal }) =>
      body<{ deliveries: EventDelivery[] }>(
        await client.api.GET('/api/projects/{id}/events', { params: { path: { id: projectId }, query: { limit, ...(status ? { status } : {}) } }, signal }),
      ).deliveries,
    // A longer list keeps the shorter one on screen while it loads; another status does not show this one's rows.
    placeholderData: (previous, previousQuery) => (previousQuery?.queryKey[4] === (status ?? 'all') ? previous : undefined),
    refetchInterval: (query) => (query.state.data?.some((delivery) => delivery.status === 'pending') ? 3_000 : false),
  });
}

/** POST /api/projects/{id}/events/{deliveryId}/redeliver: the answer is the delivery, pending again. */
export function useRedeliver(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async (deliveryId: string) =>
      body<EventDelivery>(await client.api.POST('/api/projects/{id}/events/{deliveryId}/redeliver', { params: { path: { id: projectId, deliveryId } } })),
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId, 'events') }),
  });
}

/** GET /api/projects/{id}/webhook-tools/deliveries?limit=: the webhook tools' handler calls, newest first. */
export function useToolDeliveries(projectId: string, limit: number) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'webhook-tool-deliveries', String(limit)),
    queryFn: async ({ signal }) =>
      body<{ deliveries: ToolDelivery[] }>(await client.api.GET('/api/projects/{id}/webhook-tools/deliveries', { params: { path: { id: projectId }, query: { limit } }, signal }))
        .deliveries,
    placeholderData: (previous) => previous,
  });
}

/** GET /api/projects/{id}/webhook: where the project's events go. */
export function useWebhook(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'webhook'),
    queryFn: async ({ signal }) => body<Schemas['ProjectWebhook']>(await client.api.GET('/api/projects/{id}/webhook', { params: { path: { id: projectId } }, signal })),
  });
}

/** GET /api/projects/{id}/webhook-secret: the secret that signs deliveries (readable: it is not shown once). */
export function useWebhookSecret(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'webhook-secret'),
    queryFn: async ({ signal }) => body<WebhookSecret>(await client.api.GET('/api/projects/{id}/webhook-secret', { params: { path: { id: projectId } }, signal })),
  });
}

/** POST /api/projects/{id}/webhook-secret/rotate: the old secret stops signing at once (no overlap). */
export function useRotateWebhookSecret(projectId: string) {
  const client = useControlPlane();
  const queries = useQueryClient();
  return useMutation({
    mutationFn: async () => body<WebhookSecret>(await client.api.POST('/api/projects/{id}/webhook-secret/rotate', { params: { path: { id: projectId } } })),
    onSuccess: () => queries.invalidateQueries({ queryKey: projectKey(projectId, 'webhook-secret') }),
  });
}
