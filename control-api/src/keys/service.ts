// Project keys (`pk_...`): control-plane credentials of one project, scope `mint` (mint end-user tokens, read
// the ceiling) or `admin` (every control-plane call). Shown once, stored as a hash, revocable at once.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { notFound, permissionDenied, unauthenticated } from '@agentplane/lib/errors';
import type { ControlSchema } from '../store/schema.js';
import type { ProjectService } from '../projects/service.js';

export type KeyScope = 'mint' | 'admin';

/** Who calls a project route: a signed-in account (acts as admin of its orgs' projects) or a project key. */
export type ProjectCaller = { kind: 'account'; accountId: string } | { kind: 'key'; keyId: string; projectId: string; scope: KeyScope };

export interface ProjectKeyOut {
  id: string;
  project_id: string;
  name: string;
  scope: KeyScope;
  /** The key's last four characters, to tell keys apart; the key itself is never shown again. */
  last_four: string;
  created_at: string;
  revoked_at: string | null;
}

const keyPrefix = 'pk_';
const hashKey = (key: string) => createHash('sha256').update(key).digest('base64url');

/** An admin key satisfies a mint requirement, never the reverse. */
export function scopeSatisfies(have: KeyScope, need: KeyScope): boolean {
  return have === 'admin' || need === 'mint';
}

export class ProjectKeyService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly projects: ProjectService,
  ) {}

  /** The caller behind an `X-API-Key`; 401 for an unknown or revoked key. */
  async authenticate(key: string): Promise<ProjectCaller & { kind: 'key' }> {
    if (!key.startsWith(keyPrefix)) throw unauthenticated('X-API-Key must be a project key (pk_...)');
    const row = await this.db.selectFrom('project_keys').selectAll().where('key_hash', '=', hashKey(key)).executeTakeFirst();
    if (!row) throw unauthenticated('unknown project key');
    if (row.revoked_at !== null) throw unauthenticated('this project key was revoked');
    return { kind: 'key', keyId: row.id, projectId: row.project_id, scope: row.scope };
  }

  /**
   * Resolves when `caller` may act on `projectId` with `need`. A project the caller cannot see answers 404
   * like one that does not exist; a mint key on an admin route is 403, saying so.
   */
  async authorize(caller: ProjectCaller, projectId: string, need: KeyScope): Promise<void> {
    if (caller.kind === 'account') {
      await this.projects.assertAccountSees(projectId, caller.accountId);
      return;
    }
    if (caller.projectId !== projectId) throw notFound(`project ${projectId} not found`);
    if (!scopeSatisfies(caller.scope, need)) {
      throw permissionDenied('this route needs an admin-scope project key; the key used has scope mint (mint tokens and read the ceiling only)');
    }
  }

  /**
   * Creates a key and returns it, the only time it is shown. A signed-in account or an admin key of the
   * project may; so a project's first key is necessarily made by an account (no key of it exists yet).
   */
  async create(caller: ProjectCaller, projectId: string, input: { scope: KeyScope; name: string }): Promise<ProjectKeyOut & { key: string }> {
    await this.authorize(caller, projectId, 'admin');
    const key = `${keyPrefix}${randomBytes(32).toString('base64url')}`;
    const row = await this.db
        .insertInto('project_keys')
        .values({
          id: randomUUID(),
          project_id: projectId,
          name: input.name,
          scope: input.scope,
          key_hash: hashKey(key),
          last_four: key.slice(-4),
          created_by: caller.kind === 'account' ? `account:${caller.accountId}` : `key:${caller.keyId}`,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    return { ...present(row), key };
  }

  async list(caller: ProjectCaller, projectId: string): Promise<ProjectKeyOut[]> {
    await this.authorize(caller, projectId, 'admin');
    const rows = await this.db.selectFrom('project_keys').selectAll().where('project_id', '=', projectId).orderBy('created_at').orderBy('id').execute();
    return rows.map(present);
  }

  /** Revokes at once: the key mints nothing more; tokens it minted live until they expire. Idempotent. */
  async revoke(caller: ProjectCaller, projectId: string, keyId: string): Promise<ProjectKeyOut> {
    await this.authorize(caller, projectId, 'admin');
    const row = await this.db
      .updateTable('project_keys')
      .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', eb.val(new Date())) }))
      .where('id', '=', keyId)
      .where('project_id', '=', projectId)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw notFound(`key ${keyId} not found`);
    return present(row);
  }
}

function present(row: { id: string; project_id: string; name: string; scope: KeyScope; last_four: string; created_at: Date; revoked_at: Date | null }): ProjectKeyOut {
  return {
    id: row.id,
    project_id: row.project_id,
    name: row.name,
    scope: row.scope,
    last_four: row.last_four,
    created_at: row.created_at.toISOString(),
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}
