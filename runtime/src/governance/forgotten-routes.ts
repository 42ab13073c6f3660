// The subjects a tenant forgot, on the admin surface (docs/decisions/0074): what the control plane reads to make its
// own audit entries of token mints stop naming them. Digests and times only; the runtime keeps no forgotten path.
import { z } from 'zod';
import type { Kysely } from 'kysely';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import type { RuntimeSchema } from '../store/schema.js';
import type { TenantService } from '../tenants/service.js';
import { forgottenSubjectsOf } from './forgotten.js';

const Params = z.object({ tenant_id: z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });

const ForgottenSubjectList = z
  .object({
    subjects: z.array(
      z.object({
        digest: z.string().meta({ description: 'SHA-256 (hex) of the tenant id, a newline and the subject' }),
        forgotten_at: z.iso.datetime(),
      }),
    ),
  })
  .meta({ id: 'ForgottenSubjectList' });

export function forgottenSubjectRoutes(db: Kysely<RuntimeSchema>, tenants: TenantService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/forgotten-subjects',
      operationId: 'listForgottenSubjects',
      summary: 'The subjects the tenant forgot, as digests, with when: for the control plane to stop naming them too',
      tags: ['tenants'],
      security: ['adminKey'],
      params: Params,
      responses: {
        200: { description: 'Every subject forgotten, latest forget first', schema: ForgottenSubjectList },
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant (`code` `tenant_not_found`)' },
      },
      async handle({ params }) {
        const forgotten = await forgottenSubjectsOf(db, await tenants.existing(params.tenant_id));
        const subjects = [...forgotten].sort(([, a], [, b]) => b - a).map(([digest, at]) => ({ digest, forgotten_at: new Date(at).toISOString() }));
        return { body: { subjects } };
      },
    }),
  ];
}
