// Forgetting one subject (SPEC.md `POST /audit/forget`; docs/decisions/0065): their work is stopped, then everything
// of theirs goes (conversations with their messages and runs, documents with their bytes and vectors, memory, MCP
// servers, skill packages, tasks, triggers, tool-call and event records), each feature registering its part as it
// does for the tenant erase. The rows go in one transaction, with the audit log's entries of theirs made to name a
// tombstone instead and the subject's digest recorded, so their tokens still in flight are refused (0074); the
// tombstone keeps when, who asked and the counts, never the subject.
import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { errorMessage, permissionDenied } from '@agentplane/lib/errors';
import { isPrivileged, isSubjectInReach } from '@agentplane/lib/permissions';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../store/schema.js';
import { AuditLog } from './audit.js';
import { recordForgotten } from './forgotten.js';

/** A feature's rows of one subject, deleted inside the forget's transaction; answers how many. */
export interface SubjectRows {
  table: string;
  purge(trx: Transaction<RuntimeSchema>, tenantId: string, subject: string): Promise<number>;
}

/** Work before the rows go: stopping the subject's runs and tasks, removing bytes and vectors kept elsewhere. */
export interface SubjectStep {
  name: string;
  run(tenantId: string, subject: string): Promise<{ items?: number }>;
}

/** What a forget's rule reads of the caller's principal (not the auth module's type: it imports the feature host). */
export interface ForgetRequester {
  tenantId: string;
  claims: { sub: string; roles: readonly string[]; scope: string; data_scope?: string | undefined };
}

export interface ForgetReport {
  forget_id: string;
  at: string;
  /** Rows removed, by table (`audit_log` counts entries that now name the tombstone). */
  erased: Record<string, number>;
  steps: { step: string; outcome: 'done' | 'failed'; items?: number; error?: string }[];
  /** Every step succeeded; false means some bytes or vectors outside the database may remain: forget again. */
  complete: boolean;
}

export class SubjectForgetter {
  private readonly steps: SubjectStep[] = [];
  private readonly rows: SubjectRows[] = [];

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly logger: Logger,
  ) {}

  registerStep(step: SubjectStep): void {
    this.steps.push(step);
  }

  registerRows(rows: SubjectRows): void {
    this.rows.push(rows);
  }

  /**
   * A privileged token's forget (`POST /audit/forget`): only of a subject inside the token's scope and data scope,
   * else 403 `outside_scope`. The erase cannot be undone, and privilege lets a token read across scopes, not erase.
   */
  async forgetFor(principal: ForgetRequester, subject: string): Promise<ForgetReport> {
    if (!isPrivileged(principal.claims.roles)) throw permissionDenied('forgetting a subject is for a privileged token (role admin, owner or service)', { code: 'not_privileged' });
    if (!isSubjectInReach(principal.claims, subject)) throw permissionDenied(`subject ${subject} is outside this token's scope`, { code: 'outside_scope' });
    return this.forget(principal.tenantId, subject, principal.claims.sub);
  }

  async forget(tenantId: string, subject: string, requestedBy: string): Promise<ForgetReport> {
    const steps: ForgetReport['steps'] = [];
    for (const step of this.steps) {
      try {
        const { items } = await step.run(tenantId, subject);
        steps.push({ step: step.name, outcome: 'done', ...(items === undefined ? {} : { items }) });
      } catch (error) {
        this.logger.warn({ err: error, tenant_id: tenantId, step: step.name }, 'a step of forgetting a subject failed');
        steps.push({ step: step.name, outcome: 'failed', error: errorMessage(error).slice(0, 500) });
      }
    }
    const forgetId = randomUUID();
    const erased: Record<string, number> = {};
    const at = await this.db.transaction().execute(async (trx) => {
      for (const part of this.rows) erased[part.table] = (erased[part.table] ?? 0) + (await part.purge(trx, tenantId, subject));
      erased.audit_log = await AuditLog.pseudonymize(trx, tenantId, subject, forgetId);
      // Their tokens still in flight are refused from here on, on every replica (the tenant's stamp moves).
      await recordForgotten(trx, tenantId, subject);
      const row = await trx
        .insertInto('forget_records')
        .values({ id: forgetId, tenant_id: tenantId, requested_by: requestedBy, erased: JSON.stringify(erased) })
        .returning('at')
        .executeTakeFirstOrThrow();
      return row.at;
    });
    return { forget_id: forgetId, at: at.toISOString(), erased, steps, complete: steps.every((step) => step.outcome === 'done') };
  }

  /** A tenant's erase: its tombstones go with its other rows. */
  static async purge(trx: Kysely<RuntimeSchema>, tenantId: string): Promise<number> {
    return Number((await trx.deleteFrom('forget_records').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows);
  }
}
