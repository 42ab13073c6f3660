// The turn's budget of database round trips (docs/decisions/0035). Every feature still to come runs through the turn,
// so a statement added to it is paid on every turn of every tenant: these counts are exact, and a change that adds
// one fails here and has to say why. Counted at the driver (`Database.statements`), `begin` and `commit` included,
// on both setups; background work (lease renewal, the lost-run sweep, and what a turn slower than a second under load
// meets: the drafts' save, the ingest worker's look for jobs) is pushed out of the way by long intervals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { TRUST_STAMP_MS } from '@agentplane/runtime/tenants/change-notices';
import { chatWorld, CHAT_CAPABILITIES, type ChatWorld } from './fixture.js';

/**
 * Statements of a blocking turn that opens a new conversation: its start and its end. Whether the tenant's
 * configuration is current costs no statement: the embedded store knows its own writes, and on a shared store the
 * replicas tell each other of theirs, the stamp being read again once it is a second old (decision 0049). Each
 * counted turn follows, at once, a turn that read the stamp afresh (`turnAfterStampExpiry`), so it finds the stamp
 * current.
 */
const NEW_SESSION_TURN = { embedded: 2, scale: 2 };
/** A plain message into an existing conversation: the same, plus finding it (its history comes back with the start). */
const FOLLOW_UP_TURN = { embedded: 3, scale: 3 };
/**
 * A new-session turn whose model calls a webhook tool once: the start and the end, plus the step that made the call
 * (its message and usage, written while the handler answers) and the call's answer with its delivery record.
 */
const WEBHOOK_TOOL_TURN = { embedded: 4, scale: 4 };

describe.each(availableSetups())('round trips of a turn (%s)', (setup) => {
  let world: ChatWorld;
  let services: ScaleServices | undefined;
  let handler: WebhookHandler;
  let token: string;

  beforeAll(async () => {
    services = setup === 'scale' ? await ScaleServices.start() : undefined;
    handler = await WebhookHandler.start();
    world = await chatWorld({ ...(await services?.env()), RUN_LEASE_SECONDS: '3600', SCHEDULER_TICK_MS: '3600000', DELIVERY_TICK_MS: '3600000', AUDIT_FLUSH_MS: '3600000', DRAFT_SAVE_MS: '3600000', INGEST_POLL_MS: '3600000' });
    token = await world.token();
    // Warm: the tenant's configuration and verifier are cached after the first request, as in steady state.
    expect((await world.chat(token, { message: 'warm up' })).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await handler?.stop();
    await services?.stop();
  });

  /**
   * Runs `turn` once the tenant's cached stamp has outlived its trust on a shared store, so `turn` reads it again and
   * the counted turn right after finds it current. A turn that merely came first could have used a stamp about to
   * expire, and the counted turn would then pay the read (CI saw 3 statements for 2 once).
   */
  async function turnAfterStampExpiry<T>(turn: () => Promise<T>): Promise<T> {
    if (setup === 'scale') await new Promise((resolve) => setTimeout(resolve, TRUST_STAMP_MS + 50));
    return turn();
  }

  /** Statements the runtime sent while `act` ran and its turn finished (the blocking answer comes after the end is stored). */
  async function counted<T>(act: () => Promise<T>): Promise<{ statements: number; value: T }> {
    const before = world.rt.runtime.database.statements();
    const value = await act();
    return { statements: world.rt.runtime.database.statements() - before, value };
  }

  it(`a new-session blocking turn takes ${NEW_SESSION_TURN[setup]} round trips`, async () => {
    expect((await turnAfterStampExpiry(() => world.chat(token, { message: 'just before' }))).status).toBe(200);
    const { statements, value } = await counted(async () => {
      const response = await world.chat(token, { message: 'hello there' });
      return { status: response.status, body: (await response.json()) as { session_id: string; content: string } };
    });
    expect(value.status).toBe(200);
    expect(value.body.content).not.toBe('');
    expect(statements).toBe(NEW_SESSION_TURN[setup]);
  });

  it(`a follow-up turn in the same conversation takes ${FOLLOW_UP_TURN[setup]} round trips`, async () => {
    const first = (await (await turnAfterStampExpiry(() => world.chat(token, { message: 'first' }))).json()) as { session_id: string };
    const { statements, value } = await counted(async () => {
      const response = await world.chat(token, { message: 'second', session_id: first.session_id });
      return response.status;
    });
    expect(value).toBe(200);
    expect(statements).toBe(FOLLOW_UP_TURN[setup]);
    // And what it stored is all there: both turns, in order.
    const messages = (await (await world.rt.endUser(`/chat/sessions/${first.session_id}/messages`, token)).json()) as { role: string; content: string }[];
    expect(messages.map((m) => [m.role, m.content === '' ? '' : 'text'])).toEqual([
      ['user', 'text'],
      ['assistant', 'text'],
      ['user', 'text'],
      ['assistant', 'text'],
    ]);
    expect(messages[2]!.content).toBe('second');
  });

  it(`a turn calling a webhook tool takes ${WEBHOOK_TOOL_TURN[setup]} round trips`, async () => {
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({
      ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'webhook_tools'] },
      webhook_tools: [
        {
          id: 'tool-1',
          name: 'lookup_order',
          description: 'Look up an order.',
          parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
          url: `${handler.url}/orders`,
          requires_approval: false,
          secrets: [{ secret: 'whsec_round-trips-secret' }],
        },
      ],
    } as never);
    expect(pushed.status).toBe(200);
    const toolToken = await world.tenant.mint({ capabilities: [...CHAT_CAPABILITIES, 'webhook_tools'] });
    handler.reply({ status: 200, body: 'Shipped on 3 March.' });
    const callingTurn = async () => {
      world.fake.script({ toolCalls: [{ name: 'lookup_order', arguments: { order_id: 'A-1' } }] }, 'It shipped.');
      const response = await world.chat(toolToken, { message: 'Where is A-1?' });
      return { status: response.status, body: (await response.json()) as { content: string } };
    };
    // Warm: the new configuration is read by the first request after the push.
    expect((await turnAfterStampExpiry(callingTurn)).status).toBe(200);
    const { statements, value } = await counted(callingTurn);
    expect(value).toEqual({ status: 200, body: expect.objectContaining({ content: 'It shipped.' }) });
    expect(handler.requests).toHaveLength(2);
    expect(statements).toBe(WEBHOOK_TOOL_TURN[setup]);
  });

  it('still takes a pushed configuration on the next request, though no request reads the stamp', async () => {
    const narrowed = await world.tenant.reconfigure({ ceiling: { capabilities: ['followups'], registeredModels: [] } });
    expect(narrowed.status).toBe(200);
    const refused = await world.chat(token, { message: 'may I?' });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { code: string }).code).toBe('capability_denied');
  });
});
