// Each project's own PostgreSQL database and role, made and dropped through the operator's admin connection.
// Idempotent at every statement, so a pass interrupted anywhere finishes on the next one: the role and database
// are created when missing, and a comment on the database marks the end of its setup (CONNECT revoked from PUBLIC,
// the `vector` extension the runtime's migrations need, which only an admin may create). DDL runs one statement
// at a time in this process; CREATE DATABASE also retries while another session holds its template.
import pg from 'pg';
import { hearCheckedOutClientErrors } from '@agentplane/lib/db/pg-client-errors';
import type { Logger } from '@agentplane/lib/logging';

/** Stored as the database's comment once its setup is complete. */
const SETUP_MARKER = 'agentplane project database: set up by agentplane-operator';

const DUPLICATE_OBJECT = '42710';
const DUPLICATE_DATABASE = '42P04';
const OBJECT_IN_USE = '55006';

const codeOf = (error: unknown) => (error as { code?: string })?.code;

/** Connection parameters of the admin URL that name the admin's own credentials: never copied to a project's URL. */
const CREDENTIAL_PARAMETERS = ['user', 'password', 'passfile', 'sslkey', 'sslcert', 'sslpassword'];

/** How long one statement or one connection attempt may take before the step fails and is retried with backoff. */
export const DATABASE_TIMEOUT_MS = 60_000;
export const CONNECT_TIMEOUT_MS = 10_000;

export interface ProjectDatabasesOptions {
  pool: pg.Pool;
  adminUrl: string;
  /** `host:port` the runtimes reach the server at, when it differs from the admin connection's. */
  databaseHost: string | undefined;
  logger: Logger;
  /** Called before every statement that changes the server; throws when this replica may not (not the leader). */
  mayWrite?: () => void;
}

export class ProjectDatabases {
  private ddl: Promise<unknown> = Promise.resolve();
  private readonly pool: pg.Pool;

  constructor(private readonly options: ProjectDatabasesOptions) {
    this.pool = options.pool;
  }

  /** The admin pool as the composition root makes it: bounded waits, so a silent server cannot hold a key forever. */
  static adminPool(adminUrl: string): pg.Pool {
    const pool = new pg.Pool({ connectionString: adminUrl, max: 3, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, query_timeout: DATABASE_TIMEOUT_MS });
    // The composition root logs the idle clients' errors; a checked-out client's statement fails and the reconcile
    // retries.
    hearCheckedOutClientErrors(pool);
    return pool;
  }

  /**
   * The URL a project's runtime connects with: its own role and database, on the admin URL's server and with its
   * connection options (sslmode and the like), but none of the admin's credentials.
   */
  connectionUrl(name: string, password: string): string {
    const url = new URL(this.options.adminUrl);
    if (this.options.databaseHost) url.host = this.options.databaseHost;
    url.username = encodeURIComponent(name);
    url.password = encodeURIComponent(password);
    url.pathname = `/${encodeURIComponent(name)}`;
    for (const parameter of CREDENTIAL_PARAMETERS) url.searchParams.delete(parameter);
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
          await this.change(`create role ${id} login password ${secret}`);
        } catch (error) {
          if (codeOf(error) !== DUPLICATE_OBJECT) throw error;
        }
        setPassword = true;
      }
      if (setPassword) await this.change(`alter role ${id} with login password ${secret}`);

      const database = await this.pool.query<{ marker: string | null }>(
        "select shobj_description(oid, 'pg_database') as marker from pg_database where datname = $1",
        [name],
      );
      if (database.rowCount === 0) await this.createDatabase(name);
      if (database.rows[0]?.marker === SETUP_MARKER) return;

      await this.change(`revoke connect on database ${id} from public`);
      const inside = new pg.Client({ connectionString: this.databaseUrlAsAdmin(name), connectionTimeoutMillis: CONNECT_TIMEOUT_MS, query_timeout: DATABASE_TIMEOUT_MS });
      // A connection lost while idle is reported as an event; without a listener it would end the process.
      inside.on('error', (error) => this.options.logger.warn({ database: name, err: error.message }, 'project database setup connection failed'));
      await inside.connect();
      try {
        this.options.mayWrite?.();
        await inside.query('create extension if not exists vector');
      } finally {
        await inside.end().catch(() => {});
      }
      await this.change(`comment on database ${id} is ${pg.escapeLiteral(SETUP_MARKER)}`);
      this.options.logger.info({ database: name }, 'project database set up');
    });
  }

  /** Drops the database (ending its sessions) and the role; nothing to do when they are gone. */
  drop(name: string): Promise<void> {
    return this.serialized(async () => {
      const id = pg.escapeIdentifier(name);
      await this.change(`drop database if exists ${id} with (force)`);
      await this.change(`drop role if exists ${id}`);
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
    if (!admin.rows[0]?.rolsuper) await this.change(`grant ${id} to current_user`);
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.change(`create database ${id} owner ${id}`);
        return;
      } catch (error) {
        if (codeOf(error) === DUPLICATE_DATABASE) return;
        // "source database template1 is being accessed by other users": another CREATE DATABASE is copying it.
        if (codeOf(error) !== OBJECT_IN_USE || attempt >= 10) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  /** One statement that changes the server, sent only while this replica may write. */
  private async change(sql: string): Promise<void> {
    this.options.mayWrite?.();
    await this.pool.query(sql);
  }

  private databaseUrlAsAdmin(name: string): string {
    const url = new URL(this.options.adminUrl);
    url.pathname = `/${encodeURIComponent(name)}`;
    return url.toString();
  }

  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = this.ddl.then(work, work);
    this.ddl = run.catch(() => undefined);
    return run;
  }
}
