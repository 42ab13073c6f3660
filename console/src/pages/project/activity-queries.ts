// The hooks of the "Turns and usage" section: turn health, usage and observability over a period, and the usage caps.
// The usage and observability documents are loose in the OpenAPI document (they keep the runtime's shape): their
// types here are the runtime's (runtime/src/governance/usage.ts).
import { useQuery } from '@tanstack/react-query';
import type { ControlPlane } from '@agentplane/client';
import { body, projectKey } from '../../queries.js';
import { useControlPlane } from '../../session.js';

type Schemas = ControlPlane.components['schemas'];
export type TurnHealth = Schemas['ProjectTurnHealth'];
export type Limits = Schemas['Limits'];

export const USAGE_WINDOWS = ['1h', '24h', '7d', '30d'] as const;
export type UsageWindow = (typeof USAGE_WINDOWS)[number];

export interface UsageReport {
  window: UsageWindow;
  since: string;
  /** Turns started. */
  requests: number;
  model_calls: number;
  input_tokens: number;
  output_tokens: number;
  /** null when no call in the window had a price. */
  cost_usd: number | null;
  /** Calls without a price: their cost is unknown, not zero. */
  unpriced_calls: number;
  by_model: { model: string; model_calls: number; input_tokens: number; output_tokens: number; cost_usd: number | null }[];
  by_purpose: { purpose: string; model_calls: number; cost_usd: number | null }[];
}

export interface ObservabilityReport {
  window: UsageWindow;
  since: string;
  requests: number;
  by_status: Record<string, number>;
  errors: number;
  error_rate: number | null;
  latency_ms: { p50: number | null; p95: number | null; p99: number | null; max: number | null };
  top_errors: { code: string; count: number }[];
}


/** GET /api/projects/{id}/turns: the last 24 hours' turns, the failed ones and the streak of failures. */
export function useTurnHealth(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'turns'),
    queryFn: async ({ signal }) => body<TurnHealth>(await client.api.GET('/api/projects/{id}/turns', { params: { path: { id: projectId } }, signal })),
  });
}

/** GET /api/projects/{id}/usage?window=: spend, turns, model calls and tokens, by model and by purpose. */
export function useUsage(projectId: string, window: UsageWindow) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'usage', window),
    queryFn: async ({ signal }) => body<UsageReport>(await client.api.GET('/api/projects/{id}/usage', { params: { path: { id: projectId }, query: { window } }, signal })),
  });
}

/** GET /api/projects/{id}/observability?window=: turns by how they ended, error codes, latency percentiles. */
export function useObservability(projectId: string, window: UsageWindow) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'observability', window),
    queryFn: async ({ signal }) =>
      body<ObservabilityReport>(await client.api.GET('/api/projects/{id}/observability', { params: { path: { id: projectId }, query: { window } }, signal })),
  });
}

/** GET /api/projects/{id}/limits: the caps on the project's model calls, tokens and spend. */
export function useLimits(projectId: string) {
  const client = useControlPlane();
  return useQuery({
    queryKey: projectKey(projectId, 'limits'),
    queryFn: async ({ signal }) => body<Limits>(await client.api.GET('/api/projects/{id}/limits', { params: { path: { id: projectId } }, signal })),
  });
}
