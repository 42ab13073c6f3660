// The control plane's audit log (docs/decisions/0065): every answered write (refusals too) and every token mint, with
// who (an account or a project key, by id, never the key), what (the route and the ids it names; a mint's subject and
// capabilities), how it went and from where. Append-only in the database. The data plane keeps its own.
import type { Request, Response } from 'express';
import type { Kysely } from 'kysely';
import { answeredRoute } from '@agentplane/lib/http/routes';
import type { Logger } from '@agentplane/lib/logging';
import type { ProjectCaller } from '../keys/service.js';
import type { ControlSchema } from '../store/schema.js';

/** Where a route handler leaves what its entry should say beyond the path's ids (a mint's subject). */
export const AUDIT_DETAIL = 'auditDetail';

export interface ControlAuditEntry {
  projectId: string | null;
  orgId: string | null;
  actor: string;
  action: string;
  resource: Record<string, unknown>;
  status: number;
  ip: string | null;
  requestId: string | null;
}

export class ControlAuditLog {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly logger: Logger,
  ) {}

  /** Appends an answered write's entry without holding its answer; a failure is logged. */
  recordLater(entry: ControlAuditEntry): void {
    this.db
      .withSchema('control')
      .insertInto('audit_log')
      .values({
        project_id: entry.projectId,
        org_id: entry.orgId,
        actor: entry.actor,
        action: entry.action,
        resource: JSON.stringify(entry.resource),
        outcome: entry.status < 400 ? 'ok' : entry.status < 500 ? 'refused' : 'failed',
        status: entry.status,
        ip: entry.ip,
        request_id: entry.requestId,
      })
      .execute()
      .catch((err: unknown) => this.logger.error({ err, action: entry.action }, 'could not append to the audit log'));
  }

  /** A project's entries, newest first, paged by `before` (an entry id). */
  async ofProject(projectId: string, query: { limit: number; before?: string | undefined; actor?: string | undefined; action?: string | undefined }) {
    let select = this.db.withSchema('control').selectFrom('audit_log').selectAll().where('project_id', '=', projectId);
    if (query.before !== undefined) select = select.where('id', '<', query.before);
    if (query.actor !== undefined) select = select.where('actor', '=', query.actor);
    if (query.action !== undefined) select = select.where('action', '=', query.action);
    const rows = await select.orderBy('id', 'desc').limit(query.limit + 1).execute();
    const page = rows.slice(0, query.limit);
    return {
      entries: page.map((row) => ({
        id: String(row.id),
        at: row.at.toISOString(),
        actor: row.actor,
        action: row.action,
        resource: row.resource,
        outcome: row.outcome,
        status: row.status,
        ip: row.ip,
        request_id: row.request_id,
      })),
      next_before: rows.length > query.limit ? String(page.at(-1)!.id) : null,
    };
  }
}

/** The entry an answered write makes; none for reads and for requests nobody authenticated. */
export function controlAuditEntry(req: Request, res: Response): ControlAuditEntry | undefined {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return undefined;
  const answered = answeredRoute(res);
  if (!answered) return undefined;
  const caller = res.locals.caller as ProjectCaller | undefined;
  const account = res.locals.account as { id: string } | undefined;
  const actor = caller ? (caller.kind === 'key' ? `key:${caller.keyId}` : `account:${caller.accountId}`) : account ? `account:${account.id}` : undefined;
  if (!actor) return undefined;
  const { params } = answered;
  return {
    projectId: answered.path.startsWith('/api/projects/{id}') ? (params.id ?? null) : null,
    orgId: answered.path.startsWith('/api/orgs/{orgId}') ? (params.orgId ?? null) : null,
    actor,
    action: `${req.method} ${answered.path}`,
    resource: { ...params, ...((res.locals[AUDIT_DETAIL] as Record<string, unknown> | undefined) ?? {}) },
    status: res.statusCode,
    ip: req.socket.remoteAddress ?? null,
    requestId: (res.locals.requestId as string | undefined) ?? null,
  };
}
