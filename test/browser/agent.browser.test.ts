// The agent drives a real browser (SPEC.md capability `browser`, docs/decisions/0088): a runtime with Debian's
// Chromium behind the egress guard, the protocol-level fake model choosing each action from the snapshot it was
// given. It opens a shop, follows a link, fills a field, chooses an option and submits, and the shop receives the
// order; every action shows in tool_start and tool_end frames. A conversation keeps its cookies from turn to turn,
// and no other conversation, person's or not, sees them. Addresses the guard refuses, and other schemes, are refused
// to the model in words it can act on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer, type ChatReply, type ChatRequest } from '../fakes/openai-server.js';
import { requireChromium } from '../harness/browser.js';
import { configuredTenant, startTestRuntime, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { MODEL, providerSection } from '../chat/fixture.js';
import { forbiddenSite, onLoopback, streamTurn, type LoopbackSite } from './world.js';

const available = requireChromium() !== null;

/** The [ref=...] of the element with this role and name in the latest browser snapshot the model was given. */
function refOf(request: ChatRequest, role: string, name: string): string {
  const snapshot = [...request.messages].reverse().find((message) => message.role === 'tool' && typeof message.content === 'string' && message.content.includes('[ref='));
  const line = String(snapshot?.content ?? '')
    .split('\n')
    .find((text) => text.includes(`${role} "${name}"`));
  const ref = /\[ref=(\w+)\]/.exec(line ?? '')?.[1];
  if (!ref) throw new Error(`no ${role} "${name}" in the snapshot:\n${String(snapshot?.content ?? '(none)')}`);
  return ref;
}

const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] });
const lastTool = (request: ChatRequest) => String([...request.messages].reverse().find((message) => message.role === 'tool')?.content ?? '');

describe.skipIf(!available)("the agent's browser", () => {
  let shop: LoopbackSite;
  let shopUrl: string;
  const orders: string[] = [];
  /** The busy page's held requests: answered, they start its loop. */
  const busyGo: import('node:http').ServerResponse[] = [];
  let secret: LoopbackSite & { hits: string[] };
  let fake: FakeOpenAIServer;
  let rt: TestRuntime;
  let tenant: TestTenant;

  beforeAll(async () => {
    shop = await onLoopback((req, res) => {
      const url = new URL(req.url ?? '/', 'http://shop');
      res.setHeader('Content-Type', 'text/html');
      const page = (body: string) => res.end(`<!doctype html><html><head><title>Shop</title></head><body>${body}</body></html>`);
      if (url.pathname === '/') return page('<h1>Shop</h1><a href="/form">Order form</a>');
      if (url.pathname === '/form')
        return page(
          '<h1>Order</h1><form action="/ordered"><label>Item <input name="item"></label><label>Size <select name="size"><option>S</option><option>M</option><option>L</option></select></label><button>Place order</button></form>',
        );
      if (url.pathname === '/ordered') {
        orders.push(`${url.searchParams.get('item')} / ${url.searchParams.get('size')}`);
        return page(`<h1>Ordered ${url.searchParams.get('item')} in ${url.searchParams.get('size')}</h1>`);
      }
      if (url.pathname === '/set-cookie') {
        res.setHeader('Set-Cookie', `who=${url.searchParams.get('who')}; Path=/`);
        return page('<h1>Cookie set</h1>');
      }
      // The page's script loops from when the test lets it (its fetch answered), never earlier.
      if (url.pathname === '/busy') return page('<h1>Busy</h1><script>fetch("/busy-go").then(() => { for (;;) {} })</script>');
      if (url.pathname === '/busy-go') return void busyGo.push(res);
      if (url.pathname === '/whoami') return page(`<h1>You are ${/who=(\w+)/.exec(req.headers.cookie ?? '')?.[1] ?? 'nobody'}</h1>`);
      res.writeHead(404).end();
    });
    shopUrl = shop.url;
    secret = await forbiddenSite();

    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-browser-0001', chatModels: [MODEL] });
    // Loopback provider URLs are allowed for the fake model; the browser's own guard refuses private addresses all
    // the same, but for the shop, which the operator allows by name.
    rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', BROWSER_HOST: 'local', BROWSER_ALLOWED_DESTINATIONS: new URL(shopUrl).host, BROWSER_CALL_SECONDS: '4' } });
    tenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'browser'], registeredModels: [MODEL] } });
    await tenant.reconfigure({ providers: providerSection(fake, [MODEL]), default_model: MODEL });
  });
  afterAll(async () => {
    await rt?.stop();
    await fake?.stop();
    shop?.server.close();
    secret?.server.close();
  });

  const turn = (token: string, message: string, sessionId?: string) =>
    streamTurn<{ type: string; name?: string; ok?: boolean; result?: string; session_id?: string; content?: string }>(rt.url, token, message, sessionId);

  it('offers the browser only with the capability, and says so in /capabilities', async () => {
    const withBrowser = await tenant.mint({ capabilities: ['chat', 'browser'] });
    const capabilities = (await (await fetch(`${rt.url}/capabilities`, { headers: { authorization: `Bearer ${withBrowser}` } })).json()) as { switches: Record<string, boolean> };
    expect(capabilities.switches.enable_browser).toBe(true);
    const tools = (await (await fetch(`${rt.url}/tools`, { headers: { authorization: `Bearer ${withBrowser}` } })).json()) as { tools: { name: string }[] };
    expect(tools.tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['browser_open', 'browser_snapshot', 'browser_click', 'browser_type', 'browser_select', 'browser_scroll', 'browser_back', 'browser_read']));
    const chatOnly = await tenant.mint({ capabilities: ['chat'] });
    const none = (await (await fetch(`${rt.url}/tools`, { headers: { authorization: `Bearer ${chatOnly}` } })).json()) as { tools: { name: string }[] };
    expect(none.tools.map((tool) => tool.name).filter((name) => name.startsWith('browser_'))).toEqual([]);
  });

  it('opens a page, follows a link, fills a form and submits it, each action in tool frames', async () => {
    const token = await tenant.mint({ sub: 'acme:alice', capabilities: ['chat', 'browser'] });
    fake.script(
      call('browser_open', { url: `${shopUrl}/` }),
      (request) => call('browser_click', { ref: refOf(request, 'link', 'Order form') }),
      (request) => call('browser_type', { ref: refOf(request, 'textbox', 'Item'), text: 'blue mug' }),
      (request) => call('browser_select', { ref: refOf(request, 'combobox', 'Size'), values: ['M'] }),
      (request) => call('browser_click', { ref: refOf(request, 'button', 'Place order') }),
      (request: ChatRequest): ChatReply => (lastTool(request).includes('Ordered blue mug in M') ? 'Your blue mug in M is ordered.' : `unexpected page: ${lastTool(request)}`),
    );
    const { frames, done } = await turn(token, 'Order a blue mug in size M from the shop.');
    expect(done.content).toBe('Your blue mug in M is ordered.');
    expect(orders).toEqual(['blue mug / M']);
    const ends = frames.filter((frame) => frame.type === 'tool_end');
    expect(ends.map((frame) => [frame.name, frame.ok])).toEqual([
      ['browser_open', true],
      ['browser_click', true],
      ['browser_type', true],
      ['browser_select', true],
      ['browser_click', true],
    ]);
    expect(frames.filter((frame) => frame.type === 'tool_start').map((frame) => frame.name)).toEqual(ends.map((frame) => frame.name));
    // Each action answered the page as it was afterwards.
    expect(ends[1]!.result).toContain('Order');
  });

  it("keeps a conversation's cookies from turn to turn, and shows them to no other conversation", async () => {
    const alice = await tenant.mint({ sub: 'acme:alice', capabilities: ['chat', 'browser'] });
    const bob = await tenant.mint({ sub: 'acme:bob', capabilities: ['chat', 'browser'] });
    const open = (path: string) => [call('browser_open', { url: `${shopUrl}${path}` }), (request: ChatRequest) => lastTool(request).match(/You are \w+|Cookie set/)?.[0] ?? 'no page'];
    fake.script(...open('/set-cookie?who=alice'));
    const first = await turn(alice, 'Sign me in.');
    expect(first.done.content).toBe('Cookie set');
    fake.script(...open('/whoami'));
    expect((await turn(alice, 'Who am I?', first.sessionId)).done.content).toBe('You are alice');
    fake.script(...open('/whoami'));
    expect((await turn(alice, 'Who am I, in a new conversation?')).done.content).toBe('You are nobody');
    fake.script(...open('/whoami'));
    expect((await turn(bob, 'Who am I?')).done.content).toBe('You are nobody');
  });

  it('gives up on a page whose script keeps it busy, closes it, and lets the conversation go on', async () => {
    const token = await tenant.mint({ sub: 'acme:dave', capabilities: ['chat', 'browser'] });
    fake.script(
      call('browser_open', { url: `${shopUrl}/busy` }),
      // Once the page is open (the model is asked again), its loop starts; the model takes its time (five words 0.4 s
      // apart) before reading, and the read would never end without the deadline.
      () => {
        for (const held of busyGo.splice(0)) held.end('go');
        return { text: 'Let me read it now.', toolCalls: [{ name: 'browser_read', arguments: {} }], dripMs: 400, chunkBy: 'word' };
      },
      call('browser_open', { url: `${shopUrl}/` }),
      'recovered',
    );
    const { frames, done } = await turn(token, 'Read the busy page.');
    const ends = frames.filter((frame) => frame.type === 'tool_end');
    expect(ends.map((frame) => [frame.name, frame.ok])).toEqual([
      ['browser_open', true],
      ['browser_read', false],
      ['browser_open', true],
    ]);
    expect(ends[1]!.result).toMatch(/did not finish within 4 s: the page was busy and has been closed/);
    expect(ends[2]!.result).toContain('Shop');
    expect(done.content).toBe('recovered');
  });

  it('refuses, in words the model can act on, addresses the guard refuses and other schemes', async () => {
    const token = await tenant.mint({ sub: 'acme:carol', capabilities: ['chat', 'browser'] });
    const tries = [`http://127.0.0.1:${secret.port}/`, `http://localhost:${secret.port}/`, `${rt.url}/health`, 'http://169.254.169.254/latest/meta-data/', 'file:///etc/passwd', 'chrome://version', `view-source:${shopUrl}/`];
    fake.script(...tries.map((url) => call('browser_open', { url })), 'done');
    const { frames } = await turn(token, 'Try these.');
    const ends = frames.filter((frame) => frame.type === 'tool_end');
    expect(ends).toHaveLength(tries.length);
    for (const [index, end] of ends.entries()) {
      expect(end.ok, tries[index]).toBe(false);
      expect(end.result, tries[index]).toMatch(/cannot be reached|opens http and https pages only/);
    }
    expect(secret.hits).toEqual([]);
  });
});
