// Durable memory and the project wiki, in both setups: with capability `memory` the agent is offered remember,
// recall, forget and write_wiki_page, and what it keeps belongs to the person whose turn it was. GET /memory shows
// a person their own memory and the wiki pages their scope sees; only they forget an item (a privileged reader gets
// 403, others 404); a wiki page is managed on the admin surface. Without the capability (or with enable_memory
// declined) nothing is offered, and the routes answer 403.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, MODEL, OTHER_MODEL, providerSection, type ChatWorld } from './fixture.js';

const EMBEDDING_MODEL = 'embed-small';
const MEMORY_TOOLS = ['remember', 'recall', 'forget', 'write_wiki_page'];

describe.each(availableSetups())('memory and the wiki (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let fake: FakeOpenAIServer;
  const capabilities = ['chat', 'memory'];

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0004', chatModels: [MODEL, OTHER_MODEL], embeddingModels: { [EMBEDDING_MODEL]: 16 } });
    world = await chatWorld((await services?.env()) ?? {}, { fake });
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({
      ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'memory'] },
      providers: providerSection(fake),
      retrieval: { embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: 16 } },
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await fake?.stop();
    await services?.stop();
  });

  const lastToolMessage = () => (fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string }).content;
  const toolsOffered = () => ((fake.chatRequests().at(-1)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
  async function turn(token: string, call: { name: string; arguments: Record<string, unknown> }, answer = 'Done.'): Promise<string> {
    fake.script({ toolCalls: [call] }, answer);
    const res = await world.chat(token, { message: 'go', model: MODEL });
    expect(res.status, await res.clone().text()).toBe(200);
    return lastToolMessage();
  }
  type MemoryList = { items: { id: string; subject: string; content: string }[]; wiki: { id: string; title: string; scope: string }[] };
  const memoryOf = async (token: string, query = '') => {
    const res = await world.rt.endUser(`/memory${query}`, token);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as MemoryList;
  };

  it('remembers for the person whose turn it is, recalls it by words, and shows it to them alone', async () => {
    const alice = await world.token({ capabilities, sub: 'acme:sales:alice', scope: 'acme:sales:alice' });
    const bob = await world.token({ capabilities, sub: 'acme:sales:bob', scope: 'acme:sales:bob' });
    expect(await turn(alice, { name: 'remember', arguments: { content: 'Alice prefers invoices in euros.' } })).toMatch(/^Remembered \(id [0-9a-f-]{36}\)\.$/);
    expect(toolsOffered()).toEqual(expect.arrayContaining(MEMORY_TOOLS));
    await turn(bob, { name: 'remember', arguments: { content: 'Bob prefers invoices in dollars.' } });

    const mine = await memoryOf(alice);
    expect(mine.items.map((item) => [item.subject, item.content])).toEqual([['acme:sales:alice', 'Alice prefers invoices in euros.']]);
    const recalled = await turn(alice, { name: 'recall', arguments: { query: 'invoices currency euros' } });
    expect(recalled).toContain('Alice prefers invoices in euros.');
    expect(recalled).not.toContain('Bob');
    // Bob neither sees nor forgets Alice's item: the 404 a made-up id gets.
    const item = mine.items[0]!.id;
    const refused = await world.rt.endUser(`/memory/${item}`, bob, { method: 'DELETE' });
    expect(refused.status).toBe(404);
    expect(await refused.json()).toMatchObject({ detail: `memory item ${item} not found` });
    expect(await turn(bob, { name: 'forget', arguments: { id: item } })).toMatch(/^Could not forget/);
    expect((await memoryOf(alice)).items).toHaveLength(1);
  });

  it("lets a privileged reader read another's memory but not forget it, and refuses others the subject parameter", async () => {
    const carol = await world.token({ capabilities, sub: 'acme:carol', scope: 'acme:carol' });
    await turn(carol, { name: 'remember', arguments: { content: 'Carol is on leave in August.' } });
    const admin = await world.token({ capabilities, sub: 'acme:admin', scope: 'acme:admin', roles: ['admin'] });
    const read = await memoryOf(admin, '?subject=acme:carol');
    expect(read.items.map((i) => i.content)).toEqual(['Carol is on leave in August.']);
    const forget = await world.rt.endUser(`/memory/${read.items[0]!.id}`, admin, { method: 'DELETE' });
    expect(forget.status).toBe(403);
    expect(await forget.json()).toMatchObject({ code: 'not_owner' });
    const plain = await world.token({ capabilities, sub: 'acme:dave', scope: 'acme:dave' });
    expect((await world.rt.endUser('/memory?subject=acme:carol', plain)).status).toBe(403);
    // Carol forgets it herself.
    expect(await (await world.rt.endUser(`/memory/${read.items[0]!.id}`, carol, { method: 'DELETE' })).json()).toEqual({ id: read.items[0]!.id, deleted: true });
    expect((await memoryOf(carol)).items).toEqual([]);
  });

  it('writes wiki pages its scope sees, rewrites them by title, and leaves them to the admin surface', async () => {
    const writer = await world.token({ capabilities, sub: 'globex:support:erin', scope: 'globex:support' });
    expect(await turn(writer, { name: 'write_wiki_page', arguments: { title: 'Refunds', content: 'Refund within 30 days.' } })).toMatch(/^Wrote wiki page "Refunds"/);
    await turn(writer, { name: 'write_wiki_page', arguments: { title: 'Refunds', content: 'Refund within 45 days.' } });
    const colleague = await world.token({ capabilities, sub: 'globex:support:frank', scope: 'globex:support:frank' });
    const outsider = await world.token({ capabilities, sub: 'globex:sales:gina', scope: 'globex:sales:gina' });
    const seen = await memoryOf(colleague);
    expect(seen.wiki.map((page) => [page.title, page.scope])).toEqual([['Refunds', 'globex:support']]);
    expect((await memoryOf(outsider)).wiki).toEqual([]);
    expect(await turn(colleague, { name: 'recall', arguments: { query: 'refund days' } })).toContain('Refund within 45 days.');
    expect(await turn(outsider, { name: 'recall', arguments: { query: 'refund days' } })).toBe('Nothing remembered matches.');
    // Found by meaning too, through the project's embedding model: words that appear nowhere on the page reach it
    // (the fake's vectors share no words, so the nearest page is the only page), and still only for those who see it.
    expect(await turn(colleague, { name: 'recall', arguments: { query: 'xyzzy plugh' } })).toContain('Refund within 45 days.');
    expect(await turn(outsider, { name: 'recall', arguments: { query: 'xyzzy plugh' } })).toBe('Nothing remembered matches.');

    const pageId = seen.wiki[0]!.id;
    const fromUser = await world.rt.endUser(`/memory/${pageId}`, colleague, { method: 'DELETE' });
    expect(fromUser.status).toBe(403);
    expect((await world.rt.endUser(`/memory/${pageId}`, outsider, { method: 'DELETE' })).status).toBe(404);
    const wiki = `/tenants/${world.tenant.tenantId}/wiki`;
    const listed = (await (await world.rt.admin(wiki)).json()) as { pages: { id: string; content: string }[] };
    expect(listed.pages.find((page) => page.id === pageId)?.content).toBe('Refund within 45 days.');
    expect((await world.rt.admin(`${wiki}/${pageId}`)).status).toBe(200);
    expect(await (await world.rt.admin(`${wiki}/${pageId}`, { method: 'DELETE' })).json()).toEqual({ id: pageId, deleted: true });
    expect((await world.rt.admin(`${wiki}/${pageId}`)).status).toBe(404);
    expect((await memoryOf(colleague)).wiki).toEqual([]);
  });

  it('offers no memory without the capability or with enable_memory declined, and the routes refuse', async () => {
    const chatOnly = await world.token({ capabilities: ['chat'] });
    fake.script('No memory.');
    expect((await world.chat(chatOnly, { message: 'hi', model: MODEL })).status).toBe(200);
    expect(toolsOffered().filter((name) => MEMORY_TOOLS.includes(name))).toEqual([]);
    const holder = await world.token({ capabilities });
    fake.script('Declined.');
    expect((await world.chat(holder, { message: 'hi', model: MODEL, enable_memory: false })).status).toBe(200);
    expect(toolsOffered().filter((name) => MEMORY_TOOLS.includes(name))).toEqual([]);
    const denied = await world.rt.endUser('/memory', chatOnly);
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ code: 'capability_denied' });
    // A client's own tool may be called `recall` when memory is not offered.
    fake.script('ok');
    const own = await world.chat(chatOnly, { message: 'hi', model: MODEL, tools: [{ name: 'recall', description: 'client recall', parameters: { type: 'object' } }] });
    expect(own.status, await own.clone().text()).toBe(200);
  });

  it('erases memory and the wiki with the tenant', async () => {
    const db = world.rt.runtime.database.db;
    const tenantId = world.tenant.tenantId;
    const before = await db.selectFrom('memory_items').select('id').where('tenant_id', '=', tenantId).execute();
    expect(before.length).toBeGreaterThan(0);
    const erased = await world.rt.admin(`/tenants/${tenantId}`, { method: 'DELETE' });
    expect(erased.status).toBe(200);
    for (const table of ['memory_items', 'wiki_pages'] as const) {
      expect(await db.selectFrom(table).select('id').where('tenant_id', '=', tenantId).execute()).toEqual([]);
    }
  });
});
