// Webhook tools: issue 15's latency line, measured in one run on loopback (fake provider, handler, runtime and client
// in one process). The line: a turn that calls a webhook tool adds at most one handler round trip, plus one model
// step, plus 1.5 ms at p50, over a turn without tools. Each term is its own row: the handler's round trip measured
// directly against the same handler, and the model step as the runtime takes it, from a two-step turn without the
// tool (the model calls a tool the turn does not offer: refused, answered, and a second step) less a one-step turn.
// Baseline: a client doing the same itself with the SDK and fetch.
import { performance } from 'node:perf_hooks';
import OpenAI from 'openai';
import { chatWorld, CHAT_CAPABILITIES, MODEL, OTHER_MODEL, type ChatWorld } from '../chat/fixture.js';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { finishTable, latencyColumns, summarise, timingRow, Teardown, type BenchReport, type LoopOptions, type Row, type Subject, type Table } from './measure.js';

const LOOP = { warmup: 20, ops: 300 };
const TOOL = 'lookup_order';
const CALL = { toolCalls: [{ name: TOOL, arguments: { order_id: 'A-1' } }] };
const ANSWER = 'It shipped on 3 March.';
/** A call outside the turn's set: the runtime refuses it in a tool message and takes the model's second step. */
const REFUSED_CALL = { toolCalls: [{ name: 'not_offered', arguments: { order_id: 'A-1' } }] };
/** The line's allowance for the runtime's own work on a webhook call, beyond the handler and the model step. */
const TARGET_REMAINDER_MS = 1.5;

interface ToolTarget extends Subject {
  turn(): Promise<void>;
}

/**
 * Every target's turn once a round, the order turned by one each round, so a busy spell on the machine falls on all
 * of them alike: the line is a difference of p50s, which rows measured one after another would skew.
 */
async function timeRounds(targets: ToolTarget[], loop: LoopOptions): Promise<{ rows: Row[]; latencies: number[][] }> {
  for (let i = 0; i < loop.warmup; i++) for (const target of targets) await target.turn();
  const latencies = targets.map(() => [] as number[]);
  for (let round = 0; round < loop.ops; round++) {
    for (let k = 0; k < targets.length; k++) {
      const index = (round + k) % targets.length;
      const t0 = performance.now();
      await targets[index]!.turn();
      latencies[index]!.push(performance.now() - t0);
    }
  }
  // A target's throughput is its own turns over its own time (one client, one turn at a time).
  const rows = targets.map((target, i) => timingRow('turn, 1 client', target, summarise(latencies[i]!, latencies[i]!.reduce((a, b) => a + b, 0))));
  return { rows, latencies };
}

async function setupTables(setup: string, env: Record<string, string>): Promise<Table[]> {
  const teardown = new Teardown();
  try {
    const fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL], record: false });
    teardown.add(() => fake.stop());
    const handler = await WebhookHandler.start();
    teardown.add(() => handler.stop());
    handler.reply({ status: 200, body: 'Order A-1 shipped on 3 March.' });
    const world: ChatWorld = await chatWorld({ ...env, PROVIDER_TIMEOUT_MS: '60000' }, { fake });
    teardown.add(() => world.stop());
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({
      ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'webhook_tools'] },
      webhook_tools: [
        {
          id: 'tool-1',
          name: TOOL,
          description: 'Look up an order.',
          parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
          url: `${handler.url}/orders`,
          requires_approval: false,
          secrets: [{ secret: 'whsec_bench-secret' }],
        },
      ],
    } as never);
    if (pushed.status !== 200) throw new Error(`pushing the tool answered ${pushed.status}: ${await pushed.text()}`);
    const token = await world.tenant.mint({ capabilities: [...CHAT_CAPABILITIES, 'webhook_tools'] });
    const chat = async () => {
      const response = await world.chat(token, { message: 'Where is A-1?' });
      if (response.status !== 200) throw new Error(`POST /chat answered ${response.status}: ${await response.text()}`);
      await response.json();
    };
    const client = new OpenAI({ baseURL: fake.url, apiKey: fake.apiKey, maxRetries: 0 });
    const tools = [{ type: 'function' as const, function: { name: TOOL, parameters: { type: 'object', properties: { order_id: { type: 'string' } } } } }];
    const targets: ToolTarget[] = [
      {
        impl: 'SDK call, POST to the handler, SDK call',
        baseline: true,
        async turn() {
          fake.script(CALL, ANSWER);
          const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Where is A-1?' }];
          const first = await client.chat.completions.create({ model: MODEL, messages, tools });
          const call = first.choices[0]!.message.tool_calls![0]! as { id: string; function: { arguments: string } };
          const answer = await fetch(`${handler.url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: call.function.arguments });
          messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: await answer.text() });
          await client.chat.completions.create({ model: MODEL, messages, tools });
        },
      },
      { impl: 'POST /chat, no tool called (ours)', turn: chat },
      {
        impl: 'POST /chat, a call refused, two model steps (ours)',
        async turn() {
          fake.script(REFUSED_CALL, ANSWER);
          await chat();
        },
      },
      {
        impl: 'POST /chat calling the webhook tool (ours)',
        async turn() {
          fake.script(CALL, ANSWER);
          await chat();
        },
      },
      {
        impl: 'one POST to the handler',
        async turn() {
          await (await fetch(`${handler.url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).text();
        },
      },
      {
        // The fake's own cost of a step, made as the runtime makes every step: streamed, its tokens relayed as they come.
        impl: 'one SDK call, streamed',
        async turn() {
          const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Where is A-1?' }], stream: true, stream_options: { include_usage: true } });
          for await (const _chunk of stream);
        },
      },
    ];
    const { rows, latencies } = await timeRounds(targets, LOOP);
    const p50 = (impl: string) => rows.find((row) => row.impl.startsWith(impl))!.figures.p50Ms!;
    const plain = p50('POST /chat, no tool');
    const withTool = p50('POST /chat calling');
    const handlerTrip = p50('one POST to the handler');
    const modelStep = p50('POST /chat, a call refused') - plain;
    const fakeStep = p50('one SDK call, streamed');
    const remainder = withTool - plain - handlerTrip - modelStep;
    // The same remainder taken within each round (the tool's turn less the refused call's turn less the handler's
    // round trip, all three measured within moments of each other), and the p50 of those.
    const of = (impl: string) => latencies[targets.findIndex((target) => target.impl.startsWith(impl))]!;
    const [tooled, refused, trips] = [of('POST /chat calling'), of('POST /chat, a call refused'), of('one POST to the handler')];
    const paired = summarise(tooled.map((ms, round) => ms - refused[round]! - trips[round]!), 0).p50Ms;
    const line = (impl: string, ms: number): Row => ({ case: 'p50', impl, figures: { ms } });
    return [
      finishTable({
        title: `tools: a turn calling a webhook tool (${setup})`,
        columns: latencyColumns,
        rows,
        note: 'handler and fake provider on loopback in the bench process; one client; one turn of each row a round, the order turned each round.',
      }),
      {
        title: `tools: the latency line, with tool − without − handler − model step ≤ ${TARGET_REMAINDER_MS} ms (${setup})`,
        columns: [{ key: 'ms', label: 'ms' }],
        rows: [
          line('turn without tools', plain),
          line('turn calling one webhook tool', withTool),
          line('added by the tool', withTool - plain),
          line('− one handler round trip (measured directly)', handlerTrip),
          line('− one model step (two-step turn − one-step turn)', modelStep),
          line(`= remainder, the runtime's own (target ≤ ${TARGET_REMAINDER_MS}): ${remainder <= TARGET_REMAINDER_MS ? 'met' : 'NOT met'}`, remainder),
          line('for reading: the remainder within each round, p50', paired),
          line("for reading: the fake's own step (one streamed SDK call)", fakeStep),
          line('for reading: remainder against that step', withTool - plain - handlerTrip - fakeStep),
        ],
        note:
          "the model step as the runtime takes it: the turn whose model calls a tool not offered (refused in a tool message, " +
          "then a second model call) less the turn without tools; it counts the second call's request, the relay and the " +
          'answers written with it, which any tool call takes. The remainder is what the webhook call itself costs beyond its handler.',
      },
    ];
  } finally {
    await teardown.run();
  }
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'tools', tables: await setupTables('embedded', {}), skipped: [] };
  if (!availableSetups().includes('scale')) {
    report.skipped.push('scale: PostgreSQL, Redis or MinIO binary not found');
    return report;
  }
  const services = await ScaleServices.start();
  try {
    report.tables.push(...(await setupTables('scale', await services.env())));
  } finally {
    await services.stop();
  }
  return report;
}
