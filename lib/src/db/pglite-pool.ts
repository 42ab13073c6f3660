// Presents one PGlite instance (on its own thread, pglite-thread.ts) to Kysely's PostgresDialect as a pool of exactly
// one connection. PGlite runs one query at a time on one session, so a transaction must own it until it ends:
// acquiring waits in a FIFO queue. (A caller must not use the outer `db` inside its own transaction: that waits for
// itself. Use the `trx`.)
import type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type { PgliteThread } from './pglite-thread.js';

const commandPattern = /^\s*(?:with\b[\s\S]*?\)\s*)?(insert|update|delete|merge|select)\b/i;

/** Kysely reads `command` to decide whether `rowCount` means affected rows; PGlite does not report it. */
function commandOf(sqlText: string): 'INSERT' | 'UPDATE' | 'DELETE' | 'MERGE' | 'SELECT' {
  const match = commandPattern.exec(sqlText);
  return ((match?.[1] ?? 'select').toUpperCase() as 'INSERT' | 'UPDATE' | 'DELETE' | 'MERGE' | 'SELECT');
}

export function pgliteSerialPool(pglite: Pick<PgliteThread, 'query'>): PostgresPool {
  let tail: Promise<void> = Promise.resolve();

  const client: Omit<PostgresPoolClient, 'release'> = {
    async query<R>(sqlText: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> {
      const result = await pglite.query<R>(sqlText, parameters);
      return {
        command: commandOf(sqlText),
        rowCount: result.affectedRows ?? result.rows.length,
        rows: result.rows,
      };
    },
  } as Omit<PostgresPoolClient, 'release'>;

  return {
    options: {},
    async connect(): Promise<PostgresPoolClient> {
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const previous = tail;
      tail = previous.then(() => held);
      await previous;
      let released = false;
      return {
        ...client,
        release() {
          if (released) return;
          released = true;
          release();
        },
      } as PostgresPoolClient;
    },
    async end() {
      await tail;
    },
  };
}
