import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
for (const opts of [{ label: 'dataDir' }, { label: 'dataDir relaxed', relaxedDurability: true }, { label: 'memory', mem: true }] as const) {
  const dataDir = 'mem' in opts ? undefined : mkdtempSync(join(tmpdir(), 'pgl-'));
  const pg = await PGlite.create({ ...(dataDir ? { dataDir } : {}), extensions: { vector }, ...('relaxedDurability' in opts ? { relaxedDurability: true } : {}) });
  await pg.exec(`create table t (id uuid primary key, tenant uuid not null, body text, created_at timestamptz default now()); create index on t (tenant, created_at)`);
  const time = async (name: string, n: number, f: (i: number) => Promise<unknown>) => {
    for (let i = 0; i < 50; i++) await f(i);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await f(i);
    console.log(`${opts.label.padEnd(16)} ${name.padEnd(30)} ${((performance.now() - t0) / n * 1000).toFixed(0)} µs`);
  };
  await time('select 1', 2000, () => pg.query('select 1'));
  await time('select $1', 2000, (i) => pg.query('select $1::int as x', [i]));
  await time('insert', 2000, () => pg.query('insert into t (id, tenant, body) values ($1, $2, $3)', [crypto.randomUUID(), crypto.randomUUID(), 'hello']));
  await time('begin;insert;commit', 1000, async () => { await pg.query('begin'); await pg.query('insert into t (id, tenant, body) values ($1, $2, $3)', [crypto.randomUUID(), crypto.randomUUID(), 'x']); await pg.query('commit'); });
  await time('exec insert (simple proto)', 2000, () => pg.exec(`insert into t (id, tenant, body) values ('${crypto.randomUUID()}', '${crypto.randomUUID()}', 'x')`));
  await pg.close();
}
