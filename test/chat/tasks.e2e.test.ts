// Scheduled tasks, in both setups, against the real scheduler of the runtime: a task is made with a cron, an interval
// or a moment (each spec error a 400 beginning `Invalid schedule spec:`), seen by whoever may see its owner's
// conversations and cancelled by its owner alone; it fires as an unattended turn of its owner (no ask_user, no client
// tools) in a conversation of its own, and its status follows SPEC.md's table: a one-shot task ends `completed`,
// `incomplete` with why (`needs_input` for a pause) or `failed`; a recurring one stays `scheduled` with its next slot.
// After downtime a recurring task fires once for its latest missed slot, and one still running skips a slot.
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, eventually, type ChatWorld } from './fixture.js';

interface Task {
  id: string;
  name: string;
  status: string;
  next_run_at: string | null;
  run_count: number;
  last_error: string | null;
  last_finish_reason: string | null;
  last_run_error: string | null;
  last_run_id: string | null;
  last_session_id: string | null;
  subject: string;
}

const capabilities = [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'];

describe.each(availableSetups())('scheduled tasks (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let alice: string;

  const send = (token: string, method: string, path: string, body?: unknown) =>
    world.rt.endUser(path, token, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const create = async (token: string, body: Record<string, unknown>) => {
    const res = await send(token, 'POST', '/tasks', body);
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as Task;
  };
  const read = async (token: string, id: string) => (await (await send(token, 'GET', `/tasks/${id}`)).json()) as Task;
  /** Makes a task due now, as if its slot had come. */
  const dueNow = (id: string, at = sql`now() - interval '1 second'`) => sql`update tasks set next_run_at = ${at} where id = ${id}`.execute(world.rt.runtime.database.db);
  /** Until every fire of the task has settled (its run ended and its outcome written). */
  const firesSettled = (id: string) =>
    eventually(
      async () => (await world.rt.runtime.database.db.selectFrom('task_fires').select('state').where('task_id', '=', id).execute()).every((fire) => fire.state === 'settled'),
      `the fires of task ${id} to settle`,
    );
  const settled = (token: string, id: string, until: (task: Task) => boolean) =>
    eventually(async () => {
      const task = await read(token, id);
      return until(task) ? task : false;
    }, `task ${id} to settle`);

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    world = await chatWorld({ ...((await services?.env()) ?? {}), SCHEDULER_TICK_MS: '100' });
    const ceiling = world.tenant.configuration.ceiling;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'tasks:read', 'tasks:write'] } } as never)).status).toBe(200);
    alice = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await services?.stop();
  });
  beforeEach(() => world.fake.clearScripts());

  it('takes a cron in a time zone, an interval or a moment, and says when each fires next', async () => {
    const cron = await create(alice, { prompt: 'Summarise the overnight tickets.', cron: '0 9 * * 1-5', timezone: 'Europe/Paris', name: 'Morning summary' });
    expect(cron).toMatchObject({ name: 'Morning summary', status: 'scheduled', run_count: 0, last_error: null, last_finish_reason: null, subject: 'acme:alice' });
    const next = new Date(cron.next_run_at!);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect(next.getUTCMinutes()).toBe(0);
    expect([7, 8]).toContain(next.getUTCHours()); // 09:00 in Paris, summer or winter
    const every = await create(alice, { prompt: 'Check the queue.', interval_seconds: 3600 });
    expect(Math.abs(new Date(every.next_run_at!).getTime() - (Date.now() + 3_600_000))).toBeLessThan(60_000);
    expect(every.name).toBe('Check the queue.');
    const at = new Date(Date.now() + 86_400_000).toISOString();
    expect((await create(alice, { prompt: 'Remind me of the review.', run_at: at })).next_run_at).toBe(at);
  });

  it('refuses a spec that cannot fire with a 400 beginning "Invalid schedule spec:", and stores nothing', async () => {
    const before = (await (await send(alice, 'GET', '/tasks?limit=1000')).json()) as { tasks: Task[] };
    for (const [body, detail] of [
      [{ cron: '61 * * * *' }, 'Invalid schedule spec: Invalid value for minute: 61'],
      [{ cron: '* * * *' }, 'Invalid schedule spec: a cron has 5 to 7 fields, this one has 4'],
      [{ cron: '0 9 * * *', timezone: 'Mars/Olympus' }, "Invalid schedule spec: unknown time zone 'Mars/Olympus'"],
      [{ interval_seconds: 30 }, 'Invalid schedule spec: interval_seconds must be at least 60'],
      [{ run_at: '2001-01-01T00:00:00Z' }, 'Invalid schedule spec: run_at is in the past'],
      [{}, 'Invalid schedule spec: give exactly one of cron, interval_seconds or run_at'],
    ] as const) {
      const res = await send(alice, 'POST', '/tasks', { prompt: 'x', ...body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { detail: string }).detail).toContain(detail);
    }
    // The shape is the schema's: a string interval is a 422 naming the field.
    const wrongType = await send(alice, 'POST', '/tasks', { prompt: 'x', interval_seconds: '3600' });
    expect(wrongType.status).toBe(422);
    expect(JSON.stringify(await wrongType.json())).toContain('interval_seconds');
    const guarded = await send(alice, 'POST', '/tasks', { prompt: 'x', interval_seconds: 3600, callback_url: 'http://169.254.169.254/latest' });
    expect(guarded.status).toBe(400);
    const unknownModel = await send(alice, 'POST', '/tasks', { prompt: 'x', interval_seconds: 3600, model: 'gpt-unknown' });
    expect(unknownModel.status).toBe(400);
    expect(((await unknownModel.json()) as { detail: string }).detail).toMatch(/^model 'gpt-unknown' is not available to this project/);
    const after = (await (await send(alice, 'GET', '/tasks?limit=1000')).json()) as { tasks: Task[] };
    expect(after.tasks).toHaveLength(before.tasks.length);
  });

  it('needs tasks:write (and chat) to create, tasks:read to list; others see only what they may, and only the owner cancels', async () => {
    const reader = await world.token({ capabilities: [...CHAT_CAPABILITIES, 'tasks:read'], sub: 'acme:alice', scope: 'acme:alice' });
    expect((await send(reader, 'POST', '/tasks', { prompt: 'x', interval_seconds: 3600 })).status).toBe(403);
    const noChat = await world.token({ capabilities: ['tasks:write'], sub: 'acme:alice', scope: 'acme:alice' });
    expect((await send(noChat, 'POST', '/tasks', { prompt: 'x', interval_seconds: 3600 })).status).toBe(403);
    const writerOnly = await world.token({ capabilities: ['chat', 'tasks:write'], sub: 'acme:alice', scope: 'acme:alice' });
    expect((await send(writerOnly, 'GET', '/tasks')).status).toBe(403);

    const task = await create(alice, { prompt: 'Private work.', interval_seconds: 3600 });
    const bob = await world.token({ capabilities, sub: 'acme:bob', scope: 'acme:bob' });
    expect((await send(bob, 'GET', `/tasks/${task.id}`)).status).toBe(404);
    expect((await send(bob, 'POST', `/tasks/${task.id}/cancel`)).status).toBe(404);
    const made = await send(bob, 'GET', '/tasks/00000000-0000-4000-8000-000000000000');
    expect(made.status).toBe(404);
    expect(((await (await send(bob, 'GET', '/tasks')).json()) as { tasks: Task[] }).tasks.map((t) => t.id)).not.toContain(task.id);

    // Privileged roles and a wide scope see it, but it is not theirs to cancel.
    for (const grant of [
      { sub: 'ops:root', scope: 'ops:root', roles: ['admin'] },
      { sub: 'ops:root', scope: 'ops:root', roles: ['owner'] },
      { sub: 'ops:svc', scope: 'ops:svc', roles: ['service'] },
      { sub: 'acme:bob', scope: 'acme' },
    ]) {
      const reader = await world.token({ capabilities, ...grant });
      expect((await read(reader, task.id)).id, JSON.stringify(grant)).toBe(task.id);
      const refused = await send(reader, 'POST', `/tasks/${task.id}/cancel`);
      expect(refused.status, JSON.stringify(grant)).toBe(403);
      expect(await refused.json()).toMatchObject({ code: 'not_owner' });
    }
    expect((await read(alice, task.id)).status).toBe('scheduled');

    const cancelled = await send(alice, 'POST', `/tasks/${task.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toMatchObject({ id: task.id, status: 'cancelled', next_run_at: null });
    expect((await send(alice, 'POST', `/tasks/${task.id}/cancel`)).status).toBe(200);
    // The control plane's view, through the admin surface: every subject's.
    const listed = (await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/tasks?status=cancelled`)).json()) as { tasks: Task[] };
    expect(listed.tasks.map((t) => t.id)).toContain(task.id);
  });

  it('fires a one-shot task as an unattended turn of its owner, in a conversation of its own, and ends completed', async () => {
    world.fake.script('Your review is at 3pm.');
    const task = await create(alice, { prompt: 'Remind me of the review.', run_at: new Date(Date.now() + 1_000).toISOString() });
    const done = await settled(alice, task.id, (t) => t.status !== 'scheduled' && t.status !== 'running');
    expect(done).toMatchObject({ status: 'completed', run_count: 1, last_error: null, last_finish_reason: null, next_run_at: null });
    const request = world.fake.chatRequests().at(-1)!;
    expect(request.messages.at(-1)).toMatchObject({ role: 'user', content: 'Remind me of the review.' });
    const offered = ((request.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
    expect(offered).not.toContain('ask_user');
    expect(offered).not.toContain('schedule_task');
    const messages = (await (await send(alice, 'GET', `/chat/sessions/${done.last_session_id}/messages`)).json()) as { role: string; content: string }[];
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'Remind me of the review.'],
      ['assistant', 'Your review is at 3pm.'],
    ]);
  });

  it('ends a one-shot task incomplete with needs_input when its turn pauses, and failed with the reason when it breaks', async () => {
    world.fake.script({ toolCalls: [{ name: 'request_approval', arguments: { action: 'Refund order 7' } }] });
    const paused = await create(alice, { prompt: 'Refund order 7.', run_at: new Date(Date.now() + 500).toISOString() });
    expect(await settled(alice, paused.id, (t) => t.status !== 'scheduled' && t.status !== 'running')).toMatchObject({
      status: 'incomplete',
      last_finish_reason: 'needs_input',
      last_error: null,
    });
    world.fake.script({ status: 400, message: 'This model does not exist.' });
    const broken = await create(alice, { prompt: 'Break.', run_at: new Date(Date.now() + 500).toISOString() });
    const failed = await settled(alice, broken.id, (t) => t.status !== 'scheduled' && t.status !== 'running');
    expect(failed.status).toBe('failed');
    expect(failed.last_error).toContain('This model does not exist.');
    expect(failed.last_finish_reason).toBeNull();
  });

  it('keeps a recurring task scheduled at its next slot after each fire, recording how the last one went', async () => {
    const task = await create(alice, { prompt: 'Check the queue.', interval_seconds: 3600 });
    world.fake.script('Queue is empty.');
    await dueNow(task.id);
    await settled(alice, task.id, (t) => t.run_count === 1 && t.last_session_id !== null);
    await firesSettled(task.id);
    const first = await read(alice, task.id);
    expect(first).toMatchObject({ status: 'scheduled', last_finish_reason: null, last_error: null, last_run_error: null });
    expect(new Date(first.next_run_at!).getTime()).toBeGreaterThan(Date.now());
    world.fake.script({ status: 400, message: 'Bad request upstream.' });
    await dueNow(task.id);
    const second = await settled(alice, task.id, (t) => t.run_count === 2 && t.last_finish_reason !== null);
    // SPEC.md: last_error is a failed (one-shot) task's; a recurring one says `error` and keeps the reason apart.
    expect(second).toMatchObject({ status: 'scheduled', last_finish_reason: 'error', last_error: null });
    expect(second.last_run_error).toContain('Bad request upstream.');
    expect(second.last_session_id).not.toBe(first.last_session_id);
  });

  it('fires once for the latest missed slot after downtime, and skips a slot while its last fire still runs', async () => {
    const task = await create(alice, { prompt: 'Hourly digest.', cron: '0 * * * *' });
    world.fake.script('Digest.');
    // Three hours down: slots were missed; one fire, for the latest.
    await dueNow(task.id, sql`date_trunc('hour', now()) - interval '3 hours'`);
    const caughtUp = await settled(alice, task.id, (t) => t.run_count === 1 && t.last_session_id !== null);
    await firesSettled(task.id);
    expect(new Date(caughtUp.next_run_at!).getTime()).toBeGreaterThan(Date.now());
    const fires = await world.rt.runtime.database.db.selectFrom('task_fires').select('slot').where('task_id', '=', task.id).execute();
    expect(fires).toHaveLength(1);
    const latestMissed = new Date();
    latestMissed.setUTCMinutes(0, 0, 0);
    expect(fires[0]!.slot.getTime()).toBe(latestMissed.getTime());

    // A fire that hangs is still running when the next slot comes: that slot is skipped, not run beside it.
    const slow = await create(alice, { prompt: 'Slow work.', interval_seconds: 3600 });
    world.fake.script('hang');
    await dueNow(slow.id);
    const running = await settled(alice, slow.id, (t) => t.run_count === 1 && t.last_session_id !== null);
    await dueNow(slow.id);
    await eventually(async () => (await read(alice, slow.id)).next_run_at !== running.next_run_at && Date.parse((await read(alice, slow.id)).next_run_at!) > Date.now(), 'the slot to pass');
    expect((await read(alice, slow.id)).run_count).toBe(1);
    // Cancelling the task stops its run too.
    expect((await send(alice, 'POST', `/tasks/${slow.id}/cancel`)).status).toBe(200);
    const stopped = await settled(alice, slow.id, (t) => t.last_finish_reason !== null);
    expect(stopped).toMatchObject({ status: 'cancelled', last_finish_reason: 'cancelled' });
  });

  it("stops firing a task once the project's ceiling no longer grants tasks:write", async () => {
    const task = await create(alice, { prompt: 'Should not run.', run_at: new Date(Date.now() + 500).toISOString() });
    const ceiling = world.tenant.configuration.ceiling;
    const before = world.fake.chatRequests().length;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: ceiling.capabilities.filter((c: string) => c !== 'tasks:write') } } as never)).status).toBe(200);
    try {
      const failed = await settled(alice, task.id, (t) => t.status !== 'scheduled' && t.status !== 'running');
      expect(failed.status).toBe('failed');
      expect(failed.last_error).toContain("capability 'tasks:write' is no longer granted");
      expect(world.fake.chatRequests()).toHaveLength(before);
    } finally {
      expect((await world.tenant.reconfigure({ ceiling } as never)).status).toBe(200);
    }
  });

  it('gives the agent schedule_task, list_tasks and cancel_task under enable_scheduling', async () => {
    const token = await world.token({ capabilities, sub: 'acme:carol', scope: 'acme:carol' });
    world.fake.script({ toolCalls: [{ name: 'schedule_task', arguments: { prompt: 'Water the plants.', cron: '0 8 * * *', timezone: 'Europe/Paris', name: 'Plants' } }] }, 'Scheduled.');
    expect((await world.chat(token, { message: 'Remind me daily to water the plants.' })).status).toBe(200);
    const tool = world.fake.chatRequests().at(-1)!.messages.find((m) => m.role === 'tool') as { content: string };
    expect(tool.content).toMatch(/^Scheduled task [0-9a-f-]{36} \('Plants'\); it first fires at /);
    const { tasks } = (await (await send(token, 'GET', '/tasks')).json()) as { tasks: Task[] };
    expect(tasks).toEqual([expect.objectContaining({ name: 'Plants', subject: 'acme:carol', status: 'scheduled' })]);

    world.fake.script({ toolCalls: [{ name: 'cancel_task', arguments: { task_id: tasks[0]!.id } }] }, 'Cancelled.');
    await world.chat(token, { message: 'Stop the plant reminder.' });
    expect((await read(token, tasks[0]!.id)).status).toBe('cancelled');

    world.fake.script('Sure.');
    await world.chat(token, { message: 'hi', enable_scheduling: false });
    const offered = ((world.fake.chatRequests().at(-1)!.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
    expect(offered).not.toContain('schedule_task');
  });

  it('lets a person keep 100 active tasks, however many ask for the last place at once', async () => {
    const token = await world.token({ capabilities, sub: 'acme:dave', scope: 'acme:dave' });
    const first = await create(token, { prompt: 'Check the queue.', interval_seconds: 3600 });
    // 98 more as stored rows (the route would take as long), then eight creates racing for the hundredth place.
    await sql`insert into tasks (id, tenant_id, owner, name, prompt, timezone, interval_seconds, acts_as, status, next_run_at)
      select gen_random_uuid(), tenant_id, owner, name, prompt, timezone, interval_seconds, acts_as, status, next_run_at
      from tasks, generate_series(1, 98) where id = ${first.id}`.execute(world.rt.runtime.database.db);
    const answers = await Promise.all(Array.from({ length: 8 }, () => send(token, 'POST', '/tasks', { prompt: 'One more.', interval_seconds: 3600 })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    expect(await answers.find((answer) => answer.status === 409)!.json()).toMatchObject({ code: 'too_many_tasks' });
    const { rows } = await sql<{ n: string }>`select count(*) as n from tasks where owner = 'acme:dave' and status = 'scheduled'`.execute(world.rt.runtime.database.db);
    expect(Number(rows[0]!.n)).toBe(100);
    await sql`update tasks set status = 'cancelled', next_run_at = null where owner = 'acme:dave'`.execute(world.rt.runtime.database.db);
  });

  it("stops a tenant's schedules first when the tenant is erased, and purges its tasks", async () => {
    const other = await chatWorld({ ...((await services?.env()) ?? {}), SCHEDULER_TICK_MS: '100' }, { fake: world.fake });
    try {
      const ceiling = other.tenant.configuration.ceiling;
      await other.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'tasks:read', 'tasks:write'] } } as never);
      const token = await other.token({ capabilities });
      const res = await other.rt.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ prompt: 'x', interval_seconds: 3600 }) });
      expect(res.status).toBe(201);
      const erased = await other.rt.admin(`/tenants/${other.tenant.tenantId}`, { method: 'DELETE' });
      expect(erased.status, await erased.clone().text()).toBe(200);
      const report = (await erased.json()) as { rows_deleted: Record<string, number>; steps: { step: string; phase: string; outcome: string; items?: number }[] };
      expect(report.steps[0]).toEqual({ step: 'schedules', phase: 'stop_work', outcome: 'done', items: 1 });
      expect(report.rows_deleted.tasks).toBe(1);
    } finally {
      await other.stop();
    }
  });
});
