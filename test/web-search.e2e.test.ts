// The project's web search engine from the control plane: PUT /api/projects/:id/web-search tries the engine with
// one real search before storing it (a refused key is 400 and nothing is stored), keeps the key sealed and never
// returns it, and the runtime's web_search then searches with it; null takes it away.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { FakeWeb } from './fakes/web-server.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const PROVIDER_KEY = 'sk-fake-web-search-0123456789';
const MODEL = 'gpt-4o-mini';
const BRAVE_KEY = 'brave-project-key-0123456789WXYZ';

describe('the web search engine from the control plane', () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;
  let web: FakeWeb;

  async function search(): Promise<string> {
    const token = await project.token('acme:alice', ['chat', 'web_search']);
    fake.script({ toolCalls: [{ name: 'web_search', arguments: { query: 'kettles' } }] }, 'Done.');
    await json(await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'search' }) }), 200);
    return (fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string }).content;
  }

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: [MODEL] });
    web = await FakeWeb.start(BRAVE_KEY);
    project = await startTestProject({ capabilities: ['chat', 'web_search'], provider: fake, model: MODEL });
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
    await web?.stop();
  });

  it('refuses a key the engine refuses, storing nothing, and a URL the guard refuses', async () => {
    const refused = await project.send('PUT', '/web-search', { provider: 'brave', base_url: web.url, api_key: 'wrong-key-000000' });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ code: 'provider_rejected' });
    expect((await project.send('PUT', '/web-search', { provider: 'brave', base_url: 'http://169.254.169.254', api_key: BRAVE_KEY })).status).toBe(400);
    expect((await project.send('PUT', '/web-search', { provider: 'brave', base_url: web.url })).status).toBe(400);
    expect(await json(await project.send('GET', '/web-search'), 200)).toEqual({ provider: null, base_url: null, key_last_four: null });
  });

  it('stores an engine that answered, its key sealed, and the agent searches with it', async () => {
    const set = await json(await project.send('PUT', '/web-search', { provider: 'brave', base_url: web.url, api_key: BRAVE_KEY }), 200);
    expect(set).toEqual({ provider: 'brave', base_url: web.url, key_last_four: 'WXYZ' });
    const stored = await sql<{ web_search: unknown }>`select web_search from control.projects`.execute(project.api.control.database.db);
    expect(JSON.stringify(stored.rows)).not.toContain(BRAVE_KEY);
    await project.pushed();
    expect(await search()).toContain('1. Result 1 for kettles');
    expect(web.requests.at(-1)!.headers['x-subscription-token']).toBe(BRAVE_KEY);
  });

  it('takes a SearXNG instance without a key, and null takes the engine away', async () => {
    await json(await project.send('PUT', '/web-search', { provider: 'searxng', base_url: web.url }), 200);
    await project.pushed();
    expect(await search()).toContain('Result 1 for kettles');
    await json(await project.send('PUT', '/web-search', { provider: null }), 200);
    await project.pushed();
    expect(await search()).toBe("Tool 'web_search' is not available in this conversation; do not call it again.");
  });
});
