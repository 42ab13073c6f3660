// HTTP adapters for the record of webhook-tool calls: `GET /tools/deliveries` for a privileged token of the tenant
// (SPEC.md Tools and capabilities), and the same list on the admin surface for the control plane's
// `/api/projects/:id/webhook-tools/deliveries` (X-Admin-Key).
import { z } from 'zod';
import { permissionDenied } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { isPrivileged } from '@agentplane/lib/permissions';
import { principalOf } from '../auth/guard.js';
import type { TenantService } from '../tenants/service.js';
import { DEFAULT_DELIVERIES_LIMIT, DELIVERY_EXCERPT_CHARS, MAX_DELIVERIES_LIMIT, type ToolDeliveries } from './deliveries.js';

const DeliveryOut = z
  .object({
    id: z.uuid(),
    at: z.iso.datetime().meta({ description: 'When the call was made' }),
    tool: z.string().meta({ description: 'The tool\'s name when it was called' }),
    tool_id: z.string().meta({ description: 'The control plane\'s tool id' }),
    session_id: z.uuid(),
    run_id: z.string(),
    subject: z.string().meta({ description: 'Whose turn made the call' }),
    status: z.int().nullable().meta({ description: 'The handler\'s HTTP status; null when none answered' }),
    ok: z.boolean().meta({ description: 'The handler answered 2xx' }),
    attempts: z.int().meta({ description: 'More than 1 when the handler could not have acted on an attempt (refused connection, 429, 503)' }),
    duration_ms: z.int(),
    result: z.string().meta({ description: `The first ${DELIVERY_EXCERPT_CHARS} characters of what the agent was given` }),
    error: z.string().nullable().meta({ description: 'Why the call failed; null for a 2xx answer' }),
  })
  .meta({ id: 'ToolDelivery' });

const DeliveryList = z.object({ deliveries: z.array(DeliveryOut) }).meta({ id: 'ToolDeliveryList' });

const DeliveriesQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_DELIVERIES_LIMIT)
    .default(DEFAULT_DELIVERIES_LIMIT)
    .meta({ description: `How many, newest first (default ${DEFAULT_DELIVERIES_LIMIT}, at most ${MAX_DELIVERIES_LIMIT})` }),
});

const TenantParams = z.object({ tenant_id: z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });

export function toolRoutes(deliveries: ToolDeliveries, tenants: TenantService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/tools/deliveries',
      operationId: 'listToolDeliveries',
      summary: 'Recent webhook-tool calls of this project, newest first: when, tool, result excerpt, duration and error',
      tags: ['tools'],
      security: ['bearer'],
      query: DeliveriesQuery,
      responses: {
        200: { description: 'Newest first', schema: DeliveryList },
        401: { description: 'Missing, invalid or expired token' },
        403: { description: 'The token carries no privileged role (admin, owner or service)' },
      },
      authorize: ({ res }) => {
        if (!isPrivileged(principalOf(res).claims.roles)) {
          throw permissionDenied('webhook tool deliveries are for a privileged token (role admin, owner or service)', { code: 'not_privileged' });
        }
      },
      async handle({ query, res }) {
        return { body: { deliveries: await deliveries.recent(principalOf(res).tenantId, query.limit) } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/tools/deliveries',
      operationId: 'listTenantToolDeliveries',
      summary: "Recent webhook-tool calls of the tenant's project, newest first",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: DeliveriesQuery,
      responses: {
        200: { description: 'Newest first', schema: DeliveryList },
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant (`code` `tenant_not_found`)' },
      },
      async handle({ params, query }) {
        return { body: { deliveries: await deliveries.recent(await tenants.existing(params.tenant_id), query.limit) } };
      },
    }),
  ];
}
