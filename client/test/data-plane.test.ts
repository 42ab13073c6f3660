// The data-plane client against a real runtime and the protocol-level fake model: tokens from a provider (replaced
// before they expire, renewed once after a 401, one refresh for concurrent calls), streams (resumed after a cut
// connection, errors terminal or not, cancel, rejoining a run), pauses and pages.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createKeyRing } from '@agentplane/lib/tokens/keys';
import { chatWorld, MODEL, type ChatWorld } from '../../test/chat/fixture.js';
import { AuthenticationError, BadRequestError, StreamError, createDataPlaneClient, type DataPlaneOptions, type StreamFrame } from '../src/index.js';

/** A fetch that records every request it sends (method and path, and the credential sent). */
function recordingFetch(wrap: (request: Request, response: Response) => Response = (_request, response) => response) {
  const sent: { method: string; path: string; authorization: string | null; lastEventId: string | null }[] = [];
  const fetch = async (request: Request) => {
    sent.push({ method: request.method, path: new URL(request.url).pathname, authorization: request.headers.get('authorization'), lastEventId: request.headers.get('last-event-id') });
    return wrap(request, await globalThis.fetch(request));
  };
  return { fetch, sent };
}

/** A response whose body breaks, as a dropped connection does, once `cutAfter` frames have come through. */
function cutAfterFrames(response: Response, cutAfter: number): Response {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let frames = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) return controller.close();
      frames += (decoder.decode(value, { stream: true }).match(/^event: /gm) ?? []).length;
      controller.enqueue(value);
      if (frames >= cutAfter) {
        await reader.cancel();
        controller.error(new TypeError('terminated: other side closed'));
      }
    },
    cancel: () => reader.cancel(),
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

/** A response whose body breaks before anything of it arrives. */
function brokenAtOnce(response: Response): Response {
  void response.body?.cancel();
  const body = new ReadableStream<Uint8Array>({ start: (controller) => controller.error(new TypeError('terminated: other side closed')) });
  return new Response(body, { status: response.status, headers: response.headers });
}

describe('the data-plane client against the runtime', () => {
  let world: ChatWorld;
  beforeAll(async () => {
    world = await chatWorld();
  });
  afterAll(async () => {
    await world?.stop();
  });
  beforeEach(() => {
    world.fake.clearScripts();
    world.fake.clearFaults();
  });

  const client = (options: Partial<DataPlaneOptions> & Pick<DataPlaneOptions, 'token'>) =>
    createDataPlaneClient({ baseUrl: world.rt.url, reconnect: { baseDelayMs: 20 }, retry: { baseDelayMs: 20 }, ...options });

  describe('tokens', () => {
    it('asks the provider again before sending a token that expires within 60 seconds', async () => {
      const minted: string[] = [];
      const provider = async () => {
        const token = await world.tenant.mint({ capabilities: ['chat'] }, { lifetimeSeconds: 30 });
        minted.push(token);
        return token;
      };
      const { fetch, sent } = recordingFetch();
      const dp = client({ token: provider, fetch });
      for (const _ of [1, 2]) {
        for await (const _session of dp.chat.sessions()) break;
      }
      // Each call found the held token within the margin of its expiry (read from the JWT) and sent a new one.
      expect(minted).toHaveLength(2);
      expect(sent.map((request) => request.authorization)).toEqual(minted.map((token) => `Bearer ${token}`));
    });

    it('keeps a token with time left, and concurrent calls share one refresh', async () => {
      let asked = 0;
      const provider = async () => {
        asked += 1;
        await new Promise((resolve) => setTimeout(resolve, 50));
        return { token: await world.tenant.mint({ capabilities: ['chat'] }), expiresAt: new Date(Date.now() + 3_600_000) };
      };
      const dp = client({ token: provider });
      await Promise.all([1, 2, 3, 4, 5].map(() => dp.api.GET('/chat/sessions')));
      await dp.api.GET('/chat/sessions');
      expect(asked).toBe(1);
    });

    it('after a 401 asks the provider for a new token and replays the call once', async () => {
      const foreign = await createKeyRing();
      const tokens = [await world.tenant.mint({ capabilities: ['chat'] }, { key: foreign.active }), await world.tenant.mint({ capabilities: ['chat'] })];
      let asked = 0;
      const { fetch, sent } = recordingFetch();
      const dp = client({ token: async () => tokens[asked++]!, fetch });
      const { data } = await dp.api.GET('/chat/sessions');
      expect(data?.sessions).toEqual(expect.any(Array));
      expect(asked).toBe(2);
      expect(sent.map((request) => request.authorization)).toEqual(tokens.map((token) => `Bearer ${token}`));
    });

    it('replays only once: a second 401 is the caller\'s AuthenticationError', async () => {
      const foreign = await createKeyRing();
      let asked = 0;
      const { fetch, sent } = recordingFetch();
      const dp = client({ token: async () => (asked++, world.tenant.mint({ capabilities: ['chat'] }, { key: foreign.active })), fetch });
      const error = await dp.api.GET('/chat/sessions').catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(AuthenticationError);
      expect(error).toMatchObject({ status: 401, retryable: false });
      expect(asked).toBe(2);
      expect(sent).toHaveLength(2);
    });
  });

  describe('errors', () => {
    it('does not retry a 400, and the error carries the body\'s fields', async () => {
      const { fetch, sent } = recordingFetch();
      const dp = client({ token: () => world.token(), fetch });
      const error = await dp.chat.send({ message: 'hello', model: 'not-registered' }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(BadRequestError);
      expect(error).toMatchObject({ status: 400, code: expect.any(String), retryable: false, request_id: expect.any(String) });
      expect((error as BadRequestError).detail).toMatch(/model 'not-registered' is not available to this project/);
      expect(sent).toHaveLength(1);
    });
  });

  describe('streams', () => {
    it('yields typed frames in order, start to done', async () => {
      world.fake.script('Hello there, friend.');
      const dp = client({ token: () => world.token() });
      const stream = dp.chat.stream({ message: 'hi' });
      const frames: StreamFrame[] = [];
      for await (const frame of stream) frames.push(frame);
      expect(frames[0]).toMatchObject({ type: 'start', run_id: expect.any(String), session_id: expect.any(String), model: MODEL });
      expect(frames.at(-1)).toMatchObject({ type: 'done', content: 'Hello there, friend.', finish_reason: null });
      expect(frames.filter((frame) => frame.type === 'token').map((frame) => (frame as { text: string }).text).join('')).toBe('Hello there, friend.');
      expect(stream.runId).toBe((frames[0] as { run_id: string }).run_id);
    });

    it('resumes a connection cut in the middle of a stream with Last-Event-ID, missing and repeating nothing', async () => {
      const text = 'one two three four five six seven eight nine ten';
      world.fake.script({ text, dripMs: 30 });
      let cut = false;
      const { fetch, sent } = recordingFetch((request, response) => {
        if (cut || request.method !== 'POST') return response;
        cut = true;
        return cutAfterFrames(response, 4);
      });
      const dp = client({ token: () => world.token(), fetch });
      const frames: StreamFrame[] = [];
      for await (const frame of dp.chat.stream({ message: 'count' })) frames.push(frame);
      expect(frames.filter((frame) => frame.type === 'token').map((frame) => (frame as { text: string }).text).join('')).toBe(text);
      expect(frames.filter((frame) => frame.type === 'start')).toHaveLength(1);
      expect(frames.at(-1)).toMatchObject({ type: 'done', content: text });
      const resumes = sent.filter((request) => request.method === 'GET');
      expect(resumes.length).toBeGreaterThanOrEqual(1);
      expect(resumes[0]!.path).toBe(`/chat/stream/${(frames[0] as { run_id: string }).run_id}`);
      expect(Number(resumes[0]!.lastEventId)).toBeGreaterThanOrEqual(3);
    });

    it('fails with terminal true when the server sends an error frame, carrying status, code, run and session', async () => {
      world.fake.script({ status: 400, message: 'This model cannot do that' });
      const dp = client({ token: () => world.token() });
      const stream = dp.chat.stream({ message: 'hi' });
      const error = await (async () => {
        for await (const _frame of stream);
      })().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(StreamError);
      expect(error).toMatchObject({ terminal: true, status: 400, code: expect.any(String), run_id: stream.runId, session_id: expect.any(String) });
      expect(stream.runId).not.toBeNull();
    });

    it('fails with terminal false when the stream keeps stopping and reconnects do not bring it back', async () => {
      world.fake.script({ text: 'a b c d e f g h i j k l m n o p', dripMs: 50 });
      // The first connection breaks after the start frame; every reconnect breaks before a frame comes.
      const { fetch, sent } = recordingFetch((request, response) => {
        if (request.method === 'POST' && new URL(request.url).pathname === '/chat/stream') return cutAfterFrames(response, 1);
        if (request.method === 'GET') return brokenAtOnce(response);
        return response;
      });
      const dp = createDataPlaneClient({ baseUrl: world.rt.url, token: () => world.token(), fetch, reconnect: { maxReconnects: 2, baseDelayMs: 10 } });
      const stream = dp.chat.stream({ message: 'hi' });
      const error = await (async () => {
        for await (const _frame of stream);
      })().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(StreamError);
      expect(error).toMatchObject({ terminal: false, status: undefined, run_id: expect.any(String), session_id: expect.any(String) });
      expect(sent.filter((request) => request.method === 'GET')).toHaveLength(2);
      await dp.chat.cancel(stream.runId!);
    });

    it('cancels its run: the stream ends with done, finish_reason cancelled', async () => {
      world.fake.script({ text: 'a long answer that goes on and on and on and on', dripMs: 100 });
      const dp = client({ token: () => world.token() });
      const stream = dp.chat.stream({ message: 'hi' });
      let last: StreamFrame | undefined;
      for await (const frame of stream) {
        last = frame;
        if (frame.type === 'token') await stream.cancel();
      }
      expect(last).toMatchObject({ type: 'done', finish_reason: 'cancelled' });
    });

    it('rejoins a run elsewhere with resume(runId, lastEventId): the frames after that id', async () => {
      world.fake.script('alpha beta gamma');
      const token = await world.token();
      const first = client({ token: async () => token }).chat.stream({ message: 'hi' });
      const all: StreamFrame[] = [];
      for await (const frame of first) all.push(frame);
      const rejoined: StreamFrame[] = [];
      for await (const frame of client({ token: async () => token }).chat.resume(first.runId!, 2)) rejoined.push(frame);
      expect(rejoined).toEqual(all.slice(2));
    });
  });

  describe('pauses and pages', () => {
    it('answers a question the agent asked, and the turn goes on', async () => {
      world.fake.script({ toolCalls: [{ id: 'call_card', name: 'ask_user', arguments: { question: 'Which card?' } }] }, 'Charged the blue card.');
      const dp = client({ token: () => world.token() });
      const paused = await dp.chat.send({ message: 'charge me' });
      expect(paused).toMatchObject({ requires_action: true, questions: [{ tool_call_id: 'call_card', question: 'Which card?' }] });
      const answered = await dp.chat.answer(paused.session_id, [{ tool_call_id: 'call_card', answer: 'the blue one' }]);
      expect(answered).toMatchObject({ requires_action: false, content: 'Charged the blue card.' });
      expect(world.fake.chatRequests().at(-1)!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'the blue one' });
    });

    it('refuses a call waiting for approval, and returns client tool results', async () => {
      const tools = [{ name: 'pay', description: 'Pays', parameters: { type: 'object', properties: {} }, requiresApproval: true }, { name: 'lookup', description: 'Looks up', parameters: { type: 'object', properties: {} } }];
      world.fake.script({ toolCalls: [{ id: 'call_pay', name: 'pay', arguments: {} }] }, { toolCalls: [{ id: 'call_look', name: 'lookup', arguments: {} }] }, 'Found it.');
      const dp = client({ token: () => world.token() });
      const paused = await dp.chat.send({ message: 'pay', tools });
      expect(paused.approvals).toMatchObject([{ tool_call_id: 'call_pay' }]);
      const refused = await dp.chat.refuse(paused.session_id, 'call_pay', 'not today', { tools });
      expect(refused.tool_calls).toMatchObject([{ id: 'call_look', name: 'lookup' }]);
      const done = await dp.chat.returnToolResults(paused.session_id, [{ tool_call_id: 'call_look', content: { found: true } }], { tools });
      expect(done).toMatchObject({ requires_action: false, content: 'Found it.' });
    });

    it('reads every conversation a page at a time', async () => {
      const token = await world.token({ sub: 'pager', scope: 'pager' });
      const dp = client({ token: async () => token });
      for (const word of ['one', 'two', 'three']) {
        world.fake.script(word);
        await dp.chat.send({ message: word });
      }
      const { fetch, sent } = recordingFetch();
      const paged = client({ token: async () => token, fetch });
      const ids: string[] = [];
      for await (const session of paged.chat.sessions({ limit: 2 })) ids.push(session.id);
      expect(new Set(ids).size).toBe(3);
      expect(sent).toHaveLength(2);
    });
  });
});
