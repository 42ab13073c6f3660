// The project's skills from the control plane: a package posted to /api/projects/:id/skills is relayed to the
// project's runtime as the form it came in, every end-user's turn is told of its skills, the listing tells the
// project's packages from end-users' own, the runtime's refusals come back as they were, and removal takes it away.
import { strToU8, zipSync } from 'fflate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const PROVIDER_KEY = 'sk-fake-skills-0123456789abcd';
const MODEL = 'gpt-4o-mini';
const skillMd = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nDo it well.\n`;

describe('skills from the control plane', () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;

  const upload = (parts: Array<[string, Uint8Array | string, string]>) => {
    const form = new FormData();
    for (const [name, bytes, filename] of parts) form.append(name, new Blob([typeof bytes === 'string' ? bytes : Buffer.from(bytes)]), filename);
    return project.api.call(`/api/projects/${project.projectId}/skills`, { method: 'POST', key: project.adminKey, body: form });
  };
  async function systemPromptOf(subject: string): Promise<string> {
    const token = await project.token(subject, ['chat', 'plugins:write']);
    await json(await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'hello' }) }), 200);
    const first = fake.chatRequests().at(-1)!.messages[0] as { role: string; content: string };
    return first.role === 'system' ? first.content : '';
  }

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: [MODEL] });
    project = await startTestProject({ capabilities: ['chat', 'plugins:write'], provider: fake, model: MODEL });
    await project.pushed();
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
  });

  it("publishes a package for every end-user, lists it beside end-users' own, and removes it", async () => {
    const published = await json<{ id: string; name: string; visibility: string; skills: unknown[] }>(
      await upload([['file', zipSync({ 'skills/returns/SKILL.md': strToU8(skillMd('returns', 'Handle a return request')) }), 'support.zip']]),
      201,
    );
    expect(published).toMatchObject({ name: 'support', visibility: 'project', skills: [{ name: 'returns', description: 'Handle a return request' }] });
    expect(await systemPromptOf('acme:alice')).toContain('- returns: Handle a return request');

    // An end-user's own package shows in the control plane's listing as theirs.
    const alice = await project.token('acme:alice', ['chat', 'plugins:write']);
    const form = new FormData();
    form.append('file', new Blob([skillMd('alice-way', 'Alice does it her way')]), 'SKILL.md');
    await json(await project.rt.endUser('/plugins', alice, { method: 'POST', body: form }), 201);
    const listed = await json<{ plugins: { name: string; visibility: string; owner_subject: string | null }[] }>(await project.send('GET', '/skills'), 200);
    expect(listed.plugins.map((p) => [p.name, p.visibility, p.owner_subject])).toEqual([
      ['support', 'project', null],
      ['alice-way', 'private', 'acme:alice'],
    ]);

    await json(await project.send('DELETE', `/skills/${published.id}`), 200);
    expect((await project.send('DELETE', `/skills/${published.id}`)).status).toBe(404);
  });

  it("relays the runtime's refusals as they were, and refuses what is not a form", async () => {
    const traversal = await upload([['files', skillMd('x', 'y'), '../../x/SKILL.md']]);
    expect(traversal.status).toBe(400);
    expect(await traversal.json()).toMatchObject({ code: 'unsafe_path' });
    expect((await project.send('POST', '/skills', { file: 'SKILL.md' })).status).toBe(400);
  });
});
