// The relational store: one Kysely query layer over two drivers, PGlite (embedded default, in the data dir,
// with its bundled pgvector) and a real PostgreSQL server with pgvector (`pg`). Both run the same SQL. Each
// driver's module is imported only when chosen.
import { Kysely, PostgresDialect, sql, type PostgresPool, type PostgresPoolClient } from 'kysely';
import { mkdirSync } from 'node:fs';
import { unavailable } from '../errors.js';
import { lockDataDir } from './data-dir-lock.js';
import { hearCheckedOutClientErrors } from './pg-client-errors.js';
import { pgliteSerialPool } from './pglite-pool.js';
import { startPgliteThread, type PgliteThread } from './pglite-thread.js';
import { seedFromTemplate } from './pglite-template.js';

export type DatabaseConfig =
  | { driver: 'pglite'; /** Directory holding the database files; omit for an in-memory database. */ dataDir?: string }
  | { driver: 'postgres'; url: string; poolSize?: number };

export interface Database<Schema> {
  readonly driver: DatabaseConfig['driver'];
  readonly db: Kysely<Schema>;
  /**
   * Statements sent to the database since it was opened, `begin` and `commit` included: each is one round trip.
   * Tests read it to hold the turn to its budget of round trips (docs/decisions/0035).
   */
  readonly statements: () => number;
  /**
   * On a store only this process writes (the embedded database behind its data-dir lock): a count of the statements
   * sent so far that write to any of `tables`, so a cache of rows from them can tell, without a query, that they
   * may have changed. Undefined on a shared store, where other processes write too. Counted when a statement is
   * sent, before it commits: a reader takes the count before its own read, and the embedded store runs one
   * statement at a time, so a cache is never tagged as newer than what it read.
   */
  changesTo(tables: readonly string[]): (() => number) | undefined;
  /**
   * Calls `listener` once a statement this process sent that writes to any of `tables` has committed: at once for
   * a statement outside a transaction, at its transaction's commit otherwise (a rolled-back write calls nothing).
   * What a shared store's replicas tell each other their caches of those tables may be stale with; a write made
   * outside this process is not seen.
   */
  onCommittedWrites(tables: readonly string[], listener: () => void | Promise<void>): void;
  /** Resolves when the database answers a query (used by GET /ready). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export async function openDatabase<Schema>(config: DatabaseConfig): Promise<Database<Schema>> {
  if (config.driver === 'postgres') {
    const { default: pg } = await import('pg');
    // Postgres returns BIGINT (int8) as text by default; counts and sizes in this service fit in a double.
    pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
    const pool = new pg.Pool({
      connectionString: config.url,
      max: config.poolSize ?? 10,
      connectionTimeoutMillis: 5_000,
    });
    // An idle client whose server went away emits 'error' on the pool; without a listener that kills the process.
    pool.on('error', () => {});
    hearCheckedOutClientErrors(pool);
    const counted = countingPool(pool);
    const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: counted.pool }) });
    return {
      driver: 'postgres',
      db,
      statements: counted.statements,
      changesTo: () => undefined,
      onCommittedWrites: counted.onCommittedWrites,
      ping: async () => {
        try {
          await sql`select 1`.execute(db);
        } catch (error) {
          // Readiness is public: name the failure by its code, never the server's address or user.
          const code = (error as { code?: unknown }).code;
          throw unavailable(`database did not answer${typeof code === 'string' ? ` (${code})` : ''}`, { cause: error });
        }
      },
      close: () => db.destroy(),
    };
  }

  let release = () => {};
  if (config.dataDir) {
    mkdirSync(config.dataDir, { recursive: true });
    release = lockDataDir(config.dataDir);
  }
  let pglite: PgliteThread;
  try {
    // A new data dir starts as a copy of the build's template, when there is one, rather than by initdb.
    if (config.dataDir) seedFromTemplate(config.dataDir);
    pglite = await startPgliteThread(config.dataDir);
  } catch (error) {
    release();
    throw error;
  }
  const counted = countingPool(pgliteSerialPool(pglite));
  const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: counted.pool }) });
  return {
    driver: 'pglite',
    db,
    statements: counted.statements,
    changesTo: (tables) => counted.watchWrites(tables),
    onCommittedWrites: counted.onCommittedWrites,
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await db.destroy();
      await pglite.close();
      release();
    },
  };
}

/** Statements that open and end a transaction, as Kysely sends them (`rollback to savepoint` ends nothing). */
const BEGINS = /^\s*(?:begin|start\s+transaction)\b/i;
const COMMITS = /^\s*(?:commit|end)\b/i;
const ROLLS_BACK = /^\s*(?:rollback|abort)\b(?!\s+to\b)/i;

interface WriteWatch {
  writes: RegExp;
  count: number;
  /** Called once a matching write has committed; the statement's answer waits for it (it must not throw). */
  committed?: () => void | Promise<void>;
}

/**
 * A pool whose clients count the statements they send, and the writes to watched tables: one counter and a few
 * regular expressions per statement, cheap enough to keep on in production. Each client follows whether it is inside
 * a transaction, so a watch that wants to hear of committed writes hears of them at the commit.
 */
function countingPool(pool: PostgresPool): {
  pool: PostgresPool;
  statements: () => number;
  watchWrites: (tables: readonly string[]) => () => number;
  onCommittedWrites: (tables: readonly string[], listener: () => void | Promise<void>) => void;
} {
  let statements = 0;
  const watches: WriteWatch[] = [];
  // One wrapper per pooled client, so Kysely (which keys its connections by client) keeps reusing its own.
  const wrappers = new WeakMap<PostgresPoolClient, PostgresPoolClient>();
  const watchFor = (tables: readonly string[], committed?: () => void | Promise<void>): WriteWatch => {
    // Anywhere in the text, so a write inside a CTE counts too; quoted (Kysely) or bare (hand-written SQL).
    const names = tables.map((table) => table.replace(/[^a-z0-9_]/gi, '')).join('|');
    const watch: WriteWatch = { writes: new RegExp(`\\b(?:insert\\s+into|update|delete\\s+from|truncate(?:\\s+table)?)\\s+"?(?:${names})"?(?![\\w"])`, 'i'), count: 0 };
    if (committed) watch.committed = committed;
    watches.push(watch);
    return watch;
  };
  const wrap = (client: PostgresPoolClient): PostgresPoolClient => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    let inTransaction = false;
    // Watches whose tables this client wrote in the transaction it has open.
    let uncommitted = new Set<WriteWatch>();
    return {
      get processID() {
        return client.processID;
      },
      query: ((...args: unknown[]) => {
        statements += 1;
        const text = args[0];
        let committing: Set<WriteWatch> | undefined;
        if (typeof text === 'string') {
          for (const watch of watches) {
            if (!watch.writes.test(text)) continue;
            watch.count += 1;
            if (watch.committed) uncommitted.add(watch);
          }
          if (BEGINS.test(text)) inTransaction = true;
          else if (ROLLS_BACK.test(text)) {
            inTransaction = false;
            uncommitted.clear();
          } else {
            if (COMMITS.test(text)) inTransaction = false;
            // Outside a transaction, this statement's own writes commit with it; a commit commits the transaction's.
            if (!inTransaction && uncommitted.size > 0) {
              committing = uncommitted;
              uncommitted = new Set();
            }
          }
        }
        const result = query(...args);
        if (!committing || !(result instanceof Promise)) return result;
        const heard = committing;
        // The caller hears of its commit once the listeners have (a replica told before the writer answers).
        return result.then(async (answer: unknown) => {
          await Promise.all([...heard].map(async (watch) => watch.committed!()));
          return answer;
        });
      }) as PostgresPoolClient['query'],
      release: (destroy?: boolean) => client.release(destroy),
    };
  };
  return {
    statements: () => statements,
    watchWrites(tables) {
      const watch = watchFor(tables);
      return () => watch.count;
    },
    onCommittedWrites(tables, listener) {
      watchFor(tables, listener);
    },
    pool: {
      options: pool.options,
      async connect(): Promise<PostgresPoolClient> {
        const client = await pool.connect();
        let wrapper = wrappers.get(client);
        if (!wrapper) {
          wrapper = wrap(client);
          wrappers.set(client, wrapper);
        }
        return wrapper;
      },
      end: () => pool.end(),
    },
  };
}

/** PostgreSQL's error code of a failed statement (the same from pg and PGlite); undefined for other errors. */
export const sqlStateOf = (error: unknown): string | undefined => (error as { code?: unknown } | null)?.code as string | undefined;

/** A unique constraint refused the row: someone else stored the same key first. */
export const isUniqueViolation = (error: unknown): boolean => sqlStateOf(error) === '23505';
