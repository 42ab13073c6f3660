// Skills in turns, in both setups: a package the project publishes is seen by every end-user, one an end-user
// uploads (plugins:write) by them alone, on top; a turn's system prompt names each skill it may use and the agent
// loads a skill's instructions or files with load_skill; `plugins` narrows and enable_plugins false declines them.
// Hostile packages are 400s naming what was wrong; a package's mcp.json brings its HTTP servers' tools.
import { strToU8, zipSync } from 'fflate';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TestMcpServer } from '../fakes/mcp-server.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, type ChatWorld } from './fixture.js';

const skillMd = (name: string, description: string, body: string) => `---\nname: ${name}\ndescription: ${description}\n---\n${body}\n`;

describe.each(availableSetups())('skills (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let mcp: TestMcpServer;

  const form = (parts: Array<[string, Uint8Array | string, string]>) => {
    const body = new FormData();
    for (const [name, bytes, filename] of parts) body.append(name, new Blob([typeof bytes === 'string' ? bytes : Buffer.from(bytes)]), filename);
    return body;
  };
  const adminUpload = (body: FormData) => world.rt.admin(`/tenants/${world.tenant.tenantId}/plugins`, { method: 'POST', body });
  const userUpload = (token: string, body: FormData) => world.rt.endUser('/plugins', token, { method: 'POST', body });
  const systemPrompt = () => (world.fake.chatRequests().at(-1)!.messages[0] as { role: string; content: string });
  const offered = () => ((world.fake.chatRequests().at(-1)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
  const lastTool = () => (world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string }).content;
  async function turn(token: string, body: Record<string, unknown> = {}, call?: { name: string; arguments: object }) {
    if (call) world.fake.script({ toolCalls: [call] }, 'Done.');
    const res = await world.chat(token, { message: 'help me', ...body });
    expect(res.status, await res.clone().text()).toBe(200);
  }

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    mcp = await TestMcpServer.start();
    world = await chatWorld((await services?.env()) ?? {});
    const ceiling = world.tenant.configuration.ceiling;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'plugins:write'] } } as never)).status).toBe(200);
    const zip = zipSync({
      'skills/forms/SKILL.md': strToU8(skillMd('pdf-forms', 'Fill in PDF forms', '# Filling forms\nRead references/fields.md first.')),
      'skills/forms/references/fields.md': strToU8('Field A is the name.'),
      'mcp.json': strToU8(JSON.stringify({ mcpServers: { calc: { url: mcp.url }, local: { command: 'npx', args: ['x'] } } })),
      'stray.txt': strToU8('stray'),
    });
    const res = await adminUpload(form([['file', zip, 'forms.zip']]));
    expect(res.status, await res.clone().text()).toBe(201);
    const plugin = (await res.json()) as { name: string; visibility: string; skills: unknown[]; warnings: string[] };
    expect(plugin).toMatchObject({ name: 'forms', visibility: 'project', owner_subject: null, skills: [{ name: 'pdf-forms', description: 'Fill in PDF forms' }] });
    expect(plugin.warnings).toEqual(expect.arrayContaining(['stray.txt: skipped, it belongs to no skill', expect.stringMatching(/^mcp.json: server 'local' refused: stdio MCP servers are refused/)]));
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await mcp?.stop();
    await services?.stop();
  });
  beforeEach(() => world.fake.clearScripts());

  it("names the project's skills in the system prompt, and loads a skill's instructions and files on demand", async () => {
    const token = await world.token();
    await turn(token);
    expect(systemPrompt().role).toBe('system');
    expect(systemPrompt().content).toContain('- pdf-forms: Fill in PDF forms');
    expect(offered()).toContain('load_skill');
    await turn(token, {}, { name: 'load_skill', arguments: { name: 'pdf-forms' } });
    expect(lastTool()).toBe('# Filling forms\nRead references/fields.md first.\n\nFiles of this skill (load one with load_skill and its path): references/fields.md');
    await turn(token, {}, { name: 'load_skill', arguments: { name: 'pdf-forms', file: 'references/fields.md' } });
    expect(lastTool()).toBe('Field A is the name.');
    await turn(token, {}, { name: 'load_skill', arguments: { name: 'pdf-forms', file: '../../mcp.json' } });
    expect(lastTool()).toMatch(/^Skill pdf-forms has no file/);
    // Its mcp.json's HTTP server is offered too; its stdio one never was.
    await turn(token, {}, { name: 'calc__add', arguments: { a: 1, b: 2 } });
    expect(lastTool()).toBe('3');
  });

  it('narrows skills by `plugins` and declines them with enable_plugins false', async () => {
    const token = await world.token();
    await turn(token, { plugins: ['something-else'] });
    expect(offered()).not.toContain('load_skill');
    expect(String(systemPrompt().content)).not.toContain('pdf-forms');
    await turn(token, { enable_plugins: false });
    expect(offered()).not.toContain('load_skill');
    expect(offered()).not.toContain('calc__add');
  });

  it("keeps an end-user's own package to them, on top of the project's, and lets only them remove it", async () => {
    const alice = await world.token({ capabilities: [...CHAT_CAPABILITIES, 'plugins:write'], sub: 'acme:alice', scope: 'acme:alice' });
    const bob = await world.token({ capabilities: [...CHAT_CAPABILITIES, 'plugins:write'], sub: 'acme:bob', scope: 'acme:bob' });
    const res = await userUpload(alice, form([['file', skillMd('alice-notes', 'How Alice files notes', 'File them by date.'), 'SKILL.md']]));
    expect(res.status, await res.clone().text()).toBe(201);
    const own = (await res.json()) as { id: string; name: string };
    expect(own).toMatchObject({ name: 'alice-notes', visibility: 'private', owner_subject: 'acme:alice' });

    await turn(alice);
    expect(systemPrompt().content).toContain('- alice-notes: How Alice files notes');
    expect(systemPrompt().content).toContain('- pdf-forms');
    await turn(bob);
    expect(systemPrompt().content).not.toContain('alice-notes');

    const listed = (await (await world.rt.endUser('/plugins', alice)).json()) as { plugins: { name: string; visibility: string }[] };
    expect(listed.plugins.map((p) => [p.name, p.visibility])).toEqual([['forms', 'project'], ['alice-notes', 'private']]);
    expect(((await (await world.rt.endUser('/plugins', bob)).json()) as { plugins: unknown[] }).plugins).toHaveLength(1);
    expect((await world.rt.endUser(`/plugins/${own.id}`, bob, { method: 'DELETE' })).status).toBe(404);
    const projectPlugin = listed.plugins.find((p) => p.visibility === 'project') as unknown as { id: string };
    const refused = await world.rt.endUser(`/plugins/${projectPlugin.id}`, alice, { method: 'DELETE' });
    expect(refused.status).toBe(403);
    expect((await world.rt.endUser(`/plugins/${own.id}`, alice, { method: 'DELETE' })).status).toBe(200);

    const plain = await world.token({ sub: 'acme:carol', scope: 'acme:carol' });
    expect((await userUpload(plain, form([['file', skillMd('x', 'y', 'z'), 'SKILL.md']]))).status).toBe(403);
  });

  it('refuses hostile packages with a 400 naming what was wrong, and stores nothing', async () => {
    const before = ((await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/plugins`)).json()) as { plugins: unknown[] }).plugins.length;
    const traversal = await adminUpload(form([['file', zipSync({ '../../etc/evil/SKILL.md': strToU8(skillMd('evil', 'x', 'y')) }), 'evil.zip']]));
    expect(traversal.status).toBe(400);
    expect(((await traversal.json()) as { code: string }).code).toBe('unsafe_path');
    const noSkill = await adminUpload(form([['files', 'hello', 'README.md']]));
    expect(noSkill.status).toBe(400);
    expect(((await noSkill.json()) as { detail: string }).detail).toMatch(/has no skill/);
    const json = await world.rt.admin(`/tenants/${world.tenant.tenantId}/plugins`, { method: 'POST', body: JSON.stringify({ file: 'x' }) });
    expect(json.status).toBe(400);
    const taken = await adminUpload(form([['files', skillMd('pdf-forms', 'again', 'x'), 'skills/again/SKILL.md']]));
    expect(taken.status).toBe(409);
    expect(((await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/plugins`)).json()) as { plugins: unknown[] }).plugins).toHaveLength(before);
  });
});
