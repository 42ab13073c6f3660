// A project's guardrails from the control plane: set as a whole (each check validated, a pattern that is not RE2 or a
// duplicate name refused with 422 naming its place, nothing changed), read back, pushed to the runtime, and in force
// in the next turn.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const MODEL = 'gpt-4o-mini';

describe("a project's guardrails", () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-fake-guardrails-0123456789', chatModels: [MODEL] });
    project = await startTestProject({ capabilities: ['chat'], provider: fake, model: MODEL });
    await json(await project.send('POST', '/default-model', { model: MODEL }), 200);
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
  });

  it('refuses an invalid check naming its place and changes nothing; a valid set is pushed and in force', async () => {
    expect(await json(await project.send('GET', '/guardrails'), 200)).toEqual({ input: [], output: [] });
    const backreference = await project.send('PUT', '/guardrails', { input: [{ name: 'bad', kind: 'pattern', pattern: '(a)\\1' }] });
    expect(backreference.status).toBe(422);
    expect(JSON.stringify(await backreference.json())).toContain('"input",0,"pattern"');
    const twice = await project.send('PUT', '/guardrails', { output: [{ name: 'a', kind: 'pii' }, { name: 'a', kind: 'pii' }] });
    expect(twice.status).toBe(422);
    expect(await json(await project.send('GET', '/guardrails'), 200)).toEqual({ input: [], output: [] });

    const rails = { input: [{ name: 'no-refunds', kind: 'list', words: ['refund'] }], output: [] };
    expect(await json(await project.send('PUT', '/guardrails', rails), 200)).toEqual(rails);
    await project.pushed();
    const token = await project.token('acme:alice', ['chat']);
    const res = await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'I want a refund' }) });
    expect(await json(res, 200)).toMatchObject({ finish_reason: 'guardrail', content: expect.stringContaining("'no-refunds'") });
    expect(fake.chatRequests()).toHaveLength(0);
  });
});
