// A new data dir seeded from the build's template is a whole database of its own: it opens without initdb, keeps
// what is written across a restart, and writes nothing back into the template. A dir that holds anything is left
// as it is.
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '@agentplane/test/harness/process';
import { openDatabase } from './database.js';
import { makePgliteTemplate, seedFromTemplate } from './pglite-template.js';

describe('PGlite template', () => {
  const root = makeTempDir('pglite-template');
  const template = join(root, 'template');

  beforeAll(async () => {
    await makePgliteTemplate(template);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('seeds an empty data dir with a database that keeps its writes and leaves the template as it was', async () => {
    const dataDir = join(root, 'data');
    mkdirSync(dataDir);
    expect(seedFromTemplate(dataDir, template)).toBe(true);
    expect(existsSync(`${dataDir}.seeding`)).toBe(false);

    const first = await openDatabase({ driver: 'pglite', dataDir });
    await sql`create table kept (id integer primary key)`.execute(first.db);
    await sql`insert into kept values (1)`.execute(first.db);
    await first.close();
    const again = await openDatabase({ driver: 'pglite', dataDir });
    expect((await sql<{ id: number }>`select id from kept`.execute(again.db)).rows).toEqual([{ id: 1 }]);
    await again.close();

    const other = join(root, 'other');
    expect(seedFromTemplate(other, template)).toBe(true); // absent dirs are made
    const fresh = await openDatabase({ driver: 'pglite', dataDir: other });
    expect((await sql<{ found: string | null }>`select to_regclass('kept')::text as found`.execute(fresh.db)).rows).toEqual([{ found: null }]);
    await fresh.close();
  });

  it('leaves a data dir that holds anything alone, and does nothing without a template', () => {
    const used = join(root, 'used');
    mkdirSync(used);
    writeFileSync(join(used, 'something'), '');
    expect(seedFromTemplate(used, template)).toBe(false);
    expect(readdirSync(used)).toEqual(['something']);

    expect(seedFromTemplate(join(root, 'empty'), join(root, 'no-template'))).toBe(false);
    expect(existsSync(join(root, 'empty'))).toBe(false);
  });
});
