// HTTP adapter for sign-in and the org routes (signed-in account sessions only, never a project key).
import { z } from 'zod';
import { defineRoute, MissingCredentialError, type Guard, type RouteDefinition } from '@agentplane/lib/http/routes';
import { unauthenticated } from '@agentplane/lib/errors';
import type { ActivityService } from '../activity/service.js';
import type { ProjectService } from '../projects/service.js';
import type { Account, AccountService } from './service.js';

type SignedIn = Account & { sessionTokenHash: string };

/** Where the session guard leaves the signed-in account for the handler. */
const accountOf = (locals: Record<string, unknown>) => locals.account as SignedIn;

export const projectKeyOnOrgRoute = 'organization routes need a signed-in account session (Authorization: Bearer ses_...); a project key cannot be used here';

/** `Authorization: Bearer ses_...`. A project key on these routes is refused with 403, saying so. */
export function sessionGuard(accounts: AccountService): Guard {
  return async (req, res) => {
    const header = req.get('authorization') ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match) {
      if (req.get('x-api-key') !== undefined) throw new MissingCredentialError(projectKeyOnOrgRoute);
      throw new MissingCredentialError('not signed in: send Authorization: Bearer <session token> from POST /api/auth/login');
    }
    if (match[1]!.startsWith('pk_')) throw unauthenticated(projectKeyOnOrgRoute);
    res.locals.account = await accounts.authenticate(match[1]!);
  };
}

const AccountOut = z.object({ id: z.uuid(), email: z.string(), created_at: z.iso.datetime() }).meta({ id: 'Account' });
const LoginRequest = z.strictObject({ email: z.string().min(1).max(320), password: z.string().min(1).max(1024) }).meta({ id: 'LoginRequest' });
const LoginResponse = z
  .object({ token: z.string().meta({ description: 'Send as Authorization: Bearer <token>' }), expires_at: z.iso.datetime(), account: AccountOut })
  .meta({ id: 'LoginResponse' });
const Me = z
  .object({ account: AccountOut, orgs: z.array(z.object({ id: z.uuid(), name: z.string(), role: z.enum(['owner', 'member']) })) })
  .meta({ id: 'Me' });
const OrgParams = z.object({ orgId: z.uuid({ error: 'orgId must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const ProjectCreate = z.strictObject({ name: z.string().trim().min(1).max(200) }).meta({ id: 'ProjectCreate' });
const ProjectOut = z
  .object({ id: z.uuid(), org_id: z.uuid(), name: z.string(), tenant_id: z.uuid(), created_at: z.iso.datetime(), updated_at: z.iso.datetime() })
  .meta({ id: 'Project' });

export function accountRoutes(accounts: AccountService, projects: ProjectService, activity: ActivityService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/auth/login',
      operationId: 'login',
      summary: 'Sign in with email and password; returns a session token',
      tags: ['accounts'],
      security: [],
      body: LoginRequest,
      responses: {
        200: { description: 'Signed in', schema: LoginResponse },
        401: { description: 'Invalid email or password (the same answer for both)' },
        429: { description: 'Too many failed sign-ins for this email or address; `detail` says when to try again' },
      },
      async handle({ body, req }) {
        return { body: await accounts.signIn(body.email, body.password, req.socket.remoteAddress ?? 'unknown') };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/logout',
      operationId: 'logout',
      summary: 'Revoke this session token',
      tags: ['accounts'],
      security: ['session'],
      responses: { 204: { description: 'Signed out' } },
      async handle({ res }) {
        await accounts.signOut(accountOf(res.locals).sessionTokenHash);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/me',
      operationId: 'me',
      summary: 'The signed-in account and its orgs',
      tags: ['accounts'],
      security: ['session'],
      responses: { 200: { description: 'The account', schema: Me } },
      async handle({ res }) {
        const { sessionTokenHash: _, ...account } = accountOf(res.locals);
        return { body: { account, orgs: await accounts.orgsOf(account.id) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/orgs/{orgId}/projects',
      operationId: 'createProject',
      summary: 'Create a project in an org (signed-in account only)',
      tags: ['projects'],
      security: ['session'],
      params: OrgParams,
      body: ProjectCreate,
      responses: {
        201: { description: 'Created', schema: ProjectOut },
        403: { description: 'A project key was used' },
        404: { description: 'No such org, or not a member' },
      },
      async handle({ params, body, res }) {
        return { status: 201, body: await projects.create(params.orgId, accountOf(res.locals).id, body.name) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/orgs/{orgId}/projects',
      operationId: 'listOrgProjects',
      summary: "List an org's projects, oldest first",
      tags: ['projects'],
      security: ['session'],
      params: OrgParams,
      responses: {
        200: { description: 'The projects', schema: z.object({ projects: z.array(ProjectOut) }).meta({ id: 'ProjectList' }) },
        403: { description: 'A project key was used' },
        404: { description: 'No such org, or not a member' },
      },
      async handle({ params, res }) {
        return { body: { projects: await projects.listForOrg(params.orgId, accountOf(res.locals).id) } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/orgs/{orgId}/costs',
      operationId: 'getOrgCosts',
      summary: "What an org's projects spent over a window, each and in all (signed-in account only, never a project key)",
      tags: ['projects'],
      security: ['session'],
      params: OrgParams,
      query: z.object({ window: z.enum(['1h', '24h', '7d', '30d']).default('30d').meta({ description: 'The period, ending now (default 30d)' }) }),
      responses: {
        200: {
          description: "Each project's usage from its runtime; one whose runtime did not answer carries `error` and is left out of the totals (`incomplete`)",
          schema: z
            .object({
              window: z.string(),
              cost_usd: z.number().nullable(),
              unpriced_calls: z.int(),
              incomplete: z.boolean(),
              projects: z.array(
                z.object({
                  project_id: z.uuid(),
                  name: z.string(),
                  cost_usd: z.number().nullable(),
                  unpriced_calls: z.int(),
                  requests: z.int(),
                  model_calls: z.int(),
                  input_tokens: z.int(),
                  output_tokens: z.int(),
                  error: z.string().nullable(),
                }),
              ),
            })
            .meta({ id: 'OrgCosts' }),
        },
        403: { description: 'A project key was used' },
        404: { description: 'No such org, or not a member' },
      },
      async handle({ params, query, res }) {
        const listed = await projects.listForOrg(params.orgId, accountOf(res.locals).id);
        return { body: await activity.orgCosts(listed, query.window) };
      },
    }),
  ];
}
