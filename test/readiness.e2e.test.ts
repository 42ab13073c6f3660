// The readiness report and turn health, from the control plane with its runtime behind it: the steps that read the
// runtime appear as the project's state calls for them. The webhook step once there is unattended work and no URL;
// the embedding step once there are documents; `turns` once a handful of turns fail in a row (a success clears it,
// and GET /turns counts them); `tasks-waiting` once a task's last run stopped for a person, naming the task, when
// and the conversation holding the question.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { eventually } from './harness/eventually.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const MODEL = 'gpt-4o-mini';

interface Step {
  id: string;
  ok: boolean;
  essential: boolean;
  fix: string | null;
  detail: string;
}

describe('readiness and turn health', () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;
  let token: string;

  const report = async () => json<{ canAnswer: boolean; ready: boolean; next: string | null; steps: Step[] }>(await project.send('GET', '/readiness'), 200);
  const step = async (id: string) => (await report()).steps.find((candidate) => candidate.id === id);

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-fake-readiness-0123456789', chatModels: [MODEL] });
    project = await startTestProject({ capabilities: ['chat', 'approvals', 'tasks:read', 'tasks:write', 'documents:write', 'documents:read'], provider: fake, model: MODEL });
    await json(await project.send('POST', '/default-model', { model: MODEL }), 200);
    await project.pushed();
    token = await project.token('acme:alice', ['chat', 'approvals', 'tasks:read', 'tasks:write', 'documents:write', 'documents:read']);
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
  });

  it('can answer once a provider and default model are there, and asks for origins without blocking', async () => {
    const now = await report();
    expect(now.canAnswer).toBe(true);
    expect(now.steps.find((candidate) => candidate.id === 'origins')).toMatchObject({ ok: false, essential: false, fix: `PUT /api/projects/${project.projectId}/origins` });
    expect(await step('webhook')).toMatchObject({ ok: true, detail: 'no unattended work yet' });
    expect(await step('embedding-model')).toMatchObject({ ok: true, detail: 'no documents yet' });
    expect(await step('turns')).toBeUndefined();
    expect(await step('tasks-waiting')).toBeUndefined();
  });

  it('asks for a webhook URL once there is unattended work, and an embedding model once there are documents', async () => {
    const task = await project.rt.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ prompt: 'Later.', interval_seconds: 86_400 }) });
    expect(task.status).toBe(201);
    expect(await step('webhook')).toMatchObject({ ok: false, essential: false, fix: `PUT /api/projects/${project.projectId}/webhook` });
    await json(await project.send('PUT', '/webhook', { url: 'http://127.0.0.1:9/hooks' }), 200);
    expect(await step('webhook')).toMatchObject({ ok: true });
    const document = await project.rt.endUser('/documents', token, { method: 'POST', body: JSON.stringify({ text: 'The returns policy.', title: 'Returns' }) });
    expect(document.status).toBe(201);
    expect(await step('embedding-model')).toMatchObject({ ok: false, detail: '1 document(s) and no embedding model' });
  });

  it('counts failing turns, raises `turns` after a handful in a row, and a success clears it', async () => {
    for (let i = 0; i < 5; i++) {
      fake.script({ status: 400, message: `Upstream refused ${i}.` });
      await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: `try ${i}` }) });
    }
    const health = await json<{ window_hours: number; total: number; errored: number; consecutive_errors: number; last_error: { code: string | null; message: string } | null; last_success_at: string | null }>(
      await project.send('GET', '/turns'),
      200,
    );
    expect(health).toMatchObject({ window_hours: 24, consecutive_errors: 5 });
    expect(health.errored).toBeGreaterThanOrEqual(5);
    expect(health.last_error!.message).toContain('Upstream refused 4.');
    const turns = await step('turns');
    expect(turns).toMatchObject({ ok: false, essential: false });
    expect(turns!.detail).toContain('the last 5 turns failed');
    expect((await report()).canAnswer).toBe(true);

    fake.script('Fine now.');
    await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'again' }) });
    const after = await json<{ consecutive_errors: number; last_success_at: string | null }>(await project.send('GET', '/turns'), 200);
    expect(after.consecutive_errors).toBe(0);
    expect(after.last_success_at).not.toBeNull();
    expect(await step('turns')).toBeUndefined();
  });

  it('names a task whose last run stopped for a person, when, and the conversation holding the question', async () => {
    fake.script({ toolCalls: [{ name: 'request_approval', arguments: { action: 'Refund order 7' } }] });
    const created = await project.rt.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ name: 'Refunds', prompt: 'Refund order 7.', run_at: new Date(Date.now() + 500).toISOString() }) });
    const task = await json<{ id: string }>(created, 201);
    const db = project.rt.runtime.database.db;
    await eventually(async () => (await sql<{ last_finish_reason: string | null }>`select last_finish_reason from tasks where id = ${task.id}`.execute(db)).rows[0]?.last_finish_reason === 'needs_input', {
      what: 'the task to stop for a person',
    });
    const waiting = await step('tasks-waiting');
    expect(waiting).toMatchObject({ ok: false, essential: false });
    const session = (await sql<{ last_session_id: string }>`select last_session_id from tasks where id = ${task.id}`.execute(db)).rows[0]!.last_session_id;
    expect(waiting!.detail).toContain(`task 'Refunds' (${task.id}) stopped at`);
    expect(waiting!.detail).toContain(`session ${session}`);
    expect(waiting!.fix).toContain('approval_decisions');
  });

  it("lists every end-user's conversations and reads one's messages, for the project's admins", async () => {
    const bob = await project.token('acme:bob', ['chat']);
    fake.script('Hello, Bob.');
    const turn = await json<{ session_id: string }>(await project.rt.endUser('/chat', bob, { method: 'POST', body: JSON.stringify({ message: 'hi, I am Bob' }) }), 200);
    const page = await json<{ sessions: { id: string; owner?: string; subject?: string }[]; has_more: boolean }>(await project.send('GET', '/sessions?limit=100'), 200);
    expect(page.sessions.map((session) => session.id)).toContain(turn.session_id);
    expect(page.sessions.length).toBeGreaterThan(1);
    const onlyBob = await json<{ sessions: { id: string }[] }>(await project.send('GET', '/sessions?user_ref=acme:bob'), 200);
    expect(onlyBob.sessions.map((session) => session.id)).toEqual([turn.session_id]);
    const messages = await json<{ role: string; content: string }[]>(await project.send('GET', `/sessions/${turn.session_id}/messages`), 200);
    expect(messages.map((message) => [message.role, message.content])).toEqual([
      ['user', 'hi, I am Bob'],
      ['assistant', 'Hello, Bob.'],
    ]);
    expect((await project.send('GET', '/sessions/00000000-0000-4000-8000-000000000000/messages')).status).toBe(404);
  });

  it("reports the context-window strategy with the system prompt's cost counted as the engine counts it", async () => {
    const prompt = 'You are the support agent of Acme. Answer in two sentences at most, and cite the returns policy when it applies.';
    await json(await project.send('PUT', '/system-prompt', { system_prompt: prompt }), 200);
    await json(await project.send('PATCH', '', { ceiling: { max_context_tokens: 8000 } }), 200);
    await project.pushed();
    const context = await json<{ max_context_tokens: number; strategy: string; summarization: boolean; system_prompt_tokens: number; history_budget_tokens: number; message_overhead_tokens: number }>(
      await project.send('GET', '/context'),
      200,
    );
    const { countTokens } = await import('gpt-tokenizer');
    expect(context).toMatchObject({ max_context_tokens: 8000, strategy: 'drop_oldest_groups', summarization: false, message_overhead_tokens: 4 });
    expect(context.system_prompt_tokens).toBe(countTokens(prompt) + 4);
    expect(context.history_budget_tokens).toBe(8000 - context.system_prompt_tokens);
  });

  it("reports the project's usage and how its turns went over a window, an org's costs to a signed-in account only, and counts it all in /metrics", async () => {
    const usage = await json<{ window: string; requests: number; model_calls: number; input_tokens: number; output_tokens: number; cost_usd: number | null; unpriced_calls: number; by_model: { model: string }[] }>(
      await project.send('GET', '/usage?window=24h'),
      200,
    );
    expect(usage.window).toBe('24h');
    expect(usage.requests).toBeGreaterThanOrEqual(7);
    expect(usage.model_calls).toBeGreaterThan(0);
    expect(usage.input_tokens).toBeGreaterThan(0);
    // The provider was registered without prices: the spend is unknown, not zero.
    expect(usage.cost_usd).toBeNull();
    expect(usage.unpriced_calls).toBe(usage.model_calls);
    expect(usage.by_model.map((row) => row.model)).toEqual([MODEL]);
    expect((await project.send('GET', '/usage?window=2d')).status).toBe(422);

    const seen = await json<{ requests: number; by_status: Record<string, number>; errors: number; error_rate: number; latency_ms: { p50: number | null; p99: number | null }; top_errors: { code: string; count: number }[] }>(
      await project.send('GET', '/observability?window=1h'),
      200,
    );
    expect(seen.errors).toBeGreaterThanOrEqual(5);
    expect(seen.by_status.failed).toBe(seen.errors);
    expect(seen.error_rate).toBeCloseTo(seen.errors / seen.requests);
    expect(seen.latency_ms.p50).toEqual(expect.any(Number));
    expect(seen.top_errors[0]!.count).toBeGreaterThanOrEqual(5);

    const owner = await project.api.control.accounts.signIn('owner@example.com', 'a long enough password', 'test');
    const orgId = (await project.api.control.accounts.orgsOf(owner.account.id))[0]!.id;
    const costs = await json<{ window: string; incomplete: boolean; projects: { project_id: string; requests: number; error: string | null }[] }>(
      await project.api.call(`/api/orgs/${orgId}/costs?window=24h`, { token: owner.token }),
      200,
    );
    expect(costs).toMatchObject({ window: '24h', incomplete: false });
    expect(costs.projects.find((row) => row.project_id === project.projectId)).toMatchObject({ requests: usage.requests, error: null });
    expect((await project.api.call(`/api/orgs/${orgId}/costs`, { key: project.adminKey })).status).toBe(401);

    const metrics = await (await fetch(`${project.rt.url}/metrics`)).text();
    expect(metrics).toMatch(/agentplane_turns_total\{[^}]*status="failed"[^}]*\} ([5-9]|\d{2,})/);
    expect(metrics).toMatch(/agentplane_model_tokens_total\{[^}]*direction="input"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/agentplane_task_fires_total\{?[^\n]*\} [1-9]|agentplane_task_fires_total [1-9]/);
    // Bounded labels: no tenant, subject or conversation is ever a label's value.
    expect(metrics).not.toContain(project.tenantId);
    expect(metrics).not.toContain('acme:');
  });
});
