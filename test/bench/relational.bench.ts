// Relational store: single-row insert and primary-key select through `openDatabase` (Kysely over our PGlite pool,
// or over pg.Pool) against the raw driver running the same SQL, on PGlite (embedded) and PostgreSQL (scale).
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { sql } from 'kysely';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { postgresBinaries, startPostgres } from '../harness/postgres.js';
import { makeTempDir } from '../harness/process.js';
import {
  Teardown,
  finishTable,
  latencyColumns,
  runCases,
  timeConcurrent,
  timeSequential,
  type BenchReport,
  type Case,
  type LoopOptions,
  type Subject,
  type Table,
} from './measure.js';

interface Schema {
  bench_rows: { id: number; name: string; payload: string };
}

const DDL = 'create table bench_rows (id integer primary key, name text not null, payload text not null)';
const INSERT = 'insert into "bench_rows" ("id", "name", "payload") values ($1, $2, $3)';
const SELECT = 'select * from "bench_rows" where "id" = $1';
const PAYLOAD = 'x'.repeat(200);
const SEQUENTIAL = { warmup: 200, ops: 1500 };
const CONCURRENT = { warmup: 320, ops: 3200 };
const CALLERS = 16;
/** openDatabase's default pool size, given to the raw pg.Pool too so both queue the same way. */
const POOL_SIZE = 10;

/** One way of running the two statements; each target has its own database, so row counts match. */
interface Target extends Subject {
  insert(id: number): Promise<unknown>;
  select(id: number): Promise<unknown>;
}

function ours(database: Database<Schema>): Target {
  const { db } = database;
  return {
    impl: 'ours (openDatabase)',
    insert: (id) => db.insertInto('bench_rows').values({ id, name: `row ${id}`, payload: PAYLOAD }).execute(),
    select: (id) => db.selectFrom('bench_rows').selectAll().where('id', '=', id).executeTakeFirst(),
  };
}

async function measureTargets(title: string, targets: Target[]): Promise<Table> {
  const nextId = new Map<Target, number>(targets.map((target) => [target, 1]));
  const insert = (target: Target) => () => {
    const id = nextId.get(target)!;
    nextId.set(target, id + 1);
    return target.insert(id);
  };
  // Every target holds the same rows when selects start; a fixed stride spreads reads over the table.
  const select = (target: Target) => {
    let k = 0;
    return () => target.select(((k++ * 7919) % (nextId.get(target)! - 1)) + 1);
  };
  const alone = (op: (target: Target) => () => Promise<unknown>) => (target: Target, loop: LoopOptions) =>
    timeSequential(op(target), loop);
  const together = (op: (target: Target) => () => Promise<unknown>) => (target: Target, loop: LoopOptions) =>
    timeConcurrent(op(target), { ...loop, callers: CALLERS });
  const cases: Case<Target>[] = [
    { name: 'insert, 1 caller', loop: SEQUENTIAL, time: alone(insert) },
    { name: `insert, ${CALLERS} callers`, loop: CONCURRENT, time: together(insert) },
    { name: 'select pk, 1 caller', loop: SEQUENTIAL, time: alone(select) },
    { name: `select pk, ${CALLERS} callers`, loop: CONCURRENT, time: together(select) },
  ];
  return finishTable({ title, columns: latencyColumns, rows: await runCases(cases, targets) });
}

async function pgliteTable(teardown: Teardown): Promise<Table> {
  const dir = makeTempDir('bench-pglite');
  teardown.add(() => rmSync(dir, { recursive: true, force: true }));

  // The raw baseline opens PGlite exactly as openDatabase does (on disk, with pgvector), minus Kysely and our pool.
  const raw = await PGlite.create({ dataDir: join(dir, 'raw'), extensions: { vector } });
  teardown.add(() => raw.close());
  await raw.exec(DDL);
  const database = await openDatabase<Schema>({ driver: 'pglite', dataDir: join(dir, 'ours') });
  teardown.add(() => database.close());
  await sql.raw(DDL).execute(database.db);

  const baseline: Target = {
    impl: 'raw PGlite.query',
    baseline: true,
    insert: (id) => raw.query(INSERT, [id, `row ${id}`, PAYLOAD]),
    select: (id) => raw.query(SELECT, [id]),
  };
  return measureTargets('relational: PGlite, on disk (embedded default)', [baseline, ours(database)]);
}

async function postgresTable(teardown: Teardown): Promise<Table> {
  const server = await startPostgres();
  teardown.add(() => server.stop());
  const [rawUrl, oursUrl] = [await server.createDatabase(), await server.createDatabase()];

  const pool = new pg.Pool({ connectionString: rawUrl, max: POOL_SIZE });
  pool.on('error', () => {});
  teardown.add(() => pool.end());
  await pool.query(DDL);
  const database = await openDatabase<Schema>({ driver: 'postgres', url: oursUrl, poolSize: POOL_SIZE });
  teardown.add(() => database.close());
  await sql.raw(DDL).execute(database.db);

  const baseline: Target = {
    impl: 'raw pg.Pool.query',
    baseline: true,
    insert: (id) => pool.query(INSERT, [id, `row ${id}`, PAYLOAD]),
    select: (id) => pool.query(SELECT, [id]),
  };
  return measureTargets(`relational: PostgreSQL over loopback (scale), pool of ${POOL_SIZE}`, [baseline, ours(database)]);
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'relational', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    report.tables.push(await pgliteTable(teardown));
    await teardown.run();
    if (postgresBinaries()) report.tables.push(await postgresTable(teardown));
    else report.skipped.push('PostgreSQL: postgres/initdb binaries not found');
  } finally {
    await teardown.run();
  }
  return report;
}
