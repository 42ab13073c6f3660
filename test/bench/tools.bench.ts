// Webhook tools: what a turn that calls one costs over a turn without tools, against the handler's own round trip,
// all measured in this run on loopback (fake provider, handler, runtime and client in one process). The issue's
// target: a turn calling a webhook tool adds no more than one handler round trip to a turn without tools, beyond
// the model's second step that any tool call takes. Baseline: a client doing the same itself with the SDK and fetch.
import OpenAI from 'openai';
import { chatWorld, CHAT_CAPABILITIES, MODEL, OTHER_MODEL, type ChatWorld } from '../chat/fixture.js';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { finishTable, latencyColumns, runCases, timeConcurrent, Teardown, type BenchReport, type Case, type Row, type Subject, type Table } from './measure.js';

const LOOP = { warmup: 20, ops: 200 };
const TOOL = 'lookup_order';
const CALL = { toolCalls: [{ name: TOOL, arguments: { order_id: 'A-1' } }] };
const ANSWER = 'It shipped on 3 March.';

interface ToolTarget extends Subject {
  turn(): Promise<void>;
}

async function setupTable(setup: string, env: Record<string, string>): Promise<Table> {
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
        impl: 'one SDK call',
        async turn() {
          await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Where is A-1?' }] });
        },
      },
      {
        // The model's second step as the runtime makes every step: streamed, its tokens relayed as they come.
        impl: 'one SDK call, streamed',
        async turn() {
          const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Where is A-1?' }], stream: true, stream_options: { include_usage: true } });
          for await (const _chunk of stream);
        },
      },
    ];
    const cases: Case<ToolTarget>[] = [{ name: 'turn, 1 client', loop: LOOP, time: (target, loop) => timeConcurrent(() => target.turn(), { ...loop, callers: 1 }) }];
    const rows = await runCases(cases, targets);
    const p50 = (impl: string) => rows.find((row) => row.impl.startsWith(impl))!.figures.p50Ms!;
    const withTool: Row = rows.find((row) => row.impl.startsWith('POST /chat calling'))!;
    const added = p50('POST /chat calling') - p50('POST /chat, no tool');
    withTool.figures.addedOverPlainMs = added;
    // What is left once the handler's round trip and the model's second step (a streamed call with the tool result,
    // as the runtime makes every step) are taken out.
    withTool.figures.beyondHandlerAndStepMs = added - p50('one POST to the handler') - p50('one SDK call, streamed');
    return finishTable({
      title: `tools: a turn calling a webhook tool (${setup})`,
      columns: [
        ...latencyColumns,
        { key: 'addedOverPlainMs', label: 'added over a plain turn ms' },
        { key: 'beyondHandlerAndStepMs', label: 'beyond handler + 2nd step ms' },
      ],
      rows,
      note:
        'handler and fake provider on loopback in the bench process. added over a plain turn: p50 of a turn calling the tool less p50 of a turn without one; ' +
        "beyond handler + 2nd step: that, less one handler round trip and one streamed SDK call (the model's second step every tool call takes, streamed as the runtime makes every step): what the tool costs in the runtime itself.",
    });
  } finally {
    await teardown.run();
  }
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'tools', tables: [await setupTable('embedded', {})], skipped: [] };
  if (!availableSetups().includes('scale')) {
    report.skipped.push('scale: PostgreSQL, Redis or MinIO binary not found');
    return report;
  }
  const services = await ScaleServices.start();
  try {
    report.tables.push(await setupTable('scale', await services.env()));
  } finally {
    await services.stop();
  }
  return report;
}
