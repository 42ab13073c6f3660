// Webhook tools in turns, in both setups, against a real handler on loopback: a published tool is offered under
// capability webhook_tools (and enable_webhook_tools), its call is POSTed to the handler signed with the tool's
// secret (and the replaced one during a rotation's overlap), the handler's answer (an error status included, cut to
// 20,000 characters) is what the model reads, a call is repeated only when the handler cannot have acted on it,
// requiresApproval pauses the turn until the person decides, and every call is recorded for privileged readers.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifySignature } from '@agentplane/lib/crypto/signatures';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { captureLogs } from '../harness/logs.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, type ChatWorld } from './fixture.js';

const SECRET = 'whsec_current-secret-for-tests-0001';
const OLD_SECRET = 'whsec_replaced-secret-for-tests-0002';
const TOOL = 'lookup_order';
const capabilities = [...CHAT_CAPABILITIES, 'webhook_tools'];

interface Delivery {
  tool: string;
  tool_id: string;
  session_id: string;
  subject: string;
  status: number | null;
  ok: boolean;
  attempts: number;
  result: string;
  error: string | null;
}

describe.each(availableSetups())('webhook tools (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let handler: WebhookHandler;
  const logs = captureLogs();

  const toolSection = (change: Record<string, unknown> = {}) => ({
    id: 'tool-1',
    name: TOOL,
    description: 'Look up an order by its id: its status and delivery date.',
    parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
    url: `${handler.url}/hooks/orders`,
    requires_approval: false,
    secrets: [{ secret: SECRET }],
    ...change,
  });
  const publish = async (change: Record<string, unknown> = {}) => {
    const res = await world.tenant.reconfigure({ webhook_tools: [toolSection(change)] } as never);
    expect(res.status, await res.clone().text()).toBe(200);
  };

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    handler = await WebhookHandler.start();
    world = await chatWorld({ ...((await services?.env()) ?? {}), WEBHOOK_TOOL_TIMEOUT_MS: '1500' }, { logger: logs.logger });
    const ceiling = world.tenant.configuration.ceiling;
    const res = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'webhook_tools'] } } as never);
    expect(res.status, await res.clone().text()).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await handler?.stop();
    await services?.stop();
  });
  beforeEach(async () => {
    world.fake.clearScripts();
    handler.requests.length = 0;
    handler.reply({ status: 200, body: 'Order A-1 shipped on 3 March.' });
    await publish();
  });

  const toolMessages = () => world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool') as { content: string; tool_call_id: string }[];
  const offered = () => ((world.fake.chatRequests().at(-1)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
  /** A turn whose model calls the tool, then answers `answer` (null: nothing more is scripted, for a turn that pauses). */
  async function callTool(token: string, body: Record<string, unknown> = {}, answer: string | null = 'Your order shipped.') {
    world.fake.script({ toolCalls: [{ id: 'call_hook', name: TOOL, arguments: { order_id: 'A-1' } }] }, ...(answer === null ? [] : [answer]));
    const res = await world.chat(token, { message: 'Where is my order A-1?', ...body });
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as { content: string; session_id: string; requires_action: boolean; approvals: { tool_call_id: string; tool: string | null }[] };
  }
  const deliveriesOf = async (token: string, query = '') => {
    const res = await world.rt.endUser(`/tools/deliveries${query}`, token);
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { deliveries: Delivery[] }).deliveries;
  };

  it('calls a published tool for the person, signed with its secret, and hands the model its answer', async () => {
    const token = await world.token({ capabilities, sub: 'acme:sales:alice', scope: 'acme:sales', roles: ['agent'] });
    const answer = await callTool(token);
    expect(answer.content).toBe('Your order shipped.');
    expect(world.fake.chatRequests().at(-2)!.tools).toEqual(
      expect.arrayContaining([
        { type: 'function', function: expect.objectContaining({ name: TOOL, description: toolSection().description, parameters: toolSection().parameters }) },
      ]),
    );
    expect(handler.requests).toHaveLength(1);
    const [request] = handler.requests;
    expect(request!.path).toBe('/hooks/orders');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(WebhookHandler.json(request!)).toEqual({
      tool: TOOL,
      arguments: { order_id: 'A-1' },
      subject: 'acme:sales:alice',
      scope: 'acme:sales',
      roles: ['agent'],
      tenant_id: world.tenant.tenantId,
      session_id: answer.session_id,
    });
    // What a handler computes by hand from the raw body, and what the library's check accepts.
    expect(request!.headers['x-service-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(request!.body).digest('hex')}`);
    expect(verifySignature(request!.headers['x-service-signature'] as string, request!.body, SECRET)).toBe(true);
    expect(toolMessages()).toEqual([expect.objectContaining({ tool_call_id: 'call_hook', content: 'Order A-1 shipped on 3 March.' })]);
  });

  it('makes an error status the result, cuts a long answer to 20,000 characters, and records every call', async () => {
    const token = await world.token({ capabilities, sub: 'acme:bob', scope: 'acme:bob' });
    handler.reply({ status: 500, body: 'database is down' });
    await callTool(token);
    expect(toolMessages().at(-1)!.content).toBe('The handler answered HTTP 500: database is down');
    // A 500 may have acted: it is not repeated.
    expect(handler.requests).toHaveLength(1);

    handler.reply({ status: 200, body: 'x'.repeat(30_000) });
    await callTool(token);
    expect(toolMessages().at(-1)!.content).toBe('x'.repeat(20_000));

    const admin = await world.token({ capabilities, sub: 'acme:admin', scope: 'acme', roles: ['admin'] });
    const [long, failed] = await deliveriesOf(admin, '?limit=2');
    expect(failed).toMatchObject({ tool: TOOL, tool_id: 'tool-1', subject: 'acme:bob', status: 500, ok: false, attempts: 1, error: 'the handler answered HTTP 500' });
    expect(failed!.result).toBe('The handler answered HTTP 500: database is down');
    expect(long).toMatchObject({ status: 200, ok: true, error: null });
    // An excerpt, not the whole answer.
    expect(long!.result).toBe('x'.repeat(500));

    const refused = await world.rt.endUser('/tools/deliveries', token);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'not_privileged' });
    const viaAdmin = await world.rt.admin(`/tenants/${world.tenant.tenantId}/tools/deliveries?limit=2`);
    expect(((await viaAdmin.json()) as { deliveries: Delivery[] }).deliveries).toEqual([long, failed]);
  });

  it('stores the answers of calls made in one step in the order they were made, each recorded, whatever bytes they hold', async () => {
    const token = await world.token({ capabilities, sub: 'acme:carol', scope: 'acme:carol' });
    handler.reply({ status: 200, body: 'first\u0000answer' }, { status: 200, body: 'second answer \ud800' }, { status: 200, body: 'third answer' });
    world.fake.script(
      {
        toolCalls: [
          { id: 'call_a', name: TOOL, arguments: { order_id: 'A-1' } },
          { id: 'call_b', name: TOOL, arguments: { order_id: 'B-2' } },
          { id: 'call_c', name: TOOL, arguments: { order_id: 'C-3' } },
        ],
      },
      'All three shipped.',
    );
    const res = await world.chat(token, { message: 'Where are my three orders?' });
    expect(res.status, await res.clone().text()).toBe(200);
    const answer = (await res.json()) as { content: string; session_id: string };
    expect(answer.content).toBe('All three shipped.');
    // A NUL and a lone surrogate are what no store takes: kept as U+FFFD, and the turn goes on.
    const results = ['first\ufffdanswer', 'second answer \ufffd', 'third answer'];
    expect(toolMessages().map((m) => [m.tool_call_id, m.content])).toEqual([
      ['call_a', results[0]],
      ['call_b', results[1]],
      ['call_c', results[2]],
    ]);
    const stored = await world.rt.endUser(`/chat/sessions/${answer.session_id}/messages`, token);
    const messages = (await stored.json()) as { role: string; content: string; tool_call_id?: string | null }[];
    expect(messages.map((m) => [m.role, m.tool_call_id ?? null, m.role === 'tool' ? m.content : null])).toEqual([
      ['user', null, null],
      ['assistant', null, null],
      ['tool', 'call_a', results[0]],
      ['tool', 'call_b', results[1]],
      ['tool', 'call_c', results[2]],
      ['assistant', null, null],
    ]);
    const admin = await world.token({ capabilities, sub: 'acme:admin', scope: 'acme', roles: ['admin'] });
    const recorded = (await deliveriesOf(admin, '?limit=3')).filter((delivery) => delivery.session_id === answer.session_id);
    expect(recorded.map((delivery) => delivery.result).sort()).toEqual([...results].sort());
  });

  it('repeats a call only when the handler cannot have acted on it, as the same delivery', async () => {
    const token = await world.token({ capabilities });
    handler.reply({ status: 503, body: 'busy', headers: { 'retry-after': '0' } }, { status: 200, body: 'fine' });
    await callTool(token);
    expect(toolMessages().at(-1)!.content).toBe('fine');
    expect(handler.requests).toHaveLength(2);
    const [first, second] = handler.requests;
    expect(second!.body).toBe(first!.body);
    expect(second!.headers['x-agentplane-delivery']).toBe(first!.headers['x-agentplane-delivery']);
    const admin = await world.token({ capabilities, roles: ['service'] });
    expect((await deliveriesOf(admin, '?limit=1'))[0]).toMatchObject({ attempts: 2, status: 200, ok: true });
  });

  it('is offered only with capability webhook_tools and enable_webhook_tools, and a call without them is refused', async () => {
    const without = await world.token({ capabilities: CHAT_CAPABILITIES });
    await callTool(without);
    expect(offered()).not.toContain(TOOL);
    expect(toolMessages().at(-1)!.content).toBe(`Tool '${TOOL}' is not available in this conversation; do not call it again.`);
    const declined = await world.token({ capabilities });
    await callTool(declined, { enable_webhook_tools: false });
    expect(offered()).not.toContain(TOOL);
    // Narrowed by allowed_tools to other tools.
    const narrowed = await world.token({ capabilities, allowed_tools: ['ask_user'] });
    await callTool(narrowed);
    expect(offered()).not.toContain(TOOL);
    expect(handler.requests).toHaveLength(0);
  });

  it('pauses on a tool that requires approval: approved, the call is made; refused, it is not', async () => {
    await publish({ requires_approval: true });
    const token = await world.token({ capabilities });
    const paused = await callTool(token, {}, null);
    expect(paused.requires_action).toBe(true);
    expect(paused.approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_hook', tool: TOOL })]);
    expect(handler.requests).toHaveLength(0);

    world.fake.script('It shipped on 3 March.');
    const approved = await world.chat(token, { session_id: paused.session_id, approval_decisions: [{ tool_call_id: 'call_hook', approved: true }] });
    expect(approved.status, await approved.clone().text()).toBe(200);
    expect(((await approved.json()) as { content: string }).content).toBe('It shipped on 3 March.');
    expect(handler.requests).toHaveLength(1);
    expect(toolMessages().at(-1)).toMatchObject({ tool_call_id: 'call_hook', content: 'Order A-1 shipped on 3 March.' });

    const again = await callTool(token, {}, null);
    world.fake.script('Understood, I will not look it up.');
    const refused = await world.chat(token, { session_id: again.session_id, approval_decisions: [{ tool_call_id: 'call_hook', approved: false, note: 'not now' }] });
    expect(refused.status).toBe(200);
    expect(handler.requests).toHaveLength(1);
    expect(toolMessages().at(-1)!.content).toContain('The person did not approve this.');
  });

  it("signs with both secrets during a rotation's overlap, and with the new one alone after it", async () => {
    const token = await world.token({ capabilities });
    await publish({ secrets: [{ secret: SECRET }, { secret: OLD_SECRET, until: new Date(Date.now() + 3_600_000).toISOString() }] });
    await callTool(token);
    const during = handler.requests.at(-1)!;
    const values = String(during.headers['x-service-signature']).split(',');
    expect(values).toHaveLength(2);
    expect(verifySignature(values[0], during.body, SECRET)).toBe(true);
    expect(verifySignature(values[1], during.body, OLD_SECRET)).toBe(true);

    await publish({ secrets: [{ secret: SECRET }, { secret: OLD_SECRET, until: new Date(Date.now() - 1_000).toISOString() }] });
    await callTool(token);
    const after = handler.requests.at(-1)!;
    expect(after.headers['x-service-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(after.body).digest('hex')}`);
  });

  it('tells the model when the handler cannot be reached or does not answer in time, and the turn goes on', async () => {
    const token = await world.token({ capabilities });
    await publish({ url: 'http://169.254.169.254/latest/meta-data/' });
    const blocked = await callTool(token);
    expect(blocked.content).toBe('Your order shipped.');
    expect(toolMessages().at(-1)!.content).toMatch(/^The handler could not be reached: /);

    await publish();
    handler.reply({ status: 200, body: 'too late', delayMs: 3_000 });
    await callTool(token);
    expect(toolMessages().at(-1)!.content).toMatch(/^The handler could not be reached: .*did not answer within 1500 ms/);
    // A handler that trickles its answer, never silent for long, is cut off at the same limit.
    handler.reply({ status: 200, body: 'a slow trickle of an answer', dripMs: 400 });
    await callTool(token);
    expect(toolMessages().at(-1)!.content).toBe('The handler could not be reached: the handler did not answer within 1500 ms');
  });

  it('says in /capabilities that enable_webhook_tools is worth setting only once the project has a tool', async () => {
    const token = await world.token({ capabilities });
    const switchOf = async () => ((await (await world.rt.endUser('/capabilities', token)).json()) as { switches: Record<string, boolean> }).switches.enable_webhook_tools;
    expect(await switchOf()).toBe(true);
    expect((await world.tenant.reconfigure({ webhook_tools: undefined } as never)).status).toBe(200);
    expect(await switchOf()).toBe(false);
  });

  it('keeps the secrets sealed: the configuration shows them redacted', async () => {
    const res = await world.rt.admin(`/tenants/${world.tenant.tenantId}/configuration`);
    const text = await res.text();
    expect(text).not.toContain(SECRET);
    expect(JSON.parse(text).webhook_tools[0].secrets[0].secret).toMatch(/^\*\*\*\*/);
  });

  it('never logs a secret, through pushes, calls, rotations, refusals and failures, at the most verbose level', () => {
    // Everything above ran with the runtime logging at trace: what it wrote is here.
    expect(logs.text()).toContain('"level":'); // the logger did write
    for (const secret of [SECRET, OLD_SECRET]) expect(logs.text()).not.toContain(secret);
  });
});
