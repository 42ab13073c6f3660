// HTTP adapter for what the project's runtime did (admin key or a signed-in member): the project is found first (404
// for one the caller may not see), then the runtime answers. Its records keep the runtime's shape.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import type { ActivityService } from './service.js';

const TaskListQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(1_000)).default(100),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
  status: z.enum(['scheduled', 'running', 'completed', 'incomplete', 'failed', 'cancelled']).optional(),
});

const ProjectTaskList = z
  .object({ tasks: z.array(z.record(z.string(), z.unknown())), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'ProjectTaskList', description: "The runtime's Task records (GET /tasks on the data plane), every subject's" });

const TurnHealth = z
  .object({
    window_hours: z.int().meta({ description: '24' }),
    total: z.int().meta({ description: 'Turns started in the window' }),
    errored: z.int().meta({ description: 'Of those, the ones that failed' }),
    consecutive_errors: z.int().meta({ description: 'Failed turns counted back from the latest that ended; a success resets it' }),
    last_error: z.object({ run_id: z.string(), at: z.iso.datetime(), code: z.string().nullable(), message: z.string() }).nullable(),
    last_success_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ProjectTurnHealth' });

const SessionsQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(500)).default(100),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
  include_subagents: z.enum(['true', 'false']).optional().meta({ description: "true: subagents' working conversations too" }),
  user_ref: z.string().min(1).max(512).optional().meta({ description: 'Only this subject\'s' }),
  status: z.enum(['idle', 'running', 'requires_action', 'completed', 'failed', 'cancelled']).optional(),
});
const SessionParams = ProjectParams.extend({ sessionId: z.uuid({ error: 'sessionId must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const MessagesQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(500)).optional(),
  before: z.uuid().optional(),
  after: z.uuid().optional(),
});
const ProjectSessionPage = z
  .object({ sessions: z.array(z.record(z.string(), z.unknown())), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'ProjectSessionPage', description: "The runtime's Session records" });

const WindowQuery = z.object({
  window: z.enum(['1h', '24h', '7d', '30d']).default('24h').meta({ description: 'The period, ending now (default 24h)' }),
});

const unavailable = { description: "The project's runtime did not answer, or has not registered the project's tenant yet" };

export function activityRoutes(activity: ActivityService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/tasks',
      operationId: 'listProjectTasks',
      summary: "The project's scheduled tasks, every end-user's, newest first",
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: TaskListQuery,
      responses: { 200: { description: 'A page', schema: ProjectTaskList }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await activity.tasks(params.id, query)) as z.infer<typeof ProjectTaskList> };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/sessions',
      operationId: 'listProjectSessions',
      summary: "Every end-user's conversations in the project, newest first; subagents' left out unless include_subagents=true",
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: SessionsQuery,
      responses: { 200: { description: 'One page', schema: ProjectSessionPage }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await activity.sessions(params.id, query)) as z.infer<typeof ProjectSessionPage> };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/sessions/{sessionId}/messages',
      operationId: 'listProjectSessionMessages',
      summary: 'The messages of one conversation in the project, oldest first',
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: SessionParams,
      query: MessagesQuery,
      responses: {
        200: { description: 'The messages', schema: z.array(z.record(z.string(), z.unknown())).meta({ id: 'ProjectSessionMessages' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        503: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await activity.sessionMessages(params.id, params.sessionId, query)) as Record<string, unknown>[] };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/usage',
      operationId: 'getProjectUsage',
      summary: "What the project spent over a window: turns, model calls, tokens and cost, by model and purpose",
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: WindowQuery,
      responses: { 200: { description: 'The usage', schema: z.record(z.string(), z.unknown()).meta({ id: 'ProjectUsage' }) }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await activity.usage(params.id, query.window)) as Record<string, unknown> };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/observability',
      operationId: 'getProjectObservability',
      summary: "How the project's turns went over a window: by status, errors and their codes, latency percentiles",
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: WindowQuery,
      responses: { 200: { description: 'The report', schema: z.record(z.string(), z.unknown()).meta({ id: 'ProjectObservability' }) }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await activity.observability(params.id, query.window)) as Record<string, unknown> };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/context',
      operationId: 'getProjectContextStrategy',
      summary: "How the project's turns fit their context window: the limit, what is trimmed and how, and what the system prompt costs (counted)",
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: {
        200: { description: 'The strategy', schema: z.record(z.string(), z.unknown()).meta({ id: 'ProjectContextStrategy' }) },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
        409: { description: "The project's configuration has not reached its runtime yet (`code` `not_configured`)" },
        503: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: (await activity.context(params.id)) as Record<string, unknown> };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/turns',
      operationId: 'getProjectTurnHealth',
      summary: "Turn health: the project's turns of the last 24 hours, the failed ones, and the streak of failures",
      tags: ['activity'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'Turn health', schema: TurnHealth }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: (await activity.turns(params.id)) as z.infer<typeof TurnHealth> };
      },
    }),
  ];
}
