// A turn's start racing the end of the turn before it, on a real PostgreSQL server (PGlite runs one statement at a
// time, so it cannot race). The start is one statement whose history comes from its snapshot: when it had to wait
// for the end's locks, that snapshot is older than the end, and the start must decline (the transactional path
// reads afresh) rather than hand the model a history without the last answer.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { postgresBinaries, startPostgres, type PostgresServer } from '@agentplane/test/harness/postgres';
import { runtimeMigrations } from '../store/migrations.js';
import type { RuntimeSchema } from '../store/schema.js';
import { newRunId } from './runs.js';
import { TurnRecords, type TurnStart } from './turn-records.js';

const havePostgres = postgresBinaries() !== null;

describe.skipIf(!havePostgres)('turn records on PostgreSQL', () => {
  let server: PostgresServer;
  let url: string;
  let database: Database<RuntimeSchema>;
  let records: TurnRecords;
  const tenantId = randomUUID();

  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase();
    database = await openDatabase<RuntimeSchema>({ driver: 'postgres', url });
    await migrate(database.db, runtimeMigrations);
    await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'race', settings_json: '{}', webhook_secret: 'whs_test' }).execute();
    records = new TurnRecords(database.db);
  }, 60_000);
  afterAll(async () => {
    await database?.close();
    await server?.stop();
  });

  const startOf = (sessionId: string, message: string): TurnStart => ({
    tenantId,
    sessionId,
    runId: newRunId(),
    subject: 'alice',
    model: 'gpt-test',
    message,
    leaseOwner: 'test',
    leaseExpiresAt: new Date(Date.now() + 60_000),
  });

  /** Waits until some backend of this server waits on a lock: the racing statement is parked behind the other. */
  async function blockedOnLock(client: pg.Client): Promise<void> {
    for (let i = 0; i < 200; i++) {
      const { rows } = await client.query<{ n: string }>(`select count(*) as n from pg_stat_activity where wait_event_type = 'Lock'`);
      if (Number(rows[0]!.n) > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('the start never waited on the end');
  }

  it('a start that waited for the previous turn to end never returns a history without its answer', async () => {
    const first = startOf(randomUUID(), 'First question');
    await records.startNewSession(first);

    // The previous turn's end, held open in its own transaction: answer, run ended, session rollup.
    const ending = new pg.Client({ connectionString: url });
    const watcher = new pg.Client({ connectionString: url });
    await Promise.all([ending.connect(), watcher.connect()]);
    try {
      await ending.query('begin');
      await ending.query(`update runs set status = 'completed', finished_at = now(), lease_expires_at = null where id = $1`, [first.runId]);
      await ending.query(`update sessions set status = 'idle', updated_at = now() where id = $1`, [first.sessionId]);
      await ending.query(`insert into messages (id, tenant_id, session_id, run_id, subject, role, content) values ($1, $2, $3, $4, 'alice', 'assistant', 'First answer')`, [
        randomUUID(),
        tenantId,
        first.sessionId,
        first.runId,
      ]);

      const next = records.startInSession(startOf(first.sessionId, 'Second question'));
      await blockedOnLock(watcher);
      await ending.query('commit');
      const history = await next;

      // Declined (the caller reads afresh), or a history that holds the answer: never the stale one.
      if (history !== undefined) expect(history.map((row) => row.content)).toEqual(['First question', 'First answer', 'Second question']);
      else {
        const runs = await database.db.selectFrom('runs').select('status').where('session_id', '=', first.sessionId).execute();
        expect(runs).toEqual([{ status: 'completed' }]);
      }
    } finally {
      await Promise.all([ending.end(), watcher.end()]);
    }
  });

  it('a start and an end of the same session at once both finish: no deadlock between them', async () => {
    for (let round = 0; round < 20; round++) {
      const first = startOf(randomUUID(), 'Question');
      await records.startNewSession(first);
      const [ended, started] = await Promise.all([
        records.end({
          tenantId,
          sessionId: first.sessionId,
          runId: first.runId,
          ending: { status: 'completed' },
          rollup: { status: 'idle', model: 'gpt-test', pending: null },
          message: { draftId: null, value: { role: 'assistant', content: 'Answer', runId: first.runId, subject: 'alice' } },
          unlessSteered: true,
        }),
        records.startInSession(startOf(first.sessionId, 'Next')),
      ]);
      expect(ended.outcome).toBe('ended');
      // The start ran first (a run still held the session: declined) or after (the whole history).
      if (started !== undefined) expect(started.map((row) => row.content)).toEqual(['Question', 'Answer', 'Next']);
    }
  });
});
