// MCP servers from the control plane to a turn, against the SDK's own MCP server: an admin adds a server (its
// headers sealed, listed by name only), the push carries it to the runtime, and an end-user's turn calls its tools
// with those headers. Stdio servers and URLs the guard refuses are 400; a taken name is 409; a removed server's
// tools are no longer offered.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STDIO_MCP_REFUSED } from '@agentplane/lib/mcp';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { TestMcpServer } from './fakes/mcp-server.js';
import { json, startTestProject, type TestProject } from './harness/project.js';

const PROVIDER_KEY = 'sk-fake-mcp-0123456789abcdef';
const MODEL = 'gpt-4o-mini';
const AUTH = 'Bearer mcp-control-plane-secret-0001';

describe('MCP servers from the control plane', () => {
  let project: TestProject;
  let fake: FakeOpenAIServer;
  let mcp: TestMcpServer;
  let serverId: string;

  const send = (method: string, path: string, body?: unknown) => project.send(method, path, body);
  async function turnCalling(name: string, args: object): Promise<string | undefined> {
    const token = await project.token('acme:alice', ['chat']);
    fake.script({ toolCalls: [{ name, arguments: args }] }, 'Done.');
    await json(await project.rt.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'go' }) }), 200);
    return (fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string } | undefined)?.content;
  }

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: [MODEL] });
    mcp = await TestMcpServer.start({ requireAuthorization: AUTH });
    project = await startTestProject({ capabilities: ['chat'], provider: fake, model: MODEL });
  }, 120_000);
  afterAll(async () => {
    await project?.stop();
    await fake?.stop();
    await mcp?.stop();
  });

  it("adds a server whose headers are sealed and listed by name only, and a turn calls its tools with them", async () => {
    const added = await json<{ id: string; name: string; transport: string; header_names: string[] }>(
      await send('POST', '/mcp', { name: 'calc', url: mcp.url, headers: { Authorization: AUTH } }),
      201,
    );
    serverId = added.id;
    expect(added).toMatchObject({ name: 'calc', transport: 'auto', header_names: ['Authorization'] });
    const listed = await json<{ servers: unknown[] }>(await send('GET', '/mcp'), 200);
    expect(JSON.stringify(listed)).not.toContain(AUTH);
    const stored = await sql<{ row: string }>`select row_to_json(s)::text as row from control.mcp_servers s`.execute(project.api.control.database.db);
    expect(stored.rows[0]!.row).not.toContain('mcp-control-plane-secret');

    await project.pushed();
    expect(await turnCalling('calc__add', { a: 20, b: 22 })).toBe('42');
    expect(await turnCalling('calc__whoami', {})).toBe(`authorization: ${AUTH}`);
  });

  it('refuses stdio servers, guarded URLs and taken names', async () => {
    const refused = async (body: object, status: number, text: string) => {
      const res = await send('POST', '/mcp', { name: 'other', url: mcp.url, ...body });
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(await res.json())).toContain(text);
    };
    await refused({ command: 'npx', args: ['some-mcp-server'] }, 400, STDIO_MCP_REFUSED);
    await refused({ type: 'stdio' }, 400, STDIO_MCP_REFUSED);
    await refused({ url: 'http://169.254.169.254/mcp' }, 400, 'url');
    await refused({ name: 'calc' }, 409, 'already exists');
    expect((await json<{ servers: unknown[] }>(await send('GET', '/mcp'), 200)).servers).toHaveLength(1);
  });

  it("removes a server: its tools are no longer offered, and an unknown id is 404", async () => {
    await json(await send('DELETE', `/mcp/${serverId}`), 200);
    expect((await send('GET', `/mcp/${serverId}`)).status).toBe(404);
    await project.pushed();
    expect(await turnCalling('calc__add', { a: 1, b: 1 })).toBe("Tool 'calc__add' is not available in this conversation; do not call it again.");
  });
});
