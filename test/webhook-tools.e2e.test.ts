// Webhook tools from the control plane to a handler: an admin publishes a tool (its secret shown once, sealed at
// rest, never listed), the push carries it to the project's runtime, an end-user's turn calls it signed with that
// secret, and the control plane lists the call. A rotation signs with both secrets for 24 hours. The write surface
// takes the approval gate only as requiresApproval true or false (400 otherwise, nothing changed) and a partial
// PATCH keeps it; names of built-in tools, URLs the guard refuses and non-object schemas are 400.
import { createHmac } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '@agentplane/lib/crypto/signatures';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { WebhookHandler } from './fakes/webhook-handler.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const PROVIDER_KEY = 'sk-fake-webhook-tools-0123456789';
const MODEL = 'gpt-4o-mini';

interface Tool {
  id: string;
  name: string;
  url: string;
  description: string;
  requiresApproval: boolean;
  previousSecretUntil: string | null;
  secret?: string;
}

describe('webhook tools from the control plane', () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;
  let handler: WebhookHandler;
  let tool: Tool;

  const call = (path: string) => project.send('GET', path);
  const send = (method: string, path: string, body?: unknown) => project.send(method, path, body);
  const pushed = () => project.pushed();
  async function turnCallingTool(): Promise<{ content: string; session_id: string; requires_action: boolean }> {
    const token = await project.token('acme:alice', ['chat', 'webhook_tools', 'approvals']);
    fake.script({ toolCalls: [{ id: 'call_1', name: 'lookup_order', arguments: { order_id: 'A-1' } }] }, 'It shipped.');
    return json(await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'Where is A-1?' }) }), 200);
  }

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: [MODEL] });
    handler = await WebhookHandler.start();
    project = await startTestProject({ capabilities: ['chat', 'webhook_tools', 'approvals'], provider: fake, model: MODEL });
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
    await handler?.stop();
  });

  it('publishes a tool whose secret is shown once and stored sealed, and the runtime calls it signed with that secret', async () => {
    tool = await json<Tool>(
      await send('POST', '/webhook-tools', {
        name: 'lookup_order',
        description: 'Look up an order by its id.',
        parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
        url: `${handler.url}/orders`,
        requiresApproval: false,
      }),
      201,
    );
    expect(tool).toMatchObject({ name: 'lookup_order', requiresApproval: false, previousSecretUntil: null });
    expect(tool.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const secret = tool.secret!;
    const listed = await json<{ tools: Tool[] }>(await call('/webhook-tools'), 200);
    expect(listed.tools.map((t) => t.id)).toEqual([tool.id]);
    expect(JSON.stringify(listed)).not.toContain(secret);
    expect(JSON.stringify(await json(await call(`/webhook-tools/${tool.id}`), 200))).not.toContain(secret);
    const stored = await sql<{ row: string }>`select row_to_json(t)::text as row from control.webhook_tools t`.execute(project.api.control.database.db);
    expect(stored.rows[0]!.row).not.toContain(secret);

    await pushed();
    handler.reply({ status: 200, body: 'Shipped on 3 March.' });
    const answer = await turnCallingTool();
    expect(answer.content).toBe('It shipped.');
    const request = handler.requests.at(-1)!;
    expect(WebhookHandler.json(request)).toMatchObject({ tool: 'lookup_order', arguments: { order_id: 'A-1' }, subject: 'acme:alice', tenant_id: project.tenantId, session_id: answer.session_id });
    expect(request.headers['x-service-signature']).toBe(`sha256=${createHmac('sha256', secret).update(request.body).digest('hex')}`);

    const { deliveries } = await json<{ deliveries: { tool: string; tool_id: string; ok: boolean; status: number; result: string }[] }>(
      await call('/webhook-tools/deliveries?limit=5'),
      200,
    );
    expect(deliveries[0]).toMatchObject({ tool: 'lookup_order', tool_id: tool.id, ok: true, status: 200, result: 'Shipped on 3 March.' });
  });

  it('rotates: the new secret is shown once, and for 24 hours a call carries both signatures', async () => {
    const before = tool.secret!;
    const rotated = await json<{ id: string; secret: string; previousSecretUntil: string }>(await send('POST', `/webhook-tools/${tool.id}/rotate`), 200);
    expect(rotated.secret).not.toBe(before);
    const overlap = Date.parse(rotated.previousSecretUntil) - Date.now();
    expect(overlap).toBeGreaterThan(23.9 * 3600_000);
    expect(overlap).toBeLessThanOrEqual(24 * 3600_000);
    expect((await json<Tool>(await call(`/webhook-tools/${tool.id}`), 200)).previousSecretUntil).toBe(rotated.previousSecretUntil);
    await pushed();
    await turnCallingTool();
    const request = handler.requests.at(-1)!;
    const header = String(request.headers['x-service-signature']);
    expect(header.split(',')).toHaveLength(2);
    expect(verifySignature(header, request.body, rotated.secret)).toBe(true);
    expect(verifySignature(header, request.body, before)).toBe(true);
    tool.secret = rotated.secret;
  });

  it('takes requiresApproval only as true or false, refuses requires_approval, and keeps the gate through a partial PATCH', async () => {
    const version = (await project.api.control.projects.configurationDocument(project.projectId))!.version;
    for (const value of [null, 0, 'false', 'true', 1]) {
      const res = await send('PATCH', `/webhook-tools/${tool.id}`, { requiresApproval: value });
      expect(res.status, `requiresApproval ${JSON.stringify(value)}`).toBe(400);
      expect(((await res.json()) as { detail: string }).detail).toContain('requiresApproval must be true or false');
    }
    const underscored = await send('PATCH', `/webhook-tools/${tool.id}`, { requires_approval: true });
    expect(underscored.status).toBe(400);
    expect(((await underscored.json()) as { detail: string }).detail).toContain('the write surface spells it requiresApproval');
    // Nothing changed, and nothing was pushed.
    expect((await json<Tool>(await call(`/webhook-tools/${tool.id}`), 200)).requiresApproval).toBe(false);
    expect((await project.api.control.projects.configurationDocument(project.projectId))!.version).toBe(version);

    expect((await json<Tool>(await send('PATCH', `/webhook-tools/${tool.id}`, { requiresApproval: true }), 200)).requiresApproval).toBe(true);
    const partial = await json<Tool>(await send('PATCH', `/webhook-tools/${tool.id}`, { description: 'Look up an order, with approval.' }), 200);
    expect(partial).toMatchObject({ description: 'Look up an order, with approval.', requiresApproval: true });

    // The gate reaches the runtime: the turn pauses and the handler is not called.
    await pushed();
    const calls = handler.requests.length;
    const paused = await turnCallingTool();
    expect(paused.requires_action).toBe(true);
    expect(handler.requests).toHaveLength(calls);
    fake.clearScripts();
  });

  it('refuses built-in names, taken names, guarded URLs and schemas that are not for an object', async () => {
    const valid = { name: 'another_tool', description: 'x', url: `${handler.url}/x` };
    const refused = async (body: object, status: number, text: string) => {
      const res = await send('POST', '/webhook-tools', { ...valid, ...body });
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(await res.json())).toContain(text);
    };
    await refused({ name: 'recall' }, 400, "a built-in tool's");
    await refused({ name: 'browser_click' }, 400, "a built-in tool's");
    await refused({ name: 'lookup_order' }, 409, 'already exists');
    await refused({ url: 'http://169.254.169.254/latest/meta-data/' }, 400, 'url');
    await refused({ parameters: { type: 'string' } }, 400, 'JSON Schema for an object');
    await refused({ name: 'has space' }, 422, 'name');
    await refused({ requiresApproval: 'yes' }, 400, 'requiresApproval must be true or false');
    const { tools } = await json<{ tools: Tool[] }>(await call('/webhook-tools'), 200);
    expect(tools.map((t) => t.name)).toEqual(['lookup_order']);
  });

  it('removes a tool: the runtime no longer offers it, and an unknown id is 404', async () => {
    await json(await send('DELETE', `/webhook-tools/${tool.id}`), 200);
    expect((await call(`/webhook-tools/${tool.id}`)).status).toBe(404);
    expect((await send('PATCH', `/webhook-tools/${tool.id}`, { requiresApproval: null })).status).toBe(404);
    await pushed();
    const calls = handler.requests.length;
    await turnCallingTool();
    expect(handler.requests).toHaveLength(calls);
    expect((await project.rt.runtime.configurations.load(project.tenantId))!.document.webhook_tools).toBeUndefined();
  });
});
