// The draft keeper against the embedded store: drafts of many steps written together, one statement a tick, and
// none at all for a step shorter than the interval.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { createLogger } from '@agentplane/lib/logging';
import { runtimeMigrations } from '../store/migrations.js';
import type { RuntimeSchema } from '../store/schema.js';
import { DraftKeeper, type DraftOwner } from './drafts.js';

let database: Database<RuntimeSchema>;
const tenantId = randomUUID();
const INTERVAL_MS = 200;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  database = await openDatabase<RuntimeSchema>({ driver: 'pglite' });
  await migrate(database.db, runtimeMigrations);
  await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'drafts', settings_json: '{}', webhook_secret: 'whs_test' }).execute();
});
afterAll(async () => {
  await database?.close();
});

async function owner(): Promise<DraftOwner> {
  const sessionId = randomUUID();
  await database.db.insertInto('sessions').values({ id: sessionId, tenant_id: tenantId, owner: 'alice' }).execute();
  return { tenantId, sessionId, runId: `run_${randomUUID()}`, subject: 'alice', model: 'gpt-test' };
}
const draftsOf = (sessionId: string) =>
  database.db.selectFrom('messages').select(['id', 'content', 'metadata', 'role']).where('session_id', '=', sessionId).execute();

describe('DraftKeeper', () => {
  it('writes no draft for a step shorter than the interval', async () => {
    const keeper = new DraftKeeper(database.db, createLogger({ level: 'silent' }), INTERVAL_MS);
    const who = await owner();
    const draft = keeper.start(who);
    const before = database.statements();
    draft.grow('Quick');
    draft.grow('Quick answer.');
    expect(await draft.settled()).toBeNull();
    await sleep(INTERVAL_MS * 2);
    expect(database.statements() - before).toBe(0);
    expect(await draftsOf(who.sessionId)).toEqual([]);
  });

  it('writes the drafts of many steps in one statement a tick, with their latest text, and hands back each row', async () => {
    const keeper = new DraftKeeper(database.db, createLogger({ level: 'silent' }), INTERVAL_MS);
    const owners = await Promise.all(Array.from({ length: 50 }, () => owner()));
    const drafts = owners.map((who) => keeper.start(who));
    drafts.forEach((draft, i) => draft.grow(`step ${i} says`));
    const before = database.statements();
    await sleep(INTERVAL_MS * 1.6);
    // Due after one interval, written at the next quarter tick: every draft in the one statement.
    expect(database.statements() - before).toBe(1);
    drafts.forEach((draft, i) => draft.grow(`step ${i} says more`));
    await sleep(INTERVAL_MS * 1.6);
    expect(database.statements() - before).toBe(2);

    for (const [i, who] of owners.entries()) {
      const id = await drafts[i]!.settled();
      expect(await draftsOf(who.sessionId)).toEqual([{ id, role: 'assistant', content: `step ${i} says more`, metadata: { incomplete: true, draft: true } }]);
    }
    expect(keeper.open).toBe(0);
  });

  it('keeps text offered after a write for the next one, and settling drops what was not written yet', async () => {
    const keeper = new DraftKeeper(database.db, createLogger({ level: 'silent' }), INTERVAL_MS);
    const who = await owner();
    const draft = keeper.start(who);
    draft.grow('First part');
    await sleep(INTERVAL_MS * 1.6);
    draft.grow('First part, second part');
    // Settled before the next write: the row keeps what was written; the step's end writes the final text itself.
    const id = await draft.settled();
    expect(id).not.toBeNull();
    await sleep(INTERVAL_MS * 2);
    expect(await draftsOf(who.sessionId)).toMatchObject([{ id, content: 'First part' }]);
  });

  it('skips the draft of a conversation deleted meanwhile and still writes the others', async () => {
    const keeper = new DraftKeeper(database.db, createLogger({ level: 'silent' }), INTERVAL_MS);
    const [gone, kept] = [await owner(), await owner()];
    const [goneDraft, keptDraft] = [keeper.start(gone), keeper.start(kept)];
    goneDraft.grow('about to vanish');
    keptDraft.grow('still here');
    await database.db.deleteFrom('sessions').where('id', '=', gone.sessionId).execute();
    await sleep(INTERVAL_MS * 1.6);
    expect(await goneDraft.settled()).toBeNull();
    const id = await keptDraft.settled();
    expect(await draftsOf(kept.sessionId)).toMatchObject([{ id, content: 'still here' }]);
  });
});
