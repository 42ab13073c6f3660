// A project's token rate and spend caps hold under concurrent turns (docs/decisions/0075): each model call reserves
// its estimate before it is sent and settles with what it used, so a burst is admitted only against the headroom
// left, never against a counter that in-flight calls have not reached yet. Run on the in-process event adapter and
// on a real redis-server; the vendor is the protocol-level fake, whose answers are held back a little so the
// burst's calls overlap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisServerBinary, startRedis, type RedisServer } from '../harness/redis.js';
import { configuredTenant, type TestTenant } from '../harness/runtime.js';
import type { ChatReply, ChatRequest } from '../fakes/openai-server.js';
import { chatWorld, CHAT_CAPABILITIES, MODEL, providerSection, type ChatWorld } from './fixture.js';

/** Concurrent turns in each burst. */
const BURST = 20;
/** What every scripted call reports using: 15 tokens, and $15 at a dollar a token. */
const USAGE = { prompt_tokens: 10, completion_tokens: 5 };
const CALL_TOKENS = 15;
const DOLLAR_A_TOKEN = { [MODEL]: { input_per_million_usd: 1_000_000, output_per_million_usd: 1_000_000 } };
/** Between streamed chunks: long enough that the burst's admitted calls are still running while the rest ask. */
const DRIP_MS = 150;

const setups = (['in-process', 'redis'] as const).filter((setup) => setup === 'in-process' || redisServerBinary() !== null);

describe.each(setups)('usage caps under concurrent turns (%s events)', (setup) => {
  let redis: RedisServer | undefined;
  let world: ChatWorld;

  beforeAll(async () => {
    redis = setup === 'redis' ? await startRedis(redisServerBinary()!) : undefined;
    world = await chatWorld(redis ? { REDIS_URL: redis.url, REDIS_KEY_PREFIX: `caps-${Math.random().toString(36).slice(2)}:` } : {});
  }, 60_000);
  afterAll(async () => {
    await world?.stop();
    await redis?.stop();
  });

  /** A tenant of its own (fresh counters), with the fake provider at these prices and these caps. */
  async function cappedTenant(limits: Record<string, unknown> | undefined, prices?: Record<string, unknown>, capabilities: string[] = []): Promise<TestTenant> {
    const tenant = await configuredTenant(world.rt, { ceiling: { capabilities: [...CHAT_CAPABILITIES, ...capabilities], registeredModels: [MODEL] } });
    const pushed = await tenant.reconfigure({ providers: providerSection(world.fake, [MODEL], prices ? { prices } : {}), default_model: MODEL, ...(limits ? { limits } : {}) });
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    return tenant;
  }

  /** Model calls the provider received since the last burst began. */
  let sent = () => 0;

  /** BURST turns at once, each in a new conversation; their statuses and bodies. */
  async function burst(tenant: TestTenant, reply: ChatReply): Promise<{ status: number; body: Record<string, unknown> }[]> {
    world.fake.clearScripts();
    for (let i = 0; i < 2 * BURST; i++) world.fake.script(reply);
    const token = await tenant.mint({ capabilities: tenant.configuration.ceiling.capabilities });
    const before = world.fake.chatRequests().length;
    sent = () => world.fake.chatRequests().length - before;
    try {
      return await Promise.all(
        Array.from({ length: BURST }, async (_, i) => {
          const response = await world.chat(token, { message: `turn ${i}` });
          return { status: response.status, body: (await response.json()) as Record<string, unknown> };
        }),
      );
    } finally {
      world.fake.clearScripts();
    }
  }

  /** What the tenant's model calls used, as its usage rows say. */
  async function used(tenant: TestTenant): Promise<{ calls: number; tokens: number; costUsd: number }> {
    const rows = await world.rt.runtime.database.db
      .selectFrom('usage_records')
      .select(['input_tokens', 'output_tokens', 'cost_usd'])
      .where('tenant_id', '=', tenant.tenantId)
      .execute();
    return {
      calls: rows.length,
      tokens: rows.reduce((sum, row) => sum + row.input_tokens + row.output_tokens, 0),
      costUsd: rows.reduce((sum, row) => sum + Number(row.cost_usd ?? 0), 0),
    };
  }

  const answer: ChatReply = { text: 'a held back answer', usage: USAGE, dripMs: DRIP_MS };

  it('holds a $20 daily spend cap against a burst of $15 turns: at most two admitted, the rest 429 budget_exceeded', async () => {
    const tenant = await cappedTenant({ budget: { amount_usd: 20, window: 'day' } }, DOLLAR_A_TOKEN);
    const answers = await burst(tenant, answer);

    const admitted = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    // The first call reserves its estimate; the headroom left admits at most one more.
    expect(admitted.length).toBeGreaterThanOrEqual(1);
    expect(admitted.length).toBeLessThanOrEqual(2);
    for (const { status, body } of refused) {
      expect(status).toBe(429);
      expect(body.code).toBe('budget_exceeded');
      expect(body.detail).toMatch(/^spend cap reached: \$20 per day for this project; it resets at \d{4}-\d\d-\d\dT00:00:00.000Z, or raise the cap$/);
    }
    const spent = await used(tenant);
    // A refused turn sent nothing to the provider.
    expect(sent()).toBe(admitted.length);
    expect(spent.calls).toBe(admitted.length);
    expect(spent.costUsd).toBe(15 * admitted.length);
    expect(spent.costUsd).toBeLessThanOrEqual(20 + 15);
  });

  it('holds a 30-token tpm limit against a burst of 15-token turns: at most two admitted, the rest 429 rate_limited', async () => {
    const tenant = await cappedTenant({ tpm_limit: 30 });
    const answers = await burst(tenant, answer);

    const admitted = answers.filter((a) => a.status === 200);
    expect(admitted.length).toBeGreaterThanOrEqual(1);
    expect(admitted.length).toBeLessThanOrEqual(2);
    for (const { status, body } of answers.filter((a) => a.status !== 200)) {
      expect(status).toBe(429);
      expect(body.code).toBe('rate_limited');
      expect(body.detail).toMatch(/^token rate limit reached: 30 tokens per minute for this project; it resets at \d{4}-/);
    }
    expect(sent()).toBe(admitted.length);
    expect((await used(tenant)).tokens).toBe(CALL_TOKENS * admitted.length);
  });

  it('reserves for every model call of a multi-step turn, so tool steps cannot run past the tpm limit either', async () => {
    const tenant = await cappedTenant({ tpm_limit: 30 }, undefined, ['todo']);
    // A first step that calls the plan tool, and a second that answers once it has the tool's result.
    const step: ChatReply = (request: ChatRequest) =>
      request.messages.some((message) => message.role === 'tool')
        ? { text: 'Planned.', usage: USAGE, dripMs: DRIP_MS }
        : { toolCalls: [{ name: 'todo', arguments: { items: [{ id: '1', content: 'Plan', status: 'pending' }] } }], usage: USAGE, dripMs: DRIP_MS };
    const answers = await burst(tenant, step);

    // Two calls fit under 30 tokens: one whole turn, or the first steps of two.
    const spent = await used(tenant);
    expect(spent.calls).toBeLessThanOrEqual(2);
    expect(spent.tokens).toBeLessThanOrEqual(30);
    expect(sent()).toBe(spent.calls);
    for (const { status, body } of answers.filter((a) => a.status !== 200)) {
      expect(status).toBe(429);
      expect(body.code).toBe('rate_limited');
    }
  });

  it('releases the reservation of a call the provider refused: it counts nothing, and the headroom stays', async () => {
    const tenant = await cappedTenant({ tpm_limit: 30 });
    const token = await tenant.mint({ capabilities: tenant.configuration.ceiling.capabilities });
    world.fake.script({ status: 400, message: 'This request was refused.' }, { text: 'one', usage: USAGE }, { text: 'two', usage: USAGE });
    expect((await world.chat(token, { message: 'refused upstream' })).status).toBe(400);
    // Its estimate (a thousand tokens and more) would hold the 30-token window shut if it stayed reserved.
    expect((await world.chat(token, { message: 'first' })).status).toBe(200);
    expect((await world.chat(token, { message: 'second' })).status).toBe(200);
    expect((await world.chat(token, { message: 'third' })).status).toBe(429);
    expect((await used(tenant)).tokens).toBe(2 * CALL_TOKENS);
  });

  it('costs a turn without caps no counter round trip, and a capped one three: the check before it is stored, the reservation, the settlement', async () => {
    // Every counter call is one round trip to Redis (one script each).
    const counters = world.rt.runtime.events.counters;
    const calls: string[] = [];
    const original = { get: counters.get, increment: counters.increment, reserve: counters.reserve, settle: counters.settle };
    for (const name of Object.keys(original) as (keyof typeof original)[]) {
      (counters as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
        calls.push(name);
        return (original[name] as (...a: unknown[]) => unknown).apply(counters, args);
      };
    }
    try {
      const uncapped = await cappedTenant(undefined, DOLLAR_A_TOKEN);
      const capped = await cappedTenant({ rpm_limit: 100, tpm_limit: 100_000, budget: { amount_usd: 1000, window: 'day' } }, DOLLAR_A_TOKEN);
      for (const tenant of [uncapped, capped]) {
        const token = await tenant.mint({ capabilities: tenant.configuration.ceiling.capabilities });
        world.fake.script({ text: 'counted', usage: USAGE });
        calls.length = 0;
        expect((await world.chat(token, { message: 'count me' })).status).toBe(200);
        expect(calls).toEqual(tenant === uncapped ? [] : ['reserve', 'reserve', 'settle']);
      }
    } finally {
      Object.assign(counters, original);
    }
  });

  it('leaves no usage behind for the refused turns: once the cap is raised, exactly the headroom the admitted calls left is there', async () => {
    const tenant = await cappedTenant({ tpm_limit: 30 });
    const answers = await burst(tenant, answer);
    const admitted = answers.filter((a) => a.status === 200).length;
    expect(admitted).toBeLessThanOrEqual(2);

    // Raised to what the admitted calls used plus two calls' worth: two more sequential turns, then a refusal.
    expect((await tenant.reconfigure({ limits: { tpm_limit: CALL_TOKENS * (admitted + 2) } })).status).toBe(200);
    const token = await tenant.mint({ capabilities: tenant.configuration.ceiling.capabilities });
    world.fake.script({ text: 'one', usage: USAGE }, { text: 'two', usage: USAGE });
    expect((await world.chat(token, { message: 'next' })).status).toBe(200);
    expect((await world.chat(token, { message: 'and next' })).status).toBe(200);
    const refused = await world.chat(token, { message: 'one too many' });
    expect(refused.status).toBe(429);
    expect((await used(tenant)).tokens).toBe(CALL_TOKENS * (admitted + 2));
  });
});
