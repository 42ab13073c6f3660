// HTTP adapter for a project's computer (admin key or a signed-in member; docs/decisions/0080): its settings, and
// its sandboxes on the runtime, listed, described by their host, and paused, resumed or deleted. The project is found
// first (404 for one the caller may not see), then the runtime answers; its records keep the runtime's shape.
import { z } from 'zod';
import { ComputerSettingsSchema } from '@agentplane/lib/computer';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import { SANDBOX_ACTIONS, SANDBOX_STATES, type ProjectComputers } from './service.js';

const SandboxListQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(100)).default(20).meta({ description: 'Page size, at most 100' }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
  state: z.enum(SANDBOX_STATES).optional().meta({ description: 'Only this state; default: all but `deleted`' }),
});

// SPEC.md names a sandbox a "computer session": `sessionId` is the sandbox's id, not a conversation's.
const SandboxActionParams = ProjectParams.extend({
  sessionId: z.uuid({ error: 'sessionId must be a UUID' }).overwrite((id) => id.toLowerCase()).meta({ description: "The sandbox's id" }),
  action: z.enum(SANDBOX_ACTIONS),
});

const ProjectSandbox = z
  .record(z.string(), z.unknown())
  .meta({ id: 'ProjectSandbox', description: "The runtime's Sandbox record (GET /computers/sessions/{id} on the data plane)" });
const ProjectSandboxList = z
  .object({ sandboxes: z.array(ProjectSandbox), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'ProjectSandboxList', description: "The project's sandboxes, every subject's, newest first" });
const ProjectSandboxHost = z
  .record(z.string(), z.unknown())
  .nullable()
  .meta({ id: 'ProjectSandboxHost', description: "The runtime's sandbox host: its kind, isolation, and what enforces each limit; null when the runtime has none" });

const unavailable = { description: "The project's runtime did not answer, or has not registered the project's tenant yet" };

export function computerRoutes(computers: ProjectComputers, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/computer',
      operationId: 'getComputerSettings',
      summary: "The project's computer settings: command timeout, sandbox count, each sandbox's limits, idle pause, lifetime, image",
      tags: ['computers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'In force (the defaults where the project set none)', schema: ComputerSettingsSchema }, 403: mintKeyOnAdminRoute, 404: projectHidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await computers.settings(params.id) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/computer',
      operationId: 'setComputerSettings',
      summary: "Replace the project's computer settings (a setting left out is its default); max_sandboxes 0 turns the computer off",
      description:
        "The runtime reads them for each sandbox it makes (count, limits, lifetime, image), each command (timeout) and each idle check: sandboxes already made keep their limits, and ones over a lowered count are kept until deleted, no new one being made meanwhile.",
      tags: ['computers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: ComputerSettingsSchema,
      responses: { 200: { description: 'In force', schema: ComputerSettingsSchema }, 403: mintKeyOnAdminRoute, 404: projectHidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { body: await computers.setSettings(params.id, body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/sandbox-host',
      operationId: 'getProjectSandboxHost',
      summary: "The sandbox host of the project's runtime, or null when it has none (then the computer is not offered)",
      tags: ['computers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The host, or null', schema: ProjectSandboxHost }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await computers.host(params.id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/sandboxes',
      operationId: 'listProjectSandboxes',
      summary: "The project's sandboxes, every end-user's, newest first",
      tags: ['computers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: SandboxListQuery,
      responses: { 200: { description: 'A page', schema: ProjectSandboxList }, 403: mintKeyOnAdminRoute, 404: projectHidden, 503: unavailable },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: await computers.sandboxes(params.id, query) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/sandboxes/{sessionId}/{action}',
      operationId: 'actOnProjectSandbox',
      summary: "Pause, resume or delete one of the project's sandboxes, whoever made it",
      description: 'A paused sandbox keeps its processes frozen and its memory; a deleted one is gone with its /workspace.',
      tags: ['computers'],
      security: ['apiKey', 'session'],
      params: SandboxActionParams,
      responses: {
        200: { description: 'The sandbox after it', schema: ProjectSandbox },
        403: mintKeyOnAdminRoute,
        404: { description: 'No such project or sandbox in it, or not visible to the caller' },
        409: { description: "The sandbox's state does not allow it (the runtime's `code`: deleted, failed, past its lifetime)" },
        503: unavailable,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await computers.act(params.id, params.sessionId, params.action) };
      },
    }),
  ];
}
