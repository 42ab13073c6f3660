// Runs are durable and detached (DESIGN.md "Runs"): a second turn on a busy session is 409, cancel and steer reach
// the run, a client that leaves does not stop it, resume replays then follows, and on the scale setup all of it works
// across two runtime processes sharing Redis and PostgreSQL, including a process that dies mid-run.
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runLogKey } from '@agentplane/runtime/chat/runs';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { availableSetups, ScaleServices, startTestRuntime, type TestRuntime } from '../harness/runtime.js';
import { allEvents, sseEvents, type SseEvent } from '../harness/sse.js';
import { chatWorld, eventually, MODEL, OTHER_MODEL, type ChatWorld } from './fixture.js';

const slow = (words: number, dripMs = 60) => ({ text: Array.from({ length: words }, (_, i) => `w${i}`).join(' '), dripMs });

/** Reads a stream until its `start` frame and returns it with the rest of the stream. */
async function startOf(response: Response) {
  const events = sseEvents(response);
  const first = await events.next();
  const start = first.value as SseEvent;
  expect(start.event).toBe('start');
  return { start: start.data as { run_id: string; session_id: string }, rest: events };
}

async function drain(events: AsyncGenerator<SseEvent>): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

describe('runs (embedded)', () => {
  let world: ChatWorld;

  beforeAll(async () => {
    world = await chatWorld();
  }, 60_000);
  beforeEach(() => world.fake.clearScripts());
  afterAll(async () => world?.stop());

  it('refuses a second turn on a session while one runs (409 turn_running)', async () => {
    const token = await world.token();
    world.fake.script(slow(15));
    const { start, rest } = await startOf(await world.stream(token, { message: 'long one' }));
    const second = await world.chat(token, { message: 'me too', session_id: start.session_id });
    expect(second.status).toBe(409);
    const busy = (await second.json()) as Record<string, unknown>;
    // The refused turn was never created: it names the busy conversation and no run.
    expect(busy).toMatchObject({ code: 'turn_running', session_id: start.session_id });
    expect(busy).not.toHaveProperty('run_id');
    expect(second.headers.get('x-run-id')).toBeNull();
    const streamed = await world.streamAll(token, { message: 'me too', session_id: start.session_id });
    expect(streamed.response.headers.get('x-run-id')).toBeNull();
    expect(streamed.events.map((e) => e.data)).toEqual([
      { type: 'error', status: 409, code: 'turn_running', message: expect.any(String), retryable: false, run_id: null, session_id: start.session_id },
    ]);
    const frames = await drain(rest);
    expect(frames.at(-1)!.event).toBe('done');
  });

  it('cancels a running turn: the provider call is aborted, the run ends cancelled, and cancel stays 202', async () => {
    const token = await world.token();
    world.fake.script(slow(60, 50));
    const { start, rest } = await startOf(await world.stream(token, { message: 'ramble' }));
    await rest.next(); // a token arrived: the provider is mid-answer
    const providerCall = world.fake.requestsTo('/chat/completions').at(-1)!;
    const cancelled = await world.rt.endUser(`/chat/stream/${start.run_id}/cancel`, token, { method: 'POST' });
    expect(cancelled.status).toBe(202);
    const frames = await drain(rest);
    expect(frames.at(-1)).toMatchObject({ event: 'done', data: { finish_reason: 'cancelled', requires_action: false } });
    expect(await world.fake.ended(providerCall)).toBe('client_closed');
    const again = await world.rt.endUser(`/chat/stream/${start.run_id}/cancel`, token, { method: 'POST' });
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({ run_id: start.run_id, accepted: true, status: 'cancelled' });
    const unknown = await world.rt.endUser('/chat/stream/run_000000000000000000000000/cancel', token, { method: 'POST' });
    expect(unknown.status).toBe(202);
    expect(await unknown.json()).toMatchObject({ accepted: true, status: null });
    // What it wrote before the cancel stays readable.
    const messages = (await (await world.rt.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as { role: string; content: string }[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('picks up a steer message at the next step boundary, as a normal user message', async () => {
    const token = await world.token();
    world.fake.script(slow(10), 'Cats, as asked.');
    const { start, rest } = await startOf(await world.stream(token, { message: 'tell me about dogs' }));
    const steered = await world.rt.endUser(`/chat/stream/${start.run_id}/steer`, token, { method: 'POST', body: JSON.stringify({ message: 'also cats' }) });
    expect(steered.status).toBe(202);
    expect(await steered.json()).toMatchObject({ run_id: start.run_id, accepted: true });
    const frames = await drain(rest);
    expect(frames.at(-1)).toMatchObject({ event: 'done', data: { content: 'Cats, as asked.' } });
    const second = world.fake.chatRequests().at(-1)!;
    expect(second.messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'tell me about dogs'],
      ['assistant', slow(10).text],
      ['user', 'also cats'],
    ]);
    const late = await world.rt.endUser(`/chat/stream/${start.run_id}/steer`, token, { method: 'POST', body: JSON.stringify({ message: 'too late' }) });
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({ code: 'run_not_running' });
    const noCapability = await world.token({ capabilities: ['chat'] });
    const refused = await world.rt.endUser(`/chat/stream/${start.run_id}/steer`, noCapability, { method: 'POST', body: JSON.stringify({ message: 'x' }) });
    expect(refused.status).toBe(403);
    // Reading a run's stream needs `chat` too, answered before the run is looked up.
    const notChat = await world.token({ capabilities: ['steer'] });
    const unread = await world.rt.endUser(`/chat/stream/${start.run_id}`, notChat);
    expect(unread.status).toBe(403);
    expect(await unread.json()).toMatchObject({ code: 'capability_denied' });
  });

  it('goes on when the client disconnects, and resume replays everything after Last-Event-ID', async () => {
    const token = await world.token();
    world.fake.script(slow(12, 30));
    const controller = new AbortController();
    const response = await world.rt.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'go on without me' }), signal: controller.signal });
    const { start } = await startOf(response);
    controller.abort();
    const run = await eventually(async () => {
      const row = await world.rt.runtime.runs.get(start.run_id);
      return row?.status === 'completed' ? row : undefined;
    }, 'the run to complete');
    expect(run.finish_reason).toBeNull();
    const full = await allEvents(await world.rt.endUser(`/chat/stream/${start.run_id}`, token));
    expect(full[0]!.event).toBe('start');
    expect(full.at(-1)).toMatchObject({ event: 'done', data: { content: slow(12).text } });
    const later = await allEvents(await world.rt.endUser(`/chat/stream/${start.run_id}`, token, { headers: { 'Last-Event-ID': '3' } }));
    expect(later.map((e) => Number(e.id))).toEqual(full.slice(3).map((e) => Number(e.id)));
    const byQuery = await allEvents(await world.rt.endUser(`/chat/stream/${start.run_id}?last_event_id=${full.length - 1}`, token));
    expect(byQuery.map((e) => e.event)).toEqual(['done']);
  });

  it('answers a run whose frames are gone with one terminal error frame naming the conversation, and an unknown id with 404', async () => {
    const token = await world.token();
    world.fake.script('short');
    const done = (await (await world.chat(token, { message: 'hi' })).json()) as { run_id: string; session_id: string };
    await world.rt.runtime.events.deleteByPrefix(runLogKey(world.tenant.tenantId, done.run_id));
    const res = await world.rt.endUser(`/chat/stream/${done.run_id}`, token);
    expect(res.status).toBe(200);
    const frames = await allEvents(res);
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ event: 'error', data: { code: 'run_events_expired', session_id: done.session_id, status: 404, retryable: false } });
    expect((frames[0]!.data as { message: string }).message).toContain(done.session_id);
    expect((await world.rt.endUser('/chat/stream/run_ffffffffffffffffffffffff', token)).status).toBe(404);
  });

  it('does not let another user resume, steer or see a run of a conversation they cannot see', async () => {
    const token = await world.token();
    world.fake.script('mine');
    const done = (await (await world.chat(token, { message: 'private' })).json()) as { run_id: string };
    const bob = await world.token({ sub: 'acme:bob', scope: 'acme:bob' });
    const resume = await world.rt.endUser(`/chat/stream/${done.run_id}`, bob);
    expect(resume.status).toBe(404);
    expect(await resume.json()).toMatchObject({ detail: `run ${done.run_id} not found` });
    const cancel = await world.rt.endUser(`/chat/stream/${done.run_id}/cancel`, bob, { method: 'POST' });
    expect(await cancel.json()).toMatchObject({ status: null });
  });

  it('titles a new conversation when auto_title is on', async () => {
    const token = await world.token({ capabilities: ['chat', 'auto_title'] });
    world.fake.script('The answer.', 'Trip to Rome');
    const done = (await (await world.chat(token, { message: 'plan a trip to Rome' })).json()) as { session_id: string };
    const session = await eventually(async () => {
      const res = (await (await world.rt.endUser(`/chat/sessions?q=${done.session_id}`, token)).json()) as { sessions: { title: string }[] };
      return res.sessions[0]?.title === 'Trip to Rome' ? res.sessions[0] : undefined;
    }, 'the title');
    expect(session.title).toBe('Trip to Rome');
  });

  it('suggests follow-ups and a recap without storing anything', async () => {
    const token = await world.token();
    world.fake.script('Rome is lovely.');
    const done = (await (await world.chat(token, { message: 'Rome?' })).json()) as { session_id: string };
    world.fake.script('1. What about Florence?\n- Best time to go?\nWhere to eat?', 'You asked about Rome and heard it is lovely.');
    const followups = await world.rt.endUser(`/chat/sessions/${done.session_id}/followups`, token, { method: 'POST', body: JSON.stringify({ count: 3 }) });
    expect(followups.status).toBe(200);
    expect(await followups.json()).toEqual({ followups: ['What about Florence?', 'Best time to go?', 'Where to eat?'] });
    const recap = await world.rt.endUser(`/chat/sessions/${done.session_id}/recap`, token, { method: 'POST' });
    expect(await recap.json()).toEqual({ recap: 'You asked about Rome and heard it is lovely.' });
    const messages = (await (await world.rt.endUser(`/chat/sessions/${done.session_id}/messages`, token)).json()) as unknown[];
    expect(messages).toHaveLength(2);
    const limited = await world.token({ capabilities: ['chat'] });
    expect((await world.rt.endUser(`/chat/sessions/${done.session_id}/recap`, limited, { method: 'POST' })).status).toBe(403);
  });

  it('saves the text of an answer as it streams, and the conversation\'s followers get the message once, settled', async () => {
    const token = await world.token();
    world.fake.script(slow(40, 100));
    const { start, rest } = await startOf(await world.stream(token, { message: 'take your time' }));
    const stopFollowing = new AbortController();
    const followed = sseEvents(await world.rt.endUser(`/chat/sessions/${start.session_id}/events`, token, { signal: stopFollowing.signal }));
    // Mid-answer, what has streamed so far is already in the session (a crash would not lose it all).
    const partial = await eventually(async () => {
      const messages = (await (await world.rt.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as { role: string; content: string }[];
      const assistant = messages.find((m) => m.role === 'assistant');
      return assistant && assistant.content !== '' && assistant.content !== slow(40).text ? assistant : undefined;
    }, 'part of the answer in the session');
    expect(slow(40).text.startsWith(partial.content)).toBe(true);
    const frames = await drain(rest);
    expect(frames.at(-1)).toMatchObject({ event: 'done', data: { content: slow(40).text } });
    const messages = (await (await world.rt.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as { id: string; role: string; content: string }[];
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'take your time'],
      ['assistant', slow(40).text],
    ]);
    expect((frames.at(-1)!.data as { message_id: string }).message_id).toBe(messages[1]!.id);
    // The follower saw no draft: its first message is the settled answer.
    const first = (await followed.next()).value as SseEvent;
    expect(first).toMatchObject({ event: 'message', data: { id: messages[1]!.id, role: 'assistant', content: slow(40).text } });
    stopFollowing.abort();
  });

  // Last: draining is for good.
  it('keeps streaming a run while the process drains, to its done frame, and exits idle', async () => {
    const token = await world.token();
    world.fake.script(slow(20, 40));
    const { start, rest } = await startOf(await world.stream(token, { message: 'deploy now' }));
    const drained = world.rt.runtime.lifecycle.drain([world.rt.server], 30_000);
    const frames = await drain(rest);
    expect(frames.at(-1)).toMatchObject({ event: 'done', data: { run_id: start.run_id, content: slow(20).text } });
    expect(await drained).toBe('idle');
    expect(await world.rt.runtime.runs.get(start.run_id)).toMatchObject({ status: 'completed' });
  });
});

describe('runs cut off by the end of a drain (embedded)', () => {
  it('end with a retryable error frame, keep the text streamed so far, and leave the conversation free', async () => {
    const world = await chatWorld();
    try {
      const token = await world.token();
      world.fake.script(slow(400, 50));
      const { start, rest } = await startOf(await world.stream(token, { message: 'too long for the grace' }));
      await rest.next();
      const drained = world.rt.runtime.lifecycle.drain([world.rt.server], 100, 30_000);
      const frames = await drain(rest);
      expect(frames.at(-1)).toMatchObject({
        event: 'error',
        data: { status: 500, code: 'run_interrupted', retryable: true, run_id: start.run_id, session_id: start.session_id },
      });
      expect(await drained).toBe('timeout');
      expect(await world.rt.runtime.runs.get(start.run_id)).toMatchObject({ status: 'failed', error: { code: 'run_interrupted' } });
      const rows = await world.rt.runtime.database.db.selectFrom('messages').selectAll().where('session_id', '=', start.session_id).orderBy('seq').execute();
      expect(rows.map((row) => row.role)).toEqual(['user', 'assistant']);
      expect(rows[1]!.metadata).toEqual({ incomplete: true });
      expect(slow(400).text.startsWith(rows[1]!.content)).toBe(true);
      expect(rows[1]!.content).not.toBe('');
      const session = await world.rt.runtime.database.db.selectFrom('sessions').select('status').where('id', '=', start.session_id).executeTakeFirstOrThrow();
      expect(session.status).toBe('failed');
    } finally {
      await world.stop();
    }
  });
});

describe.runIf(availableSetups().includes('scale'))('runs across two processes (scale)', () => {
  let services: ScaleServices;
  let fake: FakeOpenAIServer;
  let env: Record<string, string>;
  let first: ChatWorld;
  let second: TestRuntime;

  beforeAll(async () => {
    services = await ScaleServices.start();
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL] });
    env = { ...(await services.env()), RUN_LEASE_SECONDS: '1', PROVIDER_TIMEOUT_MS: '30000' };
    first = await chatWorld(env, { fake });
    second = await startTestRuntime({ env: { ...env, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' }, adminKey: first.rt.adminKey });
  }, 120_000);
  beforeEach(() => fake.clearScripts());
  afterAll(async () => {
    await second?.stop();
    await first?.stop();
    await fake?.stop();
    await services?.stop();
  });

  it('resumes on another process with Last-Event-ID, and cancel from there reaches the run', async () => {
    const token = await first.token();
    fake.script(slow(30, 40));
    const { start, rest } = await startOf(await first.stream(token, { message: 'across' }));
    await rest.next();
    await rest.next();
    const elsewhere = await second.endUser(`/chat/stream/${start.run_id}`, token, { headers: { 'Last-Event-ID': '2' } });
    expect(elsewhere.status).toBe(200);
    const reader = sseEvents(elsewhere);
    const next = (await reader.next()).value as SseEvent;
    expect(Number(next.id)).toBe(3);
    const cancel = await second.endUser(`/chat/stream/${start.run_id}/cancel`, token, { method: 'POST' });
    expect(cancel.status).toBe(202);
    const tail = await drain(reader);
    expect(tail.at(-1)).toMatchObject({ event: 'done', data: { finish_reason: 'cancelled' } });
    const ids = [3, ...tail.map((e) => Number(e.id))];
    expect(ids).toEqual(ids.map((_, i) => i + 3));
  });

  it('a pause written on one process is answered on the other', async () => {
    const token = await first.token();
    const tool = { name: 'get_time', description: 'The time', parameters: { type: 'object' } };
    fake.script({ toolCalls: [{ id: 'call_t', name: 'get_time', arguments: {} }] }, 'It is noon.');
    const paused = (await (await first.chat(token, { message: 'time?', tools: [tool] })).json()) as { session_id: string; requires_action: boolean };
    expect(paused.requires_action).toBe(true);
    const answered = await second.endUser('/chat', token, {
      method: 'POST',
      body: JSON.stringify({ session_id: paused.session_id, tools: [tool], tool_results: [{ tool_call_id: 'call_t', content: '12:00' }] }),
    });
    expect(answered.status).toBe(200);
    expect(await answered.json()).toMatchObject({ content: 'It is noon.', requires_action: false });
  });

  it('an EventSource client reconnects to the other process with Last-Event-ID and misses nothing', async () => {
    const token = await first.token();
    fake.script(slow(20, 40));
    const { start, rest } = await startOf(await first.stream(token, { message: 'standard client' }));
    // The first process's connections are cut below; the stream that started the run goes with them.
    void drain(rest).catch(() => undefined);
    const targets = [first.rt, second];
    const seenLastEventIds: (string | null)[] = [];
    let connections = 0;
    const received: { id: string; type: string }[] = [];
    await new Promise<void>((resolve, reject) => {
      const source = new EventSource(`${first.rt.url}/chat/stream/${start.run_id}`, {
        fetch: (input, init) => {
          const target = targets[Math.min(connections, 1)]!;
          connections += 1;
          const headers = new Headers(init?.headers);
          seenLastEventIds.push(headers.get('last-event-id'));
          headers.set('authorization', `Bearer ${token}`);
          return fetch(String(input).replace(first.rt.url, target.url), { ...init, headers });
        },
      });
      const onFrame = (event: MessageEvent) => {
        // EventSource also fires `error` for a lost connection (no data): that is a reconnect, not our error frame.
        if (event.type === 'error' && event.data === undefined) return;
        received.push({ id: event.lastEventId, type: event.type });
        // Cut the first connection mid-run, from the server side: the client must reconnect by itself.
        if (received.length === 4) first.rt.server.closeAllConnections();
        if (event.type === 'done' || event.type === 'error') {
          source.close();
          resolve();
        }
      };
      for (const type of ['start', 'token', 'tool_start', 'tool_end', 'done', 'error']) source.addEventListener(type, onFrame);
      setTimeout(() => reject(new Error(`no terminal frame; received ${JSON.stringify(received)}`)), 20_000).unref();
    });
    expect(connections).toBeGreaterThanOrEqual(2);
    expect(seenLastEventIds[0]).toBeNull();
    expect(seenLastEventIds[1]).toBe('4');
    expect(received.map((frame) => Number(frame.id))).toEqual(received.map((_, i) => i + 1));
    expect(received.at(-1)!.type).toBe('done');
  });

  it('fails a run whose process died once its lease lapses, and says so to a resuming client', async () => {
    const doomedFake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL] });
    const doomed = await startTestRuntime({ env: { ...env, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' }, adminKey: first.rt.adminKey });
    try {
      const token = await first.token();
      fake.script('hang');
      const { start } = await startOf(await doomed.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'never answered' }) }));
      // The process goes away without finishing its run (its lease is no longer renewed).
      await doomed.stop();
      const frames = await allEvents(await second.endUser(`/chat/stream/${start.run_id}`, token, { headers: { 'Last-Event-ID': '1' } }));
      expect(frames).toHaveLength(1);
      expect(frames[0]).toMatchObject({ event: 'error', data: { status: 500, code: 'run_lost', session_id: start.session_id, retryable: true } });
      const row = await second.runtime.runs.get(start.run_id);
      expect(row).toMatchObject({ status: 'failed' });
      // The conversation is free again.
      fake.clearScripts();
      fake.script('back');
      const again = await first.chat(token, { message: 'retry', session_id: start.session_id });
      expect(again.status).toBe(200);
    } finally {
      await doomedFake.stop();
    }
  });

  it('keeps the text a dead process had streamed: its draft is settled when the run is swept as lost', async () => {
    const doomed = await startTestRuntime({ env: { ...env, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' }, adminKey: first.rt.adminKey });
    const token = await first.token();
    fake.script(slow(400, 50));
    const { start } = await startOf(await doomed.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'die mid-answer' }) }));
    const draft = await eventually(async () => {
      const messages = (await (await second.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as { role: string; content: string }[];
      const assistant = messages.find((m) => m.role === 'assistant');
      return assistant && assistant.content !== '' ? assistant : undefined;
    }, 'the streamed text to be saved');
    await doomed.stop();
    const frames = await allEvents(await second.endUser(`/chat/stream/${start.run_id}`, token, { headers: { 'Last-Event-ID': '1' } }));
    expect(frames.at(-1)).toMatchObject({ event: 'error', data: { status: 500, code: 'run_lost', retryable: true } });
    const rows = await second.runtime.database.db.selectFrom('messages').selectAll().where('session_id', '=', start.session_id).orderBy('seq').execute();
    expect(rows.map((row) => row.role)).toEqual(['user', 'assistant']);
    expect(rows[1]!.content.startsWith(draft.content)).toBe(true);
    expect(slow(400).text.startsWith(rows[1]!.content)).toBe(true);
    expect(rows[1]!.metadata).toEqual({ incomplete: true });
  });
});
