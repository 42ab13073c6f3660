// Two runtime processes on one PostgreSQL and one Redis, as replicas are: both run the scheduler against the same
// tasks and every slot fires exactly once; a skill package removed on one is gone from the other's kept list at once. Forty one-shot tasks come due at the same moment and each starts one
// run, whichever replica claims it; then an interval task is made due again and again, and each slot fires once.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { availableSetups, ScaleServices, startTestRuntime, type TestRuntime } from '../harness/runtime.js';
import { chatRuntime, CHAT_CAPABILITIES, eventually, MODEL, OTHER_MODEL } from './fixture.js';

describe.skipIf(!availableSetups().includes('scale'))('two replicas of one store', () => {
  let services: ScaleServices;
  let fake: FakeOpenAIServer;
  let first: Awaited<ReturnType<typeof chatRuntime>>;
  let second: TestRuntime;

  beforeAll(async () => {
    services = await ScaleServices.start();
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL], defaultReply: { text: 'Done.' } });
    const env = { ...(await services.env()), SCHEDULER_TICK_MS: '50' };
    first = await chatRuntime(fake, env);
    const ceiling = first.tenant.configuration.ceiling;
    expect((await first.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'tasks:read', 'tasks:write'] } } as never)).status).toBe(200);
    // The second replica serves the same tenant from the same store.
    second = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', ...env }, adminKey: first.rt.adminKey });
  }, 180_000);
  afterAll(async () => {
    await first?.stop();
    await second?.stop();
    await fake?.stop();
    await services?.stop();
  });

  it('fires each of forty tasks due at one moment exactly once, across both replicas', async () => {
    const token = await first.tenant.mint({ capabilities: [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'], sub: 'acme:alice', scope: 'acme:alice' });
    const at = new Date(Date.now() + 1_500).toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const res = await first.rt.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ prompt: `Task number ${i}.`, run_at: at }) });
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
    const db = first.rt.runtime.database.db;
    await eventually(
      async () => (await db.selectFrom('tasks').select('status').where('id', 'in', ids).execute()).every((task) => task.status === 'completed'),
      'every task to complete',
      30_000,
    );
    const fires = await db.selectFrom('task_fires').select(['task_id', 'run_id', 'claimed_by']).where('task_id', 'in', ids).execute();
    expect(fires).toHaveLength(40);
    expect(new Set(fires.map((fire) => fire.task_id)).size).toBe(40);
    const runs = await db.selectFrom('runs').select('id').where('id', 'in', fires.map((fire) => fire.run_id)).execute();
    expect(runs).toHaveLength(40);
    // Each task's prompt reached the model once.
    const told = fake.chatRequests().map((request) => (request.messages.at(-1) as { content: string }).content).filter((content) => content.startsWith('Task number '));
    expect(told).toHaveLength(40);
    expect(new Set(told).size).toBe(40);
    const tasks = await db.selectFrom('tasks').select('run_count').where('id', 'in', ids).execute();
    expect(tasks.every((task) => task.run_count === 1)).toBe(true);
  });

  it('fires each slot of a recurring task once, however often both replicas look', async () => {
    const token = await first.tenant.mint({ capabilities: [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'], sub: 'acme:bob', scope: 'acme:bob' });
    const res = await second.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ prompt: 'Recurring work.', interval_seconds: 3600 }) });
    const { id } = (await res.json()) as { id: string };
    const db = first.rt.runtime.database.db;
    for (let slot = 1; slot <= 5; slot++) {
      // The next slot comes: the task is due, and both replicas look at once.
      await eventually(async () => (await db.selectFrom('task_fires').select('state').where('task_id', '=', id).execute()).every((fire) => fire.state === 'settled'), 'the last fire to settle');
      await sql`update tasks set next_run_at = now() - interval '1 second' where id = ${id}`.execute(db);
      await eventually(async () => (await db.selectFrom('tasks').select('run_count').where('id', '=', id).executeTakeFirstOrThrow()).run_count === slot, `slot ${slot} to fire`);
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await db.selectFrom('task_fires').select('run_id').where('task_id', '=', id).execute())).toHaveLength(5);
    expect((await db.selectFrom('tasks').select('run_count').where('id', '=', id).executeTakeFirstOrThrow()).run_count).toBe(5);
  });

  it("drops a skill package removed on one replica from the other's kept list at once", async () => {
    const ceiling = first.tenant.configuration.ceiling;
    expect((await first.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'plugins:write'] } } as never)).status).toBe(200);
    const token = await first.tenant.mint({ capabilities: [...CHAT_CAPABILITIES, 'plugins:write'], sub: 'acme:carol', scope: 'acme:carol' });
    const body = new FormData();
    body.append('file', new Blob(['---\nname: refunds\ndescription: How refunds are handled\n---\nRefund within 30 days.\n']), 'SKILL.md');
    const uploaded = await first.rt.endUser('/plugins', token, { method: 'POST', body });
    expect(uploaded.status, await uploaded.clone().text()).toBe(201);
    const { id } = (await uploaded.json()) as { id: string };
    const listed = async (rt: Pick<TestRuntime, 'endUser'>) => ((await (await rt.endUser('/plugins', token)).json()) as { plugins: { id: string }[] }).plugins.map((plugin) => plugin.id);
    // The second replica reads the list and keeps it.
    expect(await listed(second)).toContain(id);
    expect((await first.rt.endUser(`/plugins/${id}`, token, { method: 'DELETE' })).status).toBe(200);
    // Told on the event bus, it reads the list again well within its 10 s.
    await eventually(async () => !(await listed(second)).includes(id), 'the second replica to drop the removed package', 3_000);
  });
});
