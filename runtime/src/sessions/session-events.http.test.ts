// Following a conversation (`GET /chat/sessions/{id}/events`) through HTTP, in both setups: new messages arrive as
// `message` frames with their ids, a client resumes with `after` or `Last-Event-ID`, messages of other conversations
// never show, a lost notice only delays a message, and the stream ends with one `error` frame when the
// conversation is deleted or leaves the caller's sight, or the token expires.
import { randomUUID } from 'node:crypto';
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableSetups, configuredTenant, ScaleServices, startTestRuntime, type TestRuntime, type TestTenant } from '@agentplane/test/harness/runtime';
import type { Conversations } from './conversations.js';
import type { MessageOutput } from './schemas.js';

interface Frame {
  id?: string;
  event?: string;
  data: unknown;
}

/** A raw reader of one event stream: every frame as it arrives, and whether the server ended it. */
interface Stream {
  status: number;
  frames: Frame[];
  ended: Promise<void>;
  /** Resolves once `count` frames arrived (fails after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<Frame[]>;
  close(): void;
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(availableSetups())('session events (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let rt: TestRuntime;
  let conversations: Conversations;
  let t: TestTenant;
  let token: string;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    rt = await startTestRuntime({ env: (await services?.env()) ?? {} });
    conversations = rt.runtime.conversations;
    t = await configuredTenant(rt, { ceiling: { capabilities: ['chat'] } });
    token = await t.mint({ sub: 'acme:alice', scope: 'acme:alice' });
  });
  afterAll(async () => {
    await rt?.stop();
    await services?.stop();
  });

  const db = () => rt.runtime.database.db;
  const newSession = async (owner = 'acme:alice') => (await conversations.createSession(db(), { tenantId: t.tenantId, owner })).id;
  const say = async (sessionId: string, content: string) => (await conversations.append(t.tenantId, sessionId, [{ role: 'assistant', content, model: 'gpt-4o' }]))[0]!;

  async function open(path: string, headers: Record<string, string> = {}, bearer = token): Promise<Stream> {
    const controller = new AbortController();
    const res = await fetch(`${rt.url}${path}`, { headers: { authorization: `Bearer ${bearer}`, ...headers }, signal: controller.signal });
    const frames: Frame[] = [];
    const ended = (async () => {
      if (!res.body || !res.headers.get('content-type')?.startsWith('text/event-stream')) return;
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body) {
          buffer += decoder.decode(chunk as Uint8Array, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const frame: Partial<Frame> = {};
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) frame.id = line.slice(4);
              else if (line.startsWith('event: ')) frame.event = line.slice(7);
              else if (line.startsWith('data: ')) frame.data = JSON.parse(line.slice(6));
            }
            if ('data' in frame) frames.push(frame as Frame);
          }
        }
      } catch {
        // Aborted by close().
      }
    })();
    return {
      status: res.status,
      frames,
      ended,
      async waitFor(count, timeoutMs = 5_000) {
        await until(() => frames.length >= count, timeoutMs, `${count} frames (have ${frames.length})`);
        return frames;
      },
      close: () => controller.abort(),
    };
  }

  it('delivers messages appended after connecting, with their ids, and resumes after a given message (EventSource)', async () => {
    const sessionId = await newSession();
    const other = await newSession();
    await say(sessionId, 'before connecting');
    const received: MessageEvent[] = [];
    const connect = (query = '') =>
      new EventSource(`${rt.url}/chat/sessions/${sessionId}/events${query}`, {
        fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, authorization: `Bearer ${token}` } }),
      });
    const source = connect();
    source.addEventListener('message', (event) => received.push(event));
    await new Promise<void>((resolve, reject) => {
      source.onopen = () => resolve();
      source.onerror = (event) => reject(new Error(`stream failed: ${event.message ?? event.code}`));
    });

    const first = await say(sessionId, 'one');
    await say(other, 'another conversation');
    const [second, third] = await conversations.append(t.tenantId, sessionId, [
      { role: 'tool', content: 'result', toolCallId: 'call_1', name: 'lookup' },
      { role: 'assistant', content: 'three', model: 'gpt-4o', toolCalls: [{ id: 'call_2', name: 'lookup', arguments: '{"q":1}' }] },
    ]);
    await until(() => received.length >= 3, 5_000, 'three messages');
    source.close();
    expect(received.map((event) => event.lastEventId)).toEqual([first.id, second!.id, third!.id]);
    const data = received.map((event) => JSON.parse(event.data as string) as MessageOutput);
    expect(data.map((m) => m.content)).toEqual(['one', 'result', 'three']);
    expect(data[2]).toEqual({
      id: third!.id,
      session_id: sessionId,
      run_id: null,
      subject: 'acme:alice',
      role: 'assistant',
      content: 'three',
      tool_calls: [{ id: 'call_2', name: 'lookup', arguments: { q: 1 } }],
      tool_call_id: null,
      name: null,
      model: 'gpt-4o',
      created_at: expect.any(String),
      feedback: null,
    });

    // Resuming after the first: the rest, then whatever comes next; never the other conversation's.
    const resumed: MessageEvent[] = [];
    const again = connect(`?after=${first.id}`);
    again.addEventListener('message', (event) => resumed.push(event));
    await until(() => resumed.length >= 2, 5_000, 'the two missed messages');
    const fourth = await say(sessionId, 'four');
    await until(() => resumed.length >= 3, 5_000, 'the next message');
    again.close();
    expect(resumed.map((event) => event.lastEventId)).toEqual([second!.id, third!.id, fourth.id]);
  });

  it('takes Last-Event-ID (what EventSource sends on reconnect) over `after`', async () => {
    const sessionId = await newSession();
    const [a, b, c] = await conversations.append(t.tenantId, sessionId, [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'b' },
      { role: 'assistant', content: 'c' },
    ]);
    const stream = await open(`/chat/sessions/${sessionId}/events?after=${a!.id}`, { 'last-event-id': b!.id });
    expect(stream.status).toBe(200);
    const frames = await stream.waitFor(1);
    stream.close();
    expect(frames).toEqual([{ id: c!.id, event: 'message', data: expect.objectContaining({ content: 'c' }) }]);
  });

  it('answers 404 before the stream for an unknown or invisible conversation and for `after` of another one; 422 for a malformed id', async () => {
    const sessionId = await newSession();
    const other = await newSession();
    const elsewhere = await say(other, 'not here');
    const bobs = await newSession('acme:bob');
    for (const id of [randomUUID(), bobs]) {
      const res = await rt.endUser(`/chat/sessions/${id}/events`, token);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ detail: `session ${id} not found` });
    }
    const wrongAfter = await rt.endUser(`/chat/sessions/${sessionId}/events?after=${elsewhere.id}`, token);
    expect(wrongAfter.status).toBe(404);
    expect(await wrongAfter.json()).toMatchObject({ detail: `message ${elsewhere.id} not found in session ${sessionId}` });
    expect((await rt.endUser(`/chat/sessions/${sessionId}/events`, token, { headers: { 'last-event-id': elsewhere.id } })).status).toBe(404);
    expect((await rt.endUser(`/chat/sessions/${sessionId}/events?after=12`, token)).status).toBe(422);
    const badHeader = await rt.endUser(`/chat/sessions/${sessionId}/events`, token, { headers: { 'last-event-id': '12' } });
    expect(badHeader.status).toBe(422);
    expect(await badHeader.json()).toMatchObject({ detail: [{ loc: ['header', 'last-event-id'], msg: 'Last-Event-ID must be a message id (a UUID)' }] });
  });

  it('ends with an error frame when the conversation is deleted', async () => {
    const sessionId = await newSession();
    const stream = await open(`/chat/sessions/${sessionId}/events`);
    expect(stream.status).toBe(200);
    const message = await say(sessionId, 'last words');
    await stream.waitFor(1);
    expect((await rt.endUser(`/chat/sessions/${sessionId}`, token, { method: 'DELETE' })).status).toBe(200);
    const frames = await stream.waitFor(2);
    await stream.ended;
    expect(frames).toEqual([
      { id: message.id, event: 'message', data: expect.objectContaining({ content: 'last words' }) },
      { event: 'error', data: { status: 404, code: 'not_found', message: `session ${sessionId} not found`, retryable: false, session_id: sessionId } },
    ]);
  });

  it('re-checks visibility before every message: a conversation moved out of the caller\'s scope ends the stream instead', async () => {
    const sessionId = await newSession();
    const stream = await open(`/chat/sessions/${sessionId}/events`);
    await db().updateTable('sessions').set({ owner: 'acme:bob' }).where('id', '=', sessionId).execute();
    await say(sessionId, 'for bob only');
    await stream.ended;
    expect(stream.frames).toEqual([{ event: 'error', data: expect.objectContaining({ status: 404, code: 'not_found' }) }]);
  });

  it('still delivers a message whose notice was lost, at the next re-read', async () => {
    const sessionId = await newSession();
    const stream = await open(`/chat/sessions/${sessionId}/events`);
    // Written inside a transaction whose writer never calls notify().
    const [row] = await db().transaction().execute((trx) => conversations.append(t.tenantId, sessionId, [{ role: 'user', content: 'quiet' }], trx));
    const frames = await stream.waitFor(1, 10_000);
    stream.close();
    expect(frames).toEqual([{ id: row!.id, event: 'message', data: expect.objectContaining({ content: 'quiet' }) }]);
  });

  it('ends with a 401 error frame when the token expires', async () => {
    const sessionId = await newSession();
    const shortLived = await t.mint({ sub: 'acme:alice', scope: 'acme:alice' }, { lifetimeSeconds: 2 });
    const stream = await open(`/chat/sessions/${sessionId}/events`, {}, shortLived);
    expect(stream.status).toBe(200);
    await Promise.race([stream.ended, new Promise((_, reject) => setTimeout(() => reject(new Error('stream did not end')), 8_000))]);
    expect(stream.frames).toEqual([
      { event: 'error', data: { status: 401, code: 'invalid_token', message: 'token expired; reconnect with a fresh token', retryable: false, session_id: sessionId } },
    ]);
  });

  it('sees a privileged token follow someone else\'s conversation', async () => {
    const sessionId = await newSession('acme:bob');
    const admin = await t.mint({ sub: 'ops:root', scope: 'ops:root', roles: ['admin'] });
    const stream = await open(`/chat/sessions/${sessionId}/events`, {}, admin);
    expect(stream.status).toBe(200);
    await say(sessionId, 'hello bob');
    const frames = await stream.waitFor(1);
    stream.close();
    expect(frames[0]).toMatchObject({ event: 'message', data: { content: 'hello bob', session_id: sessionId } });
  });
});
