// Upgrades of the runtime's schema on a database that already holds rows: what a backfilling migration leaves behind.
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { expect, it } from 'vitest';
import { runtimeMigrations } from './migrations.js';

const apply = async (db: PGlite, versions: (version: number) => boolean) => {
  for (const migration of runtimeMigrations.filter((m) => versions(m.version))) for (const statement of migration.statements) await db.exec(statement);
};

it('migration 5 gives every existing message the subject of its run, else the conversation\'s owner, and requires one from then on', async () => {
  const db = new PGlite({ extensions: { vector } });
  try {
    await apply(db, (version) => version < 5);
    const tenant = '00000000-0000-4000-8000-000000000001';
    const session = '00000000-0000-4000-8000-000000000002';
    await db.exec(`insert into tenants (tenant_id, name, webhook_secret) values ('${tenant}', 'x', 'y')`);
    await db.exec(`insert into sessions (id, tenant_id, owner) values ('${session}', '${tenant}', 'acme:alice')`);
    await db.exec(`insert into runs (id, tenant_id, session_id, subject, status) values ('run_1', '${tenant}', '${session}', 'acme:runner', 'completed')`);
    await db.exec(
      `insert into messages (id, tenant_id, session_id, run_id, role, content) values
        ('00000000-0000-4000-8000-000000000003', '${tenant}', '${session}', 'run_1', 'user', 'by a run'),
        ('00000000-0000-4000-8000-000000000004', '${tenant}', '${session}', null, 'user', 'fork copy')`,
    );
    await apply(db, (version) => version === 5);
    const rows = await db.query<{ content: string; subject: string }>('select content, subject from messages order by content');
    expect(rows.rows).toEqual([
      { content: 'by a run', subject: 'acme:runner' },
      { content: 'fork copy', subject: 'acme:alice' },
    ]);
    await expect(
      db.exec(`insert into messages (id, tenant_id, session_id, role) values ('00000000-0000-4000-8000-000000000005', '${tenant}', '${session}', 'user')`),
    ).rejects.toThrow(/subject/);
  } finally {
    await db.close();
  }
});
