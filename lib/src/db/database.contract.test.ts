// One contract for the relational store, run against PGlite (in memory and on disk) and a real PostgreSQL
// server with pgvector: the same migrations, SQL and transaction behaviour must hold on both.
import { rmSync, writeFileSync } from 'node:fs';
import { sql, type Generated, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '@agentplane/test/harness/process';
import { postgresBinaries, startPostgres, type PostgresServer } from '@agentplane/test/harness/postgres';
import { DataDirLockedError } from './data-dir-lock.js';
import { openDatabase, type Database, type DatabaseConfig } from './database.js';
import { currentVersion, migrate, SchemaTooNewError, type Migration } from './migrate.js';

interface Schema {
  notes: { id: Generated<number>; tenant_id: string; body: unknown; created_at: Generated<Date> };
  counters: { id: number; value: number };
  embeddings: { id: Generated<number>; tenant_id: string; embedding: string };
}

const migrations: Migration[] = [
  {
    version: 1,
    name: 'notes',
    statements: [
      'create extension if not exists vector',
      `create table notes (id serial primary key, tenant_id uuid not null, body jsonb not null, created_at timestamptz not null default now())`,
    ],
  },
  {
    version: 2,
    name: 'counters and embeddings',
    statements: [
      'create table counters (id integer primary key, value integer not null)',
      'insert into counters (id, value) values (1, 0)',
      'create table embeddings (id serial primary key, tenant_id uuid not null, embedding vector(3) not null)',
      'create index embeddings_hnsw on embeddings using hnsw (embedding vector_cosine_ops)',
    ],
  },
];

const tenantA = '7d3f8a52-1c7e-4d55-9a0e-2b1f6f3a9c01';

function contract(name: string, open: () => Promise<Database<Schema>>) {
  describe(`relational store: ${name}`, () => {
    let database: Database<Schema>;
    let db: Kysely<Schema>;

    beforeAll(async () => {
      database = await open();
      db = database.db;
    });
    afterAll(async () => {
      await database?.close();
    });

    it('applies every migration once, and a second run applies nothing', async () => {
      const first = await migrate(db, migrations);
      expect(first.applied.map((m) => m.version)).toEqual([1, 2]);
      const second = await migrate(db, migrations);
      expect(second.applied).toEqual([]);
      expect(await currentVersion(db)).toBe(2);
    });

    it('applies only the new migrations of a later release', async () => {
      const later: Migration[] = [...migrations, { version: 3, name: 'tags', statements: ['alter table notes add column tag text'] }];
      expect((await migrate(db, later)).applied.map((m) => m.version)).toEqual([3]);
      await db.insertInto('notes').values({ tenant_id: tenantA, body: JSON.stringify({ t: 1 }), tag: 'x' } as never).execute();
    });

    it('refuses to run against a database migrated by newer code, changing nothing', async () => {
      await expect(migrate(db, migrations)).rejects.toBeInstanceOf(SchemaTooNewError);
      await expect(migrate(db, migrations)).rejects.toThrow(/version 3, newer than this build knows \(2\)/);
      expect(await currentVersion(db)).toBe(3);
    });

    it('rolls back a failed migration whole', async () => {
      const broken: Migration[] = [
        ...migrations,
        { version: 3, name: 'tags', statements: ['alter table notes add column tag text'] },
        { version: 4, name: 'broken', statements: ['create table half_done (id int)', 'select no_such_function()'] },
      ];
      await expect(migrate(db, broken)).rejects.toThrow();
      expect(await currentVersion(db)).toBe(3);
      const tables = await sql<{ n: number }>`select count(*)::int as n from information_schema.tables where table_name = 'half_done'`.execute(db);
      expect(tables.rows[0]?.n).toBe(0);
    });

    it('keeps a separate history per schema, so two programs can share one database', async () => {
      const other: Migration[] = [{ version: 1, name: 'other program', statements: ['create table other_program.things (id int)'] }];
      expect((await migrate(db, other, { schema: 'other_program' })).applied).toEqual([{ version: 1, name: 'other program' }]);
      expect(await currentVersion(db, { schema: 'other_program' })).toBe(1);
      expect(await currentVersion(db)).toBe(3);
      expect((await migrate(db, other, { schema: 'other_program' })).applied).toEqual([]);
    });

    it('round-trips jsonb, timestamps and counts', async () => {
      await db.insertInto('notes').values({ tenant_id: tenantA, body: JSON.stringify({ nested: { list: [1, 'two', null] } }) }).execute();
      const row = await db.selectFrom('notes').selectAll().orderBy('id', 'desc').limit(1).executeTakeFirstOrThrow();
      expect(row.body).toEqual({ nested: { list: [1, 'two', null] } });
      expect(row.created_at).toBeInstanceOf(Date);
      const count = await db.selectFrom('notes').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      expect(count.n).toBe(2);
      const updated = await db.updateTable('notes').set({ tenant_id: tenantA }).where('tenant_id', '=', tenantA).executeTakeFirst();
      expect(Number(updated.numUpdatedRows)).toBe(2);
    });

    it('keeps nothing of a transaction that fails', async () => {
      await expect(
        db.transaction().execute(async (trx) => {
          await trx.insertInto('notes').values({ tenant_id: tenantA, body: JSON.stringify({ lost: true }) }).execute();
          throw new Error('abort');
        }),
      ).rejects.toThrow('abort');
      const lost = await sql<{ n: number }>`select count(*)::int as n from notes where body ? 'lost'`.execute(db);
      expect(lost.rows[0]?.n).toBe(0);
    });

    it('serializes concurrent read-modify-write transactions without losing an update', async () => {
      await Promise.all(
        Array.from({ length: 25 }, () =>
          db.transaction().execute(async (trx) => {
            const current = await trx.selectFrom('counters').select('value').where('id', '=', 1).forUpdate().executeTakeFirstOrThrow();
            await trx.updateTable('counters').set({ value: current.value + 1 }).where('id', '=', 1).execute();
          }),
        ),
      );
      const counter = await db.selectFrom('counters').select('value').where('id', '=', 1).executeTakeFirstOrThrow();
      expect(counter.value).toBe(25);
    });

    it('answers nearest-neighbour queries with pgvector and its HNSW index', async () => {
      const vectors = ['[1,0,0]', '[0,1,0]', '[0.9,0.1,0]', '[0,0,1]'];
      for (const embedding of vectors) await db.insertInto('embeddings').values({ tenant_id: tenantA, embedding }).execute();
      const nearest = await sql<{ embedding: string; distance: number }>`
        select embedding::text as embedding, embedding <=> '[1,0.05,0]' as distance
        from embeddings order by embedding <=> '[1,0.05,0]' limit 2`.execute(db);
      expect(nearest.rows.map((r) => r.embedding)).toEqual(['[1,0,0]', '[0.9,0.1,0]']);
      expect(nearest.rows[0]!.distance).toBeLessThan(0.01);
      await expect(sql`select '[1,2]'::vector(3)`.execute(db)).rejects.toThrow(/dimensions/);
    });

    it('gives the same answers to a statement sent again and again, with every kind of parameter and column', async () => {
      // The embedded store prepares a repeated statement once and runs it by name (docs/decisions/0048): its
      // parameters and rows must come back exactly as on the first run, and as on PostgreSQL.
      const roundTrip = (value: { when: Date; body: unknown; bytes: Buffer; list: string[]; flag: boolean; n: number; nothing: null }) =>
        sql<{ when: Date; body: unknown; bytes: Uint8Array; list: string[]; flag: boolean; n: number; nothing: string | null; big: number }>`
          select ${value.when}::timestamptz as when, ${JSON.stringify(value.body)}::jsonb as body, ${value.bytes}::bytea as bytes,
            ${value.list}::text[] as list, ${value.flag}::boolean as flag, ${value.n}::int as n, ${value.nothing}::text as nothing,
            ${value.n}::bigint * 2 as big`.execute(db);
      for (let i = 0; i < 8; i++) {
        const value = { when: new Date(Date.UTC(2026, 0, 1 + i)), body: { i, nested: ['x', null, i % 2 === 0] }, bytes: Buffer.from([0, i, 255]), list: [`a${i}`, 'b,"c"'], flag: i % 2 === 0, n: i * 7, nothing: null };
        const row = (await roundTrip(value)).rows[0]!;
        expect(row.when.getTime()).toBe(value.when.getTime());
        expect(row.body).toEqual(value.body);
        expect(Buffer.from(row.bytes)).toEqual(value.bytes);
        expect(row.list).toEqual(value.list);
        expect(row.flag).toBe(value.flag);
        expect(row.n).toBe(value.n);
        expect(row.nothing).toBeNull();
        expect(Number(row.big)).toBe(value.n * 2);
      }
      // Affected rows and returned rows of a repeated write.
      for (let i = 0; i < 3; i++) {
        const done = await db.updateTable('counters').set({ value: 100 + i }).where('id', '=', 1).returning('value').execute();
        expect(done).toEqual([{ value: 100 + i }]);
        const counted = await db.updateTable('counters').set({ value: 0 }).where('id', '=', 1).executeTakeFirst();
        expect(Number(counted.numUpdatedRows)).toBe(1);
      }
    });

    it("answers a repeated statement with the table's new columns after a schema change, and its errors with their code", async () => {
      const all = () => db.selectFrom('counters').selectAll().where('id', '=', 1).executeTakeFirstOrThrow();
      for (let i = 0; i < 6; i++) expect(Object.keys(await all()).sort()).toEqual(['id', 'value']);
      await sql`alter table counters add column label text not null default 'one'`.execute(db);
      expect(await all()).toEqual({ id: 1, value: 0, label: 'one' });
      const duplicate = () => db.insertInto('counters').values({ id: 1, value: 1 }).execute();
      for (let i = 0; i < 3; i++) await expect(duplicate()).rejects.toMatchObject({ code: '23505' });
      // A failed statement inside a transaction fails the transaction, and the store goes on after it.
      await expect(db.transaction().execute(async (trx) => {
        await trx.updateTable('counters').set({ value: 5 }).where('id', '=', 1).execute();
        await trx.insertInto('counters').values({ id: 1, value: 1 }).execute();
      })).rejects.toMatchObject({ code: '23505' });
      expect((await all()).value).toBe(0);
      await sql`alter table counters drop column label`.execute(db);
      expect(await all()).toEqual({ id: 1, value: 0 });
    });

    it('runs more distinct statements than it keeps prepared, each still answering right', async () => {
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < 300; i++) {
          const row = await sql<{ n: number }>`select ${i}::int + ${sql.raw(String(i))} as n`.execute(db);
          expect(row.rows[0]!.n).toBe(2 * i);
        }
      }
    });

    it('tells a listener of each committed write to the tables it watches, at the commit, and of no rolled-back one', async () => {
      const heard: string[] = [];
      let inside = -1;
      database.onCommittedWrites(['counters'], () => {
        heard.push('counters');
      });
      database.onCommittedWrites(['embeddings'], () => {
        heard.push('embeddings');
      });
      await db.updateTable('counters').set({ value: 1 }).where('id', '=', 1).execute();
      expect(heard).toEqual(['counters']);
      await db.selectFrom('counters').selectAll().execute();
      await db.insertInto('notes').values({ tenant_id: tenantA, body: JSON.stringify({ unwatched: true }) }).execute();
      expect(heard).toEqual(['counters']);

      await db.transaction().execute(async (trx) => {
        await trx.updateTable('counters').set({ value: 2 }).where('id', '=', 1).execute();
        await sql`insert into embeddings (tenant_id, embedding) values (${tenantA}, '[1,1,1]')`.execute(trx);
        await trx.updateTable('counters').set({ value: 3 }).where('id', '=', 1).execute();
        inside = heard.length;
      });
      expect(inside).toBe(1);
      expect(heard.slice(1).sort()).toEqual(['counters', 'embeddings']);

      await expect(db.transaction().execute(async (trx) => {
        await trx.updateTable('counters').set({ value: 4 }).where('id', '=', 1).execute();
        throw new Error('changed my mind');
      })).rejects.toThrow('changed my mind');
      // A failed write outside a transaction commits nothing either.
      await expect(db.insertInto('counters').values({ id: 1, value: 5 }).execute()).rejects.toMatchObject({ code: '23505' });
      expect(heard).toHaveLength(3);
      expect((await db.selectFrom('counters').select('value').where('id', '=', 1).executeTakeFirstOrThrow()).value).toBe(3);
      await db.updateTable('counters').set({ value: 0 }).where('id', '=', 1).execute();
      expect(heard).toHaveLength(4);
    });

    it('answers ping', async () => {
      await expect(database.ping()).resolves.toBeUndefined();
    });

    it('counts the statements it sends, and on the embedded store the writes to watched tables', async () => {
      const before = database.statements();
      await db.selectFrom('notes').select('id').execute();
      await db.transaction().execute(async (trx) => trx.selectFrom('notes').select('id').execute());
      expect(database.statements() - before).toBe(4);

      const writes = database.changesTo(['notes']);
      if (database.driver === 'postgres') {
        // Other processes write to a shared store: no count could say nothing changed.
        expect(writes).toBeUndefined();
        return;
      }
      const count = () => writes!();
      const at = count();
      await db.selectFrom('notes').selectAll().execute();
      await db.transaction().execute(async (trx) => trx.selectFrom('notes').select('id').forUpdate().execute());
      expect(count()).toBe(at);
      const { id } = await db.insertInto('notes').values({ tenant_id: tenantA, body: JSON.stringify({ w: 1 }) }).returning('id').executeTakeFirstOrThrow();
      await db.updateTable('notes').set({ body: JSON.stringify({ w: 2 }) }).where('id', '=', id).execute();
      await sql`with gone as (delete from notes where id = ${id} returning id) select count(*) from gone`.execute(db);
      expect(count()).toBe(at + 3);
    });
  });
}

contract('PGlite in memory', () => openDatabase<Schema>({ driver: 'pglite' }));

describe('relational store: PGlite on disk', () => {
  it('keeps its data across a close and reopen', async () => {
    const dir = makeTempDir('pglite');
    const config: DatabaseConfig = { driver: 'pglite', dataDir: dir };
    try {
      const first = await openDatabase<Schema>(config);
      await migrate(first.db, migrations);
      await first.db.insertInto('notes').values({ tenant_id: tenantA, body: JSON.stringify({ kept: true }) }).execute();
      await first.close();
      const second = await openDatabase<Schema>(config);
      expect((await migrate(second.db, migrations)).applied).toEqual([]);
      const rows = await second.db.selectFrom('notes').select('body').execute();
      expect(rows.map((r) => r.body)).toEqual([{ kept: true }]);
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('relational store: PGlite data dir lock', () => {
  it('refuses a second opener while the first holds the directory, and admits one after close', async () => {
    const dir = makeTempDir('pglite-lock');
    try {
      const first = await openDatabase({ driver: 'pglite', dataDir: dir });
      await expect(openDatabase({ driver: 'pglite', dataDir: dir })).rejects.toBeInstanceOf(DataDirLockedError);
      await expect(openDatabase({ driver: 'pglite', dataDir: dir })).rejects.toThrow(`is in use by process ${process.pid}`);
      await first.close();
      const second = await openDatabase({ driver: 'pglite', dataDir: dir });
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes over a lock whose holder is gone, even when its pid is reused (by this process, or another)', async () => {
    // A dead pid; this process's own pid (a container restarts with the same pid); pid 1 with another start time.
    for (const stale of ['2147483646:1', `${process.pid}:1`, '1:1']) {
      const dir = makeTempDir('pglite-stale');
      try {
        writeFileSync(`${dir}.lock`, stale);
        const database = await openDatabase({ driver: 'pglite', dataDir: dir });
        await database.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
        rmSync(`${dir}.lock`, { force: true });
      }
    }
  });
});

const havePostgres = postgresBinaries() !== null;
describe.skipIf(!havePostgres)('relational store: real PostgreSQL with pgvector', () => {
  let server: PostgresServer;
  let url: string;
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase();
  });
  afterAll(async () => {
    await server?.stop();
  });

  contract('PostgreSQL', () => openDatabase<Schema>({ driver: 'postgres', url }));

  it('lets only one of several replicas starting at once apply each migration', async () => {
    const fresh = await server.createDatabase();
    const replicas = await Promise.all(Array.from({ length: 4 }, () => openDatabase<Schema>({ driver: 'postgres', url: fresh })));
    try {
      const outcomes = await Promise.all(replicas.map((r) => migrate(r.db, migrations)));
      const applied = outcomes.flatMap((o) => o.applied.map((m) => m.version)).sort();
      expect(applied).toEqual([1, 2]);
      expect(await currentVersion(replicas[0]!.db)).toBe(2);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
    }
  });

  it('survives a connection ended while checked out (a dropped database): the statement fails, the process goes on', async () => {
    const fresh = await server.createDatabase();
    const database = await openDatabase<Schema>({ driver: 'postgres', url: fresh });
    const admin = await openDatabase<Schema>({ driver: 'postgres', url });
    try {
      const unheard: unknown[] = [];
      const listener = (error: unknown) => unheard.push(error);
      process.on('uncaughtException', listener);
      try {
        // A transaction holds its client while the server ends that session, as a project's erase does.
        const held = database.db.transaction().execute(async (trx) => {
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
          await sql`select pg_terminate_backend(${rows[0]!.pid})`.execute(admin.db);
          await new Promise((resolve) => setTimeout(resolve, 200));
          await sql`select 1`.execute(trx);
        });
        await expect(held).rejects.toThrow();
        await new Promise((resolve) => setTimeout(resolve, 200));
      } finally {
        process.off('uncaughtException', listener);
      }
      expect(unheard).toEqual([]);
      // The pool goes on with a new connection.
      expect((await sql<{ one: number }>`select 1 as one`.execute(database.db)).rows[0]!.one).toBe(1);
    } finally {
      await database.close();
      await admin.close();
    }
  });

  it('fails ping when the server is unreachable', async () => {
    const dead = await openDatabase({ driver: 'postgres', url: 'postgres://postgres@127.0.0.1:1/none' });
    await expect(dead.ping()).rejects.toThrow();
    await dead.close();
  });
});
