// The audit log and forgetting a subject on the data plane (SPEC.md `/audit`, `/audit/forget`; docs/decisions/0065):
// both for privileged tokens (role admin, owner or service) of the tenant; others get 403. And what every answered
// write adds to the log: who (the token's subject, the admin key, a trigger), what (the route and the ids it names),
// how it went, from where.
import type { Request, Response } from 'express';
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { permissionDenied } from '@agentplane/lib/errors';
import { answeredRoute, defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { isPrivileged } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import { principalOf } from '../auth/guard.js';
import { visibleOwnerCondition } from '../sessions/access.js';
import { ACTOR_KINDS, AUDIT_OUTCOMES, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE, outcomeOf, type AuditEntry, type AuditLog } from './audit.js';
import type { SubjectForgetter } from './forget.js';
import { storableText } from '@agentplane/lib/http/text';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const isoDateTime = z.iso.datetime({ offset: true });

const AuditQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(MAX_AUDIT_PAGE)).default(DEFAULT_AUDIT_PAGE).meta({ description: `Page size, at most ${MAX_AUDIT_PAGE}` }),
  before: z.string().regex(/^\d{1,18}$/, 'before must be an entry id').optional().meta({ description: "Entries older than this one: the previous page's next_before" }),
  actor: z.string().min(1).max(512).optional().meta({ description: 'Only this subject\'s (or `admin`, `trigger:<id>`, `forgotten:<id>`)' }),
  action: z.string().min(1).max(256).optional().meta({ description: 'Only this action, such as `POST /chat` or `tool_call`' }),
  outcome: z.enum(AUDIT_OUTCOMES).optional(),
  since: isoDateTime.optional(),
  until: isoDateTime.optional(),
});

const AuditEntryOut = z
  .object({
    id: z.string(),
    at: z.iso.datetime(),
    actor: z.string(),
    actor_kind: z.enum(ACTOR_KINDS),
    action: z.string(),
    resource: z.record(z.string(), z.unknown()).meta({ description: 'The ids the action named, or what a tool call was' }),
    outcome: z.enum(AUDIT_OUTCOMES),
    status: z.int().nullable(),
    ip: z.string().nullable(),
    request_id: z.string().nullable(),
  })
  .meta({ id: 'AuditEntry' });

// The identity rule, with its control characters (Unicode's Cc: U+0000-U+001F and U+007F-U+009F) spelled out as a
// range: schema-driven clients can build strings from that, not from the Unicode class.
const ForgetRequest = z
  .strictObject({
    subject: z
      .string()
      .max(512)
      .regex(/^[^:\u0000-\u001f\u007f-\u009f]+(?::[^:\u0000-\u001f\u007f-\u009f]+)*$/, 'subject must be a `:`-separated identity path with no empty segment')
      .meta({ description: 'The subject whose data goes: exactly this identity path' }),
  })
  .meta({ id: 'ForgetRequest' });

const ForgetReport = z
  .object({
    forget_id: z.uuid().meta({ description: 'The tombstone: its record holds when, who asked and the counts, never the subject' }),
    at: z.iso.datetime(),
    erased: z.record(z.string(), z.int()).meta({ description: "Rows removed by table; `audit_log` counts entries that now name `forgotten:<forget_id>`" }),
    steps: z.array(z.object({ step: z.string(), outcome: z.enum(['done', 'failed']), items: z.int().optional(), error: z.string().optional() })),
    complete: z.boolean().meta({ description: 'false: something outside the database (bytes, vectors) could not be removed; forget again' }),
  })
  .meta({ id: 'ForgetReport' });

const notPrivileged = { description: 'The token carries no privileged role (admin, owner or service) (`code` `not_privileged`)' };

function requirePrivileged(principal: Principal, what: string): void {
  if (!isPrivileged(principal.claims.roles)) throw permissionDenied(`${what} is for a privileged token (role admin, owner or service)`, { code: 'not_privileged' });
}

export function auditRoutes(audit: AuditLog, forgetter: SubjectForgetter): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/audit',
      operationId: 'listAudit',
      summary: "The tenant's audit log, newest first: every write, tool call, unattended start and forget, who, when, from where and how it went",
      tags: ['governance'],
      security: ['bearer'],
      query: AuditQuery,
      responses: {
        200: { description: 'A page', schema: z.object({ entries: z.array(AuditEntryOut), next_before: z.string().nullable() }).meta({ id: 'AuditPage' }) },
        401: { description: 'Missing, invalid or expired token' },
        403: notPrivileged,
      },
      authorize: ({ res }) => requirePrivileged(principalOf(res), 'the audit log'),
      async handle({ query, res }) {
        const principal = principalOf(res);
        // A privileged token narrowed by `data_scope` reads the entries of the subjects under it alone.
        const narrowed = principal.claims.data_scope !== undefined ? visibleOwnerCondition(principal, 'audit_log.actor') : undefined;
        return { body: await audit.list(principal.tenantId, query, narrowed) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/audit/forget',
      operationId: 'forgetSubject',
      summary: "Erase one subject's data: conversations and run logs, documents, memory and wiki pages, MCP servers, skills, tasks, triggers, tool-call and event records",
      description:
        "Only a subject inside the token's scope (and its data_scope): a privileged role reads across scopes but erases only within its own. Their running turns and schedules are stopped first; the logs of their runs and the wiki pages they wrote go too, and their tokens issued before the forget are refused from then on. The audit log keeps its entries, naming a tombstone instead of the subject; the tombstone holds when, who asked and the counts.",
      tags: ['governance'],
      security: ['bearer'],
      body: ForgetRequest,
      responses: {
        200: { description: 'What went', schema: ForgetReport },
        401: { description: 'Missing, invalid or expired token' },
        403: { description: 'No privileged role (`not_privileged`), or the subject is outside the token\'s scope (`code` `outside_scope`)' },
      },
      authorize: ({ res }) => requirePrivileged(principalOf(res), 'forgetting a subject'),
      async handle({ body, res }) {
        const principal = principalOf(res);
        const report = await forgetter.forgetFor(principal, body.subject);
        await audit.record([
          { tenantId: principal.tenantId, actor: principal.claims.sub, actorKind: 'end_user', action: 'subject.forget', resource: { forget_id: report.forget_id, erased: report.erased }, outcome: report.complete ? 'ok' : 'failed' },
        ]);
        return { body: report };
      },
    }),
  ];
}

/** What an answered write adds to the log; reads and requests no tenant can be named for add nothing. */
export function auditedWrite(req: Request, res: Response): AuditEntry | undefined {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return undefined;
  const answered = answeredRoute(res);
  // Nobody authenticated (401): the entry could name any tenant and any actor, so there is none.
  if (answered === undefined || res.statusCode === 401) return undefined;
  const route = answered.path;
  const principal = res.locals.principal as Principal | undefined;
  const trigger = res.locals.trigger as { id: string; tenant_id: string } | undefined;
  // The path's values as sent may be anything: kept only when plain, and a trigger's slug (its credential) never.
  const params = Object.fromEntries(
    Object.entries(answered.params)
      .filter(([name, value]) => !(name === 'trigger' && !UUID.test(value)))
      .map(([name, value]) => [name, storableText(value).slice(0, 200)]),
  );
  const tenantId = principal?.tenantId ?? trigger?.tenant_id ?? (UUID.test(params.tenant_id ?? '') ? params.tenant_id!.toLowerCase() : undefined);
  if (!tenantId) return undefined;
  const admin = route.startsWith('/tenants');
  return {
    tenantId,
    actor: principal ? principal.claims.sub : trigger ? `trigger:${trigger.id}` : admin ? 'admin' : 'anonymous',
    actorKind: principal ? 'end_user' : trigger ? 'unattended' : admin ? 'admin' : 'anonymous',
    action: `${req.method} ${route}`,
    resource: { ...params, ...(trigger ? { trigger_id: trigger.id } : {}) },
    outcome: outcomeOf(res.statusCode),
    status: res.statusCode,
    ip: req.socket.remoteAddress ?? null,
    requestId: (res.locals.requestId as string | undefined) ?? null,
  };
}
