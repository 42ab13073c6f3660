// HTTP adapters for scheduled tasks (SPEC.md Tasks endpoints; docs/decisions/0058): create and list (`tasks:write`,
// `tasks:read`), read one, cancel one's own; and the tenant's whole list on the admin surface for the control plane.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { invalidArgument, notFound } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { principalOf } from '../auth/guard.js';
import type { TenantService } from '../tenants/service.js';
import type { TaskScheduler } from './scheduler.js';
import { MAX_RUN_AT_AHEAD_MS, MAX_INTERVAL_SECONDS, MIN_INTERVAL_SECONDS } from './schedule.js';
import { DEFAULT_TASK_PAGE, MAX_TASK_PAGE, MAX_TASK_PROMPT_CHARS, TASK_STATUSES, type TaskService } from './service.js';

const uuid = (name: string) => z.uuid({ error: `${name} must be a UUID` }).overwrite((id) => id.toLowerCase());

const TaskCreate = z
  .strictObject({
    prompt: z.string().max(MAX_TASK_PROMPT_CHARS).meta({ description: 'What the agent is told each time the task fires, as a message of its own' }),
    name: z.string().max(200).optional().meta({ description: 'For people; default: the start of the prompt' }),
    cron: z.string().max(256).nullish().meta({ description: 'A cron of 5 to 7 fields (seconds and years optional), fired at most once a minute' }),
    timezone: z.string().max(64).nullish().meta({ description: "The cron's IANA time zone, such as Europe/Paris; blank is UTC" }),
    interval_seconds: z
      .number()
      .nullish()
      .meta({ description: `Fire every so many seconds instead (${MIN_INTERVAL_SECONDS} to ${MAX_INTERVAL_SECONDS}), the first fire one interval from now` }),
    run_at: z
      .string()
      .max(64)
      .nullish()
      .meta({ description: `Fire once, at this RFC 3339 time with its offset (within ${MAX_RUN_AT_AHEAD_MS / 86_400_000} days)` }),
    callback_url: z.string().max(2_048).nullish().meta({ description: 'Where this task\'s deliveries also go, checked by the URL guard' }),
    session_id: uuid('session_id').nullish().meta({ description: 'A conversation of your own that each fire posts into; default: a new conversation each fire' }),
    model: z.string().max(256).nullish().meta({ description: "The model its turns run on; default: the project's" }),
  })
  .meta({ id: 'TaskCreate', description: 'Exactly one of cron, interval_seconds and run_at.' });

const TaskOut = z
  .object({
    id: z.uuid(),
    name: z.string(),
    prompt: z.string(),
    status: z.enum(TASK_STATUSES).meta({
      description:
        '`scheduled` (next_run_at set), `running` (a one-shot task\'s run under way), then `completed`, `incomplete` (see last_finish_reason) or `failed` (see last_error); `cancelled`',
    }),
    cron: z.string().nullable(),
    timezone: z.string(),
    interval_seconds: z.int().nullable(),
    run_at: z.iso.datetime().nullable(),
    next_run_at: z.iso.datetime().nullable().meta({ description: 'Never null while scheduled' }),
    run_count: z.int().meta({ description: 'Runs started' }),
    last_error: z.string().nullable().meta({ description: 'Null unless status is failed' }),
    last_finish_reason: z.string().nullable().meta({ description: 'How the last fire stopped short (`needs_input`, `max_tool_iterations`...; `error` for a broken run of a recurring task); null when it finished' }),
    last_run_error: z.string().nullable().meta({ description: "Why the last fire's run broke, recurring tasks included" }),
    last_run_at: z.iso.datetime().nullable(),
    last_run_id: z.string().nullable(),
    last_session_id: z.uuid().nullable().meta({ description: 'The conversation the last fire wrote in' }),
    callback_url: z.string().nullable(),
    session_id: z.uuid().nullable(),
    model: z.string().nullable(),
    subject: z.string().meta({ description: 'Whom it acts for: the subject that created it' }),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'Task' });

const TaskList = z
  .object({
    tasks: z.array(TaskOut),
    has_more: z.boolean(),
    next_offset: z.int().nullable().meta({ description: 'The offset of the next page; null when has_more is false' }),
  })
  .meta({ id: 'TaskList' });

const TaskListQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(MAX_TASK_PAGE)).default(DEFAULT_TASK_PAGE).meta({ description: `Page size, at most ${MAX_TASK_PAGE}` }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
  status: z.enum(TASK_STATUSES).optional(),
});

const TaskParams = z.object({ task_id: uuid('task_id') });
const TenantParams = z.object({ tenant_id: uuid('tenant_id') });

const unauthenticated = { description: 'Missing, invalid or expired token' };

const SlotFireBody = z
  .strictObject({ slot: z.iso.datetime({ offset: true, error: 'slot must be an RFC 3339 date and time' }).meta({ description: 'The slot the Job was made for' }) })
  .meta({ id: 'SlotFire' });
const SlotFired = z
  .object({
    fired: z.boolean(),
    run_id: z.string().optional().meta({ description: "The fire's run, when it fired" }),
    reason: z.enum(['not_scheduled', 'already_fired', 'still_running']).optional().meta({ description: 'Why nothing fired' }),
    detail: z.string().optional(),
  })
  .meta({ id: 'SlotFired' });

/**
 * The fire container's call (docs/decisions/0066): a CronJob's Job asks to fire its slot, with the project's fire key.
 * The slot fires once however many Jobs ask; a Job's retry after a 5xx is safe.
 */
export function taskFireRoutes(scheduler: Pick<TaskScheduler, 'fireSlot'>): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/internal/tasks/{task_id}/fires',
      operationId: 'fireTaskSlot',
      summary: "Fire one slot of a task, for its CronJob's Job",
      description: 'Answers 202 when the slot fired now, 200 with `reason` when it fired nothing (already fired, skipped, or the task ended).',
      tags: ['tasks'],
      security: ['fireKey'],
      params: TaskParams,
      body: SlotFireBody,
      responses: {
        200: { description: 'Nothing fired, and why', schema: SlotFired },
        202: { description: 'The slot fired: its run started', schema: SlotFired },
        400: { description: 'Not a slot of the task\'s schedule, or one not come yet' },
        401: { description: 'Missing or wrong X-Fire-Key' },
        404: { description: 'No such task' },
      },
      async handle({ params, body }) {
        const outcome = await scheduler.fireSlot(params.task_id, new Date(body.slot));
        if (outcome.fired) return { status: 202, body: { fired: true, run_id: outcome.runId } };
        if (outcome.reason === 'not_found') throw notFound(`task ${params.task_id} not found`);
        if (outcome.reason === 'not_a_slot') throw invalidArgument(`slot: ${outcome.detail}`, { code: 'not_a_slot' });
        return { body: { fired: false, reason: outcome.reason, ...(outcome.detail ? { detail: outcome.detail } : {}) } };
      },
    }),
  ];
}

export function taskRoutes(tasks: TaskService, tenants: TenantService): RouteDefinition[] {
  const notFound = { description: 'No such task, or not one this token may see (the same answer)' };
  return [
    defineRoute({
      method: 'post',
      path: '/tasks',
      operationId: 'createTask',
      summary: 'Schedule a task: a prompt run as an unattended turn of yours at a moment, every interval, or on a cron',
      description:
        'Its turns act for you with what this token holds, under the project\'s ceiling at each fire; nobody is there to answer, so they are offered no client tools and no `ask_user`, and a pause ends the fire with `needs_input`.',
      tags: ['tasks'],
      security: ['bearer'],
      body: TaskCreate,
      responses: {
        201: { description: 'Scheduled', schema: TaskOut },
        400: { description: 'A detail beginning `Invalid schedule spec:` (do not retry), a callback URL the guard refuses, or an unregistered model' },
        401: unauthenticated,
        403: { description: 'No capability `tasks:write` or `chat`; or the conversation is seen but not owned' },
        404: { description: 'No such conversation (session_id)' },
        409: { description: 'Too many scheduled tasks (`code` `too_many_tasks`), or no provider serves the model' },
      },
      authorize: ({ res }) => tasks.authorizeWrite(principalOf(res)),
      async handle({ body, res }) {
        return { status: 201, body: await tasks.create(principalOf(res), body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tasks',
      operationId: 'listTasks',
      summary: 'Scheduled tasks this token may see, newest first',
      tags: ['tasks'],
      security: ['bearer'],
      query: TaskListQuery,
      responses: { 200: { description: 'A page', schema: TaskList }, 401: unauthenticated, 403: { description: 'No capability `tasks:read`' } },
      authorize: ({ res }) => tasks.authorizeRead(principalOf(res)),
      async handle({ query, res }) {
        return { body: await tasks.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tasks/{task_id}',
      operationId: 'getTask',
      summary: 'One scheduled task',
      tags: ['tasks'],
      security: ['bearer'],
      params: TaskParams,
      responses: { 200: { description: 'The task', schema: TaskOut }, 401: unauthenticated, 403: { description: 'No capability `tasks:read`' }, 404: notFound },
      authorize: ({ res }) => tasks.authorizeRead(principalOf(res)),
      async handle({ params, res }) {
        return { body: await tasks.get(principalOf(res), params.task_id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tasks/{task_id}/cancel',
      operationId: 'cancelTask',
      summary: 'Cancel one of your tasks: it fires no more, and a run of it under way is stopped',
      description: 'A task that already ended is answered as it is.',
      tags: ['tasks'],
      security: ['bearer'],
      params: TaskParams,
      responses: {
        200: { description: 'The task, cancelled', schema: TaskOut },
        401: unauthenticated,
        403: { description: 'No capability `tasks:write`; or the task is seen but belongs to another subject (`code` `not_owner`)' },
        404: notFound,
      },
      authorize: ({ res }) => tasks.authorizeWrite(principalOf(res)),
      async handle({ params, res }) {
        return { body: await tasks.cancel(principalOf(res), params.task_id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/tasks',
      operationId: 'listTenantTasks',
      summary: "Every scheduled task of the tenant's project, newest first",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: TaskListQuery,
      responses: {
        200: { description: 'A page', schema: TaskList },
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant (`code` `tenant_not_found`)' },
      },
      async handle({ params, query }) {
        return { body: await tasks.ofTenant(await tenants.existing(params.tenant_id), query) };
      },
    }),
  ];
}
