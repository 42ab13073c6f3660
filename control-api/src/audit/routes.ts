// The project's control-plane audit log for its admins (admin key or a signed-in member): every write and token
// mint, newest first.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import type { ForgottenMints } from './forgotten.js';
import type { ControlAuditLog } from './log.js';

const AuditQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(1_000)).default(100),
  before: z.string().regex(/^\d{1,18}$/, 'before must be an entry id').optional(),
  actor: z.string().min(1).max(300).optional().meta({ description: '`account:<id>` or `key:<id>`' }),
  action: z.string().min(1).max(300).optional().meta({ description: 'Such as `POST /api/projects/{id}/token`' }),
});

const AuditPage = z
  .object({
    entries: z.array(
      z.object({
        id: z.string(),
        at: z.iso.datetime(),
        actor: z.string(),
        action: z.string(),
        resource: z.record(z.string(), z.unknown()).meta({ description: "The path's ids; a mint's subject (`forgotten` once the runtime forgot it) and capabilities" }),
        outcome: z.enum(['ok', 'refused', 'failed']),
        status: z.int().nullable(),
        ip: z.string().nullable(),
        request_id: z.string().nullable(),
      }),
    ),
    next_before: z.string().nullable(),
  })
  .meta({ id: 'ControlAuditPage' });

export function controlAuditRoutes(audit: ControlAuditLog, keys: ProjectKeyService, forgotten: ForgottenMints): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/audit',
      operationId: 'listProjectAudit',
      summary: "The project's control-plane audit log, newest first: every write and token mint, who, when, from where and how it went",
      tags: ['audit'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: AuditQuery,
      responses: { 200: { description: 'A page', schema: AuditPage }, 403: mintKeyOnAdminRoute, 404: projectHidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        // A subject forgotten on the runtime since the last pass stops being named before the entries are shown.
        await forgotten.settleBeforeRead(params.id);
        return { body: (await audit.ofProject(params.id, query)) as z.infer<typeof AuditPage> };
      },
    }),
  ];
}
