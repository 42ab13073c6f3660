// How a tenant's turns and unattended work are going, on the admin surface for the control plane: turn health
// (GET /api/projects/:id/turns relays it) and the facts its readiness report's steps read.
import { z } from 'zod';
import { conflict } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import type { TenantService } from '../tenants/service.js';
import type { TenantConfigurationService } from '../tenants/configuration.js';
import type { TenantActivity } from './activity.js';
import { contextReport } from './context.js';
import { USAGE_WINDOWS, type UsageReports } from './usage.js';

const TurnHealthOut = z
  .object({
    window_hours: z.int(),
    total: z.int().meta({ description: 'Turns started in the window' }),
    errored: z.int().meta({ description: 'Of those, the ones that failed' }),
    consecutive_errors: z.int().meta({ description: 'Failed turns counted back from the latest that ended; a success resets it' }),
    last_error: z.object({ run_id: z.string(), at: z.iso.datetime(), code: z.string().nullable(), message: z.string() }).nullable(),
    last_success_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'TurnHealth' });

const ReadinessFactsOut = z
  .object({
    turns: TurnHealthOut,
    tasks_waiting: z.array(z.object({ task_id: z.uuid(), name: z.string(), stopped_at: z.iso.datetime(), session_id: z.uuid().nullable(), run_id: z.string().nullable() })),
    documents: z.int(),
    active_tasks: z.int(),
    triggers: z.int(),
  })
  .meta({ id: 'TenantReadinessFacts' });

const TenantParams = z.object({ tenant_id: z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const adminResponses = { 401: { description: 'Missing or wrong X-Admin-Key' }, 404: { description: 'No such tenant (`code` `tenant_not_found`)' } };

const ContextOut = z
  .object({
    max_context_tokens: z.int().nullable().meta({ description: "The project's ceiling; a token may narrow it. Null: no limit but the model's own" }),
    strategy: z.literal('drop_oldest_groups'),
    description: z.string(),
    summarization: z.literal(false),
    tokenizer: z.string(),
    message_overhead_tokens: z.int(),
    system_prompt_tokens: z.int().meta({ description: "What the project's system prompt costs every call, counted" }),
    history_budget_tokens: z.int().nullable().meta({ description: 'What is left for the conversation under the ceiling' }),
  })
  .meta({ id: 'ContextStrategy' });

const WindowQuery = z.object({
  window: z.enum(Object.keys(USAGE_WINDOWS) as [keyof typeof USAGE_WINDOWS, ...(keyof typeof USAGE_WINDOWS)[]]).default('24h').meta({ description: 'The period, ending now: 1h, 24h (default), 7d or 30d' }),
});

const UsageOut = z
  .object({
    window: z.string(),
    since: z.iso.datetime(),
    requests: z.int().meta({ description: 'Turns started' }),
    model_calls: z.int(),
    input_tokens: z.int(),
    output_tokens: z.int(),
    cost_usd: z.number().nullable().meta({ description: "At the project's prices; null when no call had a price" }),
    unpriced_calls: z.int().meta({ description: 'Calls of models without a price: their cost is unknown, not zero' }),
    by_model: z.array(z.object({ model: z.string(), model_calls: z.int(), input_tokens: z.int(), output_tokens: z.int(), cost_usd: z.number().nullable() })),
    by_purpose: z.array(z.object({ purpose: z.string(), model_calls: z.int(), cost_usd: z.number().nullable() })),
  })
  .meta({ id: 'UsageReport' });

const ObservabilityOut = z
  .object({
    window: z.string(),
    since: z.iso.datetime(),
    requests: z.int(),
    by_status: z.record(z.string(), z.int()),
    errors: z.int(),
    error_rate: z.number().nullable(),
    latency_ms: z.object({ p50: z.int().nullable(), p95: z.int().nullable(), p99: z.int().nullable(), max: z.int().nullable() }).meta({ description: "From a turn's start to its end" }),
    top_errors: z.array(z.object({ code: z.string(), count: z.int() })),
  })
  .meta({ id: 'ObservabilityReport' });

export function activityRoutes(activity: TenantActivity, tenants: TenantService, configurations: TenantConfigurationService, usage: UsageReports): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/usage',
      operationId: 'getTenantUsage',
      summary: "What the tenant's project spent over a window: turns, model calls, tokens and cost, by model and purpose",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: WindowQuery,
      responses: { 200: { description: 'The usage', schema: UsageOut }, ...adminResponses },
      async handle({ params, query }) {
        return { body: await usage.usage(await tenants.existing(params.tenant_id), query.window) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/observability',
      operationId: 'getTenantObservability',
      summary: "How the tenant's turns went over a window: by status, errors and their codes, latency percentiles",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: WindowQuery,
      responses: { 200: { description: 'The report', schema: ObservabilityOut }, ...adminResponses },
      async handle({ params, query }) {
        return { body: await usage.observability(await tenants.existing(params.tenant_id), query.window) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/context',
      operationId: 'getTenantContextStrategy',
      summary: "How the project's turns fit their context window: the limit, what is trimmed and how, and what the system prompt costs",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      responses: { 200: { description: 'The strategy', schema: ContextOut }, ...adminResponses, 409: { description: 'The tenant has no configuration yet (`code` `not_configured`)' } },
      async handle({ params }) {
        const configuration = await configurations.load(await tenants.existing(params.tenant_id));
        if (!configuration) throw conflict("the tenant has no configuration yet: its project's first push has not arrived", { code: 'not_configured' });
        return { body: await contextReport(configuration) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/turns',
      operationId: 'getTenantTurnHealth',
      summary: "Turn health: the tenant's turns of the last 24 hours, the failed ones, and the streak of failures",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      responses: { 200: { description: 'Turn health', schema: TurnHealthOut }, ...adminResponses },
      async handle({ params }) {
        return { body: await activity.turnHealth(await tenants.existing(params.tenant_id)) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/readiness',
      operationId: 'getTenantReadinessFacts',
      summary: "What the project's readiness report reads from its runtime: turn health, tasks waiting for a person, documents, unattended work",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      responses: { 200: { description: 'The facts', schema: ReadinessFactsOut }, ...adminResponses },
      async handle({ params }) {
        return { body: await activity.readinessFacts(await tenants.existing(params.tenant_id)) };
      },
    }),
  ];
}
