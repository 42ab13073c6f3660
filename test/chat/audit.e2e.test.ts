// The audit log and forgetting a subject, in both setups: every write a caller makes is recorded with who, what, how
// it went and from where, refusals included, and every tool call a turn makes; only privileged tokens read it; the
// database refuses to change or remove an entry. Forgetting a subject stops their work and removes their
// conversations, documents, memory, tasks, triggers and records, leaves a tombstone that does not name them, and makes
// their audit entries name the tombstone.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, eventually, type ChatWorld } from './fixture.js';

interface Entry {
  actor: string;
  actor_kind: string;
  action: string;
  resource: Record<string, unknown>;
  outcome: string;
  status: number | null;
  ip: string | null;
}

const capabilities = [...CHAT_CAPABILITIES, 'todo', 'memory', 'documents:read', 'documents:write', 'tasks:read', 'tasks:write', 'triggers'];

describe.each(availableSetups())('the audit log and forgetting (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let alice: string;
  let admin: string;

  const entries = async (query = '') => {
    const res = await world.rt.endUser(`/audit${query}`, admin);
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { entries: Entry[] }).entries;
  };

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    world = await chatWorld({ ...((await services?.env()) ?? {}), AUDIT_FLUSH_MS: '50' });
    const ceiling = world.tenant.configuration.ceiling;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, ...capabilities] } } as never)).status).toBe(200);
    alice = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
    admin = await world.token({ capabilities, sub: 'ops:admin', scope: 'ops:admin', roles: ['admin'] });
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });

  it('records writes with who, what, how and from where, refusals too, and each tool call; only privileged tokens read it', async () => {
    world.fake.script({ toolCalls: [{ name: 'todo', arguments: { items: [{ content: 'Plan the trip', status: 'pending' }] } }] }, 'Planned.');
    const turn = await world.chat(alice, { message: 'plan my trip' });
    expect(turn.status).toBe(200);
    const { session_id: sessionId } = (await turn.json()) as { session_id: string };
    const refused = await world.rt.endUser(`/chat/sessions/${sessionId}`, admin, { method: 'DELETE' });
    expect(refused.status).toBe(403);

    const mine = await entries('?actor=acme:alice');
    expect(mine.find((entry) => entry.action === 'POST /chat')).toMatchObject({ actor_kind: 'end_user', outcome: 'ok', status: 200, ip: expect.any(String) });
    expect(mine.find((entry) => entry.action === 'tool_call')).toMatchObject({ outcome: 'ok', resource: expect.objectContaining({ tool: 'todo', origin: 'builtin', session_id: sessionId }) });
    const theirs = await entries('?actor=ops:admin&outcome=refused');
    expect(theirs[0]).toMatchObject({ action: 'DELETE /chat/sessions/{id}', outcome: 'refused', status: 403, resource: { id: sessionId } });

    // A privileged token narrowed by data_scope reads its subjects' entries alone.
    const narrowed = await world.token({ capabilities, sub: 'ops:auditor', scope: 'ops:auditor', roles: ['admin'], data_scope: 'acme:alice' });
    const seen = ((await (await world.rt.endUser('/audit', narrowed)).json()) as { entries: Entry[] }).entries;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((entry) => entry.actor === 'acme:alice')).toBe(true);
    const plain = await world.rt.endUser('/audit', alice);
    expect(plain.status).toBe(403);
    expect(await plain.json()).toMatchObject({ code: 'not_privileged' });
    expect((await world.rt.endUser('/audit/forget', alice, { method: 'POST', body: JSON.stringify({ subject: 'acme:bob' }) })).status).toBe(403);
  });

  it('refuses, in the database itself, to change or remove an entry', async () => {
    const db = world.rt.runtime.database.db;
    await expect(sql`update audit_log set outcome = 'ok' where outcome = 'refused'`.execute(db)).rejects.toThrow(/append-only/);
    await expect(sql`delete from audit_log`.execute(db)).rejects.toThrow(/append-only/);
    await expect(sql`update audit_log set actor = 'forgotten:x'`.execute(db)).rejects.toThrow(/append-only/);
  });

  it("forgets a subject: their work stopped, their data gone, a tombstone that does not name them, and their audit entries renamed", async () => {
    const carol = await world.token({ capabilities, sub: 'acme:carol', scope: 'acme:carol' });
    world.fake.script({ toolCalls: [{ name: 'remember', arguments: { content: 'Carol is allergic to peanuts.' } }] }, 'Noted.');
    const turn = (await (await world.chat(carol, { message: 'I am allergic to peanuts' })).json()) as { session_id: string };
    const document = await world.rt.endUser('/documents', carol, { method: 'POST', body: JSON.stringify({ text: "Carol's travel plans.", title: 'Plans' }) });
    expect(document.status).toBe(201);
    expect((await world.rt.endUser('/tasks', carol, { method: 'POST', body: JSON.stringify({ prompt: 'Remind Carol.', interval_seconds: 3600 }) })).status).toBe(201);
    expect((await world.rt.endUser('/triggers', carol, { method: 'POST', body: JSON.stringify({ name: 'Carol hook', prompt: 'x' }) })).status).toBe(201);
    // Someone else's conversation stays.
    world.fake.script('Hello, Dave.');
    const dave = await world.token({ capabilities, sub: 'acme:dave', scope: 'acme:dave' });
    const daves = (await (await world.chat(dave, { message: 'hi' })).json()) as { session_id: string };
    await eventually(async () => (await entries('?actor=acme:carol')).length >= 4, "Carol's entries");

    // Forgetting is for an administrator whose scope holds the subject (ops:admin's does not: decision 0074).
    const acmeAdmin = await world.token({ capabilities, sub: 'acme:ops:admin', scope: 'acme', roles: ['admin'] });
    expect((await world.rt.endUser('/audit/forget', admin, { method: 'POST', body: JSON.stringify({ subject: 'acme:carol' }) })).status).toBe(403);
    const res = await world.rt.endUser('/audit/forget', acmeAdmin, { method: 'POST', body: JSON.stringify({ subject: 'acme:carol' }) });
    expect(res.status, await res.clone().text()).toBe(200);
    const report = (await res.json()) as { forget_id: string; erased: Record<string, number>; complete: boolean; steps: { step: string; outcome: string }[] };
    expect(report.complete).toBe(true);
    expect(report.erased).toMatchObject({ sessions: 1, memory_items: 1, tasks: 1, triggers: 1 });
    expect(report.erased.messages).toBeGreaterThanOrEqual(2);
    expect(report.erased.audit_log).toBeGreaterThanOrEqual(4);
    expect(report.steps.find((step) => step.step === 'documents')).toMatchObject({ outcome: 'done', items: 1 });

    const db = world.rt.runtime.database.db;
    for (const [table, column] of [['sessions', 'owner'], ['memory_items', 'subject'], ['documents', 'owner'], ['tasks', 'owner'], ['triggers', 'owner'], ['audit_log', 'actor']] as const) {
      const left = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} where ${sql.ref(column)} = 'acme:carol'`.execute(db);
      expect(left.rows[0]!.n, table).toBe(0);
    }
    expect((await world.rt.endUser(`/chat/sessions/${turn.session_id}/messages`, admin)).status).toBe(404);
    expect((await world.rt.endUser(`/chat/sessions/${daves.session_id}/messages`, admin)).status).toBe(200);
    const tombstone = await sql<{ row: string }>`select row_to_json(f)::text as row from forget_records f where id = ${report.forget_id}`.execute(db);
    expect(tombstone.rows[0]!.row).not.toContain('carol');
    expect(tombstone.rows[0]!.row).toContain('acme:ops:admin');
    const renamed = await entries(`?actor=forgotten:${report.forget_id}`);
    expect(renamed.length).toBe(report.erased.audit_log);
    expect(renamed.every((entry) => entry.ip === null)).toBe(true);
    expect((await entries('?action=subject.forget'))[0]).toMatchObject({ actor: 'acme:ops:admin', outcome: 'ok', resource: { forget_id: report.forget_id } });
  });

  it('records each unattended start: a task fire and a trigger event, as the subject they act for', async () => {
    world.fake.script('Fired.', 'Triggered.');
    const eve = await world.token({ capabilities, sub: 'acme:eve', scope: 'acme:eve' });
    const task = (await (await world.rt.endUser('/tasks', eve, { method: 'POST', body: JSON.stringify({ prompt: 'Go.', run_at: new Date(Date.now() + 300).toISOString() }) })).json()) as { id: string };
    const trigger = (await (await world.rt.endUser('/triggers', eve, { method: 'POST', body: JSON.stringify({ name: 'hook', prompt: 'Go.' }) })).json()) as { id: string; url: string };
    expect((await fetch(trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' })).status).toBe(200);
    await eventually(async () => (await entries('?actor=acme:eve&outcome=ok')).filter((entry) => entry.actor_kind === 'unattended').length === 2, 'both starts in the log');
    const starts = (await entries('?actor=acme:eve')).filter((entry) => entry.actor_kind === 'unattended');
    expect(starts.map((entry) => entry.action).sort()).toEqual(['task.fire', 'trigger.fire']);
    expect(starts.find((entry) => entry.action === 'task.fire')!.resource).toMatchObject({ task_id: task.id });
    expect(starts.find((entry) => entry.action === 'trigger.fire')!.resource).toMatchObject({ trigger_id: trigger.id });
    expect(JSON.stringify(starts)).not.toContain(trigger.url.split('/').at(-1)!);
  });
});
