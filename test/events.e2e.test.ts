// Where a project's events go, from the control plane to a receiver: the admin sets the webhook URL (the URL guard
// checks it; it is pushed to the runtime), reads the secret that signs deliveries (readable, not shown once) and
// rotates it (at once, no overlap); a task scheduled by an end-user fires, and the receiver verifies what arrives with
// that secret; the control plane lists the project's tasks and the deliveries with their attempts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyEventSignature } from '@agentplane/lib/crypto/signatures';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { WebhookHandler } from './fakes/webhook-handler.js';
import { eventually } from './harness/eventually.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const PROVIDER_KEY = 'sk-fake-events-0123456789';
const MODEL = 'gpt-4o-mini';

describe("a project's events", () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;
  let receiver: WebhookHandler;

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: [MODEL] });
    receiver = await WebhookHandler.start();
    receiver.reply({ status: 204 });
    project = await startTestProject({ capabilities: ['chat', 'tasks:read', 'tasks:write'], provider: fake, model: MODEL });
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
    await receiver?.stop();
  });

  it('sets the webhook URL through the URL guard and pushes it; null clears it', async () => {
    expect(await json(await project.send('GET', '/webhook'), 200)).toEqual({ url: null });
    const refused = await project.send('PUT', '/webhook', { url: 'http://169.254.169.254/latest/meta-data/' });
    expect(refused.status).toBe(400);
    expect(await json(await project.send('PUT', '/webhook', { url: `${receiver.url}/hooks` }), 200)).toEqual({ url: `${receiver.url}/hooks` });
    await project.pushed();
    expect((await project.rt.runtime.configurations.load(project.tenantId))!.document.webhook).toEqual({ url: `${receiver.url}/hooks` });
    expect(await json(await project.send('PUT', '/webhook', { url: null }), 200)).toEqual({ url: null });
    await project.pushed();
    expect((await project.rt.runtime.configurations.load(project.tenantId))!.document.webhook).toBeUndefined();
    await json(await project.send('PUT', '/webhook', { url: `${receiver.url}/hooks` }), 200);
    await project.pushed();
  });

  it('reads the secret (readable, not shown once) and rotates it at once', async () => {
    const first = await json<{ webhook_secret: string; rotated_at: string }>(await project.send('GET', '/webhook-secret'), 200);
    expect(first.webhook_secret).toMatch(/^whsec_/);
    expect((await json<{ webhook_secret: string }>(await project.send('GET', '/webhook-secret'), 200)).webhook_secret).toBe(first.webhook_secret);
    const rotated = await json<{ webhook_secret: string }>(await project.send('POST', '/webhook-secret/rotate'), 200);
    expect(rotated.webhook_secret).not.toBe(first.webhook_secret);
    expect((await json<{ webhook_secret: string }>(await project.send('GET', '/webhook-secret'), 200)).webhook_secret).toBe(rotated.webhook_secret);
  });

  it("delivers a task's events signed with that secret, and lists the project's tasks and deliveries", async () => {
    const { webhook_secret: secret } = await json<{ webhook_secret: string }>(await project.send('GET', '/webhook-secret'), 200);
    const token = await project.token('acme:alice', ['chat', 'tasks:read', 'tasks:write']);
    fake.script('Morning report sent.');
    const created = await project.rt.endUser('/tasks', token, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'Send the morning report.', run_at: new Date(Date.now() + 500).toISOString() }),
    });
    const task = await json<{ id: string }>(created, 201);
    await eventually(async () => receiver.requests.some((request) => request.headers['x-event-type'] === 'turn.stopped'), { what: 'turn.stopped at the receiver' });
    for (const request of receiver.requests) {
      const delivery = { id: String(request.headers['x-delivery-id']), timestamp: request.headers['x-delivery-timestamp'] as string, body: request.body };
      expect(verifyEventSignature(request.headers['x-signature'] as string, delivery, secret)).toBe(true);
    }
    const tasks = await json<{ tasks: { id: string; subject: string; status: string }[] }>(await project.send('GET', '/tasks'), 200);
    expect(tasks.tasks).toEqual([expect.objectContaining({ id: task.id, subject: 'acme:alice' })]);
    const { deliveries } = await json<{ deliveries: { type: string; status: string; attempt_log: unknown[] }[] }>(await project.send('GET', '/events?limit=10'), 200);
    expect(deliveries.map((delivery) => delivery.type).sort()).toEqual(['scheduled_task.fired', 'turn.stopped']);
    expect(deliveries.every((delivery) => delivery.status === 'delivered' && delivery.attempt_log.length === 1)).toBe(true);

    // The admin sends one again: the receiver gets the same event id, newly signed.
    const sent = receiver.requests.length;
    const { id, event_id: eventId } = (deliveries as unknown as { id: string; event_id: string }[])[0]!;
    expect(await json(await project.send('POST', `/events/${id}/redeliver`), 202)).toMatchObject({ id, status: 'pending' });
    await eventually(() => receiver.requests.length > sent, { what: 'the redelivery at the receiver' });
    const again = receiver.requests.at(-1)!;
    expect(again.headers['x-delivery-id']).toBe(eventId);
    expect(verifyEventSignature(again.headers['x-signature'] as string, { id: eventId, timestamp: again.headers['x-delivery-timestamp'] as string, body: again.body }, secret)).toBe(true);
    expect((await project.send('POST', `/events/${randomUUID()}/redeliver`)).status).toBe(404);
    // Seeing is not sending: a mint key of the project is refused, an account outside its org does not see it.
    const { api } = project;
    const mint = (await json<{ key: string }>(await project.send('POST', '/keys', { scope: 'mint', name: 'mint' }), 201)).key;
    expect((await api.call(`/api/projects/${project.projectId}/events/${id}/redeliver`, { method: 'POST', key: mint })).status).toBe(403);
    await api.control.accounts.createOwner('outsider@example.com', 'another long password', 'elsewhere');
    const outsider = (await api.control.accounts.signIn('outsider@example.com', 'another long password', 'test')).token;
    expect((await api.call(`/api/projects/${project.projectId}/events/${id}/redeliver`, { method: 'POST', token: outsider })).status).toBe(404);
    expect((await project.send('POST', '/events/not-a-uuid/redeliver')).status).toBe(422);
  });
});
