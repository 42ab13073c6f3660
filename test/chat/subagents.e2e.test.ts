// Subagents, in both setups: with capability `subagents` the agent may delegate a task; the child runs for the same
// person in a conversation of its own (parent_session_id set, left out of session lists unless include_subagents),
// unattended (no ask_user, no client tools, no delegating further), on a model the project allows, and its answer is
// the parent's tool result. A child that cannot finish ends the parent's turn with subagents_incomplete, and no more
// than the project's max_concurrent run at once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, MODEL, OTHER_MODEL, type ChatWorld } from './fixture.js';

describe.each(availableSetups())('subagents (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  const capabilities = [...CHAT_CAPABILITIES, 'subagents'];

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    world = await chatWorld((await services?.env()) ?? {});
    const ceiling = world.tenant.configuration.ceiling;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'subagents'] } } as never)).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });
  beforeEach(() => world.fake.clearScripts());

  const toolNames = (request: object) => (((request as { tools?: unknown }).tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
  async function delegate(token: string, ...child: Parameters<ChatWorld['fake']['script']>) {
    world.fake.script({ toolCalls: [{ id: 'call_delegate', name: 'delegate', arguments: { task: 'Summarise the returns policy.' } }] }, ...child, 'Parent done.');
    const res = await world.chat(token, { message: 'Please handle this.' });
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as { content: string; finish_reason: string | null; session_id: string };
  }

  it("runs the child in its own conversation for the same person, unattended, and hands its answer to the parent", async () => {
    const token = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
    const calls = world.fake.chatRequests().length;
    const answer = await delegate(token, 'Returns are free within 30 days.');
    expect(answer).toMatchObject({ content: 'Parent done.', finish_reason: null });
    const [parentFirst, child, parentSecond] = world.fake.chatRequests().slice(calls);
    expect(toolNames(parentFirst!)).toContain('delegate');
    // The child: the task as its message, on the parent's model, with no delegate, no ask_user.
    expect(child!.model).toBe(MODEL);
    expect(child!.messages.at(-1)).toMatchObject({ role: 'user', content: 'Summarise the returns policy.' });
    expect(toolNames(child!)).not.toContain('delegate');
    expect(toolNames(child!)).not.toContain('ask_user');
    const toolMessage = parentSecond!.messages.find((m) => m.role === 'tool') as { content: string };
    const childSession = /its conversation: ([0-9a-f-]{36})/.exec(toolMessage.content)![1]!;
    expect(toolMessage.content).toBe(`The subagent's answer (its conversation: ${childSession}):\n\nReturns are free within 30 days.`);

    const listed = async (query: string) => ((await (await world.rt.endUser(`/chat/sessions${query}`, token)).json()) as { sessions: { id: string; parent_session_id: string | null }[] }).sessions;
    expect((await listed('')).map((s) => s.id)).not.toContain(childSession);
    expect((await listed('?include_subagents=true')).find((s) => s.id === childSession)).toMatchObject({ parent_session_id: answer.session_id });
    const messages = (await (await world.rt.endUser(`/chat/sessions/${childSession}/messages`, token)).json()) as { content: string }[];
    expect(messages.map((m) => m.content)).toEqual(['Summarise the returns policy.', 'Returns are free within 30 days.']);
  });

  it('ends the parent with subagents_incomplete when the child stops to wait for a person', async () => {
    const token = await world.token({ capabilities });
    world.fake.script({ toolCalls: [{ name: 'delegate', arguments: { task: 'Refund order 7.' } }] }, { toolCalls: [{ name: 'request_approval', arguments: { action: 'Refund order 7' } }] });
    const res = await world.chat(token, { message: 'Refund it.' });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { finish_reason: string; requires_action: boolean };
    expect(answer).toMatchObject({ finish_reason: 'subagents_incomplete', requires_action: false });
    const tool = world.fake.chatRequests().at(-1)!;
    expect(toolNames(tool)).not.toContain('delegate');
  });

  it("runs on the project's subagent model, and refuses a delegate past max_concurrent", async () => {
    expect((await world.tenant.reconfigure({ subagents: { models: [OTHER_MODEL], max_concurrent: 1 } } as never)).status).toBe(200);
    const token = await world.token({ capabilities, sub: 'acme:bob', scope: 'acme:bob' });
    const calls = world.fake.chatRequests().length;
    await delegate(token, 'Done by the other model.');
    expect(world.fake.chatRequests()[calls + 1]!.model).toBe(OTHER_MODEL);

    // One subagent already at work (its run holds a live lease): the next delegate is told to wait.
    const db = world.rt.runtime.database.db;
    const [sessionId, parentId] = [randomUUID(), randomUUID()];
    await db.insertInto('sessions').values({ id: parentId, tenant_id: world.tenant.tenantId, owner: 'acme:bob', model: MODEL }).execute();
    await db.insertInto('sessions').values({ id: sessionId, tenant_id: world.tenant.tenantId, owner: 'acme:bob', model: MODEL, parent_session_id: parentId }).execute();
    await db
      .insertInto('runs')
      .values({ id: `run_${randomUUID()}`, tenant_id: world.tenant.tenantId, session_id: sessionId, subject: 'acme:bob', model: MODEL, status: 'running', lease_owner: 'elsewhere', lease_expires_at: new Date(Date.now() + 600_000) } as never)
      .execute();
    world.fake.script({ toolCalls: [{ name: 'delegate', arguments: { task: 'More work.' } }] }, 'I will do it myself.');
    const res = await world.chat(token, { message: 'More, please.' });
    expect(res.status).toBe(200);
    const tool = world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string };
    expect(tool.content).toBe("The project's 1 subagents are all at work; do this yourself, or delegate it later.");
    await db.deleteFrom('runs').where('session_id', '=', sessionId).execute();
  });

  it('lets only max_concurrent of delegates made at the same moment by different turns go on', async () => {
    expect((await world.tenant.reconfigure({ subagents: { models: [MODEL], max_concurrent: 1 } } as never)).status).toBe(200);
    // Every call answers by what it is: a parent's first step delegates, a child works slowly, a parent reading its
    // tool result finishes. So it does not matter which turn takes which scripted reply.
    const reply = (request: { messages: { role: string; content?: unknown }[] }) => {
      const last = request.messages.at(-1)!;
      if (last.role === 'tool') return 'Parent done.';
      if (last.content === 'Race work.') return { text: 'Child finished the race work slowly.', dripMs: 60 };
      return { toolCalls: [{ name: 'delegate', arguments: { task: 'Race work.' } }] };
    };
    const parents = 4;
    world.fake.script(...Array.from({ length: parents * 3 }, () => reply));
    const tokens = await Promise.all(Array.from({ length: parents }, (_, i) => world.token({ capabilities, sub: `acme:racer${i}`, scope: `acme:racer${i}` })));
    const answers = await Promise.all(tokens.map(async (token) => {
      const res = await world.chat(token, { message: 'Race.' });
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as { session_id: string };
    }));
    const results = await Promise.all(answers.map(async ({ session_id }, i) => {
      const messages = (await (await world.rt.endUser(`/chat/sessions/${session_id}/messages`, tokens[i]!)).json()) as { role: string; content: string }[];
      return messages.find((m) => m.role === 'tool')!.content;
    }));
    const ran = results.filter((result) => result.startsWith("The subagent's answer"));
    // The first to start goes on; every delegate that counted a free place at the same moment as it stands down.
    expect(ran.length, results.join('\n')).toBe(1);
    expect(results.filter((result) => result === "The project's 1 subagents are all at work; do this yourself, or delegate it later.")).toHaveLength(parents - 1);
    expect((await world.tenant.reconfigure({ subagents: undefined } as never)).status).toBe(200);
  });

  it("keeps what the delegating request declined or narrowed in the child's run", async () => {
    const token = await world.token({ capabilities });
    world.fake.script({ toolCalls: [{ name: 'delegate', arguments: { task: 'Work.' } }] }, 'Child done.', 'Parent done.');
    const calls = world.fake.chatRequests().length;
    const res = await world.chat(token, { message: 'go', allowed_tools: ['delegate'], enable_approvals: false });
    expect(res.status).toBe(200);
    const child = world.fake.chatRequests()[calls + 1]!;
    expect(child.messages.at(-1)).toMatchObject({ role: 'user', content: 'Work.' });
    // The parent allowed only delegate, and delegate is not a child's: the child is offered nothing.
    expect(toolNames(child)).toEqual([]);
  });

  it('is offered only with capability subagents and enable_subagents', async () => {
    world.fake.script('Hello.');
    await world.chat(await world.token({ capabilities: CHAT_CAPABILITIES }), { message: 'hi' });
    expect(toolNames(world.fake.chatRequests().at(-1)!)).not.toContain('delegate');
    world.fake.script('Hello.');
    await world.chat(await world.token({ capabilities }), { message: 'hi', enable_subagents: false });
    expect(toolNames(world.fake.chatRequests().at(-1)!)).not.toContain('delegate');
  });
});
