// Events a project receives, in both setups, at a real receiver on loopback that checks every signature: a task's
// fire sends `scheduled_task.fired` and, when its turn stops, `turn.stopped` (a pause with what it waits for), to the
// project's webhook URL and the task's callback URL, signed with the tenant's webhook secret over the delivery's id,
// time and raw body. A failed attempt is retried with backoff from the outbox, every attempt recorded; one that keeps
// failing ends dead. A rotated secret signs at once.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyEventSignature } from '@agentplane/lib/crypto/signatures';
import { WebhookHandler, type HandlerRequest } from '../fakes/webhook-handler.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, eventually, type ChatWorld } from './fixture.js';

interface Delivery {
  id: string;
  event_id: string;
  type: string;
  target: string;
  status: string;
  attempts: number;
  attempt_log: { status: number | null; error: string | null }[];
  last_error: string | null;
}

const capabilities = [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'];

describe.each(availableSetups())('events sent to the project (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let receiver: WebhookHandler;
  let token: string;

  const secret = async () => ((await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/webhook-secret`)).json()) as { webhook_secret: string }).webhook_secret;
  const deliveries = async (query = '') =>
    ((await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/events${query}`)).json()) as { deliveries: Delivery[] }).deliveries;
  const bodyOf = (request: HandlerRequest) => JSON.parse(request.body) as { id: string; type: string; created_at: string; data: Record<string, unknown> };
  /** The task an event is about. */
  const taskOf = (data: Record<string, unknown>) => (data.task_id ?? (data.origin as { task_id?: string } | undefined)?.task_id) as string | undefined;
  /** What the receiver got of one type (of one task's, when named), at one path when named. */
  const received = (type: string, options: { path?: string; task?: string } = {}) =>
    receiver.requests.filter(
      (request) =>
        request.headers['x-event-type'] === type &&
        (options.path === undefined || request.path === options.path) &&
        (options.task === undefined || taskOf(bodyOf(request).data) === options.task),
    );
  /** The recorded deliveries of one task's events. */
  const deliveriesOf = async (task: string) =>
    (await deliveries('?limit=1000')).filter((delivery) => taskOf((delivery as unknown as { payload: { data: Record<string, unknown> } }).payload.data) === task);
  const oneShot = async (body: Record<string, unknown>) => {
    const res = await world.rt.endUser('/tasks', token, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Send the weekly report.', run_at: new Date(Date.now() + 500).toISOString(), ...body }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string };
  };

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    receiver = await WebhookHandler.start();
    world = await chatWorld({ ...((await services?.env()) ?? {}), SCHEDULER_TICK_MS: '100', DELIVERY_TICK_MS: '100' });
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({
      ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'tasks:read', 'tasks:write'] },
      webhook: { url: `${receiver.url}/project-events` },
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    token = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await receiver?.stop();
    await services?.stop();
  });
  beforeEach(() => {
    world.fake.clearScripts();
    receiver.requests.length = 0;
    receiver.reply({ status: 204 });
  });

  it("sends scheduled_task.fired and turn.stopped to the project's URL and the task's callback, each signed over its id, time and body", async () => {
    world.fake.script('The report is sent.');
    const task = await oneShot({ callback_url: `${receiver.url}/callback` });
    await eventually(async () => received('turn.stopped', { task: task.id }).length === 2, 'turn.stopped at both URLs');
    const key = await secret();
    for (const request of receiver.requests) {
      const id = String(request.headers['x-delivery-id']);
      // What a receiver checks, with the secret it read from GET /api/projects/:id/webhook-secret.
      expect(verifyEventSignature(request.headers['x-signature'] as string, { id, timestamp: request.headers['x-delivery-timestamp'] as string, body: request.body }, key)).toBe(true);
      expect(verifyEventSignature(request.headers['x-signature'] as string, { id, timestamp: request.headers['x-delivery-timestamp'] as string, body: `${request.body} ` }, key)).toBe(false);
      expect(bodyOf(request).id).toBe(id);
    }
    const fired = received('scheduled_task.fired', { task: task.id });
    expect(fired.map((request) => request.path).sort()).toEqual(['/callback', '/project-events']);
    // One event, two targets: the same id at both.
    expect(new Set(fired.map((request) => request.headers['x-delivery-id'])).size).toBe(1);
    const stopped = bodyOf(received('turn.stopped', { path: '/project-events', task: task.id })[0]!);
    expect(stopped).toMatchObject({
      type: 'turn.stopped',
      data: {
        subject: 'acme:alice',
        origin: { kind: 'task', task_id: task.id },
        status: 'completed',
        finish_reason: null,
        error: null,
        content: 'The report is sent.',
        requires_action: false,
        approvals: [],
      },
    });
    expect(bodyOf(fired[0]!).data).toMatchObject({ task_id: task.id, run_id: stopped.data.run_id, session_id: stopped.data.session_id, subject: 'acme:alice' });
    const recorded = await deliveriesOf(task.id);
    expect(recorded.map((delivery) => [delivery.type, delivery.target, delivery.status]).sort()).toEqual([
      ['scheduled_task.fired', 'callback', 'delivered'],
      ['scheduled_task.fired', 'project', 'delivered'],
      ['turn.stopped', 'callback', 'delivered'],
      ['turn.stopped', 'project', 'delivered'],
    ]);
  });

  it('tells of a pause with what it waits for, so the decision can be sent back with approval_decisions', async () => {
    world.fake.script({ toolCalls: [{ id: 'call_refund', name: 'request_approval', arguments: { action: 'Refund order 7' } }] });
    const task = await oneShot({ prompt: 'Refund order 7.' });
    await eventually(async () => received('turn.stopped', { task: task.id }).length === 1, 'turn.stopped');
    const stopped = bodyOf(received('turn.stopped', { task: task.id })[0]!);
    expect(stopped.data).toMatchObject({ status: 'incomplete', finish_reason: 'needs_input', requires_action: true });
    expect(stopped.data.approvals).toEqual([expect.objectContaining({ tool_call_id: 'call_refund', action: 'Refund order 7' })]);
    // The receiver's server answers for the person, on their conversation.
    world.fake.script('Refunded.');
    const decided = await world.chat(token, { session_id: stopped.data.session_id, approval_decisions: [{ tool_call_id: 'call_refund', approved: true }] });
    expect(decided.status, await decided.clone().text()).toBe(200);
    expect(((await decided.json()) as { content: string }).content).toBe('Refunded.');
  });

  it('retries a failed attempt with backoff, recording each, and ends a delivery that keeps failing dead', async () => {
    receiver.reply({ status: 503, body: 'busy' });
    world.fake.script('Done.');
    const task = await oneShot({});
    const stoppedOf = async (id: string) => (await deliveriesOf(id)).find((delivery) => delivery.type === 'turn.stopped');
    await eventually(async () => ((await stoppedOf(task.id))?.attempts ?? 0) >= 1, 'a first attempt');
    const first = await stoppedOf(task.id);
    expect(first).toMatchObject({ status: 'pending', attempts: 1, last_error: 'the receiver answered HTTP 503: busy' });
    // The wait before the next attempt is seconds; the test moves the clock of the row instead of waiting.
    const db = world.rt.runtime.database.db;
    receiver.reply({ status: 200 });
    await sql`update event_deliveries set next_attempt_at = now() where id = ${first!.id}`.execute(db);
    await eventually(async () => (await stoppedOf(task.id))?.status === 'delivered', 'the retry');
    const retried = (await stoppedOf(task.id))!;
    expect(retried.attempt_log.map((attempt) => attempt.status)).toEqual([503, 200]);
    const ids = receiver.requests.filter((request) => bodyOf(request).id === first!.event_id).map((request) => request.headers['x-delivery-id']);
    expect(new Set(ids)).toEqual(new Set([first!.event_id]));

    // Its last attempt failing too, a delivery is dead and tried no more.
    receiver.reply({ status: 500, body: 'down' });
    world.fake.script('Again.');
    const again = await oneShot({});
    await eventually(async () => ((await stoppedOf(again.id))?.attempts ?? 0) >= 1, 'a first attempt');
    const doomed = await stoppedOf(again.id);
    await sql`update event_deliveries set attempts = 7, next_attempt_at = now() where id = ${doomed!.id}`.execute(db);
    await eventually(async () => (await deliveries('?status=dead')).some((delivery) => delivery.id === doomed!.id), 'the delivery to die');

    // Sent again once the receiver is back: the same event id, newly signed, its earlier attempts kept in its log.
    receiver.reply({ status: 200 });
    const redeliver = (id: string) => world.rt.admin(`/tenants/${world.tenant.tenantId}/events/${id}/redeliver`, { method: 'POST' });
    const requeued = await redeliver(doomed!.id);
    expect(requeued.status, await requeued.clone().text()).toBe(202);
    expect(await requeued.json()).toMatchObject({ id: doomed!.id, status: 'pending', attempts: 0 });
    const redelivered = await eventually(async () => {
      const row = await stoppedOf(again.id);
      return row?.status === 'delivered' ? row : false;
    }, 'the redelivery');
    expect(redelivered.attempt_log.map((attempt) => attempt.status)).toEqual([500, 500, 200]);
    const last = receiver.requests.filter((request) => request.headers['x-delivery-id'] === doomed!.event_id).at(-1)!;
    expect(bodyOf(last).id).toBe(doomed!.event_id);
    expect(verifyEventSignature(last.headers['x-signature'] as string, { id: doomed!.event_id, timestamp: last.headers['x-delivery-timestamp'] as string, body: last.body }, await secret())).toBe(true);
    // One still being attempted is left to its retries; another tenant's, or a made-up one, is not found.
    receiver.reply({ status: 503 });
    world.fake.script('Pending.');
    const pending = await oneShot({});
    await eventually(async () => ((await stoppedOf(pending.id))?.attempts ?? 0) >= 1, 'a first attempt');
    const busy = await redeliver((await stoppedOf(pending.id))!.id);
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ code: 'delivery_pending' });
    expect((await redeliver(randomUUID())).status).toBe(404);
    receiver.reply({ status: 200 });
  });

  it("retries to the project's webhook URL in force at each attempt, and ends a delivery whose URL was removed", async () => {
    const db = world.rt.runtime.database.db;
    const stoppedOf = async (id: string) => (await deliveriesOf(id)).find((delivery) => delivery.type === 'turn.stopped' && delivery.target === 'project');
    receiver.reply({ status: 503 });
    world.fake.script('Moved.');
    const task = await oneShot({});
    await eventually(async () => ((await stoppedOf(task.id))?.attempts ?? 0) >= 1, 'a first attempt');
    receiver.reply({ status: 204 });
    expect((await world.tenant.reconfigure({ webhook: { url: `${receiver.url}/moved` } } as never)).status).toBe(200);
    await sql`update event_deliveries set next_attempt_at = now() where id = ${(await stoppedOf(task.id))!.id}`.execute(db);
    await eventually(async () => (await stoppedOf(task.id))?.status === 'delivered', 'the retry at the new URL');
    expect(received('turn.stopped', { task: task.id }).map((request) => request.path)).toContain('/moved');

    receiver.reply({ status: 503 });
    world.fake.script('Gone.');
    const orphan = await oneShot({});
    await eventually(async () => ((await stoppedOf(orphan.id))?.attempts ?? 0) >= 1, 'a first attempt');
    expect((await world.tenant.reconfigure({ webhook: undefined } as never)).status).toBe(200);
    await sql`update event_deliveries set next_attempt_at = now() where id = ${(await stoppedOf(orphan.id))!.id}`.execute(db);
    await eventually(async () => (await stoppedOf(orphan.id))?.status === 'dead', 'the delivery to end');
    expect((await stoppedOf(orphan.id))!.last_error).toBe("the project's webhook URL was removed");
    // Sent again only once there is somewhere to send it.
    const again = await world.rt.admin(`/tenants/${world.tenant.tenantId}/events/${(await stoppedOf(orphan.id))!.id}/redeliver`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'no_webhook_url' });
    expect((await world.tenant.reconfigure({ webhook: { url: `${receiver.url}/project-events` } } as never)).status).toBe(200);
  });

  it('signs with a rotated secret at once', async () => {
    const before = await secret();
    const rotated = await world.rt.admin(`/tenants/${world.tenant.tenantId}/webhook-secret/rotate`, { method: 'POST' });
    expect(rotated.status).toBe(200);
    const after = ((await rotated.json()) as { webhook_secret: string }).webhook_secret;
    expect(after).not.toBe(before);
    world.fake.script('Rotated.');
    const task = await oneShot({});
    await eventually(async () => received('turn.stopped', { task: task.id }).length === 1, 'turn.stopped');
    const request = received('turn.stopped', { task: task.id })[0]!;
    const delivery = { id: String(request.headers['x-delivery-id']), timestamp: request.headers['x-delivery-timestamp'] as string, body: request.body };
    expect(verifyEventSignature(request.headers['x-signature'] as string, delivery, after)).toBe(true);
    expect(verifyEventSignature(request.headers['x-signature'] as string, delivery, before)).toBe(false);
  });
});
