// Conversations through HTTP, in both setups: listing with every filter and stable paging, who sees what
// (scope, privileged roles, data scope, other tenants: not visible answers like unknown, before any 422), history and
// its pages, titles (owner only), fork, delete (refused while a turn holds a live lease) and feedback.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import type { Conversations, NewMessage } from './conversations.js';
import type { MessageOutput, SessionOutput, SessionPageOutput } from './schemas.js';

const ceiling = { capabilities: ['chat', 'documents:read'] };

describe.each(availableSetups())('conversations (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  let conversations: Conversations;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    rt = await startTestRuntime({ env: (await services?.env()) ?? {} });
    conversations = rt.runtime.conversations;
  });
  afterAll(async () => {
    await rt?.stop();
    await services?.stop();
  });

  const db = () => rt.runtime.database.db;

  /** A tenant and a way to mint its tokens: by default a plain user `acme:alice` who sees only her own. */
  async function tenant(): Promise<TestTenant & { token(grant?: Partial<AccessTokenGrant>): Promise<string> }> {
    const t = await configuredTenant(rt, { ceiling });
    return Object.assign(t, { token: (grant: Partial<AccessTokenGrant> = {}) => t.mint({ sub: 'acme:alice', scope: 'acme:alice', ...grant }) });
  }

  async function seed(
    t: TestTenant,
    owner: string,
    options: { title?: string; model?: string | null; status?: 'idle' | 'completed' | 'failed' | 'requires_action'; parent?: string; updatedAt?: Date; messages?: NewMessage[] } = {},
  ): Promise<string> {
    const session = await conversations.createSession(db(), {
      tenantId: t.tenantId,
      owner,
      title: options.title ?? '',
      model: options.model ?? null,
      parentSessionId: options.parent ?? null,
    });
    if (options.messages) await conversations.append(t.tenantId, session.id, options.messages);
    if (options.status) await conversations.setRollup(db(), session.id, { status: options.status });
    if (options.updatedAt) await db().updateTable('sessions').set({ updated_at: options.updatedAt }).where('id', '=', session.id).execute();
    return session.id;
  }

  async function list(token: string, query = ''): Promise<SessionPageOutput> {
    const res = await rt.endUser(`/chat/sessions${query}`, token);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as SessionPageOutput;
  }
  const ids = (page: SessionPageOutput) => page.sessions.map((s) => s.id);

  describe('GET /chat/sessions', () => {
    it('answers the page shape, newest first, and pages with has_more and next_offset; equal times are ordered by id', async () => {
      const t = await tenant();
      const base = Date.UTC(2030, 0, 1);
      const tied = new Date(base + 5_000);
      const created: string[] = [];
      for (let i = 0; i < 5; i++) created.push(await seed(t, 'acme:alice', { title: `t${i}`, updatedAt: new Date(base + i * 1000) }));
      const tiedIds = [await seed(t, 'acme:alice', { updatedAt: tied }), await seed(t, 'acme:alice', { updatedAt: tied }), await seed(t, 'acme:alice', { updatedAt: tied })];
      const expected = [...tiedIds.sort().reverse(), ...[...created].reverse()];
      const token = await t.token();

      const first = await list(token, '?limit=3');
      expect(ids(first)).toEqual(expected.slice(0, 3));
      expect(first).toMatchObject({ has_more: true, next_offset: 3 });
      const second = await list(token, '?limit=3&offset=3');
      expect(ids(second)).toEqual(expected.slice(3, 6));
      expect(second).toMatchObject({ has_more: true, next_offset: 6 });
      const last = await list(token, '?limit=3&offset=6');
      expect(ids(last)).toEqual(expected.slice(6));
      expect(last).toMatchObject({ has_more: false, next_offset: null });
      // A page that ends exactly at the last row has no more.
      expect(await list(token, '?limit=8')).toMatchObject({ has_more: false, next_offset: null });
      expect(ids(await list(token))).toEqual(expected);
      expect(Object.keys(first).sort()).toEqual(['has_more', 'next_offset', 'sessions']);

      const row = first.sessions[0]!;
      expect(row).toEqual({
        id: row.id,
        title: '',
        user_ref: 'acme:alice',
        model: null,
        status: 'idle',
        parent_session_id: null,
        requires_action: false,
        created_at: expect.any(String),
        updated_at: tied.toISOString(),
      });
    });

    it('refuses a limit above 500, a negative offset, an unknown status and a malformed date with 422', async () => {
      const t = await tenant();
      const token = await t.token();
      for (const query of ['?limit=501', '?limit=0', '?offset=-1', '?status=sleeping', '?since=yesterday', '?include_subagents=maybe']) {
        const res = await rt.endUser(`/chat/sessions${query}`, token);
        expect(res.status, query).toBe(422);
        const body = (await res.json()) as { detail: { loc: unknown[] }[] };
        expect(body.detail[0]!.loc[0]).toBe('query');
      }
      expect((await list(token, '?limit=500')).sessions).toEqual([]);
    });

    it('filters by user_ref, model, status, time bounds and q (id prefix, title, user), and combines them', async () => {
      const t = await tenant();
      const at = (minute: number) => new Date(Date.UTC(2031, 5, 1, 12, minute));
      const a = await seed(t, 'acme:alice', { title: 'Quarterly Report', model: 'gpt-4o', status: 'completed', updatedAt: at(0) });
      const b = await seed(t, 'acme:bob', { title: 'holiday plans', model: 'llama-3', status: 'failed', updatedAt: at(10) });
      const c = await seed(t, 'acme:bobby', { title: 'report draft', model: 'gpt-4o', status: 'requires_action', updatedAt: at(20) });
      const admin = await t.token({ roles: ['admin'] });

      expect(ids(await list(admin, '?user_ref=acme:bob'))).toEqual([b]);
      expect(ids(await list(admin, '?model=gpt-4o'))).toEqual([c, a]);
      expect(ids(await list(admin, '?status=failed'))).toEqual([b]);
      expect(ids(await list(admin, '?status=idle'))).toEqual([]);
      // since is inclusive, until exclusive, both on updated_at.
      expect(ids(await list(admin, `?since=${at(10).toISOString()}`))).toEqual([c, b]);
      expect(ids(await list(admin, `?until=${at(10).toISOString()}`))).toEqual([a]);
      expect(ids(await list(admin, `?since=${encodeURIComponent('2031-06-01T14:05:00+02:00')}&until=${at(20).toISOString()}`))).toEqual([b]);
      // q: title (case-insensitive substring), user (substring), id (prefix or whole, any case).
      expect(ids(await list(admin, '?q=REPORT'))).toEqual([c, a]);
      expect(ids(await list(admin, '?q=bob'))).toEqual([c, b]);
      expect(ids(await list(admin, `?q=${a}`))).toEqual([a]);
      expect(ids(await list(admin, `?q=${b.slice(0, 8).toUpperCase()}`))).toContain(b);
      expect(ids(await list(admin, '?q=%25'))).toEqual([]);
      expect(ids(await list(admin, '?q='))).toEqual([c, b, a]);
      // Filters combine.
      expect(ids(await list(admin, '?q=report&model=gpt-4o&status=completed'))).toEqual([a]);
      expect(ids(await list(admin, '?q=report&user_ref=acme:bobby'))).toEqual([c]);
    });

    it('leaves subagents\' working conversations out unless include_subagents is true', async () => {
      const t = await tenant();
      const parent = await seed(t, 'acme:alice', { updatedAt: new Date(Date.UTC(2032, 0, 1)) });
      const child = await seed(t, 'acme:alice', { parent, updatedAt: new Date(Date.UTC(2032, 0, 2)) });
      const token = await t.token();
      expect(ids(await list(token))).toEqual([parent]);
      expect(ids(await list(token, '?include_subagents=false'))).toEqual([parent]);
      const all = await list(token, '?include_subagents=true');
      expect(ids(all)).toEqual([child, parent]);
      expect(all.sessions[0]!.parent_session_id).toBe(parent);
      expect(all.sessions[1]!.parent_session_id).toBeNull();
    });

    it('shows requires_action when the session waits on a pause', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      await conversations.setRollup(db(), id, {
        status: 'requires_action',
        pending: { run_id: 'run_x', tool_calls: [], approvals: [], questions: [{ tool_call_id: 'q1', question: 'which?' }] },
      });
      const [row] = (await list(await t.token())).sessions;
      expect(row).toMatchObject({ id, status: 'requires_action', requires_action: true });
    });
  });

  describe('visibility', () => {
    let t: Awaited<ReturnType<typeof tenant>>;
    let alice: string;
    let bob: string;
    let acme2: string;
    let other: string;
    beforeAll(async () => {
      t = await tenant();
      alice = await seed(t, 'acme:alice', { updatedAt: new Date(Date.UTC(2033, 0, 4)) });
      bob = await seed(t, 'acme:bob', { updatedAt: new Date(Date.UTC(2033, 0, 3)) });
      acme2 = await seed(t, 'acme2:carol', { updatedAt: new Date(Date.UTC(2033, 0, 2)) });
      other = await seed(t, 'globex:dave', { updatedAt: new Date(Date.UTC(2033, 0, 1)) });
    });

    it('a plain token sees its own; scope acme sees acme:* but not acme2; an admin sees all; data_scope limits even an admin', async () => {
      expect(ids(await list(await t.token()))).toEqual([alice]);
      expect(ids(await list(await t.token({ scope: 'acme' })))).toEqual([alice, bob]);
      for (const role of ['admin', 'owner', 'service']) {
        expect(ids(await list(await t.token({ sub: 'ops:root', scope: 'ops:root', roles: [role] })))).toEqual([alice, bob, acme2, other]);
      }
      // Other role names (and a differently cased one) carry no privilege.
      expect(ids(await list(await t.token({ roles: ['Admin', 'editor'] })))).toEqual([alice]);
      expect(ids(await list(await t.token({ sub: 'acme2:carol', scope: 'acme2' })))).toEqual([acme2]);
      expect(ids(await list(await t.token({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'], data_scope: 'acme' })))).toEqual([alice, bob]);
      // user_ref cannot widen what a token sees.
      expect(ids(await list(await t.token(), '?user_ref=acme:bob'))).toEqual([]);
    });

    it('answers a conversation the caller may not see exactly like an unknown one, on every route', async () => {
      const plain = await t.token();
      const unknown = randomUUID();
      const elsewhere = await tenant();
      const foreign = await seed(elsewhere, 'acme:alice', {
        messages: [{ role: 'assistant', content: 'hi', model: 'gpt-4o' }],
      });
      const foreignMessage = (await db().selectFrom('messages').select('id').where('session_id', '=', foreign).executeTakeFirstOrThrow()).id;
      const requests = (id: string, messageId: string = randomUUID()): [string, RequestInit][] => [
        [`/chat/sessions/${id}/messages`, {}],
        [`/chat/sessions/${id}/fork`, { method: 'POST' }],
        [`/chat/sessions/${id}`, { method: 'DELETE' }],
        [`/chat/sessions/${id}/messages/${messageId}/feedback`, { method: 'PUT', body: JSON.stringify({ rating: 'up' }) }],
        [`/chat/sessions/${id}/messages/${messageId}/feedback`, { method: 'DELETE' }],
        [`/chat/sessions/${id}/events`, {}],
        [`/chat/sessions/${id}`, { method: 'PATCH', body: JSON.stringify({ title: 'x' }) }],
        // Not visible is answered before the body or query is validated.
        [`/chat/sessions/${id}`, { method: 'PATCH', body: JSON.stringify({ title: 42 }) }],
        [`/chat/sessions/${id}/messages/${messageId}/feedback`, { method: 'PUT', body: JSON.stringify({ rating: 'meh' }) }],
        [`/chat/sessions/${id}/messages?limit=0`, {}],
        [`/chat/sessions/${id}/events?after=not-a-uuid`, {}],
      ];
      for (const id of [unknown, bob, acme2, foreign]) {
        for (const [path, init] of requests(id, id === foreign ? foreignMessage : undefined)) {
          const res = await rt.endUser(path, plain, init);
          expect(res.status, `${init.method ?? 'GET'} ${path}`).toBe(404);
          expect(await res.json()).toMatchObject({ detail: `session ${id} not found` });
        }
      }
      // Nothing was deleted or written on the way.
      expect(ids(await list(await t.token({ roles: ['admin'] })))).toEqual([alice, bob, acme2, other]);
      expect((await rt.endUser(`/chat/sessions/${foreign}/messages`, await elsewhere.mint({ sub: 'acme:alice', scope: 'acme:alice' }))).status).toBe(200);
    });

    it('refuses a token without capability chat with 403, and a malformed session id with 422', async () => {
      const noChat = await t.token({ capabilities: ['documents:read'] });
      for (const path of ['/chat/sessions', '/chat/sessions/models', `/chat/sessions/${alice}/messages`, '/chat/feedback']) {
        const res = await rt.endUser(path, noChat);
        expect(res.status, path).toBe(403);
        expect(await res.json()).toMatchObject({ detail: "conversations need capability 'chat', which this token does not hold", code: 'capability_denied' });
      }
      const res = await rt.endUser('/chat/sessions/not-a-uuid/messages', await t.token());
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ detail: [{ loc: ['path', 'session_id'], msg: 'session_id must be a UUID' }] });
      expect((await rt.endUser('/chat/sessions', 'not-a-token')).status).toBe(401);
    });
  });

  describe('GET /chat/sessions/models', () => {
    it('lists, sorted and distinct, the rollup and assistant models of the visible conversations only', async () => {
      const t = await tenant();
      await seed(t, 'acme:alice', {
        model: 'gpt-4o',
        messages: [
          { role: 'user', content: 'hi', model: 'user-model-ignored' },
          { role: 'assistant', content: 'hello', model: 'claude-3' },
        ],
      });
      const parent = await seed(t, 'acme:alice', { model: 'gpt-4o' });
      await seed(t, 'acme:alice', { parent, model: 'subagent-model' });
      await seed(t, 'acme:alice');
      await seed(t, 'acme:bob', { model: 'bobs-model', messages: [{ role: 'assistant', content: 'x', model: 'bobs-assistant' }] });
      const res = await rt.endUser('/chat/sessions/models', await t.token());
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(['claude-3', 'gpt-4o', 'subagent-model']);
      expect(await (await rt.endUser('/chat/sessions/models', await t.token({ roles: ['admin'] }))).json()).toEqual([
        'bobs-assistant',
        'bobs-model',
        'claude-3',
        'gpt-4o',
        'subagent-model',
      ]);
    });
  });

  describe('GET /chat/sessions/{session_id}/messages', () => {
    it('answers every message oldest first with tool calls parsed and the caller\'s own vote', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      const [user, assistant, tool, final] = await conversations.append(t.tenantId, id, [
        { role: 'user', content: 'weather in Paris?', runId: 'run_1' },
        {
          role: 'assistant',
          content: '',
          runId: 'run_1',
          model: 'gpt-4o',
          toolCalls: [
            { id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' },
            { id: 'call_2', name: 'raw', arguments: 'not json' },
          ],
        },
        { role: 'tool', content: 'sunny', runId: 'run_1', toolCallId: 'call_1', name: 'weather' },
        { role: 'assistant', content: 'It is sunny.', runId: 'run_1', model: 'gpt-4o' },
      ]);
      const token = await t.token();
      // Another person's vote is not shown as the caller's.
      await db()
        .insertInto('message_feedback')
        .values({ tenant_id: t.tenantId, message_id: final!.id, subject: 'acme:bob', rating: 'down', comment: 'meh', model: 'gpt-4o', updated_at: new Date() })
        .execute();
      expect((await rt.endUser(`/chat/sessions/${id}/messages/${final!.id}/feedback`, token, { method: 'PUT', body: JSON.stringify({ rating: 'up', comment: 'great' }) })).status).toBe(200);

      const res = await rt.endUser(`/chat/sessions/${id}/messages`, token);
      expect(res.status).toBe(200);
      const messages = (await res.json()) as MessageOutput[];
      expect(messages.map((m) => m.id)).toEqual([user!.id, assistant!.id, tool!.id, final!.id]);
      // Seeded without a writer, each message is the owner's.
      const common = { session_id: id, run_id: 'run_1', subject: 'acme:alice', created_at: expect.any(String) };
      expect(messages).toEqual([
        { ...common, id: user!.id, role: 'user', content: 'weather in Paris?', tool_calls: null, tool_call_id: null, name: null, model: null, feedback: null },
        {
          ...common,
          id: assistant!.id,
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: 'call_1', name: 'weather', arguments: { city: 'Paris' } },
            { id: 'call_2', name: 'raw', arguments: 'not json' },
          ],
          tool_call_id: null,
          name: null,
          model: 'gpt-4o',
          feedback: null,
        },
        { ...common, id: tool!.id, role: 'tool', content: 'sunny', tool_calls: null, tool_call_id: 'call_1', name: 'weather', model: null, feedback: null },
        { ...common, id: final!.id, role: 'assistant', content: 'It is sunny.', tool_calls: null, tool_call_id: null, name: null, model: 'gpt-4o', feedback: { rating: 'up', comment: 'great' } },
      ]);
      // Bob (seen through an admin token acting as him) sees his own vote.
      const bobs = (await (await rt.endUser(`/chat/sessions/${id}/messages`, await t.token({ sub: 'acme:bob', scope: 'acme:bob', roles: ['admin'] }))).json()) as MessageOutput[];
      expect(bobs.at(-1)!.feedback).toEqual({ rating: 'down', comment: 'meh' });
    });

    it('pages with limit (the newest), before and after a message, oldest first in every page; no page asked is every message', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      const rows = await conversations.append(
        t.tenantId,
        id,
        Array.from({ length: 5 }, (_, i) => ({ role: 'user' as const, content: `m${i + 1}` })),
      );
      const [m1, m2, , m4, m5] = rows.map((row) => row.id);
      const token = await t.token();
      const page = async (query: string) => {
        const res = await rt.endUser(`/chat/sessions/${id}/messages${query}`, token);
        expect(res.status, query).toBe(200);
        return ((await res.json()) as MessageOutput[]).map((m) => m.content);
      };
      expect(await page('')).toEqual(['m1', 'm2', 'm3', 'm4', 'm5']);
      expect(await page('?limit=1')).toEqual(['m5']);
      expect(await page('?limit=2')).toEqual(['m4', 'm5']);
      expect(await page(`?limit=2&before=${m4}`)).toEqual(['m2', 'm3']);
      expect(await page(`?limit=2&before=${m2}`)).toEqual(['m1']);
      expect(await page(`?before=${m1}`)).toEqual([]);
      expect(await page(`?limit=2&after=${m2}`)).toEqual(['m3', 'm4']);
      expect(await page(`?after=${m1}`)).toEqual(['m2', 'm3', 'm4', 'm5']);
      expect(await page(`?after=${m5}`)).toEqual([]);
      expect(await page('?limit=500')).toHaveLength(5);
      // Both cursors: the messages strictly between them, from the older end.
      expect(await page(`?after=${m1}&before=${m5}`)).toEqual(['m2', 'm3', 'm4']);
      expect(await page(`?after=${m1}&before=${m5}&limit=2`)).toEqual(['m2', 'm3']);
      expect(await page(`?after=${m4}&before=${m2}`)).toEqual([]);

      for (const query of ['?limit=0', '?limit=501', '?limit=two', '?before=nope']) {
        const res = await rt.endUser(`/chat/sessions/${id}/messages${query}`, token);
        expect(res.status, query).toBe(422);
        expect(((await res.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc[0]).toBe('query');
      }
      const elsewhere = await seed(t, 'acme:alice', { messages: [{ role: 'user', content: 'other' }] });
      const foreign = (await db().selectFrom('messages').select('id').where('session_id', '=', elsewhere).executeTakeFirstOrThrow()).id;
      const wrong = await rt.endUser(`/chat/sessions/${id}/messages?before=${foreign}`, token);
      expect(wrong.status).toBe(404);
      expect(await wrong.json()).toMatchObject({ detail: `message ${foreign} not found in session ${id}` });
    });

    it('answers an empty array for a conversation without messages', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      expect(await (await rt.endUser(`/chat/sessions/${id}/messages`, await t.token())).json()).toEqual([]);
    });
  });

  describe('POST /chat/sessions/{id}/fork', () => {
    it('copies every message in order into a new idle conversation of the caller, without the pause', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:bob', { title: 'Trip', model: 'gpt-4o' });
      const original = await conversations.append(t.tenantId, id, [
        { role: 'user', content: 'book it', runId: 'run_1', metadata: { attachments: ['a'] } },
        { role: 'assistant', content: '', runId: 'run_1', model: 'gpt-4o', toolCalls: [{ id: 'call_1', name: 'book', arguments: '{"when":"now"}' }] },
      ]);
      await conversations.setRollup(db(), id, {
        status: 'requires_action',
        pending: { run_id: 'run_1', tool_calls: [{ id: 'call_1', name: 'book', arguments: { when: 'now' } }], approvals: [], questions: [] },
      });
      // An admin can fork what it sees; the fork is its own.
      const admin = await t.token({ sub: 'acme:ops', scope: 'acme:ops', roles: ['admin'] });
      const res = await rt.endUser(`/chat/sessions/${id}/fork`, admin, { method: 'POST' });
      expect(res.status).toBe(201);
      const fork = (await res.json()) as SessionOutput;
      expect(fork).toEqual({
        id: expect.any(String),
        title: 'Trip (fork)',
        user_ref: 'acme:ops',
        model: 'gpt-4o',
        status: 'idle',
        parent_session_id: null,
        requires_action: false,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      });
      expect(fork.id).not.toBe(id);
      const copied = (await (await rt.endUser(`/chat/sessions/${fork.id}/messages`, admin)).json()) as MessageOutput[];
      expect(copied.map((m) => [m.role, m.content, m.tool_calls, m.model, m.run_id, m.session_id])).toEqual([
        ['user', 'book it', null, null, null, fork.id],
        ['assistant', '', [{ id: 'call_1', name: 'book', arguments: { when: 'now' } }], 'gpt-4o', null, fork.id],
      ]);
      expect(copied.map((m) => m.id)).not.toContain(original[0]!.id);
      const stored = await db().selectFrom('sessions').select(['pending', 'owner']).where('id', '=', fork.id).executeTakeFirstOrThrow();
      expect(stored).toEqual({ pending: null, owner: 'acme:ops' });
      expect((await db().selectFrom('messages').select('metadata').where('session_id', '=', fork.id).orderBy('seq').executeTakeFirstOrThrow()).metadata).toEqual({ attachments: ['a'] });
      // The original is untouched, and Bob does not see the admin's fork.
      expect((await (await rt.endUser(`/chat/sessions/${id}/messages`, admin)).json() as unknown[]).length).toBe(2);
      expect((await rt.endUser(`/chat/sessions/${fork.id}/messages`, await t.token({ sub: 'acme:bob', scope: 'acme:bob' }))).status).toBe(404);
    });

    it('keeps an empty title empty', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      const fork = (await (await rt.endUser(`/chat/sessions/${id}/fork`, await t.token(), { method: 'POST' })).json()) as SessionOutput;
      expect(fork).toMatchObject({ title: '', user_ref: 'acme:alice', model: null });
    });
  });

  describe('PATCH /chat/sessions/{id}', () => {
    it('sets the title for the owner (trimmed, empty clears it), and refuses a long, NUL-carrying or unknown field with 422', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      const token = await t.token();
      const patch = (body: unknown, as = token) => rt.endUser(`/chat/sessions/${id}`, as, { method: 'PATCH', body: JSON.stringify(body) });
      const res = await patch({ title: '  Trip to Lisbon ' });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ id, title: 'Trip to Lisbon', user_ref: 'acme:alice' });
      expect((await list(token)).sessions.find((s) => s.id === id)!.title).toBe('Trip to Lisbon');
      expect(await (await patch({ title: 'x'.repeat(200) })).json()).toMatchObject({ title: 'x'.repeat(200) });
      for (const [body, loc] of [
        [{ title: 'x'.repeat(201) }, ['body', 'title']],
        [{ title: 'a\u0000b' }, ['body', 'title']],
        [{ title: 7 }, ['body', 'title']],
        [{}, ['body', 'title']],
        [{ title: 'ok', owner: 'acme:bob' }, ['body']],
      ] as const) {
        const refused = await patch(body);
        expect(refused.status, JSON.stringify(body).slice(0, 40)).toBe(422);
        expect(((await refused.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc).toEqual(loc);
      }
      expect(await (await patch({ title: '' })).json()).toMatchObject({ title: '' });
    });

    it('answers 403 to a privileged role or a wide scope (they see it, they do not own it), before the body is validated', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice', { title: 'Mine' });
      for (const reader of [
        await t.token({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'] }),
        await t.token({ sub: 'ops:root', scope: 'ops:root', roles: ['owner'] }),
        await t.token({ sub: 'ops:root', scope: 'ops:root', roles: ['service'] }),
        await t.token({ sub: 'acme:bob', scope: 'acme' }),
      ]) {
        for (const body of [{ title: 'Theirs' }, { title: 'x'.repeat(999) }]) {
          const res = await rt.endUser(`/chat/sessions/${id}`, reader, { method: 'PATCH', body: JSON.stringify(body) });
          expect(res.status).toBe(403);
          expect(await res.json()).toMatchObject({ detail: `session ${id} belongs to another subject: this token may read it but not change it`, code: 'not_owner' });
        }
      }
      expect((await db().selectFrom('sessions').select('title').where('id', '=', id).executeTakeFirstOrThrow()).title).toBe('Mine');
    });
  });

  describe('DELETE /chat/sessions/{id}', () => {
    async function insertRun(t: TestTenant, sessionId: string, lease: number) {
      const id = `run_${randomUUID().replace(/-/g, '')}`;
      await db()
        .insertInto('runs')
        .values({ id, tenant_id: t.tenantId, session_id: sessionId, subject: 'acme:alice', model: 'gpt-4o', status: 'running', lease_owner: 'elsewhere', lease_expires_at: new Date(Date.now() + lease) })
        .execute();
      return id;
    }

    it('deletes the conversation with its messages, runs, steers, votes and subagent conversations; usage stays', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice', { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo', model: 'gpt-4o' }] });
      const child = await seed(t, 'acme:alice', { parent: id, messages: [{ role: 'user', content: 'sub work' }] });
      const grandchild = await seed(t, 'acme:alice', { parent: child });
      const keep = await seed(t, 'acme:alice', { messages: [{ role: 'user', content: 'keep me' }] });
      const runId = `run_${randomUUID().replace(/-/g, '')}`;
      await db().insertInto('runs').values({ id: runId, tenant_id: t.tenantId, session_id: id, subject: 'acme:alice', model: 'gpt-4o', status: 'completed' }).execute();
      await db().insertInto('run_steers').values({ tenant_id: t.tenantId, run_id: runId, message: 'faster' }).execute();
      const assistant = (await db().selectFrom('messages').select('id').where('session_id', '=', id).where('role', '=', 'assistant').executeTakeFirstOrThrow()).id;
      await db().insertInto('message_feedback').values({ tenant_id: t.tenantId, message_id: assistant, subject: 'acme:alice', rating: 'up', model: 'gpt-4o', updated_at: new Date() }).execute();
      await db()
        .insertInto('usage_records')
        .values({ tenant_id: t.tenantId, session_id: id, run_id: runId, model: 'gpt-4o', purpose: 'turn', input_tokens: 10, output_tokens: 5, cost_usd: null })
        .execute();

      const token = await t.token();
      const res = await rt.endUser(`/chat/sessions/${id}`, token, { method: 'DELETE' });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ id, deleted: true });

      const gone = [id, child, grandchild];
      expect(await db().selectFrom('sessions').select('id').where('id', 'in', gone).execute()).toEqual([]);
      expect(await db().selectFrom('messages').select('id').where('session_id', 'in', gone).execute()).toEqual([]);
      expect(await db().selectFrom('runs').select('id').where('session_id', 'in', gone).execute()).toEqual([]);
      expect(await db().selectFrom('run_steers').select('seq').where('run_id', '=', runId).execute()).toEqual([]);
      expect(await db().selectFrom('message_feedback').select('message_id').where('message_id', '=', assistant).execute()).toEqual([]);
      expect(await db().selectFrom('usage_records').select('session_id').where('tenant_id', '=', t.tenantId).execute()).toEqual([{ session_id: id }]);
      expect(ids(await list(token, '?include_subagents=true'))).toEqual([keep]);
      expect((await rt.endUser(`/chat/sessions/${id}/messages`, token)).status).toBe(404);
      // A second delete is a 404 like any unknown id.
      const again = await rt.endUser(`/chat/sessions/${id}`, token, { method: 'DELETE' });
      expect(again.status).toBe(404);
      expect(await again.json()).toMatchObject({ detail: `session ${id} not found` });
    });

    it('refuses with 409 while a turn holds a live lease (also in a subagent conversation), and deletes once the lease lapsed', async () => {
      const t = await tenant();
      const token = await t.token();
      const id = await seed(t, 'acme:alice', { messages: [{ role: 'user', content: 'hi' }] });
      const run = await insertRun(t, id, 60_000);
      const res = await rt.endUser(`/chat/sessions/${id}`, token, { method: 'DELETE' });
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ detail: 'a turn is running in this session; cancel it first or wait', code: 'turn_running' });
      expect((await rt.endUser(`/chat/sessions/${id}/messages`, token)).status).toBe(200);

      // The process holding it died: its lease lapsed.
      await db().updateTable('runs').set({ lease_expires_at: new Date(Date.now() - 1000) }).where('id', '=', run).execute();
      expect((await rt.endUser(`/chat/sessions/${id}`, token, { method: 'DELETE' })).status).toBe(200);

      const parent = await seed(t, 'acme:alice');
      const child = await seed(t, 'acme:alice', { parent });
      await insertRun(t, child, 60_000);
      expect((await rt.endUser(`/chat/sessions/${parent}`, token, { method: 'DELETE' })).status).toBe(409);
      expect(await db().selectFrom('sessions').select('id').where('id', 'in', [parent, child]).execute()).toHaveLength(2);
    });
  });

  describe('feedback', () => {
    it('takes, replaces and withdraws the caller\'s vote on an assistant message', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      const [user, assistant] = await conversations.append(t.tenantId, id, [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello', model: 'gpt-4o' },
      ]);
      const token = await t.token();
      const path = `/chat/sessions/${id}/messages/${assistant!.id}/feedback`;

      const put = await rt.endUser(path, token, { method: 'PUT', body: JSON.stringify({ rating: 'up', comment: 'nice' }) });
      expect(put.status).toBe(200);
      expect(await put.json()).toEqual({ message_id: assistant!.id, rating: 'up', comment: 'nice', model: 'gpt-4o', updated_at: expect.any(String) });
      // A second PUT replaces the vote; without a comment the old one is cleared.
      const replaced = await rt.endUser(path, token, { method: 'PUT', body: JSON.stringify({ rating: 'down' }) });
      expect(await replaced.json()).toMatchObject({ rating: 'down', comment: null, model: 'gpt-4o' });
      expect(await db().selectFrom('message_feedback').select(['subject', 'rating']).where('message_id', '=', assistant!.id).execute()).toEqual([
        { subject: 'acme:alice', rating: 'down' },
      ]);

      const deleted = await rt.endUser(path, token, { method: 'DELETE' });
      expect(deleted.status).toBe(200);
      expect(await deleted.json()).toEqual({ message_id: assistant!.id, deleted: true });
      const twice = await rt.endUser(path, token, { method: 'DELETE' });
      expect(twice.status).toBe(404);
      expect(await twice.json()).toMatchObject({ detail: `you have no feedback on message ${assistant!.id}` });

      const onUser = await rt.endUser(`/chat/sessions/${id}/messages/${user!.id}/feedback`, token, { method: 'PUT', body: JSON.stringify({ rating: 'up' }) });
      expect(onUser.status).toBe(400);
      expect(await onUser.json()).toMatchObject({ detail: 'feedback is only taken on assistant messages' });
    });

    it('refuses a message of another conversation (404), a bad rating and a long comment (422)', async () => {
      const t = await tenant();
      const id = await seed(t, 'acme:alice');
      const otherSession = await seed(t, 'acme:alice', { messages: [{ role: 'assistant', content: 'elsewhere', model: 'm' }] });
      const [assistant] = await conversations.append(t.tenantId, id, [{ role: 'assistant', content: 'x', model: 'm' }]);
      const foreign = (await db().selectFrom('messages').select('id').where('session_id', '=', otherSession).executeTakeFirstOrThrow()).id;
      const token = await t.token();
      const wrong = await rt.endUser(`/chat/sessions/${id}/messages/${foreign}/feedback`, token, { method: 'PUT', body: JSON.stringify({ rating: 'up' }) });
      expect(wrong.status).toBe(404);
      expect(await wrong.json()).toMatchObject({ detail: `message ${foreign} not found in session ${id}` });
      const path = `/chat/sessions/${id}/messages/${assistant!.id}/feedback`;
      for (const body of [{ rating: 'meh' }, { rating: 'up', comment: 'x'.repeat(2001) }, { rating: 'up', extra: true }, {}]) {
        expect((await rt.endUser(path, token, { method: 'PUT', body: JSON.stringify(body) })).status, JSON.stringify(body).slice(0, 40)).toBe(422);
      }
      expect((await rt.endUser(path, token, { method: 'PUT', body: JSON.stringify({ rating: 'up', comment: 'x'.repeat(2000) }) })).status).toBe(200);
    });

    it('GET /chat/feedback counts votes per model for privileged tokens only, within the data scope', async () => {
      const t = await tenant();
      const vote = async (owner: string, model: string | null, votes: ('up' | 'down')[]) => {
        const id = await seed(t, owner);
        const [message] = await conversations.append(t.tenantId, id, [{ role: 'assistant', content: 'a', model }]);
        for (const [i, rating] of votes.entries()) {
          await db()
            .insertInto('message_feedback')
            .values({ tenant_id: t.tenantId, message_id: message!.id, subject: `acme:voter${i}`, rating, model, updated_at: new Date() })
            .execute();
        }
      };
      await vote('acme:alice', 'gpt-4o', ['up', 'up', 'down']);
      await vote('acme:bob', 'gpt-4o', ['down']);
      await vote('globex:carol', 'claude-3', ['up']);
      await vote('acme:alice', null, ['down']);
      // Another tenant's votes never count.
      const elsewhere = await tenant();
      const foreign = await seed(elsewhere, 'acme:alice', { messages: [{ role: 'assistant', content: 'a', model: 'gpt-4o' }] });
      const foreignMessage = (await db().selectFrom('messages').select('id').where('session_id', '=', foreign).executeTakeFirstOrThrow()).id;
      await db().insertInto('message_feedback').values({ tenant_id: elsewhere.tenantId, message_id: foreignMessage, subject: 'x', rating: 'up', model: 'gpt-4o', updated_at: new Date() }).execute();

      const plain = await rt.endUser('/chat/feedback', await t.token({ scope: 'acme' }));
      expect(plain.status).toBe(403);
      expect(await plain.json()).toMatchObject({ detail: 'feedback totals need a privileged token (role admin, owner or service)' });

      const admin = await rt.endUser('/chat/feedback', await t.token({ sub: 'ops:root', scope: 'ops:root', roles: ['owner'] }));
      expect(admin.status).toBe(200);
      expect(await admin.json()).toEqual({
        models: [
          { model: 'claude-3', up: 1, down: 0, total: 1 },
          { model: 'gpt-4o', up: 2, down: 2, total: 4 },
          { model: null, up: 0, down: 1, total: 1 },
        ],
      });
      const scoped = await rt.endUser('/chat/feedback', await t.token({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'], data_scope: 'acme:bob' }));
      expect(await scoped.json()).toEqual({ models: [{ model: 'gpt-4o', up: 0, down: 1, total: 1 }] });
    });
  });
});
