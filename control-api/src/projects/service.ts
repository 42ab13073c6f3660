// Projects of an org: each is one customer's hard-isolation unit with its own tenant on a runtime.
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { notFound } from '../../../lib/src/errors.js';
import type { ControlSchema } from '../store/schema.js';

export interface ProjectOut {
  id: string;
  org_id: string;
  name: string;
  tenant_id: string;
  created_at: string;
  updated_at: string;
}

export class ProjectService {
  constructor(private readonly db: Kysely<ControlSchema>) {}

  /** Resolves when the account belongs to the org; an org it cannot see answers exactly like one that does not exist. */
  async assertMember(orgId: string, accountId: string): Promise<void> {
    const member = await this.db
      .selectFrom('org_members')
      .select('role')
      .where('org_id', '=', orgId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (!member) throw notFound(`org ${orgId} not found`);
  }

  /** Resolves when the account belongs to the project's org; otherwise 404, as for a project that does not exist. */
  async assertAccountSees(projectId: string, accountId: string): Promise<void> {
    const row = await this.db
      .selectFrom('projects')
      .innerJoin('org_members', 'org_members.org_id', 'projects.org_id')
      .select('projects.id')
      .where('projects.id', '=', projectId)
      .where('org_members.account_id', '=', accountId)
      .executeTakeFirst();
    if (!row) throw notFound(`project ${projectId} not found`);
  }

  async create(orgId: string, accountId: string, name: string): Promise<ProjectOut> {
    await this.assertMember(orgId, accountId);
    const row = await this.db
      .insertInto('projects')
      .values({ id: randomUUID(), org_id: orgId, name, tenant_id: randomUUID() })
      .returningAll()
      .executeTakeFirstOrThrow();
    return present(row);
  }

  async listForOrg(orgId: string, accountId: string): Promise<ProjectOut[]> {
    await this.assertMember(orgId, accountId);
    const rows = await this.db.selectFrom('projects').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
    return rows.map(present);
  }
}

function present(row: { id: string; org_id: string; name: string; tenant_id: string; created_at: Date; updated_at: Date }): ProjectOut {
  return { ...row, created_at: row.created_at.toISOString(), updated_at: row.updated_at.toISOString() };
}
