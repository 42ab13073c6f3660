// Schema migrations shared by both drivers: an ordered list of SQL steps, each applied once in its own
// transaction under an advisory lock (two replicas starting together never both migrate), recorded in
// `schema_migrations`. A database migrated by newer code is refused rather than run against.
import { sql, type Kysely } from 'kysely';

export interface Migration {
  /** Strictly increasing from 1, never renumbered once released. */
  version: number;
  name: string;
  /** SQL statements run in order inside one transaction. */
  statements: string[];
}

export interface MigrationOutcome {
  applied: { version: number; name: string }[];
  version: number;
}

export class SchemaTooNewError extends Error {
  constructor(
    readonly databaseVersion: number,
    readonly codeVersion: number,
  ) {
    super(
      `database schema is at version ${databaseVersion}, newer than this build knows (${codeVersion}); ` +
        'run a release at least as new as the one that migrated it',
    );
    this.name = 'SchemaTooNewError';
  }
}

/** Any fixed 64-bit number: the key of the advisory lock that serializes migrators on one database. */
const migrationLockKey = 0x61676e74706c616en;

export function assertOrdered(migrations: Migration[]): void {
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(`migration '${migration.name}' has version ${migration.version}, expected ${index + 1}`);
    }
  });
}

export interface MigrateOptions {
  /**
   * The PostgreSQL schema whose `schema_migrations` records this set, so two programs can share one database
   * (the all-in-one) with each its own history. Default `public`.
   */
  schema?: string;
}

/** Applies every migration the database lacks. Idempotent: a migrated database is left untouched. */
export async function migrate(db: Kysely<any>, migrations: Migration[], options: MigrateOptions = {}): Promise<MigrationOutcome> {
  assertOrdered(migrations);
  const schema = options.schema ?? 'public';
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name '${schema}'`);
  const history = sql.table(`${schema}.schema_migrations`);
  const codeVersion = migrations.length;
  const applied: MigrationOutcome['applied'] = [];
  for (;;) {
    const step = await db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${migrationLockKey.toString()}::bigint)`.execute(trx);
      // Under the lock: `create ... if not exists` itself races between replicas.
      await sql`create schema if not exists ${sql.id(schema)}`.execute(trx);
      await sql`
        create table if not exists ${history} (
          version integer primary key,
          name text not null,
          applied_at timestamptz not null default now()
        )`.execute(trx);
      const current = await currentVersion(trx, options);
      if (current > codeVersion) throw new SchemaTooNewError(current, codeVersion);
      const next = migrations[current];
      if (!next) return null;
      for (const statement of next.statements) await sql.raw(statement).execute(trx);
      await sql`insert into ${history} (version, name) values (${next.version}, ${next.name})`.execute(trx);
      return next;
    });
    if (!step) break;
    applied.push({ version: step.version, name: step.name });
  }
  return { applied, version: codeVersion };
}

export async function currentVersion(db: Kysely<any>, options: MigrateOptions = {}): Promise<number> {
  const history = sql.table(`${options.schema ?? 'public'}.schema_migrations`);
  const result = await sql<{ version: number | null }>`select max(version) as version from ${history}`.execute(db);
  return Number(result.rows[0]?.version ?? 0);
}
