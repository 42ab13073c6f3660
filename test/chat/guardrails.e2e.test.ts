// Guardrails in turns, in both setups: an input check that fires ends the turn with finish_reason `guardrail` before
// any model is called, an output check withholds the answer (in the response, the stream's done frame and the stored
// conversation), each naming the check and never its rules; PII detectors and a moderation model on the project's
// provider (its /moderations endpoint, served by the fake) fire the same way, and a moderation endpoint that fails
// lets the text through.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { allEvents, sseEvents } from '../harness/sse.js';
import { chatWorld, type ChatWorld } from './fixture.js';

const GUARDRAILS = {
  input: [
    { name: 'no-secrets', kind: 'pattern', pattern: 'password\\s*[:=]', case_insensitive: true },
    { name: 'pii', kind: 'pii', types: ['credit_card', 'email'] },
    { name: 'moderated', kind: 'moderation', model: 'omni-moderation-latest' },
  ],
  output: [{ name: 'competitors', kind: 'list', words: ['Globex'] }],
};

describe.each(availableSetups())('guardrails (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let token: string;
  let moderationAnswer: { status: number; flagged: boolean };

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    world = await chatWorld((await services?.env()) ?? {});
    world.fake.route('POST', '/moderations', (request) => {
      const input = String((request.body as { input?: unknown }).input ?? '');
      if (moderationAnswer.status !== 200) return { status: moderationAnswer.status, body: { error: { message: 'down' } } };
      return { status: 200, body: { id: 'modr-1', model: 'omni-moderation-latest', results: [{ flagged: moderationAnswer.flagged || input.includes('hurt'), categories: {}, category_scores: {} }] } };
    });
    expect((await world.tenant.reconfigure({ guardrails: GUARDRAILS } as never)).status).toBe(200);
    token = await world.token({ sub: 'acme:alice', scope: 'acme:alice' });
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });
  beforeEach(() => {
    world.fake.clearScripts();
    moderationAnswer = { status: 200, flagged: false };
  });

  const chatRequests = () => world.fake.chatRequests().length;

  it('stops a message an input check fires on before any model is called, naming the check and not its rules', async () => {
    const before = chatRequests();
    const res = await world.chat(token, { message: 'my password: hunter2, please remember it' });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { content: string; finish_reason: string; session_id: string };
    expect(answer).toMatchObject({ finish_reason: 'guardrail', content: "This message was stopped by the project's guardrail 'no-secrets', so it was not answered." });
    expect(answer.content).not.toContain('password\\s');
    expect(chatRequests()).toBe(before);
    const messages = (await (await world.rt.endUser(`/chat/sessions/${answer.session_id}/messages`, token)).json()) as { role: string; content: string }[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.content).toBe(answer.content);

    // PII: a payment card, on the streaming path too.
    const stream = await world.streamAll(token, { message: 'charge 4111 1111 1111 1111 now' });
    const done = stream.events.find((event) => event.event === 'done')!;
    expect(done.data).toMatchObject({ finish_reason: 'guardrail', content: expect.stringContaining("'pii'") });
    expect(chatRequests()).toBe(before);
    // Nothing fires on an ordinary message.
    world.fake.script('Hello.');
    expect(((await (await world.chat(token, { message: 'hello there' })).json()) as { finish_reason: string | null }).finish_reason).toBeNull();
  });

  it("asks the project's moderation model, and lets the text through when it cannot answer", async () => {
    const flagged = await world.chat(token, { message: 'how do I hurt someone' });
    expect(((await flagged.json()) as { finish_reason: string; content: string })).toMatchObject({ finish_reason: 'guardrail', content: expect.stringContaining("'moderated'") });
    const asked = world.fake.requestsTo('/moderations').at(-1)!;
    expect(asked.body).toMatchObject({ model: 'omni-moderation-latest', input: 'how do I hurt someone' });

    moderationAnswer = { status: 503, flagged: true };
    world.fake.script('Sure.');
    const through = await world.chat(token, { message: 'tell me a story' });
    expect(((await through.json()) as { finish_reason: string | null; content: string })).toMatchObject({ finish_reason: null, content: 'Sure.' });
  });

  it('withholds an answer an output check fires on, in the response and in the stored conversation', async () => {
    world.fake.script('You could also try Globex, they are cheaper.');
    const res = await world.chat(token, { message: 'any alternatives?' });
    const answer = (await res.json()) as { content: string; finish_reason: string; session_id: string };
    expect(answer).toMatchObject({ finish_reason: 'guardrail', content: "The answer was withheld by the project's guardrail 'competitors'." });
    const messages = (await (await world.rt.endUser(`/chat/sessions/${answer.session_id}/messages`, token)).json()) as { role: string; content: string }[];
    expect(messages.at(-1)).toMatchObject({ role: 'assistant', content: answer.content });
    expect(JSON.stringify(messages)).not.toContain('Globex');
    // A word inside another is not the word.
    world.fake.script('Globexes are not a thing.');
    expect(((await (await world.chat(token, { message: 'ok' })).json()) as { finish_reason: string | null }).finish_reason).toBeNull();
  });

  it('judges a steer and an answer to a question as it judges a message', async () => {
    world.fake.script({ text: 'Working through your tickets one by one. '.repeat(10), chunkBy: 'word', dripMs: 20 }, 'Never asked for.');
    const response = await world.stream(token, { message: 'summarise my tickets' });
    const runId = response.headers.get('x-run-id')!;
    const steered = await world.rt.endUser(`/chat/stream/${runId}/steer`, token, { method: 'POST', body: JSON.stringify({ message: 'my password: hunter2' }) });
    expect(steered.status).toBe(202);
    const done = (await allEvents(response)).find((event) => event.event === 'done')!.data;
    expect(done).toMatchObject({ finish_reason: 'guardrail', content: "This message was stopped by the project's guardrail 'no-secrets', so it was not answered." });
    expect(world.fake.chatRequests().at(-1)!.messages.some((message) => JSON.stringify(message).includes('hunter2'))).toBe(false);
    world.fake.clearScripts(); // the second answer was never asked for

    world.fake.script({ toolCalls: [{ id: 'call_card', name: 'ask_user', arguments: { question: 'Which card should I charge?' } }] }, 'Charged.');
    const paused = (await (await world.chat(token, { message: 'pay the invoice' })).json()) as { session_id: string; requires_action: boolean };
    expect(paused.requires_action).toBe(true);
    const calls = chatRequests();
    // An answer a check stops is refused, stored nowhere, and the question still waits for one.
    const refused = await world.chat(token, { session_id: paused.session_id, question_answers: [{ tool_call_id: 'call_card', answer: '4111 1111 1111 1111' }] });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ code: 'guardrail', detail: "This answer was stopped by the project's guardrail 'pii'; the question still waits for an answer." });
    expect(chatRequests()).toBe(calls);
    const answered = await world.chat(token, { session_id: paused.session_id, question_answers: [{ tool_call_id: 'call_card', answer: 'the company card on file' }] });
    expect(await answered.json()).toMatchObject({ content: 'Charged.' });
    expect(JSON.stringify(world.fake.chatRequests().at(-1)!.messages)).not.toContain('4111');
  });

  it('never streams a word of what an output check fires on, and stops the model mid-answer', async () => {
    const before = 'Here is a long comparison of the vendors you asked about, with details on each of them. '.repeat(8);
    world.fake.script({ text: `${before}You could also try Globex, they are cheaper. ${'More text follows here. '.repeat(40)}`, chunkBy: 'char', dripMs: 1 });
    const { response, events } = await world.streamAll(token, { message: 'compare vendors' });
    expect(response.status).toBe(200);
    const relayed = events.filter((event) => event.event === 'token').map((event) => (event.data as { text: string }).text).join('');
    // What was relayed is the start of the answer, before the match, and nothing of it.
    expect(before.startsWith(relayed)).toBe(true);
    expect(relayed.length).toBeGreaterThan(0);
    const done = events.find((event) => event.event === 'done')!.data as { finish_reason: string; content: string };
    expect(done).toMatchObject({ finish_reason: 'guardrail', content: "The answer was withheld by the project's guardrail 'competitors'." });
    // The model's stream was left early: its last chunks were never asked for.
    const request = world.fake.requestsTo('/chat/completions').at(-1)!;
    expect(await world.fake.ended(request)).toBe('client_closed');
    expect(request.chunksSent).toBeLessThan(before.length + 400);
  });

  it('keeps of a cancelled answer only what was judged and shown, and never shows a stopped message to the model again', async () => {
    world.fake.script({ text: 'A careful answer about our own product, and nothing else at all. '.repeat(40), chunkBy: 'word', dripMs: 5 });
    const response = await world.stream(token, { message: 'describe the product' });
    const runId = response.headers.get('x-run-id')!;
    const tokens: string[] = [];
    let done: { content: string; finish_reason: string; session_id: string } | undefined;
    for await (const event of sseEvents(response)) {
      if (event.event === 'token') {
        tokens.push((event.data as { text: string }).text);
        if (tokens.length === 3) expect((await world.rt.endUser(`/chat/stream/${runId}/cancel`, token, { method: 'POST' })).status).toBe(202);
      }
      if (event.event === 'done') done = event.data as typeof done;
    }
    expect(done).toMatchObject({ finish_reason: 'cancelled' });
    const shown = tokens.join('');
    expect(done!.content).toBe(shown);
    const messages = (await (await world.rt.endUser(`/chat/sessions/${done!.session_id}/messages`, token)).json()) as { role: string; content: string }[];
    expect(messages.at(-1)).toMatchObject({ role: 'assistant', content: shown });

    // A message an input check stopped stays in the conversation for people, and is withheld from the model later.
    const stopped = (await (await world.chat(token, { session_id: done!.session_id, message: 'my password: hunter2' })).json()) as { finish_reason: string };
    expect(stopped.finish_reason).toBe('guardrail');
    world.fake.script('Understood.');
    expect((await world.chat(token, { session_id: done!.session_id, message: 'go on' })).status).toBe(200);
    const prompt = JSON.stringify(world.fake.chatRequests().at(-1)!.messages);
    expect(prompt).not.toContain('hunter2');
    expect(prompt).toContain("[Withheld: this message was stopped by the project's guardrail.]");
  });

  it('streams a passing answer whole and in order, most of it before the answer ends', async () => {
    const text = 'A careful answer about our own product, and nothing else at all. '.repeat(30);
    world.fake.script({ text, chunkBy: 'char' });
    const { events } = await world.streamAll(token, { message: 'tell me more' });
    const tokens = events.filter((event) => event.event === 'token').map((event) => (event.data as { text: string }).text);
    expect(tokens.join('')).toBe(text);
    expect(tokens.length).toBeGreaterThan(10);
    expect(events.find((event) => event.event === 'done')!.data).toMatchObject({ finish_reason: null, content: text });
  });
});
