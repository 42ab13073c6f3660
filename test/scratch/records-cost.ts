import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { runtimeMigrations } from '@agentplane/runtime/store/migrations';
import { TurnRecords } from '@agentplane/runtime/chat/turn-records';
import { sql } from 'kysely';
const database = await openDatabase<any>({ driver: 'pglite', dataDir: mkdtempSync(join(tmpdir(), 'rc-')) });
await migrate(database.db, runtimeMigrations);
const tenantId = randomUUID();
await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'x', settings_json: '{}', webhook_secret: 'w' }).execute();
await database.db.insertInto('tenant_configurations').values({ tenant_id: tenantId, version: 1, digest: 'd', document: '{}' } as any).execute().catch((e) => console.log('cfg', e.message));
const records = new TurnRecords(database.db);
const time = async (name: string, n: number, f: (i: number) => Promise<unknown>) => {
  for (let i = 0; i < 50; i++) await f(i);
  const t0 = performance.now(); const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await f(i);
  const c = process.cpuUsage(c0);
  console.log(`${name.padEnd(30)} wall ${((performance.now() - t0) / n * 1000).toFixed(0)} µs, cpu ${((c.user + c.system) / n).toFixed(0)} µs`);
};
const sessions: { s: string; r: string }[] = [];
await time('startNewSession', 1000, async () => {
  const s = randomUUID(), r = `run_${randomUUID()}`;
  sessions.push({ s, r });
  await records.startNewSession({ tenantId, sessionId: s, runId: r, subject: 'alice', model: 'gpt', message: 'hello there', leaseOwner: 'me', leaseExpiresAt: new Date(Date.now() + 30000) });
});
let k = 0;
await time('end', 1000, async () => {
  const { s, r } = sessions[k++]!;
  await records.end({ tenantId, sessionId: s, runId: r, ending: { status: 'completed', finishReason: null }, rollup: { status: 'completed', model: 'gpt', pending: null },
    message: { draftId: null, value: { role: 'assistant', content: 'answer text here', runId: r, subject: 'alice', model: 'gpt' } },
    usage: { model: 'gpt', purpose: 'turn', inputTokens: 10, outputTokens: 20, costUsd: null }, unlessSteered: true });
});
await time('stamp', 2000, () => database.db.selectFrom('tenant_configurations').select((eb: any) => ['version', 'digest', eb.selectFrom('tenants').select('updated_at').whereRef('tenants.tenant_id', '=', 'tenant_configurations.tenant_id').as('s')]).where('tenant_id', '=', tenantId).executeTakeFirst());
await time('raw select 1 via kysely', 2000, () => sql`select 1`.execute(database.db));
await database.close();
// Prepared: the same start statement as a server-side prepared statement
{
  const database2 = await openDatabase<any>({ driver: 'pglite', dataDir: mkdtempSync(join(tmpdir(), 'rc-')) });
  await migrate(database2.db, runtimeMigrations);
  await database2.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'x', settings_json: '{}', webhook_secret: 'w' }).execute();
  await sql`prepare start_turn (uuid, uuid, text, text, text, text, timestamptz, uuid, text) as
      with session as (
        insert into sessions (id, tenant_id, owner, model, status) values ($1, $2, $3, $4, 'running')
      ), run as (
        insert into runs (id, tenant_id, session_id, subject, model, status, lease_owner, lease_expires_at)
        values ($5, $2, $1, $3, $4, 'running', $6, $7)
      )
      insert into messages (id, tenant_id, session_id, run_id, subject, role, content)
      values ($8, $2, $1, $5, $3, 'user', $9)
      returning *`.execute(database2.db);
  await time('prepared startNewSession', 1000, async () => {
    await sql`execute start_turn(${randomUUID()}, ${tenantId}, 'alice', 'gpt', ${`run_${randomUUID()}`}, 'me', ${new Date()}, ${randomUUID()}, 'hello there')`.execute(database2.db);
  });
  await time('plain insert session only', 1000, async () => {
    await sql`insert into sessions (id, tenant_id, owner, model, status) values (${randomUUID()}, ${tenantId}, 'alice', 'gpt', 'running')`.execute(database2.db);
  });
}
