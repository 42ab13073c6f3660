// The agent's plan, in both setups: with capability `todo` (and enable_todo) the agent is offered a `todo` tool that
// replaces the conversation's plan with each call; GET /chat/sessions/{id}/todos shows it to whoever may read the
// conversation (404 to others, as for a made-up id), a bad list is refused to the model without changing the plan,
// and the plan goes with its conversation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, type ChatWorld } from './fixture.js';

describe.each(availableSetups())('the agent plan (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  const capabilities = [...CHAT_CAPABILITIES, 'todo'];

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    world = await chatWorld((await services?.env()) ?? {});
    const ceiling = world.tenant.configuration.ceiling;
    const res = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'todo'] } } as never);
    expect(res.status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });

  const lastTool = () => (world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string }).content;
  const offered = () => ((world.fake.chatRequests().at(-2)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
  async function plan(token: string, items: unknown, sessionId?: string, body: Record<string, unknown> = {}) {
    world.fake.script({ toolCalls: [{ name: 'todo', arguments: { items } }] }, 'Planned.');
    const res = await world.chat(token, { message: 'plan it', ...(sessionId ? { session_id: sessionId } : {}), ...body });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { session_id: string }).session_id;
  }
  const todosOf = async (token: string, sessionId: string) => world.rt.endUser(`/chat/sessions/${sessionId}/todos`, token);

  it('keeps the plan the agent writes, replacing it whole, and shows it to whoever may read the conversation', async () => {
    const alice = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
    const sessionId = await plan(alice, [
      { content: 'Find the invoice', status: 'completed' },
      { content: 'Check the amount', status: 'in_progress' },
      { content: 'Send the reminder', status: 'pending' },
    ]);
    expect(offered()).toContain('todo');
    expect(lastTool()).toBe('Plan saved: 3 items, 1 completed.\n[x] 1. Find the invoice\n[~] 2. Check the amount\n[ ] 3. Send the reminder');
    const res = await todosOf(alice, sessionId);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([
      { id: '1', content: 'Find the invoice', status: 'completed' },
      { id: '2', content: 'Check the amount', status: 'in_progress' },
      { id: '3', content: 'Send the reminder', status: 'pending' },
    ]);

    await plan(alice, [{ content: 'Send the reminder', status: 'completed' }], sessionId);
    expect(await (await todosOf(alice, sessionId)).json()).toEqual([{ id: '1', content: 'Send the reminder', status: 'completed' }]);

    // A privileged reader sees it; another person does not see that the conversation exists.
    const admin = await world.token({ capabilities, sub: 'acme:admin', scope: 'acme', roles: ['admin'] });
    expect((await todosOf(admin, sessionId)).status).toBe(200);
    const bob = await world.token({ capabilities, sub: 'acme:bob', scope: 'acme:bob' });
    expect((await todosOf(bob, sessionId)).status).toBe(404);
  });

  it('refuses a bad list to the model and keeps the plan as it was', async () => {
    const token = await world.token({ capabilities });
    const sessionId = await plan(token, [{ content: 'One step', status: 'pending' }]);
    await plan(token, [{ content: 'No status' }], sessionId);
    expect(lastTool()).toBe('Item 1 needs a `status`: one of pending, in_progress, completed.');
    await plan(token, 'not a list', sessionId);
    expect(lastTool()).toMatch(/^todo needs `items`/);
    await plan(token, Array.from({ length: 51 }, () => ({ content: 'x', status: 'pending' })), sessionId);
    expect(lastTool()).toMatch(/at most 50 items/);
    expect(await (await todosOf(token, sessionId)).json()).toEqual([{ id: '1', content: 'One step', status: 'pending' }]);
  });

  it('is offered only with capability todo and enable_todo, and the plan goes with its conversation', async () => {
    const without = await world.token({ capabilities: CHAT_CAPABILITIES });
    const sessionId = await plan(without, [{ content: 'x', status: 'pending' }]);
    expect(offered()).not.toContain('todo');
    expect(await (await todosOf(without, sessionId)).json()).toEqual([]);
    const token = await world.token({ capabilities });
    await plan(token, [{ content: 'x', status: 'pending' }], undefined, { enable_todo: false });
    expect(offered()).not.toContain('todo');

    const kept = await plan(token, [{ content: 'x', status: 'pending' }]);
    expect((await world.rt.endUser(`/chat/sessions/${kept}`, token, { method: 'DELETE' })).status).toBe(200);
    expect((await todosOf(token, kept)).status).toBe(404);
    const rows = await world.rt.runtime.database.db.selectFrom('session_todos').select('session_id').where('session_id', '=', kept).execute();
    expect(rows).toEqual([]);
  });
});
