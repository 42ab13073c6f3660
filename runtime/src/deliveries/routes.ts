// The events sent to a tenant's project (docs/decisions/0059), newest first with every attempt, and sending one again,
// on the admin surface for the control plane (GET /api/projects/:id/events, POST .../events/:deliveryId/redeliver).
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { notFound } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import type { TenantService } from '../tenants/service.js';
import { EVENT_TYPES, type EventOutbox } from './outbox.js';

const Attempt = z.object({ at: z.iso.datetime(), status: z.int().nullable(), error: z.string().nullable(), duration_ms: z.int() });

const EventDeliveryOut = z
  .object({
    id: z.uuid(),
    event_id: z.uuid().meta({ description: 'X-Delivery-Id: the same for every target and attempt of one event' }),
    type: z.enum(EVENT_TYPES),
    target: z.enum(['project', 'callback']).meta({ description: "The project's webhook URL, or a task's callback URL" }),
    url: z.string(),
    status: z.enum(['pending', 'delivered', 'dead']).meta({ description: '`dead`: every attempt failed' }),
    attempts: z.int(),
    attempt_log: z.array(Attempt).meta({ description: 'Every attempt: when, the HTTP status (null when none came), why it failed' }),
    next_attempt_at: z.iso.datetime().nullable(),
    last_status: z.int().nullable(),
    last_error: z.string().nullable(),
    created_at: z.iso.datetime(),
    delivered_at: z.iso.datetime().nullable(),
    payload: z.record(z.string(), z.unknown()).meta({ description: 'The body as sent: id, type, created_at, data' }),
  })
  .meta({ id: 'EventDelivery' });

const DeliveriesQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(1_000)).default(100),
  status: z.enum(['pending', 'delivered', 'dead']).optional(),
});

const tenantId = z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase());
const TenantParams = z.object({ tenant_id: tenantId });
const DeliveryParams = z.object({ tenant_id: tenantId, delivery_id: z.uuid({ error: 'delivery_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });

export function deliveryRoutes(outbox: EventOutbox, tenants: TenantService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/events',
      operationId: 'listTenantEventDeliveries',
      summary: "Events sent to the tenant's project (turn.stopped, scheduled_task.fired), newest first, with every attempt",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: DeliveriesQuery,
      responses: {
        200: { description: 'Newest first', schema: z.object({ deliveries: z.array(EventDeliveryOut) }).meta({ id: 'EventDeliveryList' }) },
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant (`code` `tenant_not_found`)' },
      },
      async handle({ params, query }) {
        return { body: { deliveries: await outbox.list(await tenants.existing(params.tenant_id), query) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tenants/{tenant_id}/events/{delivery_id}/redeliver',
      operationId: 'redeliverTenantEvent',
      summary: 'Send a delivered or dead event to its target again: same event id, fresh timestamp and signature, a fresh budget of attempts',
      tags: ['tenants'],
      security: ['adminKey'],
      params: DeliveryParams,
      responses: {
        202: { description: 'Queued: it is sent at once, and retried as a new event would be', schema: EventDeliveryOut },
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant (`code` `tenant_not_found`), or no such delivery of it' },
        409: { description: 'The delivery is still pending: it is retried on its own (`code` `delivery_pending`); or it goes to the project\'s webhook URL, which is not set (`code` `no_webhook_url`)' },
      },
      async handle({ params }) {
        const row = await outbox.redeliver(await tenants.existing(params.tenant_id), params.delivery_id);
        if (!row) throw notFound(`event delivery ${params.delivery_id} not found`);
        return { status: 202, body: row };
      },
    }),
  ];
}
