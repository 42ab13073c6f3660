// HTTP adapter for what the project's runtime did (admin key or a signed-in member): the project is found first (404
// for one the caller may not see), then the runtime answers. Its records keep the runtime's shape.
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import type { ActivityService } from './service.js';

const TaskListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
  offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  status: z.enum(['scheduled', 'running', 'completed', 'incomplete', 'failed', 'cancelled']).optional(),
});

const ProjectTaskList = z
  .object({ tasks: z.array(z.record(z.string(), z.unknown())), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'ProjectTaskList', description: "The runtime's Task records (GET /tasks on the data plane), every subject's" });

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
  ];
}
