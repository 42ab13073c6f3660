// Each project's own PostgreSQL database and role, made and dropped through the operator's admin connection.
// Idempotent at every statement, so a pass interrupted anywhere finishes on the next one: the role and database
// are created when missing, and a comment on the database marks the end of its setup (CONNECT revoked from PUBLIC,
// the `vector` extension the runtime's migrations need, which only an admin may create). DDL runs one statement
// at a time in this process; CREATE DATABASE also retries while another session holds its template.
import pg from 'pg';
import type { Logger } from '../../../../lib/src/logging.js';

/** Stored as the database's comment once its setup is complete. */
const SETUP_MARKER = 'agentplane project database: set up by agentplane-operator';

const DUPLICATE_OBJECT = '42710';
const DUPLICATE_DATABASE = '42P04';
const OBJECT_IN_USE = '55006';

const codeOf = (error: unknown) => (error as { code?: string })?.code;

export class ProjectDatabases {
  private ddl: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly pool: pg.Pool,
    private readonly adminUrl: string,
    /** `host:port` the runtimes reach the server at, when it differs from the admin connection's. */
    private readonly databaseHost: string | undefined,
    private readonly logger: Logger,
  ) {}

  /** The URL a project's runtime connects with: its own role and database, on the admin URL's server and options. */
  connectionUrl(name: string, password: string): string {
    const url = new URL(this.adminUrl);
    if (this.databaseHost) url.host = this.databaseHost;
    url.username = encodeURIComponent(name);
    url.password = encodeURIComponent(password);
    url.pathname = `/${encodeURIComponent(name)}`;
    return url.toString();
  }

  /** The password inside a connection URL made by connectionUrl. */
  static passwordOf(databaseUrl: string | undefined): string | undefined {
    if (!databaseUrl) return undefined;
    try {
      const password = decodeURIComponent(new URL(databaseUrl).password);
      return password || undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Makes the role (login, with `password`) and the database it owns exist. The password is set on the role when
   * the role is new or `passwordChanged` says the runtime's Secret will carry a new one, so the two agree.
   */
  ensure(name: string, password: string, passwordChanged: boolean): Promise<void> {
    return this.serialized(async () => {
      const id = pg.escapeIdentifier(name);
      const secret = pg.escapeLiteral(password);
      let setPassword = passwordChanged;
      const role = await this.pool.query('select 1 from pg_roles where rolname = $1', [name]);
      if (role.rowCount === 0) {
        try {
          await this.pool.query(`create role ${id} login password ${secret}`);
        } catch (error) {
          if (codeOf(error) !== DUPLICATE_OBJECT) throw error;
        }
        setPassword = true;
      }
      if (setPassword) await this.pool.query(`alter role ${id} with login password ${secret}`);

      const database = await this.pool.query<{ marker: string | null }>(
        "select shobj_description(oid, 'pg_database') as marker from pg_database where datname = $1",
        [name],
      );
      if (database.rowCount === 0) await this.createDatabase(name);
      if (database.rows[0]?.marker === SETUP_MARKER) return;

      await this.pool.query(`revoke connect on database ${id} from public`);
      const inside = new pg.Client({ connectionString: this.databaseUrlAsAdmin(name) });
      await inside.connect();
      try {
        await inside.query('create extension if not exists vector');
      } finally {
        await inside.end().catch(() => {});
      }
      await this.pool.query(`comment on database ${id} is ${pg.escapeLiteral(SETUP_MARKER)}`);
      this.logger.info({ database: name }, 'project database set up');
    });
  }

  /** Drops the database (ending its sessions) and the role; nothing to do when they are gone. */
  drop(name: string): Promise<void> {
    return this.serialized(async () => {
      const id = pg.escapeIdentifier(name);
      await this.pool.query(`drop database if exists ${id} with (force)`);
      await this.pool.query(`drop role if exists ${id}`);
    });
  }

  /** Whether the database and the role exist (the tests' "nothing orphaned"). */
  async exists(name: string): Promise<{ database: boolean; role: boolean }> {
    const result = await this.pool.query<{ database: boolean; role: boolean }>(
      'select exists (select 1 from pg_database where datname = $1) as database, exists (select 1 from pg_roles where rolname = $1) as role',
      [name],
    );
    return result.rows[0]!;
  }

  private async createDatabase(name: string): Promise<void> {
    const id = pg.escapeIdentifier(name);
    // An admin that is not a superuser may give a database to a role only as a member of it.
    const admin = await this.pool.query<{ rolsuper: boolean }>('select rolsuper from pg_roles where rolname = current_user');
    if (!admin.rows[0]?.rolsuper) await this.pool.query(`grant ${id} to current_user`);
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.pool.query(`create database ${id} owner ${id}`);
        return;
      } catch (error) {
        if (codeOf(error) === DUPLICATE_DATABASE) return;
        // "source database template1 is being accessed by other users": another CREATE DATABASE is copying it.
        if (codeOf(error) !== OBJECT_IN_USE || attempt >= 10) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  private databaseUrlAsAdmin(name: string): string {
    const url = new URL(this.adminUrl);
    url.pathname = `/${encodeURIComponent(name)}`;
    return url.toString();
  }

  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = this.ddl.then(work, work);
    this.ddl = run.catch(() => undefined);
    return run;
  }
}
