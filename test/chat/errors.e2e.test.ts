// Every error of a turn (SPEC.md Errors rules 1-5, 9, 10) with its exact status and text, on the blocking path and
// as the streaming path's terminal `error` frame, and what each leaves in the session.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chatWorld, MODEL, providerSection, type ChatWorld } from './fixture.js';

describe('turn errors', () => {
  let world: ChatWorld;

  beforeAll(async () => {
    world = await chatWorld({ PROVIDER_TIMEOUT_MS: '400' });
  }, 60_000);
  beforeEach(() => {
    world.fake.clearScripts();
    world.fake.clearFaults();
  });
  afterAll(async () => world?.stop());

  /** The blocking answer and the stream's error frame for the same failure must agree. */
  async function bothPaths(token: string, body: Record<string, unknown>, script: () => void) {
    script();
    const blocking = await world.chat(token, body);
    const blockingBody = (await blocking.json()) as Record<string, unknown>;
    script();
    const { response, events } = await world.streamAll(token, body);
    expect(response.status).toBe(200);
    expect(events[0]!.event).toBe('start');
    const terminal = events.at(-1)!;
    expect(terminal.event).toBe('error');
    expect(events.filter((e) => e.event === 'error' || e.event === 'done')).toHaveLength(1);
    const frame = terminal.data as Record<string, unknown>;
    expect(frame).toMatchObject({ status: blocking.status, message: blockingBody.detail, run_id: response.headers.get('x-run-id') });
    expect(blockingBody.run_id).toEqual(expect.stringMatching(/^run_/));
    expect(blockingBody.session_id).toEqual(expect.any(String));
    return { status: blocking.status, body: blockingBody, frame };
  }

  it('refuses an unregistered model with 400 and SPEC\'s sentence, before anything is sent or stored, naming no run or session that does not exist', async () => {
    const token = await world.token();
    const before = world.fake.chatRequests().length;
    const sessionsBefore = await world.rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).execute();
    const detail = `model 'gpt-9' is not available to this project. Registered: gpt-4.1, gpt-4o-mini`;
    const blocking = await world.chat(token, { message: 'hi', model: 'gpt-9' });
    expect(blocking.status).toBe(400);
    expect(blocking.headers.get('x-run-id')).toBeNull();
    // Nothing was created: no run id, and no id of a session that was never made.
    expect(await blocking.json()).toMatchObject({ detail });
    const { response, events } = await world.streamAll(token, { message: 'hi', model: 'gpt-9' });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-run-id')).toBeNull();
    expect(events.map((e) => e.event)).toEqual(['error']);
    expect(events[0]!.data).toEqual({ type: 'error', status: 400, code: 'invalid_argument', message: detail, retryable: false, run_id: null, session_id: null });
    // Named, the conversation is carried (it exists), still with no run.
    world.fake.script('first');
    const first = (await (await world.chat(token, { message: 'hello' })).json()) as { session_id: string };
    const named = await world.chat(token, { message: 'hi', model: 'gpt-9', session_id: first.session_id });
    expect(await named.json()).toMatchObject({ detail, session_id: first.session_id });
    const namedStream = await world.streamAll(token, { message: 'hi', model: 'gpt-9', session_id: first.session_id });
    expect(namedStream.events.map((e) => e.data)).toEqual([{ type: 'error', status: 400, code: 'invalid_argument', message: detail, retryable: false, run_id: null, session_id: first.session_id }]);
    expect(world.fake.chatRequests()).toHaveLength(before + 1);
    const sessionsAfter = await world.rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).execute();
    expect(sessionsAfter.map((row) => row.id).sort()).toEqual([...sessionsBefore.map((row) => row.id), first.session_id].sort());
  });

  it('refuses a message carrying a NUL character with 422 naming the field, on both paths, storing nothing', async () => {
    const token = await world.token();
    for (const send of [world.chat, world.stream]) {
      const res = await send(token, { message: 'bad\u0000byte' });
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ detail: [{ loc: ['body', 'message'], msg: 'must not contain the NUL character (U+0000)' }] });
    }
    const steer = await world.rt.endUser('/chat/stream/run_000000000000000000000000/steer', token, { method: 'POST', body: JSON.stringify({ message: 'x\u0000' }) });
    expect(steer.status).toBe(404);
  });

  it('refuses a model outside the token\'s allow-list with 403', async () => {
    const token = await world.token({ allowed_models: [MODEL] });
    const res = await world.chat(token, { message: 'hi', model: 'gpt-4.1' });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ detail: "model 'gpt-4.1' is not allowed for this token", code: 'model_not_allowed' });
  });

  it('answers a provider rejection with 400', async () => {
    const token = await world.token();
    const { status, body } = await bothPaths(token, { message: 'hi' }, () => world.fake.script({ status: 400, message: 'messages: too long' }));
    expect(status).toBe(400);
    expect(body).toMatchObject({ code: 'provider_rejected' });
    expect(String(body.detail)).toContain('messages: too long');
  });

  it('answers a refused provider key with 400', async () => {
    const token = await world.token();
    const { status, body } = await bothPaths(token, { message: 'hi' }, () => world.fake.script({ status: 401, message: 'Incorrect API key provided' }));
    expect(status).toBe(400);
    expect(body).toMatchObject({ code: 'provider_rejected' });
  });

  it.each([429, 500])('answers a provider failure (%i) with 502 and the provider\'s own message, retryable', async (providerStatus) => {
    const token = await world.token();
    const { status, body, frame } = await bothPaths(token, { message: 'hi' }, () =>
      world.fake.script({ status: providerStatus, message: `upstream says ${providerStatus}` }),
    );
    expect(status).toBe(502);
    expect(String(body.detail)).toContain(`upstream says ${providerStatus}`);
    expect(frame.retryable).toBe(true);
  });

  it('answers a provider that does not answer in time with 504 and no status code in the sentence', async () => {
    const token = await world.token();
    const { status, body } = await bothPaths(token, { message: 'hi' }, () => world.fake.script('hang'));
    expect(status).toBe(504);
    expect(body.detail).toBe('the upstream request timed out');
  });

  it('keeps what a failing turn wrote readable in the session', async () => {
    const token = await world.token();
    world.fake.script({ text: 'partial answer that breaks', failAfterChunks: 2 });
    const res = await world.chat(token, { message: 'tell me' });
    expect(res.status).toBe(502);
    const body = (await res.json()) as { session_id: string; run_id: string };
    const messages = (await (await world.rt.endUser(`/chat/sessions/${body.session_id}/messages`, token)).json()) as { role: string; content: string }[];
    expect(messages[0]).toMatchObject({ role: 'user', content: 'tell me' });
    expect(messages[1]!.role).toBe('assistant');
    expect('partial answer that breaks'.startsWith(messages[1]!.content)).toBe(true);
    expect(messages[1]!.content.length).toBeGreaterThan(0);
    const sessions = (await (await world.rt.endUser(`/chat/sessions?q=${body.session_id}`, token)).json()) as { sessions: { status: string }[] };
    expect(sessions.sessions[0]!.status).toBe('failed');
  });

  it('answers 409 no_provider when no credential serves the model, and the failed turn persists nothing', async () => {
    const token = await world.token();
    world.fake.script('first');
    const first = (await (await world.chat(token, { message: 'before rotation' })).json()) as { session_id: string };
    expect((await world.tenant.reconfigure({ providers: [], default_model: null })).status).toBe(200);
    try {
      const res = await world.chat(token, { message: 'after rotation', session_id: first.session_id, model: MODEL });
      expect(res.status).toBe(409);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ code: 'no_provider', session_id: first.session_id });
      expect(body).not.toHaveProperty('run_id');
      expect(String(body.detail)).toContain(`no provider serves model '${MODEL}'`);
      const { events } = await world.streamAll(token, { message: 'again', session_id: first.session_id, model: MODEL });
      expect(events.at(-1)!.data).toMatchObject({ type: 'error', status: 409, code: 'no_provider', session_id: first.session_id });
      const messages = (await (await world.rt.endUser(`/chat/sessions/${first.session_id}/messages`, token)).json()) as unknown[];
      expect(messages).toHaveLength(2);
      // A new conversation refused this way is never created, so no session id (and no run id) is named.
      const fresh = await world.chat(token, { message: 'new', model: MODEL });
      expect(fresh.status).toBe(409);
      const freshBody = (await fresh.json()) as Record<string, unknown>;
      expect(freshBody).toMatchObject({ code: 'no_provider' });
      expect(freshBody).not.toHaveProperty('session_id');
      expect(freshBody).not.toHaveProperty('run_id');
    } finally {
      await world.tenant.reconfigure({ providers: providerSection(world.fake), default_model: MODEL });
    }
  });

  it('answers 409 no_provider naming cause and fix once the project\'s only provider is removed, persisting nothing; a project that never had a model still ends no_model', async () => {
    const token = await world.token();
    world.fake.script('first');
    const first = (await (await world.chat(token, { message: 'before removal' })).json()) as { session_id: string };
    const ceiling = world.tenant.configuration.ceiling;
    // What the control plane pushes once the only provider is deleted: no providers, no registered models, and the
    // default model the customer chose, which nothing serves any more.
    const removed = await world.tenant.reconfigure({ providers: undefined, default_model: MODEL, ceiling: { ...ceiling, registeredModels: [] } });
    expect(removed.status).toBe(200);
    try {
      const before = world.fake.chatRequests().length;
      const runsBefore = await world.rt.runtime.database.db.selectFrom('runs').select('id').where('tenant_id', '=', world.tenant.tenantId).execute();
      const res = await world.chat(token, { message: 'after removal', session_id: first.session_id });
      expect(res.status).toBe(409);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ code: 'no_provider', session_id: first.session_id });
      expect(body).not.toHaveProperty('finish_reason');
      // The cause (the default model's provider is gone) and the fix (register one, or choose another default).
      expect(String(body.detail)).toContain(`no provider serves model '${MODEL}'`);
      expect(String(body.detail)).toContain('POST /api/projects/{id}/providers');
      expect(String(body.detail)).toContain('POST /api/projects/{id}/default-model');
      const { response, events } = await world.streamAll(token, { message: 'again', session_id: first.session_id });
      expect(response.status).toBe(200);
      expect(events.filter((e) => e.event === 'error' || e.event === 'done')).toHaveLength(1);
      expect(events.at(-1)!.event).toBe('error');
      expect(events.at(-1)!.data).toMatchObject({ type: 'error', status: 409, code: 'no_provider', message: body.detail, retryable: false, session_id: first.session_id });
      const fresh = await world.chat(token, { message: 'new conversation' });
      expect(fresh.status).toBe(409);
      expect(await fresh.json()).not.toHaveProperty('session_id');
      // Nothing persisted: the history is the first turn alone, no run was recorded and no model was called.
      const messages = (await (await world.rt.endUser(`/chat/sessions/${first.session_id}/messages`, token)).json()) as { content: string }[];
      expect(messages.map((m) => m.content)).toEqual(['before removal', 'first']);
      const runsAfter = await world.rt.runtime.database.db.selectFrom('runs').select('id').where('tenant_id', '=', world.tenant.tenantId).execute();
      expect(runsAfter).toHaveLength(runsBefore.length);
      expect(world.fake.chatRequests()).toHaveLength(before);
      // A project that never had a model (no default, no provider) ends no_model at once, free.
      expect((await world.tenant.reconfigure({ default_model: null })).status).toBe(200);
      const never = await world.chat(token, { message: 'anyone?' });
      expect(never.status).toBe(200);
      expect(await never.json()).toMatchObject({ finish_reason: 'no_model', content: '' });
    } finally {
      await world.tenant.reconfigure({ providers: providerSection(world.fake), default_model: MODEL, ceiling });
    }
  });

  it('answers 429 with the reset time once the project\'s rpm limit is reached, without delaying', async () => {
    expect((await world.tenant.reconfigure({ limits: { rpm_limit: 2 } })).status).toBe(200);
    try {
      const token = await world.token();
      world.fake.script('one', 'two');
      expect((await world.chat(token, { message: '1' })).status).toBe(200);
      expect((await world.chat(token, { message: '2' })).status).toBe(200);
      const before = world.fake.chatRequests().length;
      const refused = await world.chat(token, { message: '3' });
      expect(refused.status).toBe(429);
      const body = (await refused.json()) as { detail: string; code: string; reset_at: string; run_id: string };
      expect(body.code).toBe('rate_limited');
      expect(body.detail).toMatch(/^rate limit reached: 2 model requests per minute for this project; it resets at \d{4}-\d\d-\d\dT/);
      expect(body.detail).toContain(body.reset_at);
      expect(world.fake.chatRequests()).toHaveLength(before);
    } finally {
      await world.tenant.reconfigure({ limits: undefined });
    }
  });

  it('answers 429 once the token rate limit is spent', async () => {
    expect((await world.tenant.reconfigure({ limits: { tpm_limit: 50 } })).status).toBe(200);
    try {
      const token = await world.token();
      world.fake.script({ text: 'big', usage: { prompt_tokens: 40, completion_tokens: 20 } });
      expect((await world.chat(token, { message: 'spend' })).status).toBe(200);
      const refused = await world.chat(token, { message: 'more' });
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { detail: string }).detail).toMatch(/^token rate limit reached: 50 tokens per minute/);
    } finally {
      await world.tenant.reconfigure({ limits: undefined });
    }
  });

  it('answers budget_exceeded once the spend cap is reached, with the cost recorded per turn', async () => {
    const priced = providerSection(world.fake, undefined, { prices: { [MODEL]: { input_per_million_usd: 1_000_000, output_per_million_usd: 1_000_000 } } });
    expect((await world.tenant.reconfigure({ providers: priced, limits: { budget: { amount_usd: 5, window: 'day' } } })).status).toBe(200);
    try {
      const token = await world.token();
      world.fake.script({ text: 'costly', usage: { prompt_tokens: 3, completion_tokens: 3 } });
      const first = (await (await world.chat(token, { message: 'buy' })).json()) as { usage: { cost_usd: number } };
      expect(first.usage.cost_usd).toBe(6);
      const refused = await world.chat(token, { message: 'again' });
      expect(refused.status).toBe(429);
      const body = (await refused.json()) as { detail: string; code: string };
      expect(body.code).toBe('budget_exceeded');
      expect(body.detail).toMatch(/^spend cap reached: \$5 per day for this project; it resets at \d{4}-\d\d-\d\dT00:00:00.000Z, or raise the cap$/);
    } finally {
      await world.tenant.reconfigure({ providers: providerSection(world.fake), limits: undefined });
    }
  });

  it('routes a tenant with a litellm_key through that key', async () => {
    const patched = await world.rt.admin(`/tenants/${world.tenant.tenantId}`, { method: 'PATCH', body: JSON.stringify({ settings_json: { litellm_key: 'sk-litellm-virtual-0002' } }) });
    expect(patched.status).toBe(200);
    const original = world.fake.apiKey;
    world.fake.apiKey = 'sk-litellm-virtual-0002';
    try {
      const token = await world.token();
      world.fake.script('via litellm');
      const res = await world.chat(token, { message: 'route me' });
      expect(res.status).toBe(200);
      expect(world.fake.requestsTo('/chat/completions').at(-1)!.headers.authorization).toBe('Bearer sk-litellm-virtual-0002');
    } finally {
      world.fake.apiKey = original;
      await world.rt.admin(`/tenants/${world.tenant.tenantId}`, { method: 'PATCH', body: JSON.stringify({ settings_json: { litellm_key: null } }) });
    }
  });
});
