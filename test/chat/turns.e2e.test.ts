// Turns end to end through HTTP and the real `openai` SDK against the protocol-level fake: the blocking and the
// streaming path, frame order, client tools, approvals, questions and the agent loop's limits. Runs on both setups.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, MODEL, type ChatWorld } from './fixture.js';

interface ChatBody {
  run_id: string;
  session_id: string;
  message_id: string | null;
  model: string | null;
  content: string;
  finish_reason: string | null;
  requires_action: boolean;
  tool_calls: { id: string; name: string; arguments: Record<string, unknown> }[];
  approvals: { tool_call_id: string; action: string; detail: string; tool: string | null; arguments: Record<string, unknown> }[];
  questions: { tool_call_id: string; question: string; options?: string[] }[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number; cost_usd: number | null };
}

const weatherTool = {
  name: 'get_weather',
  description: 'Look up the weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

describe.each(availableSetups())('turns (%s)', (setup) => {
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

  const messagesOf = async (token: string, sessionId: string) => {
    const res = await world.rt.endUser(`/chat/sessions/${sessionId}/messages`, token);
    expect(res.status).toBe(200);
    return (await res.json()) as { role: string; content: string; tool_call_id: string | null; tool_calls: unknown }[];
  };

  it('answers a blocking turn with the model\'s text, stores both messages and records usage', async () => {
    const token = await world.token();
    world.fake.script({ text: 'Hello there, Alice.', usage: { prompt_tokens: 12, completion_tokens: 5 } });
    const res = await world.chat(token, { message: 'Hi, I am Alice' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ChatBody;
    expect(body).toMatchObject({
      content: 'Hello there, Alice.',
      finish_reason: null,
      requires_action: false,
      tool_calls: [],
      approvals: [],
      questions: [],
      model: MODEL,
      usage: { input_tokens: 12, output_tokens: 5, total_tokens: 17, cost_usd: null },
    });
    expect(res.headers.get('x-run-id')).toBe(body.run_id);
    expect(body.run_id).toMatch(/^run_[0-9a-f]{24}$/);
    const sent = world.fake.chatRequests().at(-1)!;
    expect(sent.model).toBe(MODEL);
    expect(sent.messages.at(-1)).toMatchObject({ role: 'user', content: 'Hi, I am Alice' });
    const messages = await messagesOf(token, body.session_id);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'Hi, I am Alice'],
      ['assistant', 'Hello there, Alice.'],
    ]);
    const usage = await world.rt.runtime.database.db.selectFrom('usage_records').selectAll().where('run_id', '=', body.run_id).execute();
    expect(usage).toMatchObject([{ model: MODEL, session_id: body.session_id, input_tokens: 12, output_tokens: 5, purpose: 'turn' }]);
  });

  it('continues a conversation with its history', async () => {
    const token = await world.token();
    world.fake.script('First answer.', 'Second answer.');
    const first = (await (await world.chat(token, { message: 'one' })).json()) as ChatBody;
    const second = (await (await world.chat(token, { message: 'two', session_id: first.session_id })).json()) as ChatBody;
    expect(second.session_id).toBe(first.session_id);
    expect(world.fake.chatRequests().at(-1)!.messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'one'],
      ['assistant', 'First answer.'],
      ['user', 'two'],
    ]);
  });

  it('streams start, tokens and done, every frame with an increasing id, and X-Run-Id', async () => {
    const token = await world.token();
    world.fake.script({ text: 'one two three four' });
    const { response, events } = await world.streamAll(token, { message: 'count' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const runId = response.headers.get('x-run-id');
    expect(events[0]).toMatchObject({ event: 'start', data: { type: 'start', run_id: runId, model: MODEL } });
    const tokens = events.filter((e) => e.event === 'token');
    expect(tokens.length).toBeGreaterThanOrEqual(4);
    expect(tokens.map((e) => (e.data as { text: string }).text).join('')).toBe('one two three four');
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { content: 'one two three four', finish_reason: null, run_id: runId } });
    expect(events.filter((e) => e.event === 'done' || e.event === 'error')).toHaveLength(1);
    expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 1));
  });

  it('hands client tool calls back with requires_action, then resumes the turn with their results', async () => {
    const token = await world.token();
    world.fake.script({ toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: { city: 'Oslo' } }] }, 'It is 3 degrees in Oslo.');
    const paused = (await (await world.chat(token, { message: 'Weather in Oslo?', tools: [weatherTool] })).json()) as ChatBody;
    expect(paused).toMatchObject({
      requires_action: true,
      finish_reason: null,
      tool_calls: [{ id: 'call_w1', name: 'get_weather', arguments: { city: 'Oslo' } }],
      approvals: [],
    });
    const offered = world.fake.chatRequests().at(-1)!.tools as { function: { name: string } }[];
    expect(offered.map((tool) => tool.function.name)).toEqual(['ask_user', 'request_approval', 'get_weather']);
    expect(offered[2]).toEqual({ type: 'function', function: { name: 'get_weather', description: weatherTool.description, parameters: weatherTool.parameters } });
    const sessions = await world.rt.endUser(`/chat/sessions?q=${paused.session_id}`, token);
    expect(((await sessions.json()) as { sessions: { status: string; requires_action: boolean }[] }).sessions[0]).toMatchObject({
      status: 'requires_action',
      requires_action: true,
    });

    const resumed = await world.chat(token, {
      session_id: paused.session_id,
      tools: [weatherTool],
      tool_results: [{ tool_call_id: 'call_w1', content: { celsius: 3 } }],
    });
    expect(resumed.status).toBe(200);
    expect((await resumed.json()) as ChatBody).toMatchObject({ content: 'It is 3 degrees in Oslo.', requires_action: false, tool_calls: [] });
    const sent = world.fake.chatRequests().at(-1)!.messages;
    expect(sent.slice(-2)).toMatchObject([
      { role: 'assistant', tool_calls: [{ id: 'call_w1', function: { name: 'get_weather' } }] },
      { role: 'tool', tool_call_id: 'call_w1', content: '{"celsius":3}' },
    ]);
  });

  it('pauses on a gated tool with the call in approvals, and the approved call comes back identical in tool_calls', async () => {
    const token = await world.token();
    const gated = { name: 'send_payment', description: 'Send a payment to someone\nMoves real money.', parameters: { type: 'object' }, requiresApproval: true };
    world.fake.script({ toolCalls: [{ id: 'call_pay', name: 'send_payment', arguments: { to: 'bob', amount: 20 } }] }, 'Paid.');
    const paused = (await (await world.chat(token, { message: 'pay bob 20', tools: [gated] })).json()) as ChatBody;
    expect(paused.requires_action).toBe(true);
    expect(paused.tool_calls).toEqual([]);
    expect(paused.approvals).toEqual([
      { tool_call_id: 'call_pay', action: 'Send a payment to someone', detail: '{"to":"bob","amount":20}', tool: 'send_payment', arguments: { to: 'bob', amount: 20 } },
    ]);
    const calls = world.fake.chatRequests().length;

    // Silence is neither answer: a request without a decision pauses again, and the model is not asked.
    const silent = (await (await world.chat(token, { session_id: paused.session_id, message: 'hello?', tools: [gated] })).json()) as ChatBody;
    expect(silent).toMatchObject({ requires_action: true, approvals: paused.approvals, tool_calls: [] });

    const approved = (await (
      await world.chat(token, { session_id: paused.session_id, tools: [gated], approval_decisions: [{ tool_call_id: 'call_pay', approved: true }] })
    ).json()) as ChatBody;
    expect(approved).toMatchObject({ requires_action: true, approvals: [], tool_calls: [{ id: 'call_pay', name: 'send_payment', arguments: { to: 'bob', amount: 20 } }] });
    expect(world.fake.chatRequests()).toHaveLength(calls);

    const done = (await (
      await world.chat(token, { session_id: paused.session_id, tools: [gated], tool_results: [{ tool_call_id: 'call_pay', content: 'ok, id 77' }] })
    ).json()) as ChatBody;
    expect(done).toMatchObject({ content: 'Paid.', requires_action: false });
    // The message sent while paused reached the agent once the pause was answered.
    const sent = world.fake.chatRequests().at(-1)!.messages;
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(sent[3]).toMatchObject({ role: 'user', content: 'hello?' });
  });

  it('refuses an invalid requiresApproval, or the spelling requires_approval, with 400 naming the field on both paths, storing nothing', async () => {
    const token = await world.token();
    const sessionsBefore = await world.rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).execute();
    const calls = world.fake.chatRequests().length;
    const tool = { name: 'send_payment', parameters: { type: 'object' } };
    const cases: [Record<string, unknown>, string][] = [
      [{ requiresApproval: 'false' }, 'tools[0].requiresApproval: requiresApproval must be true or false'],
      [{ requiresApproval: null }, 'tools[0].requiresApproval: requiresApproval must be true or false'],
      [{ requiresApproval: 0 }, 'tools[0].requiresApproval: requiresApproval must be true or false'],
      [{ requires_approval: true }, 'tools[0].requires_approval: the write surface spells it requiresApproval'],
    ];
    for (const [gate, detail] of cases) {
      for (const send of [world.chat, world.stream]) {
        const res = await send(token, { message: 'pay bob', tools: [{ ...tool, ...gate }] });
        expect(res.status, JSON.stringify(gate)).toBe(400);
        expect(await res.json()).toMatchObject({ detail, code: 'invalid_argument', request_id: expect.any(String) });
      }
    }
    // Other problems of the same tool stay 422; a 400 field beside them still answers 400.
    const other = await world.chat(token, { message: 'pay bob', tools: [{ ...tool, name: 'bad name' }] });
    expect(other.status).toBe(422);
    const both = await world.chat(token, { message: 'pay bob', tools: [{ ...tool, name: 'bad name', requiresApproval: null }] });
    expect(both.status).toBe(400);
    expect(await both.json()).toMatchObject({ detail: 'tools[0].requiresApproval: requiresApproval must be true or false' });
    // true and false are the gate itself.
    world.fake.script('no tool needed', 'still none');
    for (const requiresApproval of [true, false]) expect((await world.chat(token, { message: 'hi', tools: [{ ...tool, requiresApproval }] })).status).toBe(200);
    expect(world.fake.chatRequests()).toHaveLength(calls + 2);
    const sessionsAfter = await world.rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).execute();
    expect(sessionsAfter).toHaveLength(sessionsBefore.length + 2);
  });

  it('tells the agent to stop when an approval is refused, passing the note', async () => {
    const token = await world.token();
    world.fake.script({ toolCalls: [{ id: 'call_ra', name: 'request_approval', arguments: { action: 'Delete the production database', detail: 'db=prod' } }] }, 'Understood, I stopped.');
    const paused = (await (await world.chat(token, { message: 'clean up' })).json()) as ChatBody;
    expect(paused.approvals).toEqual([
      { tool_call_id: 'call_ra', action: 'Delete the production database', detail: 'db=prod', tool: null, arguments: { action: 'Delete the production database', detail: 'db=prod' } },
    ]);
    const refused = (await (
      await world.chat(token, { session_id: paused.session_id, approval_decisions: [{ tool_call_id: 'call_ra', approved: false, note: 'never in business hours' }] })
    ).json()) as ChatBody;
    expect(refused).toMatchObject({ content: 'Understood, I stopped.', requires_action: false });
    const toolMessage = world.fake.chatRequests().at(-1)!.messages.at(-1)!;
    expect(toolMessage).toMatchObject({ role: 'tool', tool_call_id: 'call_ra' });
    expect(toolMessage.content).toContain('do not try to achieve it another way');
    expect(toolMessage.content).toContain('never in business hours');
  });

  it('pauses on ask_user and resumes with the answer', async () => {
    const token = await world.token();
    world.fake.script({ toolCalls: [{ id: 'call_q', name: 'ask_user', arguments: { question: 'Which city?', options: ['Oslo', 'Rome'] } }] }, 'Booked Rome.');
    const paused = (await (await world.chat(token, { message: 'book me a trip' })).json()) as ChatBody;
    expect(paused).toMatchObject({ requires_action: true, questions: [{ tool_call_id: 'call_q', question: 'Which city?', options: ['Oslo', 'Rome'] }] });
    const answered = (await (await world.chat(token, { session_id: paused.session_id, question_answers: [{ tool_call_id: 'call_q', answer: 'Rome' }] })).json()) as ChatBody;
    expect(answered.content).toBe('Booked Rome.');
    expect(world.fake.chatRequests().at(-1)!.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_q', content: 'Rome' });
  });

  it('does not offer ask_user without the capability and refuses a call to it', async () => {
    const token = await world.token({ capabilities: ['chat'], max_tool_iterations: 3 });
    world.fake.script({ toolCalls: [{ id: 'call_x', name: 'ask_user', arguments: { question: 'hm?' } }] }, 'Fine.');
    const body = (await (await world.chat(token, { message: 'go' })).json()) as ChatBody;
    expect(body).toMatchObject({ requires_action: false, content: 'Fine.' });
    const [first, second] = world.fake.chatRequests().slice(-2);
    expect(first!.tools).toBeUndefined();
    expect(second!.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_x' });
    expect(String(second!.messages.at(-1)!.content)).toContain("Tool 'ask_user' is not available");
  });

  it('answers are refused for ids that are not waiting, and with nothing pending', async () => {
    const token = await world.token();
    world.fake.script('plain');
    const done = (await (await world.chat(token, { message: 'hi' })).json()) as ChatBody;
    const res = await world.chat(token, { session_id: done.session_id, tool_results: [{ tool_call_id: 'nope', content: 'x' }] });
    expect(res.status).toBe(400);
    // Refused before anything was stored: the conversation is named, no run was made so none is named.
    expect(await res.json()).toMatchObject({ detail: 'nothing in this conversation is waiting for an answer', code: 'nothing_pending', session_id: done.session_id });
  });

  it('ends with max_tool_iterations when the agent keeps calling tools past the ceiling', async () => {
    const token = await world.token({ max_tool_iterations: 2 });
    const looping = { toolCalls: [{ name: 'lookup', arguments: {} }] };
    world.fake.script(looping, looping, looping, 'never reached');
    const body = (await (await world.chat(token, { message: 'loop' })).json()) as ChatBody;
    expect(body).toMatchObject({ finish_reason: 'max_tool_iterations', requires_action: false });
    expect(world.fake.scriptsLeft).toBe(1);
  });

  it('streams tool_start and tool_end for calls the service answers itself', async () => {
    const token = await world.token();
    world.fake.script({ toolCalls: [{ id: 'call_u', name: 'unknown_tool', arguments: { a: 1 } }] }, 'Done anyway.');
    const { events } = await world.streamAll(token, { message: 'go' });
    expect(events.map((e) => e.event).filter((type) => type !== 'token')).toEqual(['start', 'tool_start', 'tool_end', 'done']);
    expect(events.find((e) => e.event === 'tool_start')!.data).toMatchObject({ tool_call_id: 'call_u', name: 'unknown_tool', arguments: { a: 1 } });
    expect(events.find((e) => e.event === 'tool_end')!.data).toMatchObject({ tool_call_id: 'call_u', ok: false });
  });

  it('ends no_model at once and sends nothing when the project has no model', async () => {
    const token = await world.token();
    const pushed = await world.tenant.reconfigure({ default_model: null });
    expect(pushed.status).toBe(200);
    try {
      const before = world.fake.chatRequests().length;
      const body = (await (await world.chat(token, { message: 'anyone?' })).json()) as ChatBody;
      expect(body).toMatchObject({ finish_reason: 'no_model', content: '', model: null, usage: { total_tokens: 0 } });
      expect(world.fake.chatRequests()).toHaveLength(before);
    } finally {
      await world.tenant.reconfigure({ default_model: MODEL });
    }
  });

  it('uses the project system prompt over the request\'s, and needs system_prompt for a per-request one', async () => {
    await world.tenant.reconfigure({ system_prompt: 'You are the ACME assistant.' });
    try {
      const token = await world.token();
      world.fake.script('ok');
      await world.chat(token, { message: 'hi', system_prompt: 'You are a pirate.' });
      expect(world.fake.chatRequests().at(-1)!.messages[0]).toEqual({ role: 'system', content: 'You are the ACME assistant.' });
      const limited = await world.token({ capabilities: ['chat'] });
      const res = await world.chat(limited, { message: 'hi', system_prompt: 'You are a pirate.' });
      expect(res.status).toBe(403);
    } finally {
      await world.tenant.reconfigure({ system_prompt: null });
    }
  });

  it('clamps history to the token\'s max_context_tokens, keeping the newest', async () => {
    const token = await world.token();
    world.fake.script('a1', 'a2');
    const first = (await (await world.chat(token, { message: 'word '.repeat(300) })).json()) as ChatBody;
    await world.chat(token, { session_id: first.session_id, message: 'short question' });
    const small = await world.token({ max_context_tokens: 60 });
    world.fake.script('a3');
    await world.chat(small, { session_id: first.session_id, message: 'latest' });
    const sent = world.fake.chatRequests().at(-1)!.messages.map((m) => m.content);
    // The 300-word message does not fit in 60 tokens: it and everything older is left out.
    expect(sent).toEqual(['a1', 'short question', 'a2', 'latest']);
  });

  it('caps effort at the token\'s max_effort and sends it as reasoning_effort', async () => {
    const token = await world.token({ max_effort: 'low' });
    world.fake.script('x', 'y');
    await world.chat(token, { message: 'think hard', effort: 'high' });
    expect(world.fake.chatRequests().at(-1)!.reasoning_effort).toBe('low');
    const free = await world.token();
    await world.chat(free, { message: 'no effort named' });
    expect(world.fake.chatRequests().at(-1)!.reasoning_effort).toBeUndefined();
  });
});
