// Forgetting a subject as an attacker would probe it (docs/decisions/0074), in both setups: a privileged token erases
// only subjects inside its own scope, and no destructive action of an administrator reaches a subject outside it;
// after a forget nothing readable names the subject or replays what they wrote: their runs' logs are gone from the
// event store, the wiki pages they wrote are gone, and their tokens issued before the forget are refused, on every
// replica of a shared store.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forgottenSubjectDigest } from '@agentplane/lib/tokens/forgotten';
import { runLogKey } from '@agentplane/runtime/chat/runs';
import { availableSetups, ScaleServices, startTestRuntime, type TestRuntime } from '../harness/runtime.js';
import { allEvents } from '../harness/sse.js';
import { chatWorld, CHAT_CAPABILITIES, eventually, type ChatWorld } from './fixture.js';

const capabilities = [...CHAT_CAPABILITIES, 'memory', 'documents:read', 'documents:write', 'tasks:read', 'tasks:write', 'triggers', 'plugins:write'];

describe.each(availableSetups())('forgetting a subject (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  /** A second replica on the same store (scale only). */
  let replica: TestRuntime | undefined;

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    const env = { ...((await services?.env()) ?? {}), AUDIT_FLUSH_MS: '50' };
    world = await chatWorld(env);
    const ceiling = world.tenant.configuration.ceiling;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, ...capabilities] } } as never)).status).toBe(200);
    if (setup === 'scale') replica = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', ...env }, adminKey: world.rt.adminKey });
  }, 180_000);
  afterAll(async () => {
    await replica?.stop();
    await world?.stop();
    await services?.stop();
  });

  const json = (method: string, body?: unknown): RequestInit => ({ method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const user = (sub: string, scope = sub) => world.token({ capabilities, sub, scope });
  /** An administrator whose token says `scope`; the control plane's mint makes an omitted scope the subject itself. */
  const admin = (sub: string, scope = sub, extra: Record<string, unknown> = {}) => world.token({ capabilities, sub, scope, roles: ['admin'], ...extra });
  const forget = (token: string, subject: string) => world.rt.endUser('/audit/forget', token, json('POST', { subject }));

  /** Everything of one subject's a destructive action could reach: a conversation with a vote, a document, a memory item, a task, a trigger, a skill package. */
  async function belongings(sub: string) {
    const token = await user(sub);
    world.fake.script({ toolCalls: [{ name: 'remember', arguments: { content: `${sub} likes tea.` } }] }, 'Noted.');
    const turn = (await (await world.chat(token, { message: 'I like tea' })).json()) as { session_id: string; message_id: string };
    expect((await world.rt.endUser(`/chat/sessions/${turn.session_id}/messages/${turn.message_id}/feedback`, token, json('PUT', { rating: 'up' }))).status).toBe(200);
    const document = (await (await world.rt.endUser('/documents', token, json('POST', { text: `${sub}'s notes.`, title: 'Notes' }))).json()) as { id: string };
    const memory = (await (await world.rt.endUser('/memory', token)).json()) as { items: { id: string }[] };
    const task = (await (await world.rt.endUser('/tasks', token, json('POST', { prompt: 'Remind me.', interval_seconds: 3600 }))).json()) as { id: string };
    const trigger = (await (await world.rt.endUser('/triggers', token, json('POST', { name: 'hook', prompt: 'x' }))).json()) as { id: string };
    const skill = new FormData();
    skill.append('file', new Blob([`---\nname: notes-${sub.replaceAll(':', '-')}\ndescription: How they file notes\n---\nBy date.\n`]), 'SKILL.md');
    const plugin = await world.rt.endUser('/plugins', token, { method: 'POST', body: skill });
    expect(plugin.status, await plugin.clone().text()).toBe(201);
    expect(memory.items).toHaveLength(1);
    return { token, sessionId: turn.session_id, messageId: turn.message_id, documentId: document.id, memoryId: memory.items[0]!.id, taskId: task.id, triggerId: trigger.id, pluginId: ((await plugin.json()) as { id: string }).id };
  }

  /** Whether each of those is still there, read by its owner. */
  async function intact(b: Awaited<ReturnType<typeof belongings>>) {
    const read = async (path: string) => (await world.rt.endUser(path, b.token)).status;
    expect(await read(`/chat/sessions/${b.sessionId}/messages`)).toBe(200);
    expect(await read(`/documents/${b.documentId}`)).toBe(200);
    expect(await read(`/tasks/${b.taskId}`)).toBe(200);
    const task = (await (await world.rt.endUser(`/tasks/${b.taskId}`, b.token)).json()) as { status: string };
    expect(task.status).toBe('scheduled');
    const memory = (await (await world.rt.endUser('/memory', b.token)).json()) as { items: { id: string }[] };
    expect(memory.items.map((item) => item.id)).toEqual([b.memoryId]);
    const triggers = (await (await world.rt.endUser('/triggers', b.token)).json()) as { triggers: { id: string }[] };
    expect(triggers.triggers.map((trigger) => trigger.id)).toContain(b.triggerId);
    const messages = (await (await world.rt.endUser(`/chat/sessions/${b.sessionId}/messages`, b.token)).json()) as { id: string; feedback: unknown }[];
    expect(messages.find((message) => message.id === b.messageId)?.feedback).toMatchObject({ rating: 'up' });
    const plugins = (await (await world.rt.endUser('/plugins', b.token)).json()) as { plugins: { id: string }[] };
    expect(plugins.plugins.map((plugin) => plugin.id)).toContain(b.pluginId);
  }

  it("refuses to forget a subject outside the token's scope: another branch, an admin minted without a scope, a data_scope", async () => {
    const alice = await belongings('acme:eng:alice');
    const outsiders: [string, string][] = [
      ['admin scoped acme:sales', await admin('acme:sales:lead', 'acme:sales')],
      // No scope at mint means only the subject's own data (SPEC.md Authentication 9): the scope is its own path.
      ['admin minted without a scope', await admin('acme:ops:admin')],
      ['admin narrowed by data_scope', await admin('acme:root', 'acme', { data_scope: 'acme:sales' })],
      ['owner scoped acme:sales', await world.token({ capabilities, sub: 'acme:sales:boss', scope: 'acme:sales', roles: ['owner'] })],
    ];
    for (const [who, token] of outsiders) {
      const res = await forget(token, 'acme:eng:alice');
      expect(res.status, who).toBe(403);
      expect(await res.json(), who).toMatchObject({ code: 'outside_scope' });
    }
    await intact(alice);
    // An administrator whose scope holds her may.
    const res = await forget(await admin('acme:eng:lead', 'acme:eng'), 'acme:eng:alice');
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await world.rt.endUser(`/chat/sessions/${alice.sessionId}/messages`, await admin('acme:eng:lead', 'acme:eng'))).status).toBe(404);
  });

  it("refuses every destructive action of an administrator on a subject outside its scope, and changes nothing", async () => {
    const bob = await belongings('acme:eng:bob');
    const administrators: [string, string, number][] = [
      // Privilege reads across scopes (SPEC.md Authentication 6): seen, so refused as not theirs (403).
      ['admin scoped acme:sales', await admin('acme:sales:lead', 'acme:sales'), 403],
      ['admin minted without a scope', await admin('acme:ops:admin'), 403],
      // A data_scope hides him: not visible is not found.
      ['admin narrowed by data_scope', await admin('acme:root', 'acme', { data_scope: 'acme:sales' }), 404],
    ];
    const actions: [string, string, RequestInit][] = [
      ['delete the conversation', `/chat/sessions/${bob.sessionId}`, json('DELETE')],
      ['delete a vote', `/chat/sessions/${bob.sessionId}/messages/${bob.messageId}/feedback`, json('DELETE')],
      ['retitle the conversation', `/chat/sessions/${bob.sessionId}`, json('PATCH', { title: 'Gone' })],
      ['delete the document', `/documents/${bob.documentId}`, json('DELETE')],
      ['forget the memory item', `/memory/${bob.memoryId}`, json('DELETE')],
      ['cancel the task', `/tasks/${bob.taskId}/cancel`, json('POST')],
      ['delete the trigger', `/triggers/${bob.triggerId}`, json('DELETE')],
      ['rotate the trigger', `/triggers/${bob.triggerId}/rotate`, json('POST')],
      ['delete the skill package', `/plugins/${bob.pluginId}`, json('DELETE')],
    ];
    for (const [who, token, status] of administrators) {
      for (const [what, path, init] of actions) {
        const res = await world.rt.endUser(path, token, init);
        // An end-user's skill package is seen by its owner alone, whatever the reader's roles: unseen is not found.
        expect(res.status, `${who}: ${what}`).toBe(what === 'delete the skill package' ? 404 : status);
      }
      const res = await forget(token, 'acme:eng:bob');
      expect(res.status, `${who}: forget`).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'outside_scope' });
    }
    await intact(bob);
  });

  it("removes the logs of the subject's runs, so GET /chat/stream/{run_id} replays nothing of what they typed", async () => {
    const carol = await user('acme:eng:carol');
    world.fake.script('Your secret is safe.');
    const { response, events } = await world.streamAll(carol, { message: 'my secret is swordfish' });
    expect(response.status).toBe(200);
    const runId = response.headers.get('x-run-id')!;
    const lead = await admin('acme:eng:lead', 'acme:eng');
    // Before: the run replays, to her and to an administrator who sees her conversations.
    const before = await world.rt.endUser(`/chat/stream/${runId}`, lead);
    expect(before.status).toBe(200);
    expect(JSON.stringify(await allEvents(before))).toContain('Your secret is safe.');
    expect(events.length).toBeGreaterThan(1);
    const key = runLogKey(world.tenant.tenantId, runId);
    expect((await world.rt.runtime.events.logs.read(key, 0)).state).toBe('closed');

    const res = await forget(lead, 'acme:eng:carol');
    expect(res.status, await res.clone().text()).toBe(200);
    const report = (await res.json()) as { complete: boolean; steps: { step: string; outcome: string; items?: number }[] };
    expect(report.complete).toBe(true);
    expect(report.steps.find((step) => step.step === 'run_logs')).toMatchObject({ outcome: 'done', items: 1 });

    expect(await world.rt.runtime.events.logs.read(key, 0)).toEqual({ state: 'missing' });
    const after = await world.rt.endUser(`/chat/stream/${runId}`, lead);
    expect(after.status).toBe(404);
    expect(await after.text()).not.toContain('swordfish');
    if (replica) expect((await replica.endUser(`/chat/stream/${runId}`, lead)).status).toBe(404);
  });

  it('removes the wiki pages the subject wrote, for their own path or for a team, and keeps the pages of others', async () => {
    const dana = await user('acme:eng:dana');
    const danaForTeam = await user('acme:eng:dana', 'acme:eng');
    const erin = await user('acme:eng:erin', 'acme:eng');
    const write = async (token: string, title: string, content: string) => {
      world.fake.script({ toolCalls: [{ name: 'write_wiki_page', arguments: { title, content } }] }, 'Written.');
      expect((await world.chat(token, { message: 'write it down' })).status).toBe(200);
    };
    await write(dana, 'Dana private', 'Dana keeps her passport in the blue drawer.');
    await write(danaForTeam, 'Team runbook', 'Dana says: restart the queue on Fridays.');
    await write(erin, 'Erin page', 'Erin wrote this.');
    const wikiOf = async (token: string) => ((await (await world.rt.endUser('/memory', token)).json()) as { wiki: { title: string; content: string; scope: string }[] }).wiki;
    // Erin's scope holds Dana's own path, so she sees both of Dana's pages.
    expect((await wikiOf(erin)).map((page) => page.title).sort()).toEqual(['Dana private', 'Erin page', 'Team runbook']);

    const res = await forget(await admin('acme:eng:lead', 'acme:eng'), 'acme:eng:dana');
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { erased: Record<string, number> }).erased.wiki_pages).toBe(2);

    expect((await wikiOf(erin)).map((page) => page.title)).toEqual(['Erin page']);
    const left = await sql<{ row: string }>`select row_to_json(w)::text as row from wiki_pages w where tenant_id = ${world.tenant.tenantId}`.execute(world.rt.runtime.database.db);
    expect(left.rows.map((row) => row.row).join('\n')).not.toMatch(/dana|passport|Fridays/i);
    expect(left.rows).toHaveLength(1);
  });

  it("refuses the subject's tokens issued before the forget, narrowed ones too, on every replica; a token minted after it works", async () => {
    const frank = await user('acme:eng:frank');
    world.fake.script('Hi Frank.');
    expect((await world.chat(frank, { message: 'hi' })).status).toBe(200);
    const narrowed = await world.rt.endUser('/auth/token', frank, json('POST', { capabilities: ['chat'], expires_in: 600 }));
    expect(narrowed.status, await narrowed.clone().text()).toBe(200);
    const child = ((await narrowed.json()) as { access_token: string }).access_token;
    const others = await user('acme:eng:grace');
    // Both replicas have verified (and hold) his token before the forget.
    expect((await world.rt.endUser('/chat/sessions', frank)).status).toBe(200);
    if (replica) expect((await replica.endUser('/chat/sessions', frank)).status).toBe(200);

    const res = await forget(await admin('acme:eng:lead', 'acme:eng'), 'acme:eng:frank');
    expect(res.status, await res.clone().text()).toBe(200);
    const answeredAt = Date.now();

    for (const token of [frank, child]) {
      const refused = await world.rt.endUser('/chat/sessions', token);
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ code: 'invalid_token' });
    }
    // Another replica hears of the forget as of any change to the tenant (decision 0049).
    if (replica) await eventually(async () => (await replica!.endUser('/chat/sessions', frank)).status === 401, 'the other replica to refuse his token');
    expect((await world.rt.endUser('/chat/sessions', others)).status).toBe(200);
    // Nothing in the record spells him out; the admin surface (for the control plane) lists digests, and only there.
    const recorded = await sql<{ row: string }>`select row_to_json(f)::text as row from forgotten_subjects f`.execute(world.rt.runtime.database.db);
    expect(recorded.rows.length).toBeGreaterThan(0);
    expect(recorded.rows.map((row) => row.row).join('\n')).not.toContain('frank');
    const listed = await world.rt.admin(`/tenants/${world.tenant.tenantId}/forgotten-subjects`);
    expect(listed.status).toBe(200);
    const { subjects } = (await listed.json()) as { subjects: { digest: string; forgotten_at: string }[] };
    expect(subjects.map((subject) => subject.digest)).toContain(forgottenSubjectDigest(world.tenant.tenantId, 'acme:eng:frank'));
    expect((await world.rt.endUser(`/tenants/${world.tenant.tenantId}/forgotten-subjects`, await admin('acme:eng:lead', 'acme:eng'))).status).toBe(401);

    // A token issued after the forget (its `iat`, whole seconds, past the forget's second) starts from nothing.
    await eventually(async () => Math.floor(Date.now() / 1000) * 1000 > answeredAt, 'the second after the forget');
    const fresh = await user('acme:eng:frank');
    const sessions = await world.rt.endUser('/chat/sessions', fresh);
    expect(sessions.status).toBe(200);
    expect(((await sessions.json()) as { sessions: unknown[] }).sessions).toEqual([]);
  });
});
