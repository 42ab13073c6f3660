// The agent answers from the documents its person may see, with citations: with `documents:read` (and `enable_rag`
// not declined) it is offered `search_documents`, which runs the same search as POST /documents/retrieve for that
// person; the passages come back to the model numbered, and the blocking response and the stream's `done` frame list
// them as citations. Without the capability, or with the flag declined, the tool is not offered, and a call to it
// anyway is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { chatWorld, MODEL, OTHER_MODEL, providerSection, type ChatWorld } from './fixture.js';

const EMBEDDING_MODEL = 'embed-small';

describe('retrieval in turns', () => {
  let world: ChatWorld;
  let fake: FakeOpenAIServer;
  const capabilities = ['chat', 'documents:read', 'documents:write'];

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0003', chatModels: [MODEL, OTHER_MODEL], embeddingModels: { [EMBEDDING_MODEL]: 16 } });
    world = await chatWorld({}, { fake });
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({
      ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'documents:read', 'documents:write'] },
      providers: providerSection(fake),
      retrieval: { embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: 16 } },
    } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
  });
  afterAll(async () => {
    await world?.stop();
    await fake?.stop();
  });

  async function upload(token: string, title: string, text: string, extra: Record<string, unknown> = {}): Promise<{ id: string }> {
    const res = await world.rt.endUser('/documents?wait=20', token, { method: 'POST', body: JSON.stringify({ title, text, content_type: 'text/markdown', ...extra }) });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string };
  }
  const toolsOffered = () => ((fake.chatRequests().at(-1)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);

  it('searches what the person may see, hands the model numbered passages, and answers with citations', async () => {
    const alice = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
    const bob = await world.token({ capabilities, sub: 'acme:bob', scope: 'acme:bob' });
    const policy = await upload(alice, 'Returns policy', '# Returns\nItems can be returned within 30 days.\n\n## Refunds\nThe refund window closes 30 days after delivery.');
    await upload(bob, 'Bob private', '# Refunds\nBob thinks the refund window is 90 days.', { visibility: 'self' });
    fake.script({ toolCalls: [{ name: 'search_documents', arguments: { query: 'refund window' } }] }, 'The refund window closes 30 days after delivery [1].');
    const res = await world.chat(alice, { message: 'How long is the refund window?', model: MODEL });
    expect(res.status, await res.clone().text()).toBe(200);
    const body = (await res.json()) as { content: string; citations: { index: number; document_id: string; title: string; heading_path: string[]; chunk_id: string; score: number }[] };
    expect(body.content).toBe('The refund window closes 30 days after delivery [1].');
    expect(body.citations[0]).toMatchObject({ index: 1, document_id: policy.id, title: 'Returns policy', heading_path: ['Returns', 'Refunds'] });
    expect(body.citations.every((c) => c.document_id === policy.id)).toBe(true);
    // What the model read: Alice's passages, numbered, and nothing of Bob's.
    const toolMessage = fake.chatRequests().at(-1)!.messages.find((m) => m.role === 'tool') as { content: string };
    expect(toolMessage.content).toContain('[1] Returns policy › Returns › Refunds\n## Refunds\nThe refund window closes 30 days after delivery.');
    expect(toolMessage.content).not.toContain('90 days');
  });

  it('carries the citations in the done frame of a stream', async () => {
    const alice = await world.token({ capabilities, sub: 'acme:carol', scope: 'acme:carol' });
    const doc = await upload(alice, 'Shipping', '# Shipping\nOrders ship from Lisbon every weekday.');
    fake.script({ toolCalls: [{ name: 'search_documents', arguments: { query: 'where do orders ship from', k: 3 } }] }, 'From Lisbon [1].');
    const { response, events } = await world.streamAll(alice, { message: 'Where do orders ship from?', model: MODEL });
    expect(response.status).toBe(200);
    const tool = events.find((e) => e.event === 'tool_end' || (e.data as { type?: string })?.type === 'tool_end');
    expect(tool).toBeDefined();
    const done = events.map((e) => e.data as { type?: string; citations?: { document_id: string }[] }).find((data) => data?.type === 'done');
    expect(done?.citations?.map((c) => c.document_id)).toEqual([doc.id]);
  });

  it('offers no search without documents:read or with enable_rag declined, and refuses a call to it anyway', async () => {
    const chatOnly = await world.token({ capabilities: ['chat'] });
    fake.script('No tools here.');
    expect((await world.chat(chatOnly, { message: 'hi', model: MODEL })).status).toBe(200);
    expect(toolsOffered()).not.toContain('search_documents');
    const reader = await world.token({ capabilities });
    fake.script('Declined.');
    expect((await world.chat(reader, { message: 'hi', model: MODEL, enable_rag: false })).status).toBe(200);
    expect(toolsOffered()).not.toContain('search_documents');
    fake.script({ toolCalls: [{ name: 'search_documents', arguments: { query: 'anything' } }] }, 'I could not search.');
    const refused = (await (await world.chat(chatOnly, { message: 'search anyway', model: MODEL })).json()) as { citations: unknown[] };
    expect(refused.citations).toEqual([]);
    const toolMessage = fake.chatRequests().at(-1)!.messages.find((m) => m.role === 'tool') as { content: string };
    expect(toolMessage.content).toBe("Tool 'search_documents' is not available in this conversation; do not call it again.");
  });

  it('leaves the markers out when the project lists its sources beside the answer instead', async () => {
    const configured = world.tenant.configuration as unknown as { retrieval: Record<string, unknown> };
    expect((await world.tenant.reconfigure({ retrieval: { ...configured.retrieval, citations: 'list' } } as never)).status).toBe(200);
    try {
      const dave = await world.token({ capabilities, sub: 'acme:dave', scope: 'acme:dave' });
      const doc = await upload(dave, 'Holidays', '# Holidays\nThe office closes on 24 December.');
      fake.script({ toolCalls: [{ name: 'search_documents', arguments: { query: 'office closes' } }] }, 'It closes on 24 December.');
      const body = (await (await world.chat(dave, { message: 'When does the office close?', model: MODEL })).json()) as { citations: { document_id: string }[] };
      expect(body.citations.map((c) => c.document_id)).toEqual([doc.id]);
      const toolMessage = fake.chatRequests().at(-1)!.messages.find((m) => m.role === 'tool') as { content: string };
      expect(toolMessage.content).toMatch(/without markers or a list of sources in your text/);
      expect(toolMessage.content).not.toMatch(/Cite what you use/);
    } finally {
      expect((await world.tenant.reconfigure({ retrieval: configured.retrieval } as never)).status).toBe(200);
    }
  });

  it('starts each turn with the best passages where the project chose automatic context, for those who may search', async () => {
    const ceiling = world.tenant.configuration.ceiling;
    const configure = (auto: boolean) =>
      world.tenant.reconfigure({
        ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'documents:read', 'documents:write'] },
        providers: providerSection(fake),
        retrieval: { embedding: { provider: 'cred-1', model: EMBEDDING_MODEL, dimensions: 16 }, ...(auto ? { auto_context: true } : {}) },
      } as never);
    const reader = await world.token({ capabilities, sub: 'acme:dora', scope: 'acme:dora' });
    const doc = await upload(reader, 'Opening hours', '# Opening hours\nThe Lisbon shop opens at nine every weekday.');
    const systemOf = () => (fake.chatRequests().at(-1)!.messages.find((m) => m.role === 'system') as { content: string } | undefined)?.content ?? '';
    try {
      expect((await configure(true)).status).toBe(200);
      fake.script('It opens at nine [1].');
      const res = await world.chat(reader, { message: 'When does the Lisbon shop open?', model: MODEL });
      expect(res.status, await res.clone().text()).toBe(200);
      const body = (await res.json()) as { citations: { index: number; document_id: string }[] };
      expect(systemOf()).toContain('[1] Opening hours › Opening hours\n# Opening hours\nThe Lisbon shop opens at nine every weekday.');
      expect(body.citations).toEqual([expect.objectContaining({ index: 1, document_id: doc.id })]);
      // Declined for the request, or a token that may not search: no passages, no citations.
      fake.script('No context.');
      const declined = (await (await world.chat(reader, { message: 'When does the Lisbon shop open?', model: MODEL, enable_rag: false })).json()) as { citations: unknown[] };
      expect(systemOf()).not.toContain('Lisbon');
      expect(declined.citations).toEqual([]);
      const chatOnly = await world.token({ capabilities: ['chat'], sub: 'acme:dora', scope: 'acme:dora' });
      fake.script('No context.');
      await world.chat(chatOnly, { message: 'When does the Lisbon shop open?', model: MODEL });
      expect(systemOf()).not.toContain('Lisbon');
    } finally {
      expect((await configure(false)).status).toBe(200);
    }
    fake.script('Off again.');
    await world.chat(reader, { message: 'When does the Lisbon shop open?', model: MODEL });
    expect(systemOf()).not.toContain('Lisbon');
  });
});
