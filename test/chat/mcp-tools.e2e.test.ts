// MCP servers' tools in turns, against the SDK's own MCP server run over HTTP: a project's server is listed once
// and its tools offered to every turn as `<server>__<tool>`, called with the server's static headers, over Streamable
// HTTP or (an older server) SSE; an error result, an unreachable server and a server the URL guard refuses are the
// model's to read, never a failed turn; `allowed_tools` narrows them; the headers are sealed.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TestMcpServer } from '../fakes/mcp-server.js';
import { captureLogs } from '../harness/logs.js';
import { chatWorld, type ChatWorld } from './fixture.js';

describe('MCP tools in turns', () => {
  let world: ChatWorld;
  let server: TestMcpServer;
  let legacy: TestMcpServer;
  const AUTH = 'Bearer mcp-static-token-0001';
  const logs = captureLogs();

  const publish = async (servers: object[]) => {
    const res = await world.tenant.reconfigure({ mcp_servers: servers } as never);
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const toolMessages = () => world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool') as { content: string }[];
  const offered = () => ((world.fake.chatRequests().at(-2)?.tools ?? []) as { function: { name: string; parameters: unknown } }[]).map((tool) => tool.function);
  async function callTool(name: string, args: object, body: Record<string, unknown> = {}) {
    world.fake.script({ toolCalls: [{ name, arguments: args }] }, 'Done.');
    const res = await world.chat(await world.token(), { message: 'go', ...body });
    expect(res.status, await res.clone().text()).toBe(200);
    return toolMessages().at(-1)?.content;
  }

  beforeAll(async () => {
    server = await TestMcpServer.start({ requireAuthorization: AUTH });
    legacy = await TestMcpServer.start({ transport: 'sse' });
    world = await chatWorld({ MCP_TIMEOUT_MS: '2000' }, { logger: logs.logger });
  }, 60_000);
  afterAll(async () => {
    await world?.stop();
    await server?.stop();
    await legacy?.stop();
  });
  beforeEach(() => world.fake.clearScripts());

  it("offers a project server's tools and calls them with its headers over Streamable HTTP", async () => {
    await publish([{ id: 'mcp-1', name: 'calc', url: server.url, transport: 'auto', headers: { Authorization: AUTH } }]);
    expect(await callTool('calc__add', { a: 2, b: 40 })).toBe('42');
    const tools = offered();
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['calc__add', 'calc__whoami', 'calc__fail']));
    expect(tools.find((tool) => tool.name === 'calc__add')!.parameters).toMatchObject({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } });
    expect(await callTool('calc__whoami', {})).toBe(`authorization: ${AUTH}`);
    expect(server.requests.every((request) => request.headers.authorization === AUTH)).toBe(true);
  });

  it('keeps the tool list: later turns do not list the tools again', async () => {
    await callTool('calc__add', { a: 1, b: 1 });
    const before = server.requests.length;
    await callTool('calc__add', { a: 1, b: 2 });
    // The call's own request(s), and no new listing: a stateless server answers each POST on its own.
    const added = server.requests.slice(before);
    expect(added.length).toBeGreaterThan(0);
    expect(added.length).toBeLessThanOrEqual(2);
  });

  it("makes an error result and an unknown server's silence the model's to read, and the turn goes on", async () => {
    expect(await callTool('calc__fail', {})).toBe('the tool broke');
    await publish([
      { id: 'mcp-1', name: 'calc', url: server.url, transport: 'auto', headers: { Authorization: 'Bearer wrong' } },
      { id: 'mcp-2', name: 'gone', url: 'http://127.0.0.1:9/mcp', transport: 'auto' },
      { id: 'mcp-3', name: 'meta', url: 'http://169.254.169.254/mcp', transport: 'auto' },
    ]);
    // None of them can be listed: no tools offered, and a call by name is refused as any unknown tool is.
    expect(await callTool('calc__add', { a: 1, b: 2 })).toBe("Tool 'calc__add' is not available in this conversation; do not call it again.");
    expect(offered().map((tool) => tool.name).filter((name) => name.includes('__'))).toEqual([]);
  });

  it('falls back to the SSE transport for an older server', async () => {
    await publish([{ id: 'mcp-4', name: 'old', url: legacy.url, transport: 'auto' }]);
    expect(await callTool('old__add', { a: 5, b: 6 })).toBe('11');
    expect(legacy.requests.some((request) => request.method === 'GET' && request.path === '/sse')).toBe(true);
  });

  it("gives each person calls through an MCP session of their own, kept between their calls", async () => {
    await publish([{ id: 'mcp-4', name: 'old', url: legacy.url, transport: 'auto' }]);
    const sessions = () => legacy.requests.filter((request) => request.method === 'GET' && request.path === '/sse').length;
    const as = async (sub: string) => {
      world.fake.script({ toolCalls: [{ name: 'old__add', arguments: { a: 1, b: 2 } }] }, 'Done.');
      const res = await world.chat(await world.token({ sub, scope: sub }), { message: 'add' });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(toolMessages().at(-1)!.content).toBe('3');
    };
    await as('acme:session-alice');
    const afterAlice = sessions();
    await as('acme:session-alice');
    expect(sessions()).toBe(afterAlice);
    // The SSE transport holds a session per stream: another person's call opens their own.
    await as('acme:session-bob');
    expect(sessions()).toBe(afterAlice + 1);
  });

  it('is narrowed by allowed_tools', async () => {
    await publish([{ id: 'mcp-1', name: 'calc', url: server.url, transport: 'auto', headers: { Authorization: AUTH } }]);
    world.fake.script({ toolCalls: [{ name: 'calc__add', arguments: { a: 1, b: 1 } }] }, 'Done.');
    const token = await world.token({ allowed_tools: ['calc__whoami'] });
    const res = await world.chat(token, { message: 'go' });
    expect(res.status).toBe(200);
    expect(offered().map((tool) => tool.name).filter((name) => name.startsWith('calc__'))).toEqual(['calc__whoami']);
    expect(toolMessages().at(-1)!.content).toBe("Tool 'calc__add' is not available in this conversation; do not call it again.");
  });

  describe("an end-user's own servers, the probe and the listing", () => {
    const manage = ['chat', 'ask_user', 'mcp:manage'];
    let alice: string;
    let bob: string;
    beforeAll(async () => {
      const ceiling = world.tenant.configuration.ceiling;
      const res = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'mcp:manage'] } } as never);
      expect(res.status).toBe(200);
      alice = await world.token({ capabilities: manage, sub: 'acme:alice', scope: 'acme:alice' });
      bob = await world.token({ capabilities: manage, sub: 'acme:bob', scope: 'acme:bob' });
    });
    const attach = (token: string, body: object) => world.rt.endUser('/tools/mcp', token, { method: 'POST', body: JSON.stringify(body) });
    const probe = async (body: object, token = alice) => {
      const res = await world.rt.endUser('/tools/mcp/probe', token, { method: 'POST', body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { ok: boolean; verdict: string | null; transport: string | null; tools: { name: string }[] } };
    };
    const turnOf = async (token: string, name: string, args: object) => {
      world.fake.script({ toolCalls: [{ name, arguments: args }] }, 'Done.');
      const res = await world.chat(token, { message: 'go' });
      expect(res.status).toBe(200);
      return toolMessages().at(-1)!.content;
    };

    it('attaches a server for its owner alone: offered in their turns, unseen and untouchable by others', async () => {
      await publish([{ id: 'mcp-1', name: 'calc', url: server.url, transport: 'auto', headers: { Authorization: AUTH } }]);
      const res = await attach(alice, { name: 'mine', url: server.url, headers: { Authorization: AUTH } });
      expect(res.status, await res.clone().text()).toBe(201);
      const mine = (await res.json()) as { id: string; header_names: string[] };
      expect(mine.header_names).toEqual(['Authorization']);
      expect(JSON.stringify(await (await world.rt.endUser('/tools/mcp', alice)).json())).not.toContain(AUTH);
      expect(await turnOf(alice, 'mine__add', { a: 3, b: 4 })).toBe('7');
      expect(await turnOf(bob, 'mine__add', { a: 3, b: 4 })).toBe("Tool 'mine__add' is not available in this conversation; do not call it again.");
      expect(((await (await world.rt.endUser('/tools/mcp', bob)).json()) as { servers: unknown[] }).servers).toEqual([]);
      expect((await world.rt.endUser(`/tools/mcp/${mine.id}`, bob, { method: 'DELETE' })).status).toBe(404);
      // Without mcp:manage: the routes refuse, and the server's tools are not offered.
      const plain = await world.token({ capabilities: ['chat'], sub: 'acme:alice', scope: 'acme:alice' });
      expect((await world.rt.endUser('/tools/mcp', plain)).status).toBe(403);
      expect(await turnOf(plain, 'mine__add', { a: 3, b: 4 })).toBe("Tool 'mine__add' is not available in this conversation; do not call it again.");
      expect((await world.rt.endUser(`/tools/mcp/${mine.id}`, alice, { method: 'DELETE' })).status).toBe(200);
      expect(await turnOf(alice, 'mine__add', { a: 3, b: 4 })).toBe("Tool 'mine__add' is not available in this conversation; do not call it again.");
    });

    it("refuses stdio servers, the project's server names and guarded URLs", async () => {
      const stdio = await attach(alice, { name: 'local', url: server.url, command: 'npx', args: ['an-mcp-server'] });
      expect(stdio.status).toBe(400);
      expect(((await stdio.json()) as { detail: string }).detail).toContain('stdio MCP servers are refused');
      expect((await attach(alice, { name: 'calc', url: server.url })).status).toBe(409);
      expect((await attach(alice, { name: 'meta', url: 'http://169.254.169.254/mcp' })).status).toBe(400);
    });

    it('probes a server without keeping it, in the words the listing uses', async () => {
      const good = await probe({ url: server.url, headers: { Authorization: AUTH } });
      expect(good).toEqual({ status: 200, body: { ok: true, verdict: null, transport: 'streamable_http', tools: expect.arrayContaining([expect.objectContaining({ name: 'add' })]) } });
      expect((await probe({ url: legacy.url })).body).toMatchObject({ ok: true, transport: 'sse' });
      const unreachable = await probe({ url: 'http://127.0.0.1:9/mcp' });
      expect(unreachable.body).toMatchObject({ ok: false, transport: null, tools: [] });
      expect(unreachable.body.verdict).toMatch(/^unreachable: /);
      expect((await probe({ url: 'http://169.254.169.254/mcp' })).status).toBe(400);
      expect((await probe({ url: server.url }, await world.token({ capabilities: ['chat'] }))).status).toBe(403);

      // A project server the loader cannot list: the listing and the probe say the same of it.
      await publish([{ id: 'mcp-9', name: 'locked', url: server.url, transport: 'streamable_http', headers: { Authorization: 'Bearer wrong' } }]);
      const listing = (await (await world.rt.endUser('/tools', alice)).json()) as { mcp_servers: { name: string; ok: boolean; verdict: string }[] };
      const locked = listing.mcp_servers.find((entry) => entry.name === 'locked')!;
      expect(locked.ok).toBe(false);
      expect((await probe({ url: server.url, transport: 'streamable_http', headers: { Authorization: 'Bearer wrong' } })).body.verdict).toBe(locked.verdict);
    });

    it('lists what the caller may call, with origins, approval gates and the request flags applied', async () => {
      await publish([{ id: 'mcp-1', name: 'calc', url: server.url, transport: 'auto', headers: { Authorization: AUTH } }]);
      const listing = (await (await world.rt.endUser('/tools', alice)).json()) as { tools: { name: string; origin: string; requires_approval: boolean }[]; mcp_servers: unknown[] };
      expect(listing.tools).toEqual(
        expect.arrayContaining([
          { name: 'ask_user', description: expect.any(String), origin: 'builtin', requires_approval: false },
          { name: 'calc__add', description: 'Add two numbers', origin: 'mcp', requires_approval: false },
        ]),
      );
      expect(listing.mcp_servers).toEqual([{ name: 'calc', origin: 'project', ok: true, verdict: null, tools: 3 }]);
      const declined = (await (await world.rt.endUser('/tools?enable_ask_user=false', alice)).json()) as { tools: { name: string }[] };
      expect(declined.tools.map((tool) => tool.name)).not.toContain('ask_user');
    });
  });

  it('keeps the headers sealed: the configuration shows them masked', async () => {
    const text = await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/configuration`)).text();
    expect(text).not.toContain('mcp-static-token');
    expect(JSON.parse(text).mcp_servers[0].headers).toEqual({ '(sealed)': '****' });
  });

  it('never logs a header value, through pushes, listings, calls, attaches, probes and refusals, at the most verbose level', () => {
    expect(logs.text()).toContain('"level":');
    expect(logs.text()).not.toContain('mcp-static-token');
  });
});
