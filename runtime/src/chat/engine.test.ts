// The turn engine against the embedded store and in-process events, driven by a scripted model that records its
// calls: no HTTP, no provider. What a client sees is read from the run's log, what stays from the store.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { createMemoryEventBus, type EventBus } from '@agentplane/lib/events';
import { Lifecycle } from '@agentplane/lib/http/lifecycle';
import { createLogger } from '@agentplane/lib/logging';
import { effectivePermission, type Capability } from '@agentplane/lib/permissions';
import { AppError } from '@agentplane/lib/errors';
import { ModelCallAbortedError } from '../models/port.js';
import { script, ScriptedModels, type ScriptedPart } from '../models/scripted.js';
import { Conversations } from '../sessions/conversations.js';
import { runtimeMigrations } from '../store/migrations.js';
import type { RuntimeSchema } from '../store/schema.js';
import { TurnEngine, type EngineDeps } from './engine.js';
import type { Turn } from './turn/turn.js';
import { UsageLimiter } from './limits.js';
import { newRunId, runControlChannel, runLogKey, RunCancelledError, RunStore } from './runs.js';
import type { Frame } from './schemas.js';
import { ToolSet } from './tools.js';
import { ToolRegistry } from './tool-registry.js';
import { eventually } from '@agentplane/test/harness/eventually';
import { DraftKeeper } from './drafts.js';
import { TurnRecords } from './turn-records.js';
import { UsageRecorder } from './usage.js';
import { UNANSWERED_CALL } from './history.js';
import { OUTPUT_ALLOWANCE_FLOOR } from './estimate.js';
import { tenantEventPrefix } from '../tenants/keys.js';

let database: Database<RuntimeSchema>;
let events: EventBus;
let conversations: Conversations;
let runs: RunStore;
let engine: TurnEngine;
let models: ScriptedModels;
const tenantId = randomUUID();

beforeAll(async () => {
  database = await openDatabase<RuntimeSchema>({ driver: 'pglite' });
  await migrate(database.db, runtimeMigrations);
  await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'engine test', settings_json: '{}', webhook_secret: 'whs_test' }).execute();
  events = createMemoryEventBus();
  conversations = new Conversations(database.db, events.pubsub);
  runs = new RunStore(database.db, 'engine-test', 30);
  engine = engineWith({});
  await engine.listen();
});

/** An engine over the suite's store, events and scripted models; `change` swaps any of its parts. */
function engineWith(change: Partial<EngineDeps>): TurnEngine {
  const limiter = new UsageLimiter(events.counters);
  return new TurnEngine({
    events,
    conversations,
    runs,
    records: new TurnRecords(database.db),
    limiter,
    usage: new UsageRecorder(database.db),
    models: (target, modelId) => models.factory(target, modelId),
    lifecycle: new Lifecycle(),
    logger: createLogger({ level: 'silent' }),
    leaseSeconds: 30,
    drafts: new DraftKeeper(database.db, createLogger({ level: 'silent' }), 1_000),
    ...change,
  });
}

type LogAppend = (key: string, frame: Frame) => Promise<number>;

/**
 * An engine whose run log answers these appends its own way (a Redis that refuses, blinks or is slow), passing them
 * on to the suite's log with `pass`; everything else is the suite's.
 */
function engineOverLog(
  appends: Partial<Record<'append' | 'appendLast', (frame: Frame, pass: () => Promise<number>) => Promise<number>>>,
  change: Partial<EngineDeps> = {},
): TurnEngine {
  const logs = new Proxy(events.logs, {
    get: (target, key, receiver) => {
      const answer = key === 'append' || key === 'appendLast' ? appends[key] : undefined;
      if (!answer) return Reflect.get(target, key, receiver);
      const original = (target[key as 'append' | 'appendLast'] as LogAppend).bind(target);
      return (logKey: string, frame: Frame) => answer(frame, () => original(logKey, frame));
    },
  });
  return engineWith({ events: { ...events, logs }, ...change });
}

const blinked = () => Promise.reject(new AppError('unavailable', 'the event store blinked'));

afterAll(async () => {
  await events?.close();
  await database?.close();
});

beforeEach(() => {
  models = new ScriptedModels();
});

const caps = (...names: string[]) => names as Capability[];
const permission = effectivePermission({
  ceiling: { capabilities: caps('chat', 'ask_user', 'approvals') },
  token: { capabilities: caps('chat', 'ask_user', 'approvals') },
});
const clientTools = [
  { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
];

/** Stores what ChatService.start would (session, user message, running run) and gives the turn, not launched. */
async function storeTurn(message: string, overrides: Partial<Turn> & { sessionId?: string } = {}): Promise<Turn> {
  const sessionId = overrides.sessionId ?? randomUUID();
  const runId = newRunId();
  await database.db.transaction().execute(async (trx) => {
    if (!overrides.sessionId) await conversations.createSession(trx, { id: sessionId, tenantId, owner: 'alice' });
    await conversations.append(tenantId, sessionId, [{ role: 'user', content: message, subject: 'alice' }], trx);
    await runs.begin(trx, { id: runId, tenantId, sessionId, subject: 'alice', model: 'gpt-test' });
  });
  const history = await conversations.messagesOf(sessionId);
  const turn: Turn = {
    runId,
    sessionId,
    tenantId,
    subject: 'alice',
    model: 'gpt-test',
    target: { baseUrl: 'http://scripted.invalid/v1', apiKey: 'sk-test' },
    price: { input_per_million_usd: 1, output_per_million_usd: 2 },
    tools: ToolSet.forTurn(permission, { tools: clientTools }),
    systemPrompt: 'You are terse.',
    effort: undefined,
    limits: undefined,
    maxToolIterations: undefined,
    maxContextTokens: undefined,
    autoTitle: false,
    history,
    ...overrides,
  };
  return turn;
}

/** The turn stored, and launched on `on` with its `start` frame, as ChatService.start does. */
async function startTurn(message: string, overrides: Partial<Turn> & { sessionId?: string } = {}, on: TurnEngine = engine): Promise<Turn> {
  const turn = await storeTurn(message, overrides);
  await on.launch(turn, startFrame(turn));
  return turn;
}

const startFrame = (turn: Turn) => ({ type: 'start' as const, run_id: turn.runId, session_id: turn.sessionId, model: 'gpt-test' });

/** Every frame of a run's log up to its terminal one. */
async function framesOf(turn: Turn): Promise<Frame[]> {
  const frames: Frame[] = [];
  for await (const event of events.logs.tail<Frame>(runLogKey(tenantId, turn.runId), 0, AbortSignal.timeout(20_000))) frames.push(event.data);
  return frames;
}

/** The first frame of a type, waiting for it while the run goes on. */
async function waitForFrame(turn: Turn, type: Frame['type']): Promise<Frame> {
  for await (const event of events.logs.tail<Frame>(runLogKey(tenantId, turn.runId), 0, AbortSignal.timeout(20_000))) {
    if (event.data.type === type) return event.data;
  }
  throw new Error(`no ${type} frame`);
}

const terminal = (frames: Frame[]) => frames.at(-1)!;
/** What ChatService.steer does: queue the message on the run, then tell whoever holds the run. */
async function steerRun(turn: Turn, message: string): Promise<boolean> {
  const queued = await runs.queueSteer(tenantId, turn.runId, message);
  await engine.notify(runs.owner, { type: 'steer', run_id: turn.runId });
  return queued;
}
const messagesOf = (sessionId: string) => conversations.messagesOf(sessionId);
const runRow = (runId: string) => runs.get(runId);

describe('TurnEngine', () => {
  it('a plain turn relays tokens, stores the answer, records usage and ends with done', async () => {
    models.push([{ type: 'text-delta', text: 'Hel' }, { type: 'text-delta', text: 'lo' }, { type: 'finish', finishReason: 'stop', usage: { inputTokens: 12, outputTokens: 3 } }]);
    const turn = await startTurn('Say hello');
    const frames = await framesOf(turn);

    expect(frames.map((frame) => frame.type)).toEqual(['start', 'token', 'token', 'done']);
    expect(terminal(frames)).toMatchObject({
      type: 'done',
      content: 'Hello',
      finish_reason: null,
      requires_action: false,
      usage: { input_tokens: 12, output_tokens: 3, total_tokens: 15, cost_usd: (12 * 1 + 3 * 2) / 1_000_000 },
    });
    expect(models.calls).toHaveLength(1);
    const [call] = models.calls;
    expect(call).toMatchObject({ method: 'stream', modelId: 'gpt-test', target: { apiKey: 'sk-test' } });
    expect(call!.request.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say hello' },
    ]);
    expect(call!.request.tools?.map((tool) => tool.name).sort()).toEqual(['ask_user', 'get_weather', 'request_approval']);
    const stored = await messagesOf(turn.sessionId);
    expect(stored.map((row) => [row.role, row.content])).toEqual([['user', 'Say hello'], ['assistant', 'Hello']]);
    expect(terminal(frames)).toMatchObject({ message_id: stored[1]!.id });
    expect(await runRow(turn.runId)).toMatchObject({ status: 'completed', finish_reason: null });
    const usage = await database.db.selectFrom('usage_records').selectAll().where('run_id', '=', turn.runId).execute();
    expect(usage).toMatchObject([{ purpose: 'turn', input_tokens: 12, output_tokens: 3 }]);
  });

  it('takes over the model call sent while the turn was stored: one call, with the same prompt, relayed as usual', async () => {
    models.push([{ type: 'text-delta', text: 'Ear' }, { type: 'text-delta', text: 'ly' }, { type: 'finish', finishReason: 'stop', usage: { inputTokens: 5, outputTokens: 2 } }]);
    const turn = await storeTurn('Be quick');
    const early = engine.callEarly(turn, 'Be quick', startFrame(turn));
    // Sent before the run exists: the call is under way while the turn's rows would be stored.
    await early.started;
    expect(models.calls).toHaveLength(1);
    await engine.launch(turn, startFrame(turn), undefined, early);
    const frames = await framesOf(turn);
    expect(frames.map((frame) => frame.type)).toEqual(['start', 'token', 'token', 'done']);
    expect(terminal(frames)).toMatchObject({ type: 'done', content: 'Early', usage: { input_tokens: 5, output_tokens: 2 } });
    expect(models.calls).toHaveLength(1);
    expect(models.calls[0]!.request.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Be quick' },
    ]);
    expect((await messagesOf(turn.sessionId)).map((row) => [row.role, row.content])).toEqual([['user', 'Be quick'], ['assistant', 'Early']]);
  });

  it('drops an early call the stored turn does not match, and calls again with the prompt the run has', async () => {
    models.push([{ type: 'hang' }]);
    models.push(script.text('From the stored turn.'));
    const turn = await storeTurn('What was stored');
    const early = engine.callEarly(turn, 'Something else', startFrame(turn));
    await early.started;
    await engine.launch(turn, startFrame(turn), undefined, early);
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', content: 'From the stored turn.' });
    expect(models.calls).toHaveLength(2);
    expect(models.calls[0]!.request.signal?.aborted).toBe(true);
    expect(models.calls[1]!.request.messages.at(-1)).toEqual({ role: 'user', content: 'What was stored' });
  });

  it('aborts an early call whose turn was never stored, and closes the log its start frame opened', async () => {
    models.push([{ type: 'hang' }]);
    const turn = await storeTurn('unused');
    const early = engine.callEarly(turn, 'Never stored', startFrame(turn));
    await early.started;
    engine.abandon(early);
    expect(models.calls[0]!.request.signal?.aborted).toBe(true);
    expect(await framesOf(turn)).toEqual([startFrame(turn)]);
    expect(await events.logs.read(runLogKey(tenantId, turn.runId), 0)).toMatchObject({ state: 'closed' });
  });

  it('cancels an early call with its run', async () => {
    models.push([{ type: 'text-delta', text: 'Partial' }, { type: 'hang' }]);
    const turn = await storeTurn('Go on forever');
    const early = engine.callEarly(turn, 'Go on forever', startFrame(turn));
    await engine.launch(turn, startFrame(turn), undefined, early);
    await waitForFrame(turn, 'token');
    expect(engine.cancelHeld(turn.runId)).toBe(true);
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', finish_reason: 'cancelled' });
    expect(models.calls).toHaveLength(1);
    expect(models.calls[0]!.request.signal?.aborted).toBe(true);
  });

  it('a client tool call pauses the turn; its answer is placed after the call on the next turn', async () => {
    const call = { id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' };
    models.push(script.toolCalls([call]));
    const first = await startTurn('Weather in Oslo?');
    const paused = terminal(await framesOf(first));
    expect(paused).toMatchObject({
      type: 'done',
      finish_reason: null,
      requires_action: true,
      tool_calls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }],
    });
    expect(await runRow(first.runId)).toMatchObject({ status: 'requires_action' });
    const session = await database.db.selectFrom('sessions').selectAll().where('id', '=', first.sessionId).executeTakeFirstOrThrow();
    expect(session.status).toBe('requires_action');
    expect(session.pending).toMatchObject({ run_id: first.runId, tool_calls: [{ id: 'call_1', name: 'get_weather' }] });

    // The client answers (as ChatService stores it), and the next turn sends the result right after its call.
    await conversations.append(tenantId, first.sessionId, [{ role: 'tool', content: '{"temp":3}', toolCallId: 'call_1', name: 'get_weather', subject: 'alice' }]);
    models.push(script.text('3 degrees.'));
    const second = await startTurn('', { sessionId: first.sessionId });
    expect(terminal(await framesOf(second))).toMatchObject({ type: 'done', content: '3 degrees.', requires_action: false });
    const messages = models.calls[1]!.request.messages;
    const callAt = messages.findIndex((message) => message.role === 'assistant' && message.toolCalls?.[0]?.id === 'call_1');
    expect(messages[callAt + 1]).toEqual({ role: 'tool', toolCallId: 'call_1', content: '{"temp":3}' });
  });

  it('a call outside the tool set is refused with tool frames and the loop goes on', async () => {
    models.push(script.toolCalls([{ id: 'call_x', name: 'delete_everything', arguments: '{}' }]), script.text('I cannot do that.'));
    const turn = await startTurn('Delete it all');
    const frames = await framesOf(turn);
    expect(frames.filter((frame) => frame.type === 'tool_start' || frame.type === 'tool_end')).toMatchObject([
      { type: 'tool_start', tool_call_id: 'call_x', name: 'delete_everything' },
      { type: 'tool_end', tool_call_id: 'call_x', ok: false, result: expect.stringContaining('not available') },
    ]);
    expect(terminal(frames)).toMatchObject({ type: 'done', content: 'I cannot do that.' });
    expect(models.calls[1]!.request.messages.at(-1)).toMatchObject({ role: 'tool', toolCallId: 'call_x', content: expect.stringContaining('not available') });
  });

  it("runs each tool family's end-of-turn work once the run ended, paused or failed, and a failing one harms nothing", async () => {
    const ended: string[] = [];
    const registry = new ToolRegistry();
    // A family whose tool the model calls; it notes the turn's end, as the computer pauses its sandbox.
    registry.register({
      name: 'probe',
      forTurn: () => ({
        tools: [{ definition: { name: 'probe', description: 'Probe', parameters: { type: 'object' } }, needs: [], run: async () => ({ ok: true as const, text: 'probed' }) }],
        ended: async () => void ended.push('probe'),
      }),
    });
    registry.register({ name: 'broken', forTurn: () => ({ tools: [], ended: async () => Promise.reject(new Error('cannot pause')) }) });
    const withFamilies = async () => ToolSet.forTurn(permission, { tools: clientTools }, await registry.forTurn({ principal: undefined as never, permission, request: {} }));

    // Completed after a server call; then paused on a client call; then failed by the model.
    models.push(script.toolCalls([{ id: 'call_p', name: 'probe', arguments: '{}' }]), script.text('Done.'));
    const completed = await startTurn('Probe it', { tools: await withFamilies() });
    expect(terminal(await framesOf(completed))).toMatchObject({ type: 'done', content: 'Done.' });
    await eventually(() => ended.length === 1);
    expect(ended).toEqual(['probe']);

    models.push(script.toolCalls([{ id: 'call_w', name: 'get_weather', arguments: '{"city":"Oslo"}' }]));
    const paused = await startTurn('Weather?', { tools: await withFamilies() });
    expect(terminal(await framesOf(paused))).toMatchObject({ type: 'done', requires_action: true });
    await eventually(() => ended.length === 2);

    models.push([{ type: 'error', error: new AppError('upstream_failed', 'the provider answered 500', { code: 'provider_error' }) }]);
    const failed = await startTurn('Again', { tools: await withFamilies() });
    expect(terminal(await framesOf(failed))).toMatchObject({ type: 'error' });
    await eventually(() => ended.length === 3);
  });

  it('reserves every model call of a multi-step turn before it is sent, and settles each to the usage it reported', async () => {
    const tpm = `${tenantEventPrefix(tenantId)}limits:tpm`;
    const before = (await events.counters.get(tpm)).value;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The second step is held while it runs: the first is settled, the second reserved.
    models.push(script.toolCalls([{ id: 'call_r', name: 'missing_tool', arguments: '{}' }], { inputTokens: 40, outputTokens: 2 }), [
      { type: 'wait', until: held },
      ...script.text('Done.', { inputTokens: 50, outputTokens: 3 }),
    ]);
    const turn = await startTurn('Two steps', { limits: { tpm_limit: 1_000_000 } });
    await waitForFrame(turn, 'tool_end');
    for (let tries = 0; models.calls.length < 2 && tries < 200; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
    const during = (await events.counters.get(tpm)).value - before;
    // 42 settled, and the second call's estimate: its prompt and at least the output floor.
    expect(during).toBeGreaterThan(42 + OUTPUT_ALLOWANCE_FLOOR);
    release();
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', content: 'Done.' });
    expect((await events.counters.get(tpm)).value - before).toBe(42 + 53);
  });

  it('releases the reservation of a call that failed, and refuses the next with 429 once the cap is reached, adding nothing', async () => {
    const keys = { tpm: `${tenantEventPrefix(tenantId)}limits:tpm`, rpm: `${tenantEventPrefix(tenantId)}limits:rpm` };
    const value = async (key: string) => (await events.counters.get(key)).value;
    // Some tokens counted already, whichever tests ran first: the cap below is then reached.
    await events.counters.increment(keys.tpm, 1, 60);
    const before = { tpm: await value(keys.tpm), rpm: await value(keys.rpm) };
    models.push(script.error(new AppError('upstream_failed', 'the provider answered 500', { code: 'provider_error' })));
    const failed = await startTurn('Fail', { limits: { tpm_limit: 1_000_000, rpm_limit: 1_000 } });
    expect(terminal(await framesOf(failed))).toMatchObject({ type: 'error', status: 502 });
    // It counts one request, and no tokens: it reported none.
    expect(await value(keys.tpm)).toBe(before.tpm);
    expect(await value(keys.rpm)).toBe(before.rpm + 1);

    // A cap already reached: the call is never sent, and neither counter moves.
    const refused = await startTurn('Refused', { limits: { tpm_limit: before.tpm, rpm_limit: 1_000 } });
    const frames = await framesOf(refused);
    expect(terminal(frames)).toMatchObject({ type: 'error', status: 429, code: 'rate_limited' });
    expect(models.calls).toHaveLength(1);
    expect(await value(keys.tpm)).toBe(before.tpm);
    expect(await value(keys.rpm)).toBe(before.rpm + 1);
  });

  it('max_tool_iterations ends the turn after that many tool rounds', async () => {
    const refused = (id: string) => script.toolCalls([{ id, name: 'missing_tool', arguments: '{}' }]);
    models.push(refused('a'), refused('b'), refused('c'));
    const turn = await startTurn('Loop', { maxToolIterations: 1 });
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', finish_reason: 'max_tool_iterations' });
    expect(models.calls).toHaveLength(2);
    expect(models.remaining).toBe(1);
    expect(await runRow(turn.runId)).toMatchObject({ status: 'completed', finish_reason: 'max_tool_iterations' });
  });

  it('cancel mid-stream aborts the model call, keeps the text and ends the run cancelled', async () => {
    models.push([{ type: 'text-delta', text: 'Partial' }, { type: 'hang' }]);
    const turn = await startTurn('Write a long essay');
    await waitForFrame(turn, 'token');
    // As another replica would: the row flag and a notice on the holding process's control channel.
    await runs.requestCancel(turn.runId);
    await events.pubsub.publish(runControlChannel(runs.owner), { type: 'cancel', run_id: turn.runId });
    const frames = await framesOf(turn);

    expect(terminal(frames)).toMatchObject({ type: 'done', finish_reason: 'cancelled', content: 'Partial' });
    const signal = models.calls[0]!.request.signal!;
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(RunCancelledError);
    expect(await runRow(turn.runId)).toMatchObject({ status: 'cancelled', finish_reason: 'cancelled' });
    const [, kept] = await messagesOf(turn.sessionId);
    expect(kept).toMatchObject({ role: 'assistant', content: 'Partial', metadata: { incomplete: true } });
  });

  it('a steer sent during a step is taken at the next step boundary, before the next model call', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const waitThenCall: ScriptedPart[] = [{ type: 'wait', until: released }, ...script.toolCalls([{ id: 'call_s', name: 'missing_tool', arguments: '{}' }])];
    models.push(waitThenCall, script.text('Steered.'));
    const turn = await startTurn('Start something');
    await expect.poll(() => models.calls.length).toBe(1);
    expect(await steerRun(turn, 'Do it in French')).toBe(true);
    release();
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', content: 'Steered.' });
    expect(models.calls[0]!.request.messages.some((message) => message.content === 'Do it in French')).toBe(false);
    expect(models.calls[1]!.request.messages.at(-1)).toEqual({ role: 'user', content: 'Do it in French' });
    const steer = (await messagesOf(turn.sessionId)).find((row) => row.content === 'Do it in French');
    expect(steer).toMatchObject({ role: 'user', run_id: turn.runId, metadata: { steer: true } });
  });

  it('a steer that arrives as the agent finishes reopens the loop instead of being lost', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    models.push([{ type: 'wait', until: released }, ...script.text('First answer.')], script.text('Second answer.'));
    const turn = await startTurn('Answer');
    await expect.poll(() => models.calls.length).toBe(1);
    await steerRun(turn, 'One more thing');
    release();
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', content: 'Second answer.' });
    expect(models.calls).toHaveLength(2);
  });

  it('a model error ends the run with its status in the error frame and keeps the partial text', async () => {
    models.push([{ type: 'text-delta', text: 'Half' }, { type: 'error', error: new AppError('upstream_failed', 'the provider answered 500', { code: 'provider_error' }) }]);
    const turn = await startTurn('Hi');
    const frames = await framesOf(turn);
    expect(terminal(frames)).toMatchObject({ type: 'error', status: 502, code: 'provider_error', retryable: true, run_id: turn.runId, session_id: turn.sessionId });
    expect(await runRow(turn.runId)).toMatchObject({ status: 'failed', error: { status: 502, code: 'provider_error' } });
    const session = await database.db.selectFrom('sessions').select('status').where('id', '=', turn.sessionId).executeTakeFirstOrThrow();
    expect(session.status).toBe('failed');
    expect((await messagesOf(turn.sessionId)).at(-1)).toMatchObject({ role: 'assistant', content: 'Half', metadata: { incomplete: true } });
  });

  it('a cancel held by this process stops the loop before the next model call', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    models.push([{ type: 'wait', until: released }, ...script.toolCalls([{ id: 'call_c', name: 'missing_tool', arguments: '{}' }])], script.text('never'));
    const turn = await startTurn('Work');
    await expect.poll(() => models.calls.length).toBe(1);
    expect(engine.cancelHeld(turn.runId)).toBe(true);
    release();
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', finish_reason: 'cancelled' });
    // The first call saw the abort; no second call was made.
    expect(models.calls).toHaveLength(1);
  });

  it('a history call with no stored result is answered for the provider', async () => {
    models.push(script.toolCalls([{ id: 'call_u', name: 'get_weather', arguments: '{}' }]));
    const first = await startTurn('Weather?');
    await framesOf(first);
    // The client never answers and sends a new message (ChatService would refuse; a fork or crash leaves the same).
    await database.db.updateTable('sessions').set({ pending: null }).where('id', '=', first.sessionId).execute();
    models.push(script.text('ok'));
    const second = await startTurn('Never mind', { sessionId: first.sessionId });
    await framesOf(second);
    expect(models.calls[1]!.request.messages).toContainEqual({ role: 'tool', toolCallId: 'call_u', content: UNANSWERED_CALL });
  });

  it('a run whose start frame the log refuses never calls the model: launch throws, the run and session end failed', async () => {
    // An event port that refuses appends, as Redis going away would; everything else is the suite's own.
    const broken = engineOverLog({ append: () => Promise.reject(new AppError('unavailable', 'the event store is unreachable')) });
    models.push(script.text('never said'));
    const turn = await storeTurn('Hi');
    const { runId, sessionId } = turn;

    await expect(broken.launch(turn, startFrame(turn))).rejects.toThrow('unreachable');
    expect(broken.heldRuns).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(models.calls).toHaveLength(0);
    expect(await runRow(runId)).toMatchObject({ status: 'failed' });
    const session = await database.db.selectFrom('sessions').select('status').where('id', '=', sessionId).executeTakeFirstOrThrow();
    expect(session.status).toBe('failed');
  });

  it('renews the leases of all its runs in one statement, and a cancel asked only of the row reaches a run at the next renewal', async () => {
    const quick = engineWith({ leaseSeconds: 0.6 }); // renewed every 200 ms
    const hanging = Array.from({ length: 6 }, () => [{ type: 'hang' }] as ScriptedPart[]);
    models.push(...hanging);
    const turns: Turn[] = [];
    for (let i = 0; i < hanging.length; i++) turns.push(await startTurn(`Hang ${i}`, {}, quick));
    await expect.poll(() => models.calls.length).toBe(hanging.length);

    // Each renewal is one statement for all six runs, not six. Nothing else touches the store while the runs hang, so
    // the statements counted are renewals: once two have run, fewer statements than runs were spent, and every run's
    // lease moved on, all to the one instant a single statement gives them.
    const leases = async () =>
      (await database.db.selectFrom('runs').select('lease_expires_at').where('id', 'in', turns.map((turn) => turn.runId)).execute()).map((row) =>
        new Date(row.lease_expires_at!).getTime(),
      );
    const granted = Math.max(...(await leases()));
    const before = database.statements();
    await expect.poll(() => database.statements() - before, { interval: 10, timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    const spent = database.statements() - before;
    const renewed = await leases();
    expect(spent).toBeLessThan(hanging.length);
    expect(new Set(renewed).size).toBe(1);
    expect(renewed[0]).toBeGreaterThan(granted);

    // Asked of the row only (a lost notice): each run sees it at the next renewal and ends cancelled.
    for (const turn of turns) await runs.requestCancel(turn.runId);
    for (const turn of turns) expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', finish_reason: 'cancelled' });
    expect(quick.heldRuns).toBe(0);
  });

  it('keeps a provider\'s text that holds NUL or a lone surrogate, as U+FFFD, instead of failing the run', async () => {
    models.push([
      { type: 'text-delta', text: 'a\u0000b' },
      { type: 'text-delta', text: ' c\ud800d' },
      { type: 'finish', finishReason: 'stop', usage: { inputTokens: 1, outputTokens: 2 } },
    ]);
    const turn = await startTurn('Say something odd');
    const frames = await framesOf(turn);
    expect(terminal(frames)).toMatchObject({ type: 'done', content: 'a\uFFFDb c\uFFFDd' });
    expect(frames.filter((frame) => frame.type === 'token').map((frame) => (frame as { text: string }).text)).toEqual(['a\uFFFDb', ' c\uFFFDd']);
    expect((await messagesOf(turn.sessionId)).at(-1)).toMatchObject({ role: 'assistant', content: 'a\uFFFDb c\uFFFDd' });
  });

  it('tells a caller waiting on the run its stored answer while the done frame is still being appended', async () => {
    // An event port whose closing append waits until the test lets it go, as a slow Redis would.
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const slow = engineOverLog({ appendLast: async (_frame, pass) => (await held, pass()) });
    models.push(script.text('Stored first.'));
    const turn = await storeTurn('Answer me');
    const answered = new Promise<Frame | undefined>((resolve) => void slow.launch(turn, startFrame(turn), resolve));

    // The answer reaches the waiter while the log has no terminal frame yet, and the database already says it.
    expect(await answered).toMatchObject({ type: 'done', content: 'Stored first.', finish_reason: null });
    expect(await runRow(turn.runId)).toMatchObject({ status: 'completed' });
    const before = await events.logs.read<Frame>(runLogKey(tenantId, turn.runId), 0, 100);
    expect(before.state === 'live' ? before.events.map((event) => event.data.type) : before.state).toEqual(['start', 'token']);
    letGo();
    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'done', content: 'Stored first.' });
  });

  it('completes a run whose last token frame the log refused after the answer arrived: stored, and its done frame carries the whole answer', async () => {
    // The log refuses the answer's last token only, as a Redis blip at the very end of a stream would.
    const blinking = engineOverLog({ append: (frame, pass) => (frame.type === 'token' && frame.text === 'lo' ? blinked() : pass()) });
    models.push([{ type: 'text-delta', text: 'Hel' }, { type: 'text-delta', text: 'lo' }, { type: 'finish', finishReason: 'stop', usage: { inputTokens: 2, outputTokens: 2 } }]);
    const turn = await startTurn('Say hello', {}, blinking);

    const frames = await framesOf(turn);
    expect(frames.map((frame) => frame.type)).toEqual(['start', 'token', 'done']);
    expect(terminal(frames)).toMatchObject({ type: 'done', content: 'Hello' });
    expect(await runRow(turn.runId)).toMatchObject({ status: 'completed' });
    expect((await messagesOf(turn.sessionId)).at(-1)).toMatchObject({ role: 'assistant', content: 'Hello' });
  });

  it('keeps a stored run completed when its done frame is refused at first: the waiter has the answer, the log gets done and no error', async () => {
    // The log's closing append fails once, as a Redis blip right at the end would, then takes the retry.
    let refusals = 1;
    const ended: string[] = [];
    const blinkingEngine = engineOverLog(
      { appendLast: (frame, pass) => (frame.type === 'done' && refusals-- > 0 ? blinked() : pass()) },
      { observe: { turnEnded: (status) => void ended.push(status), usage: () => undefined } },
    );
    models.push(script.text('Kept.'));
    const turn = await storeTurn('Answer me');
    const answered = new Promise<Frame | undefined>((resolve) => void blinkingEngine.launch(turn, startFrame(turn), resolve));

    expect(await answered).toMatchObject({ type: 'done', content: 'Kept.' });
    const frames = await framesOf(turn);
    expect(frames.map((frame) => frame.type)).toEqual(['start', 'token', 'done']);
    expect(await runRow(turn.runId)).toMatchObject({ status: 'completed' });
    await expect.poll(() => blinkingEngine.heldRuns).toBe(0);
    expect(ended).toEqual(['completed']);
  });

  it('fails a run steered after its last token frame was refused: the text its followers never got is not skipped', async () => {
    const steered = engineOverLog({ append: (frame, pass) => (frame.type === 'token' && frame.text === 'First reply.' ? blinked() : pass()) });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    models.push([{ type: 'wait', until: released }, ...script.text('First reply.')], script.text('Second answer.'));
    const turn = await startTurn('Answer', {}, steered);
    await expect.poll(() => models.calls.length).toBe(1);
    await runs.queueSteer(tenantId, turn.runId, 'One more thing');
    release();

    expect(terminal(await framesOf(turn))).toMatchObject({ type: 'error', message: 'the event store blinked' });
    expect(models.calls).toHaveLength(1);
    expect(await runRow(turn.runId)).toMatchObject({ status: 'failed' });
  });

  it('the scripted model ends an aborted stream as a real adapter does', async () => {
    const controller = new AbortController();
    const stream = models.factory({ baseUrl: 'x', apiKey: 'y' }, 'm').stream({ model: 'm', messages: [], signal: controller.signal });
    models.push([{ type: 'hang' }]);
    const parts: unknown[] = [];
    const reading = (async () => {
      for await (const part of stream) parts.push(part);
    })();
    setTimeout(() => controller.abort(), 10);
    await reading;
    expect(parts).toEqual([{ type: 'error', error: expect.any(ModelCallAbortedError) }]);
  });
});
