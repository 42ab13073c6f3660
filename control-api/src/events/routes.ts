// HTTP adapter for where the project's events go (admin key or a signed-in member): the webhook URL, the secret that
// signs deliveries (readable; rotation replaces it at once, SPEC.md), and the record of what was sent.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import type { ProjectEventsService } from './service.js';

const Webhook = z.object({ url: z.string().nullable().meta({ description: 'Where turn.stopped and scheduled_task.fired go; null: nowhere but tasks\' callback URLs' }) }).meta({ id: 'ProjectWebhook' });
const WebhookSet = z
  .strictObject({ url: z.string().max(2_048).nullable().meta({ description: 'An https URL (http only where private URLs are allowed), checked by the URL guard; null clears it' }) })
  .meta({ id: 'ProjectWebhookSet' });
const WebhookSecret = z
  .object({
    tenant_id: z.uuid(),
    webhook_secret: z.string().meta({ description: 'Signs every event in X-Signature: v1=<hex HMAC-SHA256 of "<X-Delivery-Id>.<X-Delivery-Timestamp>.<raw body>">' }),
    rotated_at: z.iso.datetime(),
  })
  .meta({ id: 'ProjectWebhookSecret' });
const EventsQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(1_000)).default(100),
  status: z.enum(['pending', 'delivered', 'dead']).optional(),
});

const DeliveryParams = ProjectParams.extend({ deliveryId: z.uuid({ error: 'deliveryId must be a UUID' }).overwrite((id) => id.toLowerCase()) });

const unavailable = { description: "The project's runtime did not answer, or has not registered the project's tenant yet" };

export function projectEventRoutes(events: ProjectEventsService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  const common = { tags: ['events'], security: ['apiKey', 'session'] as ('apiKey' | 'session')[], params: ProjectParams };
  return [
    defineRoute({
      ...common,
      method: 'get',
      path: '/api/projects/{id}/webhook',
      operationId: 'getProjectWebhook',
      summary: "Where the project's events go",
      responses: { 200: { description: 'The URL', schema: Webhook }, 403: mintKeyOnAdminRoute, 404: projectHidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await events.webhook(params.id) };
      },
    }),
    defineRoute({
      ...common,
      method: 'put',
      path: '/api/projects/{id}/webhook',
      operationId: 'setProjectWebhook',
      summary: "Set where the project's events go (turn.stopped for unattended runs, scheduled_task.fired)",
      body: WebhookSet,
      responses: { 200: { description: 'In force', schema: Webhook }, 400: { description: 'A URL the guard refuses' }, 403: mintKeyOnAdminRoute, 404: projectHidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { body: await events.setWebhook(params.id, body.url) };
      },
    }),
    defineRoute({
      ...common,
      method: 'get',
      path: '/api/projects/{id}/webhook-secret',
      operationId: 'getProjectWebhookSecret',
      summary: "The secret that signs the project's events (readable, not shown once)",
      responses: { 200: { description: 'The secret', schema: WebhookSecret }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: (await events.secret(params.id)) as z.infer<typeof WebhookSecret> };
      },
    }),
    defineRoute({
      ...common,
      method: 'post',
      path: '/api/projects/{id}/webhook-secret/rotate',
      operationId: 'rotateProjectWebhookSecret',
      summary: 'Replace the secret at once: there is no overlap, so a receiver may fail one verification and see the retry',
      responses: { 200: { description: 'The new secret', schema: WebhookSecret }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: (await events.rotateSecret(params.id)) as z.infer<typeof WebhookSecret> };
      },
    }),
    defineRoute({
      ...common,
      method: 'get',
      path: '/api/projects/{id}/events',
      operationId: 'listProjectEvents',
      summary: 'Events sent to the project, newest first: each target, its status (pending, delivered, dead) and every attempt',
      query: EventsQuery,
      responses: {
        200: { description: 'As the runtime recorded them', schema: z.object({ deliveries: z.array(z.record(z.string(), z.unknown())) }).meta({ id: 'ProjectEventDeliveries' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        503: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await events.deliveries(params.id, query)) as { deliveries: Record<string, unknown>[] } };
      },
    }),
    defineRoute({
      ...common,
      method: 'post',
      path: '/api/projects/{id}/events/{deliveryId}/redeliver',
      operationId: 'redeliverProjectEvent',
      summary: 'Send a delivered or dead event to its target again',
      description:
        'The same event id (X-Delivery-Id), so a receiver that handled it already can tell; a fresh timestamp and signature, and a fresh budget of attempts. Its earlier attempts stay in its log.',
      params: DeliveryParams,
      responses: {
        202: { description: 'Queued, and sent at once', schema: z.record(z.string(), z.unknown()).meta({ id: 'ProjectEventDelivery' }) },
        403: mintKeyOnAdminRoute,
        404: { description: 'No such project, or no such delivery of it (the same answer)' },
        409: { description: 'The delivery is still pending: it is retried on its own (`code` `delivery_pending`); or it goes to the project\'s webhook URL, which is not set (`code` `no_webhook_url`)' },
        503: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { status: 202, body: (await events.redeliver(params.id, params.deliveryId)) as Record<string, unknown> };
      },
    }),
  ];
}
