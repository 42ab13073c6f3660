// HTTP adapters for webhook triggers (SPEC.md Tasks, triggers...; docs/decisions/0060): make, list, rotate and remove
// them with capability `triggers`; and the fire, `POST /triggers/{slug}`, which takes no bearer token: its URL is the
// credential. A fire always answers 200 when taken (`{accepted: true}`, plus `duplicate: true` for a repeated event).
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { AppError } from '@agentplane/lib/errors';
import { rawBodyOf } from '@agentplane/lib/http/app';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { principalOf } from '../auth/guard.js';
import { DEFAULT_TRIGGER_RATE_PER_MINUTE, MAX_TRIGGER_PROMPT_CHARS, MAX_TRIGGER_RATE_PER_MINUTE, type TriggerService } from './service.js';

const TriggerCreate = z
  .strictObject({
    name: z.string().max(200).meta({ description: 'For people' }),
    prompt: z.string().max(MAX_TRIGGER_PROMPT_CHARS).meta({ description: 'What the agent is told on each event, the event\'s JSON following it' }),
    signed: z.boolean().optional().meta({ description: 'Events must carry X-Signature: sha256=<hex HMAC of the raw body> under the signing secret this answer returns once' }),
    session_id: z.uuid({ error: 'session_id must be a UUID' }).overwrite((id) => id.toLowerCase()).nullish().meta({ description: 'A conversation of your own every event posts into; default: a new conversation per event' }),
    model: z.string().max(256).nullish(),
    callback_url: z.string().max(2_048).nullish().meta({ description: "Where this trigger's turn.stopped events also go, checked by the URL guard" }),
    rate_per_minute: z.number().optional().meta({ description: `Events taken a minute, 1 to ${MAX_TRIGGER_RATE_PER_MINUTE} (default ${DEFAULT_TRIGGER_RATE_PER_MINUTE}); more answer 429 with Retry-After` }),
  })
  .meta({ id: 'TriggerCreate' });

const TriggerOut = z
  .object({
    id: z.uuid(),
    name: z.string(),
    prompt: z.string(),
    url_hint: z.string().meta({ description: "The URL's last four characters: the URL is shown at creation and rotation only" }),
    signed: z.boolean(),
    previous_url_until: z.iso.datetime().nullable().meta({ description: 'After a rotation: until when the replaced URL still answers' }),
    session_id: z.uuid().nullable(),
    model: z.string().nullable(),
    callback_url: z.string().nullable(),
    rate_per_minute: z.int(),
    fire_count: z.int().meta({ description: 'Events taken (duplicates not counted)' }),
    last_fired_at: z.iso.datetime().nullable(),
    subject: z.string().meta({ description: 'Whom its runs act for: the subject that made it' }),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'Trigger' });

const TriggerWithUrl = TriggerOut.extend({
  url: z.string().meta({ description: 'POST events here, with no bearer token: the URL is the credential. Shown in this answer only' }),
  signing_secret: z.string().optional().meta({ description: 'A signed trigger\'s secret, at creation only' }),
}).meta({ id: 'TriggerWithUrl' });

const TriggerList = z.object({ triggers: z.array(TriggerOut), has_more: z.boolean(), next_offset: z.int().nullable() }).meta({ id: 'TriggerList' });
const ListQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(1_000)).default(100),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
});
const TriggerParams = z.object({ trigger_id: z.uuid({ error: 'trigger_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
// SPEC.md names the fire's segment `{slug}` and the removal's `{trigger_id}`; OpenAPI allows one template per
// position, so both are `{trigger}`: the slug for the fire, the id for the removal (docs/decisions/0060).
const SlugParams = z.object({ trigger: z.string().max(128).meta({ description: "The slug: the last segment of the trigger's URL" }) });
const TriggerRef = z.object({ trigger: z.uuid({ error: 'trigger must be the trigger\'s id (a UUID)' }).overwrite((id) => id.toLowerCase()).meta({ description: "The trigger's id" }) });
const FireOut = z
  .object({ accepted: z.literal(true), duplicate: z.literal(true).optional().meta({ description: 'The event was taken within the last 24 hours: nothing new was started' }) })
  .meta({ id: 'TriggerFired' });

const unauthenticated = { description: 'Missing, invalid or expired token' };
const forbidden = { description: 'No capability `triggers`; or the trigger is seen but belongs to another subject (`code` `not_owner`)' };
const notFound = { description: 'No such trigger, or not one this token may see (the same answer)' };

export function triggerRoutes(triggers: TriggerService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/triggers',
      operationId: 'createTrigger',
      summary: 'Make a webhook trigger: a secret URL other systems POST events to, each starting an unattended turn of yours',
      tags: ['triggers'],
      security: ['bearer'],
      body: TriggerCreate,
      responses: {
        201: { description: 'Made; its URL (and signing secret) are shown this once', schema: TriggerWithUrl },
        400: { description: 'An empty name or prompt, a rate out of range, a callback URL the guard refuses, or an unregistered model' },
        401: unauthenticated,
        403: { description: 'No capability `triggers` or `chat`; or the conversation is seen but not owned' },
        404: { description: 'No such conversation (session_id)' },
        409: { description: 'Too many triggers (`code` `too_many_triggers`), or no provider serves the model' },
      },
      authorize: ({ res }) => triggers.authorize(principalOf(res)),
      async handle({ body, res }) {
        return { status: 201, body: await triggers.create(principalOf(res), body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/triggers',
      operationId: 'listTriggers',
      summary: 'Webhook triggers this token may see, newest first (never their URLs)',
      tags: ['triggers'],
      security: ['bearer'],
      query: ListQuery,
      responses: { 200: { description: 'A page', schema: TriggerList }, 401: unauthenticated, 403: { description: 'No capability `triggers`' } },
      authorize: ({ res }) => triggers.authorize(principalOf(res)),
      async handle({ query, res }) {
        return { body: await triggers.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/triggers/{trigger_id}/rotate',
      operationId: 'rotateTrigger',
      summary: 'A new URL for one of your triggers; the replaced one answers for 24 hours more. The signing secret is unchanged and not returned',
      tags: ['triggers'],
      security: ['bearer'],
      params: TriggerParams,
      responses: { 200: { description: 'The new URL, shown this once', schema: TriggerWithUrl }, 401: unauthenticated, 403: forbidden, 404: notFound },
      authorize: ({ res }) => triggers.authorize(principalOf(res)),
      async handle({ params, res }) {
        return { body: await triggers.rotate(principalOf(res), params.trigger_id) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/triggers/{trigger}',
      operationId: 'deleteTrigger',
      summary: 'Remove one of your triggers: its URLs answer no more; runs it started go on',
      tags: ['triggers'],
      security: ['bearer'],
      params: TriggerRef,
      responses: { 200: { description: 'Removed', schema: TriggerOut }, 401: unauthenticated, 403: forbidden, 404: notFound },
      authorize: ({ res }) => triggers.authorize(principalOf(res)),
      async handle({ params, res }) {
        return { body: await triggers.remove(principalOf(res), params.trigger) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/triggers/{trigger}',
      operationId: 'fireTrigger',
      summary: 'Fire a trigger: no bearer token, the URL is the credential. Takes the event at once and starts a run; its reply is never in this answer',
      description:
        'The event is keyed by `X-Event-Id`, else `Idempotency-Key`, else a hash of the body: a key taken within 24 hours answers `duplicate: true` and starts nothing. ' +
        'A signed trigger needs `X-Signature: sha256=<hex HMAC-SHA256 of the raw body>`. The reply lands in the conversation and in the project\'s `turn.stopped` event.',
      tags: ['triggers'],
      security: [],
      params: SlugParams,
      responses: {
        200: { description: 'Taken (or already taken)', schema: FireOut },
        400: { description: 'A body that is not JSON, or an event key that is too long' },
        415: { description: 'A body that is not sent as application/json' },
        401: {
          description:
            'A signed trigger, and no valid `X-Signature`: `sha256=` and the hex HMAC-SHA256 of the raw body (the event is then keyed by its body), or `v1=` and that of `<X-Event-Id>.<X-Event-Timestamp>.<raw body>` with a timestamp within 300 s (`code` `invalid_signature`)',
        },
        404: { description: 'No trigger answers at this URL' },
        429: { description: "Over the trigger's rate (`code` `trigger_rate_limited`); Retry-After says when to send again" },
      },
      authorize: async ({ params, res }) => {
        res.locals.trigger = await triggers.bySlug(params.trigger);
      },
      async handle({ req, res }) {
        // An event is JSON or nothing: another body would be read as empty, keyed alike and taken as a duplicate.
        if (hasBody(req) && !req.is('application/json')) throw new AppError('unsupported_media_type', 'a trigger takes a JSON body, sent with Content-Type: application/json');
        const header = (name: string) => {
          const value = req.get(name);
          return value === undefined || value === '' ? undefined : value;
        };
        const body = rawBodyOf(req as never) ?? Buffer.alloc(0);
        return {
          body: await triggers.fire(res.locals.trigger as Parameters<TriggerService['fire']>[0], {
            body,
            json: body.length === 0 ? null : req.body,
            signature: header('x-signature'),
            eventId: header('x-event-id') ?? header('idempotency-key'),
            timestamp: header('x-event-timestamp'),
          }),
        };
      },
    }),
  ];
}

/** Whether the request carries a body (a length above zero, or a chunked one). */
function hasBody(req: { headers: Record<string, string | string[] | undefined> }): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
