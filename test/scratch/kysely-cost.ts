import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgliteSerialPool } from '@agentplane/lib/db/pglite-pool';
const pg = await PGlite.create({ dataDir: mkdtempSync(join(tmpdir(), 'pgl-')), extensions: { vector } });
const time = async (name: string, n: number, f: (i: number) => Promise<unknown>) => {
  for (let i = 0; i < 100; i++) await f(i);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f(i);
  console.log(`${name.padEnd(30)} ${((performance.now() - t0) / n * 1000).toFixed(0)} µs`);
};
const pool = pgliteSerialPool(pg);
const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
for (let round = 0; round < 2; round++) {
  await time('pglite select 1', 2000, () => pg.query('select 1', [], { rowMode: 'object' }));
  await time('pool select 1', 2000, async () => { const c = await pool.connect(); await c.query('select 1', []); c.release(); });
  await time('kysely select 1', 2000, () => sql`select 1`.execute(db));
}
