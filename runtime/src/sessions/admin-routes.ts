// A tenant's conversations on the admin surface, for the control plane (GET /api/projects/:id/sessions[/:sessionId/
// messages]): every subject's, read through the same service and visibility rule as an end-user's, as a service
// principal that sees them all and owns none.
import { z } from 'zod';
import { AppError, notFound } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import type { EndUserAuthenticator, Principal } from '../auth/authenticate.js';
import type { TenantService } from '../tenants/service.js';
import { MessageOut, MessagePageQuery, SessionListQuery, SessionPage } from './schemas.js';
import type { SessionService } from './service.js';

const TenantParams = z.object({ tenant_id: z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const TenantSessionParams = TenantParams.extend({ session_id: z.uuid({ error: 'session_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const adminResponses = { 401: { description: 'Missing or wrong X-Admin-Key' }, 404: { description: 'No such tenant (`code` `tenant_not_found`), or no such conversation' } };

export function sessionAdminRoutes(sessions: SessionService, tenants: TenantService, authenticator: EndUserAuthenticator): RouteDefinition[] {
  /** The reader for a tenant; undefined for one registered but never configured (it has no conversations). */
  const reader = async (tenantId: string): Promise<Principal | undefined> => {
    const id = await tenants.existing(tenantId);
    return authenticator.administrator(id).catch((error: unknown) => {
      if (error instanceof AppError && error.kind === 'unauthenticated') return undefined;
      throw error;
    });
  };
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/sessions',
      operationId: 'listTenantSessions',
      summary: "Every conversation of the tenant's project, newest first; subagents' left out unless include_subagents",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: SessionListQuery,
      responses: { 200: { description: 'One page', schema: SessionPage }, ...adminResponses },
      async handle({ params, query }) {
        const principal = await reader(params.tenant_id);
        return { body: principal ? await sessions.list(principal, query) : { sessions: [], has_more: false, next_offset: null } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/sessions/{session_id}/messages',
      operationId: 'listTenantSessionMessages',
      summary: 'The messages of one conversation of the tenant, oldest first',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantSessionParams,
      query: MessagePageQuery,
      responses: { 200: { description: 'The messages', schema: z.array(MessageOut) }, ...adminResponses },
      async handle({ params, query }) {
        const principal = await reader(params.tenant_id);
        if (!principal) throw notFound(`session ${params.session_id} not found`);
        return { body: await sessions.messages(principal, params.session_id, query) };
      },
    }),
  ];
}
