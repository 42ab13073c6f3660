// Where a project's subagents run, from the control plane: PUT /api/projects/:id/subagents takes registered models
// only (400 otherwise, nothing changed) and how many run at once, and the runtime's delegates run there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const PROVIDER_KEY = 'sk-fake-subagents-0123456789';
const MODEL = 'gpt-4o-mini';
const CHILD_MODEL = 'gpt-4.1-nano';

describe('subagent settings from the control plane', () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: [MODEL, CHILD_MODEL] });
    project = await startTestProject({ capabilities: ['chat', 'subagents'], provider: fake, model: MODEL });
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
  });

  it('refuses a model the project does not register, and the runtime runs delegates on the chosen one', async () => {
    const version = (await project.api.control.projects.configurationDocument(project.projectId))!.version;
    const refused = await project.send('PUT', '/subagents', { models: ['gpt-unknown'], maxConcurrent: 2 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/model 'gpt-unknown' is not available to this project/);
    expect((await project.api.control.projects.configurationDocument(project.projectId))!.version).toBe(version);

    expect(await json(await project.send('PUT', '/subagents', { models: [MODEL], maxConcurrent: 2 }), 200)).toEqual({ models: [MODEL], maxConcurrent: 2 });
    await project.pushed();
    expect((await project.rt.runtime.configurations.load(project.tenantId))!.document.subagents).toEqual({ models: [MODEL], max_concurrent: 2 });

    const token = await project.token('acme:alice', ['chat', 'subagents']);
    fake.script({ toolCalls: [{ name: 'delegate', arguments: { task: 'Say hi.' } }] }, 'Hi from the child.', 'Done.');
    const answer = await json<{ content: string }>(await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'go' }) }), 200);
    expect(answer.content).toBe('Done.');
    const child = fake.chatRequests().at(-2)!;
    expect(child.model).toBe(MODEL);
    expect(child.messages.at(-1)).toMatchObject({ role: 'user', content: 'Say hi.' });
  });
});
