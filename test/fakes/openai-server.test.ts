// The fake provider speaks the wire format the real `openai` SDK expects: streamed chunks and tool-call deltas the
// SDK's own helpers assemble, the usage chunk, OpenAI's error bodies, and the faults tests rely on.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FakeOpenAIServer } from './openai-server.js';

const apiKey = 'sk-fake-self-test-000000000000';

describe('FakeOpenAIServer', () => {
  let fake: FakeOpenAIServer;
  let client: OpenAI;

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey, chatModels: ['gpt-test'] });
    client = new OpenAI({ baseURL: fake.url, apiKey, maxRetries: 0, organization: null, project: null, logLevel: 'off' });
  });
  afterAll(async () => {
    await fake?.close();
  });

  it('streams text word by word, tool calls as deltas with split arguments, the finish reason and the usage chunk', async () => {
    fake.script({ text: 'Looking that up now.', toolCalls: [{ id: 'call_a', name: 'search', arguments: { query: 'weather in Paris' } }, { name: 'clock', arguments: '{"zone":"Europe/Paris"}' }] });
    const stream = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'weather and time in Paris?' }], stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta).toMatchObject({ role: 'assistant' });
    const texts = chunks.flatMap((chunk) => (chunk.choices[0]?.delta.content ? [chunk.choices[0].delta.content] : []));
    expect(texts).toEqual(['Looking', ' that', ' up', ' now.']);
    const argumentPieces = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls?.filter((call) => call.index === 0 && call.function?.arguments) ?? []);
    expect(argumentPieces.length).toBeGreaterThan(2);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: expect.any(Number) });
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('is assembled by the SDK\'s own stream helper into the message it describes', async () => {
    fake.script({ toolCalls: [{ id: 'call_x', name: 'search', arguments: { query: 'a' } }, { id: 'call_y', name: 'search', arguments: { query: 'b' } }], usage: { prompt_tokens: 11, completion_tokens: 7 } });
    const runner = client.chat.completions.stream({ model: 'gpt-test', messages: [{ role: 'user', content: 'two searches' }], stream_options: { include_usage: true } });
    const completion = await runner.finalChatCompletion();
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect(completion.choices[0]!.message.tool_calls).toEqual([
      { id: 'call_x', type: 'function', function: { name: 'search', arguments: '{"query":"a"}' } },
      { id: 'call_y', type: 'function', function: { name: 'search', arguments: '{"query":"b"}' } },
    ]);
    expect(completion.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
  });

  it('answers without streaming, with tool calls and usage; by default it echoes the last user message', async () => {
    fake.script({ toolCalls: [{ name: 'lookup', arguments: { id: 7 } }] });
    const called = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'look up 7' }] });
    expect(called.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null, tool_calls: [{ type: 'function', function: { name: 'lookup', arguments: '{"id":7}' } }] } });

    const echoed = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'say this back' }] });
    expect(echoed.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'say this back' } });
    expect(echoed.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(echoed.usage!.completion_tokens).toBe(3);
    expect(fake.chatRequests().at(-1)!.messages).toEqual([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'say this back' }]);
  });

  it('answers scripted errors with OpenAI\'s error body, as the SDK\'s error classes', async () => {
    const ask = () => client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
    fake.script({ status: 400, message: 'bad tools' }, { status: 401, message: 'no such key' }, { status: 429, message: 'slow down' }, { status: 500, message: 'fell over' });
    await expect(ask()).rejects.toMatchObject({ constructor: OpenAI.BadRequestError, status: 400, error: { message: 'bad tools', type: 'invalid_request_error' } });
    await expect(ask()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(ask()).rejects.toMatchObject({ constructor: OpenAI.RateLimitError, code: 'rate_limit_exceeded', error: { message: 'slow down' } });
    await expect(ask()).rejects.toMatchObject({ constructor: OpenAI.InternalServerError, error: { message: 'fell over', type: 'server_error' } });
    expect(fake.scriptsLeft).toBe(0);
  });

  it('refuses a conversation OpenAI would refuse, without using a script', async () => {
    fake.script('unused');
    await expect(
      client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'call_nobody', content: 'result' }] }),
    ).rejects.toMatchObject({ status: 400, error: { message: expect.stringContaining("messages with role 'tool' must be a response") } });
    await expect(
      client.chat.completions.create({
        model: 'gpt-test',
        messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'user', content: 'and?' }],
      }),
    ).rejects.toMatchObject({ status: 400, error: { message: expect.stringContaining('call_1') } });
    expect(fake.scriptsLeft).toBe(1);
    fake.script();
    await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'use it' }] });
    expect(fake.scriptsLeft).toBe(0);
  });

  it('hangs until the SDK gives up, and sees the client close', async () => {
    fake.script('hang');
    await expect(client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }, { timeout: 200 })).rejects.toBeInstanceOf(
      OpenAI.APIConnectionTimeoutError,
    );
    expect(await fake.ended(fake.requests.at(-1)!)).toBe('client_closed');
  });

  it('drips a stream so a client can leave mid-way, and cuts a stream after n chunks', async () => {
    fake.script({ text: 'one two three four five six seven eight', dripMs: 40 });
    const stream = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'count' }], stream: true });
    let words = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content && ++words === 2) break;
    const dripped = fake.requests.at(-1)!;
    expect(await fake.ended(dripped)).toBe('client_closed');
    expect(dripped.chunksSent).toBeLessThan(8);

    fake.script({ text: 'partial answer here', failAfterChunks: 2 });
    const cut = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'go' }], stream: true });
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of cut) if (chunk.choices[0]?.delta.content) seen.push(chunk.choices[0].delta.content);
      })(),
    ).rejects.toThrow();
    expect(seen).toEqual(['partial']);
    expect(fake.requests.at(-1)!.outcome).toBe('dropped');
  });

  it('closes at once with a hanging and a dripping request open', async () => {
    const other = await FakeOpenAIServer.start({ apiKey, chatModels: ['gpt-test'] });
    const otherClient = new OpenAI({ baseURL: other.url, apiKey, maxRetries: 0, timeout: 30_000 });
    other.script('hang', { text: 'a b c d e f g h i j', dripMs: 10_000 });
    const hanging = otherClient.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    const dripping = otherClient.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const reading = dripping.then(async (stream) => {
      for await (const _ of stream);
    }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(other.requests[1]?.chunksSent).toBeGreaterThan(0));
    // Neither request would end on its own (the drip takes 100 s, the hang forever): stop() returning is the server
    // dropping them, as their outcomes say.
    await other.stop();
    expect(await hanging).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(await reading).toBeInstanceOf(Error);
    expect(other.requests.map((request) => request.outcome)).toEqual(['dropped', 'dropped']);
  });
});

