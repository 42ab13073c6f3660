// HTTP adapter for project keys, and the guard of every project route: a signed-in session or a project key.
import { z } from 'zod';
import { defineRoute, MissingCredentialError, type Guard, type RouteDefinition } from '@agentplane/lib/http/routes';
import type { AccountService } from '../accounts/service.js';
import type { ProjectCaller, ProjectKeyService } from './service.js';

/** `X-API-Key: pk_...`, or `Authorization: Bearer ses_...` of an account; sets `res.locals.caller`. */
export function projectCallerGuard(accounts: AccountService, keys: ProjectKeyService): Guard {
  return async (req, res) => {
    const apiKey = req.get('x-api-key');
    const bearer = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '')?.[1];
    let caller: ProjectCaller;
    if (apiKey !== undefined) caller = await keys.authenticate(apiKey);
    else if (bearer?.startsWith('pk_')) caller = await keys.authenticate(bearer);
    else if (bearer !== undefined) caller = { kind: 'account', accountId: (await accounts.authenticate(bearer)).id };
    else throw new MissingCredentialError('send a project key in X-API-Key, or a signed-in session as Authorization: Bearer');
    res.locals.caller = caller;
  };
}

export const callerOf = (locals: Record<string, unknown>) => locals.caller as ProjectCaller;

export const ProjectParams = z.object({ id: z.uuid({ error: 'project id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const KeyParams = ProjectParams.extend({ keyId: z.uuid({ error: 'keyId must be a UUID' }).overwrite((id) => id.toLowerCase()) });

const KeyCreate = z
  .strictObject({
    scope: z.enum(['mint', 'admin']).default('mint').meta({ description: '`mint` (default): mint end-user tokens and read the ceiling. `admin`: every control-plane call.' }),
    name: z.string().max(200).default('').meta({ description: 'A label for people' }),
  })
  .meta({ id: 'ProjectKeyCreate' });

const KeyOut = z
  .object({
    id: z.uuid(),
    project_id: z.uuid(),
    name: z.string(),
    scope: z.enum(['mint', 'admin']),
    last_four: z.string(),
    created_at: z.iso.datetime(),
    revoked_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ProjectKey' });

const KeyCreated = KeyOut.extend({ key: z.string().meta({ description: 'The key itself (`pk_...`): shown this once, stored only as a hash' }) }).meta({
  id: 'ProjectKeyCreated',
});

/** Answers every project route may give besides its own. */
export const mintKeyOnAdminRoute = { description: 'A mint-scope key on an admin route' };
export const projectHidden = { description: 'No such project (or thing in it), or not visible to the caller' };
const forbidden = mintKeyOnAdminRoute;
const hidden = projectHidden;

/** Resolves when the route's caller may administer the project (a signed-in member, or an admin key of it). */
/**
 * Fails closed at start when a route below `/api/projects/{id}` has no `authorize` step: the project's caller is
 * checked there, before the body, for every such route, so a route that forgot it never serves.
 */
export function assertProjectRoutesAuthorize(routes: RouteDefinition[]): RouteDefinition[] {
  const open = routes.filter((route) => route.path.startsWith('/api/projects/{id}') && !route.authorize);
  if (open.length > 0) throw new Error(`project routes without an authorize step: ${open.map((route) => `${route.method.toUpperCase()} ${route.path}`).join(', ')}`);
  return routes;
}

export const authorizeAdmin = (keys: ProjectKeyService) => (locals: Record<string, unknown>, projectId: string) =>
  keys.authorize(callerOf(locals), projectId, 'admin');

export function keyRoutes(keys: ProjectKeyService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/keys',
      operationId: 'listProjectKeys',
      summary: "List the project's keys (never the keys themselves)",
      tags: ['keys'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The keys, oldest first', schema: z.object({ keys: z.array(KeyOut) }).meta({ id: 'ProjectKeyList' }) }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => keys.authorize(callerOf(res.locals), params.id, 'admin'),
      async handle({ params, res }) {
        return { body: { keys: await keys.list(callerOf(res.locals), params.id) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/keys',
      operationId: 'createProjectKey',
      summary: 'Create a project key; the first needs a signed-in account, later ones an account or an admin key',
      tags: ['keys'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: KeyCreate,
      responses: { 201: { description: 'Created; `key` is shown only now', schema: KeyCreated }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => keys.authorize(callerOf(res.locals), params.id, 'admin'),
      async handle({ params, body, res }) {
        return { status: 201, body: await keys.create(callerOf(res.locals), params.id, body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/keys/{keyId}',
      operationId: 'revokeProjectKey',
      summary: 'Revoke a key at once (tokens it minted live until they expire)',
      tags: ['keys'],
      security: ['apiKey', 'session'],
      params: KeyParams,
      responses: { 200: { description: 'Revoked (repeating it changes nothing)', schema: KeyOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => keys.authorize(callerOf(res.locals), params.id, 'admin'),
      async handle({ params, res }) {
        return { body: await keys.revoke(callerOf(res.locals), params.id, params.keyId) };
      },
    }),
  ];
}
