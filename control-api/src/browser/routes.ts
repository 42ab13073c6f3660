// HTTP adapter for a project's browser hand-off settings (admin key or a signed-in member; docs/decisions/0090): which
// model answers the hand-off check, and how often one conversation may ask it. Kept with the project and pushed in
// its configuration like any change.
import { BrowserSettingsSchema } from '@agentplane/lib/browser';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import type { ProjectService } from '../projects/service.js';

export function browserRoutes(projects: ProjectService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/browser',
      operationId: 'getBrowserSettings',
      summary: "The project's browser hand-off settings: the check's model and how often a conversation may ask it",
      tags: ['browser'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'In force (the defaults where the project set none)', schema: BrowserSettingsSchema }, 403: mintKeyOnAdminRoute, 404: projectHidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await projects.browserOf(params.id) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/browser',
      operationId: 'setBrowserSettings',
      summary: "Replace the project's browser hand-off settings (a setting left out is its default)",
      description:
        "`handoff_check_model` must be a model the project registers (400 otherwise); a small, cheap one suits the check, which answers one word. The runtime reads the settings at each check.",
      tags: ['browser'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: BrowserSettingsSchema,
      responses: {
        200: { description: 'In force', schema: BrowserSettingsSchema },
        400: { description: 'The model is not one the project registers (`model_not_available`)' },
        403: mintKeyOnAdminRoute,
        404: projectHidden,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { body: await projects.setBrowser(params.id, body) };
      },
    }),
  ];
}
