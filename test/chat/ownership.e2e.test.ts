// Seeing is not owning (docs/decisions/0026), in both setups: privileged roles and wide scopes read another
// subject's conversation but every change to it (a turn, a stream, steer, cancel, votes, title, delete) is 403; a
// caller who cannot see it gets the 404 of an unknown id before its body is validated; fork, a read, is allowed.
// Also: every message records the subject that wrote it, and a re-sent POST /chat/stream with Last-Event-ID resumes.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { allEvents, sseEvents, type SseEvent } from '../harness/sse.js';
import { chatWorld, eventually, type ChatWorld } from './fixture.js';

const slow = (words: number, dripMs = 40) => ({ text: Array.from({ length: words }, (_, i) => `w${i}`).join(' '), dripMs });

describe.each(availableSetups())('conversation ownership (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    world = await chatWorld(services ? await services.env() : {});
  }, 120_000);
  beforeEach(() => world.fake.clearScripts());
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });

  const db = () => world.rt.runtime.database.db;
  const alice = () => world.token({ sub: 'acme:alice', scope: 'acme:alice' });
  /** Callers who see Alice's conversation without owning it. */
  const readers = (): [string, Promise<string>][] => [
    ['role admin', world.token({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'] })],
    ['role owner', world.token({ sub: 'ops:root', scope: 'ops:root', roles: ['owner'] })],
    ['role service', world.token({ sub: 'ops:svc', scope: 'ops:svc', roles: ['service'] })],
    ['scope acme', world.token({ sub: 'acme:bob', scope: 'acme' })],
  ];
  const json = (method: string, body: unknown): RequestInit => ({ method, body: JSON.stringify(body) });

  /** A conversation of Alice's with one finished turn: its id, the run, and the assistant message. */
  async function alicesConversation() {
    world.fake.script('Hello, Alice.');
    const res = await world.chat(await alice(), { message: 'hi' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { session_id: string; run_id: string; message_id: string };
    return { sessionId: body.session_id, runId: body.run_id, messageId: body.message_id };
  }

  /** Every change a caller may try on a conversation, each with a valid body and (where it has one) an invalid one. */
  function changes(c: { sessionId: string; runId: string; messageId: string }): [string, string, RequestInit][] {
    const feedback = `/chat/sessions/${c.sessionId}/messages/${c.messageId}/feedback`;
    return [
      ['turn', '/chat', json('POST', { message: 'mine now', session_id: c.sessionId })],
      ['turn, invalid body', '/chat', json('POST', { message: 'x', session_id: c.sessionId, effort: 'extreme', bogus: 1 })],
      ['turn answering', '/chat', json('POST', { session_id: c.sessionId, tool_results: [{ tool_call_id: 'c1', content: 'x' }] })],
      ['stream', '/chat/stream', json('POST', { message: 'mine now', session_id: c.sessionId })],
      ['stream, invalid body', '/chat/stream', json('POST', { message: 42, session_id: c.sessionId })],
      ['steer', `/chat/stream/${c.runId}/steer`, json('POST', { message: 'faster' })],
      ['steer, invalid body', `/chat/stream/${c.runId}/steer`, json('POST', { message: '' })],
      ['feedback put', feedback, json('PUT', { rating: 'down' })],
      ['feedback put, invalid body', feedback, json('PUT', { rating: 'meh' })],
      ['feedback delete', feedback, { method: 'DELETE' }],
      ['title', `/chat/sessions/${c.sessionId}`, json('PATCH', { title: 'Hijacked' })],
      ['title, invalid body', `/chat/sessions/${c.sessionId}`, json('PATCH', { title: 'x'.repeat(201) })],
      ['delete', `/chat/sessions/${c.sessionId}`, { method: 'DELETE' }],
    ];
  }

  it('answers 403 not_owner to privileged roles and wide scopes on every change, before validating the body, and changes nothing', async () => {
    const c = await alicesConversation();
    const owner = await alice();
    // Alice votes, so a reader's DELETE of "its" vote would have something to hit on the message.
    expect((await world.rt.endUser(`/chat/sessions/${c.sessionId}/messages/${c.messageId}/feedback`, owner, json('PUT', { rating: 'up' }))).status).toBe(200);
    const requestsBefore = world.fake.chatRequests().length;
    for (const [who, pending] of readers()) {
      const token = await pending;
      // They do see it.
      expect((await world.rt.endUser(`/chat/sessions/${c.sessionId}/messages`, token)).status, who).toBe(200);
      for (const [what, path, init] of changes(c)) {
        const res = await world.rt.endUser(path, token, init);
        expect(res.status, `${who}: ${what}`).toBe(403);
        const body = (await res.json()) as { detail: string; code: string };
        expect(body.code, `${who}: ${what}`).toBe('not_owner');
        expect(body.detail).toMatch(/belongs to another subject/);
      }
      const cancel = await world.rt.endUser(`/chat/stream/${c.runId}/cancel`, token, { method: 'POST' });
      expect(cancel.status, `${who}: cancel`).toBe(403);
      expect(await cancel.json()).toMatchObject({ code: 'not_owner' });
    }
    // Nothing was written, voted, retitled, deleted or sent to the model.
    expect(world.fake.chatRequests()).toHaveLength(requestsBefore);
    const messages = (await (await world.rt.endUser(`/chat/sessions/${c.sessionId}/messages`, owner)).json()) as { feedback: unknown }[];
    expect(messages).toHaveLength(2);
    expect(messages[1]!.feedback).toEqual({ rating: 'up', comment: null });
    expect(await db().selectFrom('message_feedback').select('subject').where('message_id', '=', c.messageId).execute()).toEqual([{ subject: 'acme:alice' }]);
    const session = await db().selectFrom('sessions').select(['title', 'owner']).where('id', '=', c.sessionId).executeTakeFirstOrThrow();
    expect(session).toEqual({ title: '', owner: 'acme:alice' });
    expect(await db().selectFrom('runs').select('id').where('session_id', '=', c.sessionId).execute()).toEqual([{ id: c.runId }]);
  });

  it('answers another plain user (and another tenant) exactly as for a made-up id, before validating the body', async () => {
    const c = await alicesConversation();
    const carol = await world.token({ sub: 'acme:carol', scope: 'acme:carol' });
    for (const [what, path, init] of changes(c)) {
      const res = await world.rt.endUser(path, carol, init);
      expect(res.status, what).toBe(404);
      const expected = path.startsWith('/chat/stream/') ? `run ${c.runId} not found` : `session ${c.sessionId} not found`;
      expect(await res.json(), what).toMatchObject({ detail: expected });
    }
    // A made-up id gets the same words.
    const madeUp = randomUUID();
    const res = await world.rt.endUser(`/chat/sessions/${madeUp}`, carol, json('PATCH', { title: 'x'.repeat(500) }));
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ detail: `session ${madeUp} not found` });
    // Cancel of a run the caller cannot see is answered as for an unknown run: 202, nothing done.
    const cancel = await world.rt.endUser(`/chat/stream/${c.runId}/cancel`, carol, { method: 'POST' });
    expect(cancel.status).toBe(202);
    expect(await cancel.json()).toEqual({ run_id: c.runId, accepted: true, status: null });
    expect((await world.rt.endUser(`/chat/sessions/${c.sessionId}/messages`, await alice())).status).toBe(200);
  });

  it('lets the owner do all of it: invalid bodies are 422 naming the field, valid ones succeed', async () => {
    const c = await alicesConversation();
    const owner = await alice();
    const invalid = changes(c).filter(([what]) => what.endsWith('invalid body'));
    for (const [what, path, init] of invalid) {
      const res = await world.rt.endUser(path, owner, init);
      expect(res.status, what).toBe(422);
      expect(((await res.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc[0], what).toBe('body');
    }
    expect((await world.rt.endUser(`/chat/sessions/${c.sessionId}/messages/${c.messageId}/feedback`, owner, json('PUT', { rating: 'up' }))).status).toBe(200);
    expect((await world.rt.endUser(`/chat/sessions/${c.sessionId}/messages/${c.messageId}/feedback`, owner, { method: 'DELETE' })).status).toBe(200);
    const titled = await world.rt.endUser(`/chat/sessions/${c.sessionId}`, owner, json('PATCH', { title: 'Greetings' }));
    expect(titled.status).toBe(200);
    expect(await titled.json()).toMatchObject({ id: c.sessionId, title: 'Greetings', user_ref: 'acme:alice' });
    world.fake.script(slow(20));
    const response = await world.stream(owner, { message: 'go on', session_id: c.sessionId });
    const runId = response.headers.get('x-run-id')!;
    const events = sseEvents(response);
    expect((await events.next()).value).toMatchObject({ event: 'start' });
    expect((await world.rt.endUser(`/chat/stream/${runId}/steer`, owner, json('POST', { message: 'shorter' }))).status).toBe(202);
    expect((await world.rt.endUser(`/chat/stream/${runId}/cancel`, owner, { method: 'POST' }))).toMatchObject({ status: 202 });
    for await (const _event of events) {
      // drained to the terminal frame
    }
    await eventually(async () => (await world.rt.runtime.runs.get(runId))?.status !== 'running', 'the run to stop');
    expect((await world.rt.endUser(`/chat/sessions/${c.sessionId}`, owner, { method: 'DELETE' })).status).toBe(200);
  });

  it('lets a reader fork what it sees: the fork is the reader\'s own, and the copies keep who wrote them', async () => {
    const c = await alicesConversation();
    const admin = await world.token({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'] });
    const res = await world.rt.endUser(`/chat/sessions/${c.sessionId}/fork`, admin, { method: 'POST' });
    expect(res.status).toBe(201);
    const fork = (await res.json()) as { id: string; user_ref: string };
    expect(fork.user_ref).toBe('ops:root');
    // The fork is the admin's to change.
    expect((await world.rt.endUser(`/chat/sessions/${fork.id}`, admin, json('PATCH', { title: 'Mine' }))).status).toBe(200);
    const copies = await db().selectFrom('messages').select(['role', 'subject']).where('session_id', '=', fork.id).orderBy('seq').execute();
    expect(copies).toEqual([
      { role: 'user', subject: 'acme:alice' },
      { role: 'assistant', subject: 'acme:alice' },
    ]);
  });

  it('records on every stored message the subject that wrote it', async () => {
    const owner = await alice();
    world.fake.script({ toolCalls: [{ id: 'call_q', name: 'ask_user', arguments: { question: 'which city?' } }] }, 'Paris it is.');
    const paused = (await (await world.chat(owner, { message: 'weather?', enable_ask_user: true })).json()) as { session_id: string; requires_action: boolean };
    expect(paused.requires_action).toBe(true);
    const answered = await world.chat(owner, { session_id: paused.session_id, question_answers: [{ tool_call_id: 'call_q', answer: 'Paris' }] });
    expect(answered.status).toBe(200);
    const rows = await db().selectFrom('messages').select(['role', 'subject']).where('session_id', '=', paused.session_id).orderBy('seq').execute();
    expect(rows.map((row) => row.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(rows.every((row) => row.subject === 'acme:alice')).toBe(true);
    // A reader sees who wrote each message.
    const admin = await world.token({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'] });
    const shown = (await (await world.rt.endUser(`/chat/sessions/${paused.session_id}/messages`, admin)).json()) as { subject: string }[];
    expect(shown.map((m) => m.subject)).toEqual(['acme:alice', 'acme:alice', 'acme:alice', 'acme:alice']);
  });

  describe('POST /chat/stream with Last-Event-ID', () => {
    async function startOf(response: Response) {
      const events = sseEvents(response);
      const start = (await events.next()).value as SseEvent;
      expect(start.event).toBe('start');
      return start.data as { run_id: string; session_id: string };
    }

    it('resumes the latest run of the named conversation (replay after the id, then live) and starts no new turn', async () => {
      const owner = await alice();
      world.fake.script('first answer');
      const first = (await (await world.chat(owner, { message: 'one' })).json()) as { session_id: string };
      const sessionsBefore = (await db().selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).where('owner', '=', 'acme:alice').execute()).length;
      world.fake.script(slow(12, 30));
      const body = { message: 'two', session_id: first.session_id };
      const controller = new AbortController();
      const response = await world.rt.endUser('/chat/stream', owner, { method: 'POST', body: JSON.stringify(body), signal: controller.signal });
      const start = await startOf(response);
      controller.abort();
      // The client re-sends the same POST with the last id it saw.
      const resumed = await world.rt.endUser('/chat/stream', owner, { method: 'POST', body: JSON.stringify(body), headers: { 'Last-Event-ID': '1' } });
      expect(resumed.status).toBe(200);
      expect(resumed.headers.get('x-run-id')).toBe(start.run_id);
      const frames = await allEvents(resumed);
      expect(frames[0]!.event).toBe('token');
      expect(Number(frames[0]!.id)).toBe(2);
      expect(frames.at(-1)).toMatchObject({ event: 'done', data: { run_id: start.run_id, content: slow(12).text } });
      const runsOf = async () => (await db().selectFrom('runs').select('id').where('session_id', '=', first.session_id).execute()).length;
      expect(await runsOf()).toBe(2);
      const messages = (await (await world.rt.endUser(`/chat/sessions/${first.session_id}/messages`, owner)).json()) as { role: string; content: string }[];
      expect(messages.map((m) => [m.role, m.content])).toEqual([
        ['user', 'one'],
        ['assistant', 'first answer'],
        ['user', 'two'],
        ['assistant', slow(12).text],
      ]);
      // The X-Run-Id request header names the run when the POST started a new conversation (no session_id to send).
      const byRun = await allEvents(await world.rt.endUser('/chat/stream', owner, { method: 'POST', body: JSON.stringify({ message: 'two' }), headers: { 'Last-Event-ID': '0', 'X-Run-Id': start.run_id } }));
      expect(byRun[0]!.event).toBe('start');
      expect(byRun.at(-1)!.event).toBe('done');
      expect(await runsOf()).toBe(2);
      expect(await db().selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).where('owner', '=', 'acme:alice').execute()).toHaveLength(sessionsBefore);
    });

    it('refuses what it cannot resume: no run named (400), an id that is not an integer (422), a run of another conversation (404)', async () => {
      const owner = await alice();
      const noTarget = await world.rt.endUser('/chat/stream', owner, { method: 'POST', body: JSON.stringify({ message: 'x' }), headers: { 'Last-Event-ID': '3' } });
      expect(noTarget.status).toBe(400);
      expect(await noTarget.json()).toMatchObject({ code: 'nothing_to_resume' });
      const c = await alicesConversation();
      const bad = await world.rt.endUser('/chat/stream', owner, { method: 'POST', body: JSON.stringify({ message: 'x', session_id: c.sessionId }), headers: { 'Last-Event-ID': 'abc' } });
      expect(bad.status).toBe(422);
      expect(await bad.json()).toMatchObject({ detail: [{ loc: ['header', 'Last-Event-ID'], msg: 'must be a non-negative integer' }] });
      const longRun = await world.rt.endUser('/chat/stream', owner, {
        method: 'POST',
        body: JSON.stringify({ message: 'x', session_id: c.sessionId }),
        headers: { 'Last-Event-ID': '0', 'X-Run-Id': 'r'.repeat(201) },
      });
      expect(longRun.status).toBe(422);
      expect(await longRun.json()).toMatchObject({ detail: [{ loc: ['header', 'X-Run-Id'], msg: 'must be a run id (1 to 200 characters)' }] });
      const other = await alicesConversation();
      const mismatch = await world.rt.endUser('/chat/stream', owner, {
        method: 'POST',
        body: JSON.stringify({ message: 'x', session_id: c.sessionId }),
        headers: { 'Last-Event-ID': '0', 'X-Run-Id': other.runId },
      });
      expect(mismatch.status).toBe(404);
      expect(await mismatch.json()).toMatchObject({ detail: `run ${other.runId} not found` });
      // None of these started a turn.
      expect(await db().selectFrom('runs').select('id').where('session_id', '=', c.sessionId).execute()).toEqual([{ id: c.runId }]);
    });
  });
});
