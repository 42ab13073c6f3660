// The control plane's audit log: every answered write and token mint, refusals too, with who (an account or a key by
// its id, never the key), what (the route, the ids, a mint's subject), how it went and from where; read by the
// project's admins; the database refuses to change or remove an entry, except that a subject the project's runtime
// forgot stops being named (docs/decisions/0074).
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { eventually } from './harness/eventually.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

interface Entry {
  actor: string;
  action: string;
  resource: Record<string, unknown>;
  outcome: string;
  status: number;
  ip: string | null;
}

describe("the control plane's audit log", () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-fake-control-audit-0123', chatModels: ['gpt-4o-mini'] });
    project = await startTestProject({ capabilities: ['chat'], provider: fake, model: 'gpt-4o-mini' });
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
  });

  const entries = async (query = '') => (await json<{ entries: Entry[] }>(await project.send('GET', `/audit${query}`), 200)).entries;

  it('records writes and mints with who, what and how, refusals too, never a key; and refuses to change an entry', async () => {
    await project.token('acme:alice', ['chat']);
    const mintKey = await json<{ key: string; id: string }>(await project.send('POST', '/keys', { scope: 'mint', name: 'minter' }), 201);
    const refused = await project.api.call(`/api/projects/${project.projectId}/system-prompt`, { method: 'PUT', key: mintKey.key, body: JSON.stringify({ system_prompt: 'x' }) });
    expect(refused.status).toBe(403);
    await eventually(async () => (await entries()).some((entry) => entry.status === 403), { what: 'the refusal in the log' });

    const log = await entries();
    const mint = log.find((entry) => entry.action === 'POST /api/projects/{id}/token')!;
    expect(mint).toMatchObject({ outcome: 'ok', status: 200, resource: { id: project.projectId, subject: 'acme:alice', capabilities: ['chat'] } });
    expect(mint.actor).toMatch(/^key:[0-9a-f-]{36}$/);
    expect(log.find((entry) => entry.status === 403)).toMatchObject({ actor: `key:${mintKey.id}`, action: 'PUT /api/projects/{id}/system-prompt', outcome: 'refused' });
    expect(log.find((entry) => entry.action === 'POST /api/projects/{id}/providers')).toMatchObject({ outcome: 'ok' });
    expect(JSON.stringify(log)).not.toContain(mintKey.key);
    expect(JSON.stringify(log)).not.toContain(project.adminKey);

    const db = project.api.control.database.db;
    await expect(sql`update control.audit_log set outcome = 'ok'`.execute(db)).rejects.toThrow(/append-only/);
    await expect(sql`delete from control.audit_log`.execute(db)).rejects.toThrow(/append-only/);
  });

  it('stops naming a subject the runtime forgot: its mint entries say `forgotten`, and nothing else of the log can change', async () => {
    const alice = await project.token('acme:eng:alice', ['chat']);
    const admin = (await json<{ access_token: string }>(await project.send('POST', '/token', { subject: 'acme:ops', scope: 'acme', roles: ['admin'], capabilities: ['chat'] }), 200)).access_token;
    expect((await project.rt.endUser('/chat/sessions', alice)).status).toBe(200);
    const mints = async () => (await entries('?action=POST /api/projects/{id}/token')).map((entry) => entry.resource.subject);
    await eventually(async () => (await mints()).includes('acme:eng:alice'), { what: "alice's mint in the log" });

    const forgotten = await project.rt.endUser('/audit/forget', admin, { method: 'POST', body: JSON.stringify({ subject: 'acme:eng:alice' }) });
    expect(forgotten.status, await forgotten.clone().text()).toBe(200);

    // Read by the project's admins, the log no longer names her; the admin and the earlier subject stay.
    const subjects = await mints();
    expect(subjects).not.toContain('acme:eng:alice');
    expect(subjects).toContain('forgotten');
    expect(subjects).toContain('acme:ops');
    expect(subjects).toContain('acme:alice');
    const db = project.api.control.database.db;
    const rows = await sql<{ row: string }>`select row_to_json(a)::text as row from control.audit_log a`.execute(db);
    expect(rows.rows.map((row) => row.row).join('\n')).not.toContain('acme:eng:alice');

    // Even in a forget's transaction, only a mint's subject may be replaced: any other change is refused.
    await expect(
      db.transaction().execute(async (trx) => {
        await sql`select set_config('control.audit', 'forget', true)`.execute(trx);
        await sql`update control.audit_log set actor = 'key:someone-else' where resource ->> 'subject' = 'forgotten'`.execute(trx);
      }),
    ).rejects.toThrow(/append-only/);
    await expect(sql`update control.audit_log set resource = (resource - 'subject') || '{"subject": "forgotten"}'::jsonb`.execute(db)).rejects.toThrow(/append-only/);
  });
});
