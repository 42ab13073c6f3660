// Projects of an org: each is one customer's hard-isolation unit with its own tenant on a runtime, its own
// capability ceiling and configuration, and its own token signing key ring (sealed at rest).
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { SecretBox } from '../../../lib/src/crypto/secret-box.js';
import { notFound } from '../../../lib/src/errors.js';
import { createKeyRing, exportKeyRing, importKeyRing, type KeyRing } from '../../../lib/src/tokens/keys.js';
import type { ControlSchema, StoredCeiling } from '../store/schema.js';
import { ceilingView, defaultCeiling, mergeCeiling, type CeilingView, type CeilingPatch } from './ceiling.js';
import type { z } from 'zod';

export interface ProjectOut {
  id: string;
  org_id: string;
  name: string;
  tenant_id: string;
  created_at: string;
  updated_at: string;
}

export interface ProjectDetail extends ProjectOut {
  ceiling: CeilingView;
  system_prompt: string | null;
  origins: string[];
}

type ProjectRow = Selectable<ControlSchema['projects']>;

export class ProjectService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly secrets: SecretBox,
  ) {}

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
    const id = randomUUID();
    const ring = await createKeyRing();
    const row = await this.db
      .insertInto('projects')
      .values({
        id,
        org_id: orgId,
        name,
        tenant_id: randomUUID(),
        ceiling: JSON.stringify(defaultCeiling()),
        signing_keys: this.secrets.seal(JSON.stringify(await exportKeyRing(ring)), signingKeysAad(id)),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return present(row);
  }

  async listForOrg(orgId: string, accountId: string): Promise<ProjectOut[]> {
    await this.assertMember(orgId, accountId);
    const rows = await this.db.selectFrom('projects').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
    return rows.map(present);
  }

  async get(projectId: string): Promise<ProjectDetail> {
    return presentDetail(await this.row(projectId));
  }

  async ceilingOf(projectId: string): Promise<{ tenantId: string; ceiling: StoredCeiling }> {
    const row = await this.row(projectId);
    return { tenantId: row.tenant_id, ceiling: row.ceiling };
  }

  async update(projectId: string, patch: { name?: string; ceiling?: z.infer<typeof CeilingPatch> }): Promise<ProjectDetail> {
    return this.db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom('projects').selectAll().where('id', '=', projectId).forUpdate().executeTakeFirst();
      if (!current) throw projectNotFound(projectId);
      const row = await trx
        .updateTable('projects')
        .set({
          ...(patch.name === undefined ? {} : { name: patch.name }),
          ...(patch.ceiling === undefined ? {} : { ceiling: JSON.stringify(mergeCeiling(current.ceiling, patch.ceiling)) }),
          updated_at: new Date(),
        })
        .where('id', '=', projectId)
        .returningAll()
        .executeTakeFirstOrThrow();
      return presentDetail(row);
    });
  }

  async setSystemPrompt(projectId: string, systemPrompt: string | null): Promise<ProjectDetail> {
    return this.setColumns(projectId, { system_prompt: systemPrompt });
  }

  async setOrigins(projectId: string, origins: string[]): Promise<ProjectDetail> {
    return this.setColumns(projectId, { origins: JSON.stringify(origins) });
  }

  /** The project's signing key ring, opened. */
  async signingKeys(projectId: string): Promise<KeyRing> {
    const row = await this.row(projectId);
    if (!row.signing_keys) throw new Error(`project ${projectId} has no signing keys`);
    return importKeyRing(JSON.parse(this.secrets.open(row.signing_keys, signingKeysAad(row.id))));
  }

  private async setColumns(projectId: string, values: { system_prompt?: string | null; origins?: string }): Promise<ProjectDetail> {
    const row = await this.db.updateTable('projects').set({ ...values, updated_at: new Date() }).where('id', '=', projectId).returningAll().executeTakeFirst();
    if (!row) throw projectNotFound(projectId);
    return presentDetail(row);
  }

  private async row(projectId: string): Promise<ProjectRow> {
    const row = await this.db.selectFrom('projects').selectAll().where('id', '=', projectId).executeTakeFirst();
    if (!row) throw projectNotFound(projectId);
    return row;
  }
}

const signingKeysAad = (projectId: string) => `project:${projectId}:signing-keys`;
const projectNotFound = (projectId: string) => notFound(`project ${projectId} not found`);

function present(row: ProjectRow): ProjectOut {
  return {
    id: row.id,
    org_id: row.org_id,
    name: row.name,
    tenant_id: row.tenant_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function presentDetail(row: ProjectRow): ProjectDetail {
  return { ...present(row), ceiling: ceilingView(row.ceiling), system_prompt: row.system_prompt, origins: row.origins };
}
