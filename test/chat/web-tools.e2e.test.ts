// Web search and page reads in turns, against a protocol-level fake of the search APIs and pages on loopback: with
// capability web_search the agent gets web_search (when the project chose an engine: Brave Search's API or a
// SearXNG instance) and browse_url, which reads a page's readable text through the URL guard, every redirect
// vetted, within size and time limits. screenshot_url is not offered, and /capabilities says so.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ARTICLE_TEXT, FakeWeb } from '../fakes/web-server.js';
import { chatWorld, CHAT_CAPABILITIES, type ChatWorld } from './fixture.js';

describe('web search and page reads', () => {
  let world: ChatWorld;
  let web: FakeWeb;
  const capabilities = [...CHAT_CAPABILITIES, 'web_search'];

  const configure = async (section: object | undefined) => {
    const ceiling = world.tenant.configuration.ceiling;
    const res = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...new Set([...ceiling.capabilities, 'web_search'])] }, web_search: section } as never);
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const offered = () => ((world.fake.chatRequests().at(-2)?.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name);
  async function call(name: string, args: object, token?: string, body: Record<string, unknown> = {}) {
    world.fake.script({ toolCalls: [{ name, arguments: args }] }, 'Done.');
    const res = await world.chat(token ?? (await world.token({ capabilities })), { message: 'look it up', ...body });
    expect(res.status, await res.clone().text()).toBe(200);
    return (world.fake.chatRequests().at(-1)!.messages.filter((m) => m.role === 'tool').at(-1) as { content: string }).content;
  }

  beforeAll(async () => {
    web = await FakeWeb.start();
    // No browser: screenshot_url, which pictures a page in one, is then not offered (test/browser/screenshots has one).
    world = await chatWorld({ WEB_FETCH_TIMEOUT_MS: '1000', BROWSER_HOST: 'none' });
  }, 60_000);
  afterAll(async () => {
    await world?.stop();
    await web?.stop();
  });
  beforeEach(() => world.fake.clearScripts());

  it("searches with Brave Search's API and the project's key", async () => {
    await configure({ provider: 'brave', base_url: web.url, api_key: web.apiKey });
    const found = await call('web_search', { query: 'best kettle', count: 2 });
    expect(found).toBe(`1. Result 1 for best kettle\n${web.url}/pages/article?n=1\nSnippet 1\n\n2. Result 2 for best kettle\n${web.url}/pages/article?n=2\nSnippet 2`);
    expect(offered()).toEqual(expect.arrayContaining(['web_search', 'browse_url']));
    expect(offered()).not.toContain('screenshot_url');
    const request = web.requests.findLast((r) => r.path === '/res/v1/web/search')!;
    expect(request.headers['x-subscription-token']).toBe(web.apiKey);
    expect(request.query.get('count')).toBe('2');
  });

  it('searches a SearXNG instance, and tells the model when the engine refuses', async () => {
    await configure({ provider: 'searxng', base_url: web.url });
    expect(await call('web_search', { query: 'kettle' })).toContain('1. Result 1 for kettle');
    await configure({ provider: 'brave', base_url: web.url, api_key: 'wrong-key' });
    expect(await call('web_search', { query: 'kettle' })).toBe('The search failed: Brave Search refused the key (HTTP 401)');
  });

  it("reads a page's readable text, following a redirect, without its navigation", async () => {
    const page = await call('browse_url', { url: `${web.url}/pages/redirect-ok` });
    expect(page).toContain('# Kettle review');
    expect(page).toContain(ARTICLE_TEXT);
    expect(page).toContain(`(redirected to ${web.url}/pages/article)`);
    expect(page).not.toContain('About us');
    expect(await call('browse_url', { url: `${web.url}/pages/plain` })).toBe(`${web.url}/pages/plain\n\nJust plain\n\ntext.`);
  });

  it('reads a page nested thousands deep as its plain text, not through Readability', async () => {
    // Readability spent 30 s and more on such a page with the event loop blocked, and then overflowed its stack.
    const page = await call('browse_url', { url: `${web.url}/pages/deep` });
    expect(page).toBe(`# Deep\n${web.url}/pages/deep\n\nThe bottom of the page.`);
  });

  it('refuses a redirect to a metadata address, a page past the limits, and what is not a page', async () => {
    // The URL guard's own refusal, which the model reads: not any failure to read (a timeout says "Could not read" too).
    expect(await call('browse_url', { url: `${web.url}/pages/redirect-metadata` })).toBe(
      `Could not read ${web.url}/pages/redirect-metadata: redirect target points to a cloud metadata address (169.254.169.254), which is never allowed`,
    );
    expect(await call('browse_url', { url: 'http://169.254.169.254/latest/meta-data/' })).toBe(
      'Could not read http://169.254.169.254/latest/meta-data/: url points to a cloud metadata address (169.254.169.254), which is never allowed',
    );
    const big = await call('browse_url', { url: `${web.url}/pages/big` });
    expect(big.length).toBeLessThanOrEqual(20_000);
    expect(await call('browse_url', { url: `${web.url}/pages/binary` })).toMatch(/application\/octet-stream is not a page/);
    expect(await call('browse_url', { url: `${web.url}/pages/slow` })).toMatch(/^Could not read .*did not answer within 1000 ms/);
    // Never silent for long, yet never done: cut off at twice the limit in all.
    expect(await call('browse_url', { url: `${web.url}/pages/trickle` })).toBe(`Could not read ${web.url}/pages/trickle: the page did not answer within 2000 ms`);
    expect(await call('browse_url', { url: 'file:///etc/passwd' })).toBe('browse_url needs an http(s) `url`.');
  });

  it('is offered only with capability web_search and enable_web_search; web_search only with an engine; /capabilities names what is not offered', async () => {
    await call('browse_url', { url: `${web.url}/pages/plain` }, await world.token({ capabilities: CHAT_CAPABILITIES }));
    expect(offered()).not.toContain('browse_url');
    await call('browse_url', { url: `${web.url}/pages/plain` }, undefined, { enable_web_search: false });
    expect(offered()).not.toContain('browse_url');
    await configure(undefined);
    await call('browse_url', { url: `${web.url}/pages/plain` });
    expect(offered()).toContain('browse_url');
    expect(offered()).not.toContain('web_search');
    expect(offered()).not.toContain('screenshot_url');
    const caps = (await (await world.rt.endUser('/capabilities', await world.token({ capabilities }))).json()) as { tools_not_offered: { tool: string; reason: string }[] };
    expect(caps.tools_not_offered).toEqual([expect.objectContaining({ tool: 'screenshot_url', capability: 'web_search', reason: expect.stringMatching(/this runtime has none/) })]);
  });
});
