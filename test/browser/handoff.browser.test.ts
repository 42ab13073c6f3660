// The hand-off (SPEC.md Browser hand-off; docs/decisions/0090) on a real runtime and Debian's Chromium: the agent
// opens a log-in page and hands it to the person; the turn pauses with the hand-off in `handoffs`. The person
// watches the page (a frame, the screencast), logs in with clicks, keys and text, asks the check (a small model
// that may answer four words, rate limited), and their next message resumes the agent on the page as they left it.
// Another person or tenant finds nothing; a privileged reader watches but may not act; a read-only hand-off refuses
// input; an unattended run that hands over stops with needs_input.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer, type ChatRequest } from '../fakes/openai-server.js';
import { requireChromium } from '../harness/browser.js';
import { configuredTenant, startTestRuntime, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { sseEvents } from '../harness/sse.js';
import { MODEL, providerSection } from '../chat/fixture.js';
import { streamTurn } from './world.js';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { eventually } from '../harness/eventually.js';

const available = requireChromium() !== null;
const CAPABILITIES = ['chat', 'browser', 'browser_handoff', 'tasks:read', 'tasks:write'];

const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] });
const lastTool = (request: ChatRequest) => String([...request.messages].reverse().find((message) => message.role === 'tool')?.content ?? '');

interface Frame {
  mime_type: string;
  data: string;
  width: number;
  height: number;
  url: string;
  title: string;
  selector: string | null;
  handoff: { tool_call_id: string; instructions: string; read_only: boolean; url: string } | null;
}

describe.skipIf(!available)('the browser hand-off', () => {
  let site: Server;
  let siteUrl: string;
  const logins: string[] = [];
  let fake: FakeOpenAIServer;
  let rt: TestRuntime;
  let tenant: TestTenant;
  let other: TestTenant;
  let receiver: WebhookHandler;

  beforeAll(async () => {
    // A log-in page whose fields sit where a person would click them: username at (100..300, 100..130).
    site = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://site');
      res.setHeader('Content-Type', 'text/html');
      const page = (title: string, body: string) =>
        res.end(`<!doctype html><html><head><title>${title}</title><style>body{margin:0} input{position:absolute;left:100px;width:200px;height:30px;box-sizing:border-box} #user{top:100px} #pass{top:160px} button{position:absolute;left:100px;top:220px}</style></head><body>${body}</body></html>`);
      if (url.pathname === '/login') return page('Sign in', '<form action="/welcome"><input id="user" name="user" aria-label="User"><input id="pass" name="pass" type="password" aria-label="Password"><button>Sign in</button></form>');
      if (url.pathname === '/welcome') {
        const user = url.searchParams.get('user') ?? '';
        logins.push(`${user}:${url.searchParams.get('pass') ?? ''}`);
        return page('Welcome', `<h1 id="greeting">Welcome, ${user.replace(/[^a-z]/g, '')}</h1>`);
      }
      if (url.pathname === '/busy') return page('Busy', '<button id="spin" style="position:absolute;left:100px;top:100px;width:200px;height:40px" onclick="for(;;){}">Spin</button>');
      if (url.pathname === '/hidden') return page('Hidden', '<p id="shown">shown</p><p id="hidden" style="display:none">hidden</p>');
      if (url.pathname === '/ticker') return page('Ticker', '<h1>Count <span id="n">0</span></h1><script>let n = 0; setInterval(() => { document.getElementById("n").textContent = String(++n) }, 50)</script>');
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-handoff-0001', chatModels: [MODEL] });
    receiver = await WebhookHandler.start();
    rt = await startTestRuntime({
      env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', BROWSER_HOST: 'local', BROWSER_ALLOWED_DESTINATIONS: new URL(siteUrl).host, BROWSER_MAX_CONTEXTS: '12', BROWSER_CALL_SECONDS: '4', SCHEDULER_TICK_MS: '100', DELIVERY_TICK_MS: '100' },
    });
    tenant = await configuredTenant(rt, { ceiling: { capabilities: CAPABILITIES, registeredModels: [MODEL] } });
    await tenant.reconfigure({
      providers: providerSection(fake, [MODEL]),
      default_model: MODEL,
      browser: { handoff_check_model: null, handoff_checks_per_minute: 2 },
      webhook: { url: `${receiver.url}/events` },
    });
    other = await configuredTenant(rt, { ceiling: { capabilities: CAPABILITIES, registeredModels: [MODEL] } });
  });
  afterAll(async () => {
    await rt?.stop();
    await fake?.stop();
    await receiver?.stop();
    site?.close();
  });

  const turn = (token: string, message: string, sessionId?: string) =>
    streamTurn<Record<string, unknown> & { type: string }, Record<string, unknown> & { requires_action: boolean; content: string; handoffs: Frame['handoff'][]; finish_reason: string | null }>(
      rt.url,
      token,
      message,
      sessionId,
    );
  const post = (token: string, path: string, body?: unknown) =>
    fetch(`${rt.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const frameOf = async (response: Response): Promise<Frame> => {
    expect(response.status, await response.clone().text()).toBe(200);
    return (await response.json()) as Frame;
  };
  const isJpeg = (frame: Frame) => Buffer.from(frame.data, 'base64').subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff]));

  /** A conversation whose agent opened the log-in page and handed it over. */
  const handedOver = async (token: string, options: { readOnly?: boolean } = {}) => {
    fake.script(call('browser_open', { url: `${siteUrl}/login` }), call('browser_handoff', { instructions: 'Please sign in to your account.', ...(options.readOnly ? { read_only: true } : {}) }));
    return turn(token, 'Sign me in to the site.');
  };

  it('pauses the turn with the hand-off, shows the page, takes the owner\'s input, checks, and resumes the agent on the page as left', async () => {
    const alice = await tenant.mint({ sub: 'acme:alice', capabilities: CAPABILITIES });
    const { frames, done, sessionId } = await handedOver(alice);
    expect(done.requires_action).toBe(true);
    expect(done.finish_reason).toBeNull();
    expect(done.handoffs).toEqual([{ tool_call_id: expect.any(String), instructions: 'Please sign in to your account.', read_only: false, url: `${siteUrl}/login` }]);
    expect(frames.filter((frame) => frame.type === 'tool_end').map((frame) => [frame.name, frame.ok])).toEqual([
      ['browser_open', true],
      ['browser_handoff', true],
    ]);
    const listed = (await (await fetch(`${rt.url}/chat/sessions`, { headers: { authorization: `Bearer ${alice}` } })).json()) as { sessions: { id: string; status: string; requires_action: boolean }[] };
    expect(listed.sessions.find((session) => session.id === sessionId)).toMatchObject({ status: 'requires_action', requires_action: true });

    // The page, whole and one element of it.
    const whole = await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/frame`, {}));
    expect(isJpeg(whole)).toBe(true);
    expect(whole).toMatchObject({ mime_type: 'image/jpeg', width: 1280, height: 800, url: `${siteUrl}/login`, title: 'Sign in', selector: null, handoff: done.handoffs[0] });
    const field = await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/frame`, { selector: '#user', format: 'png' }));
    expect(field).toMatchObject({ mime_type: 'image/png', width: 200, height: 30, selector: '#user' });
    expect(Buffer.from(field.data, 'base64').subarray(1, 4).toString()).toBe('PNG');
    expect((await post(alice, `/chat/sessions/${sessionId}/browser/frame`, { selector: 'input[' })).status).toBe(400);
    expect((await post(alice, `/chat/sessions/${sessionId}/browser/frame`, { selector: '#nowhere' })).status).toBe(400);

    // The person signs in: a click in the user field, text, Tab, text, Enter.
    await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'click', x: 150, y: 115 }));
    await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'text', text: 'alice' }));
    await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'key', key: 'Tab' }));
    await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'text', text: 's3cret' }));
    const bad = await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'key', key: 'NoSuchKey' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe('unknown_key');
    await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'key', key: 'Enter' }));
    expect(logins).toEqual(['alice:s3cret']);
    // The wheel and the other mouse inputs reach the page too (answered with its picture).
    for (const input of [{ type: 'wheel', x: 10, y: 10, delta_y: 300 }, { type: 'move', x: 5, y: 5 }, { type: 'mouse_down', x: 5, y: 5 }, { type: 'mouse_up', x: 5, y: 5, button: 'left' }]) {
      expect((await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/input`, input))).url).toContain('/welcome');
    }
    const after = await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/frame`, {}));
    expect(after).toMatchObject({ title: 'Welcome' });

    // The check: the small model's word, then a word it may not say read as unsure, then the rate limit.
    fake.script('done');
    const checked = await post(alice, `/chat/sessions/${sessionId}/browser/check`);
    expect(checked.status).toBe(200);
    expect(await checked.json()).toMatchObject({ result: 'done', model: MODEL, url: expect.stringContaining('/welcome') });
    const asked = fake.requests.at(-1)!.body as ChatRequest;
    expect(JSON.stringify(asked.messages)).toContain('Please sign in to your account.');
    expect(JSON.stringify(asked.messages)).toContain('Welcome, alice');
    fake.script('Yes! The person is finished, I am sure.');
    expect(await (await post(alice, `/chat/sessions/${sessionId}/browser/check`)).json()).toMatchObject({ result: 'unsure' });
    const limited = await post(alice, `/chat/sessions/${sessionId}/browser/check`);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);

    // Their next message resumes the agent, which sees the page as they left it.
    fake.script(
      (request) => {
        expect(lastTool(request)).toContain('a check of the page suggested the task is done');
        return call('browser_snapshot', {});
      },
      (request) => (lastTool(request).includes('Welcome, alice') ? 'You are signed in as alice.' : `unexpected page: ${lastTool(request)}`),
    );
    const resumed = await turn(alice, 'Done, I signed in.', sessionId);
    expect(resumed.done).toMatchObject({ requires_action: false, content: 'You are signed in as alice.', handoffs: [] });
    // The hand-off ended: the page takes no more input, and the check has nothing to check.
    const ended = await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'key', key: 'Tab' });
    expect(ended.status).toBe(409);
    expect(((await ended.json()) as { code: string }).code).toBe('no_handoff');
    expect((await post(alice, `/chat/sessions/${sessionId}/browser/check`)).status).toBe(409);
    // Watching still works while the agent holds the page.
    expect((await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/frame`, {}))).handoff).toBeNull();
  });

  it('streams the page as it paints, and each input shows in the frames that follow', async () => {
    const alice = await tenant.mint({ sub: 'acme:alice', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: `${siteUrl}/ticker` }), call('browser_handoff', { instructions: 'Watch the counter.' }));
    const { sessionId } = await turn(alice, 'Show me the counter.');
    const controller = new AbortController();
    const response = await fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream`, { headers: { authorization: `Bearer ${alice}` }, signal: controller.signal });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const seen: Array<{ data: string; url: string; width: number }> = [];
    try {
      for await (const event of sseEvents(response)) {
        expect(event.event).toBe('frame');
        seen.push(event.data as { data: string; url: string; width: number });
        if (seen.length >= 5) break;
      }
    } finally {
      controller.abort();
    }
    // A changing page gives changing frames, each a JPEG of the page.
    expect(new Set(seen.map((frame) => frame.data)).size).toBeGreaterThan(1);
    expect(seen.every((frame) => frame.url === `${siteUrl}/ticker` && frame.width === 1280 && Buffer.from(frame.data, 'base64')[0] === 0xff)).toBe(true);

    // One element followed: frames of that element only.
    const followed = await fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream?selector=${encodeURIComponent('#n')}`, { headers: { authorization: `Bearer ${alice}` } });
    expect(followed.status).toBe(200);
    for await (const event of sseEvents(followed)) {
      expect(event.data).toMatchObject({ selector: '#n' });
      expect((event.data as { width: number }).width).toBeGreaterThan(0);
      expect((event.data as { width: number }).width).toBeLessThan(1280);
      break;
    }
    expect((await fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream?selector=${encodeURIComponent('a[')}`, { headers: { authorization: `Bearer ${alice}` } })).status).toBe(400);
  });

  it('holds the screencast at the frames a viewer that acknowledges has not taken, however fast it reads the socket', async () => {
    // A person of their own: each keeps at most two handed-over pages (KEPT_PER_SUBJECT), and alice has hers.
    const ada = await tenant.mint({ sub: 'acme:ada', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: `${siteUrl}/ticker` }), call('browser_handoff', { instructions: 'Watch the counter.' }));
    const { sessionId } = await turn(ada, 'Show me the counter.');
    const controller = new AbortController();
    const response = await fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream?ack=true`, { headers: { authorization: `Bearer ${ada}` }, signal: controller.signal });
    expect(response.status).toBe(200);
    // Read as fast as they come, and never acknowledged until said.
    const events: Array<{ id: string | undefined; event: string; data: unknown }> = [];
    const reading = (async () => {
      for await (const event of sseEvents(response)) events.push(event);
    })().catch(() => undefined);
    try {
      await eventually(async () => events.length >= 3, { what: 'the ready event and the first frames' });
      expect(events[0]).toMatchObject({ event: 'ready', data: { window: 2, stream: expect.any(String) } });
      const stream = (events[0]!.data as { stream: string }).stream;
      // The ticker paints every 50 ms: in a second unacknowledged, no more than the window came.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(events.map((event) => event.event)).toEqual(['ready', 'frame', 'frame']);
      const ack = (token: string, body: unknown) => post(token, `/chat/sessions/${sessionId}/browser/stream/ack`, body);
      // Another person, a stream id that is no stream here, a frame not sent, a bad body: refused, nothing moves.
      const bob = await tenant.mint({ sub: 'acme:bob', scope: 'acme:bob', capabilities: CAPABILITIES });
      expect((await ack(bob, { stream, frame: 3 })).status).toBe(404);
      expect((await ack(ada, { stream: '00000000-0000-4000-8000-000000000000', frame: 3 })).status).toBe(404);
      const notSent = await ack(ada, { stream, frame: 99 });
      expect(notSent.status).toBe(400);
      expect(await notSent.json()).toMatchObject({ code: 'frame_not_sent' });
      expect((await ack(ada, { stream, frame: -1 })).status).toBe(422);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(events).toHaveLength(3);
      // Taken: the next frames come, newer ones, and stop again at the window.
      const taken = await ack(ada, { stream, frame: Number(events[2]!.id) });
      expect(taken.status).toBe(200);
      expect(await taken.json()).toEqual({ taken: 3 });
      await eventually(async () => events.length >= 5, { what: 'the next frames' });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(events).toHaveLength(5);
      expect((events[4]!.data as { data: string }).data).not.toBe((events[2]!.data as { data: string }).data);
    } finally {
      controller.abort();
      await reading;
      // Its page goes with it: the tenant's handed-over pages are a bounded share of the pool the next tests need.
      expect((await fetch(`${rt.url}/chat/sessions/${sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${ada}` } })).status).toBe(200);
    }
  });

  it('shows nothing to another person or tenant, lets a privileged reader watch but not act, and refuses input to a read-only hand-off', async () => {
    const alice = await tenant.mint({ sub: 'acme:alice', capabilities: CAPABILITIES });
    const { sessionId } = await handedOver(alice);
    const bob = await tenant.mint({ sub: 'acme:bob', scope: 'acme:bob', capabilities: CAPABILITIES });
    const stranger = await other.mint({ sub: 'acme:alice', capabilities: CAPABILITIES });
    for (const token of [bob, stranger]) {
      expect((await post(token, `/chat/sessions/${sessionId}/browser/frame`, {})).status).toBe(404);
      expect((await post(token, `/chat/sessions/${sessionId}/browser/input`, { type: 'key', key: 'Tab' })).status).toBe(404);
      expect((await post(token, `/chat/sessions/${sessionId}/browser/check`)).status).toBe(404);
      expect((await fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(404);
    }
    // Not visible is 404 before the body is read: a hostile body changes nothing.
    expect((await post(bob, `/chat/sessions/${sessionId}/browser/input`, { type: 'warp', x: -1 })).status).toBe(404);

    const admin = await tenant.mint({ sub: 'acme:boss', scope: 'acme', roles: ['admin'], capabilities: CAPABILITIES });
    expect((await frameOf(await post(admin, `/chat/sessions/${sessionId}/browser/frame`, {}))).url).toBe(`${siteUrl}/login`);
    const watched = await fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream`, { headers: { authorization: `Bearer ${admin}` } });
    expect(watched.status).toBe(200);
    await watched.body?.cancel();
    for (const [path, body] of [
      ['input', { type: 'key', key: 'Tab' }],
      ['check', undefined],
    ] as const) {
      const refused = await post(admin, `/chat/sessions/${sessionId}/browser/${path}`, body);
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({ code: 'not_owner', detail: expect.stringContaining('can see it but may not') });
    }

    // A read-only hand-off: the owner watches, and may not act.
    const hank = await tenant.mint({ sub: 'acme:hank', scope: 'acme:hank', capabilities: CAPABILITIES });
    const readOnly = await handedOver(hank, { readOnly: true });
    expect(readOnly.done.handoffs[0]).toMatchObject({ read_only: true });
    expect((await frameOf(await post(hank, `/chat/sessions/${readOnly.sessionId}/browser/frame`, {}))).handoff).toMatchObject({ read_only: true });
    const refused = await post(hank, `/chat/sessions/${readOnly.sessionId}/browser/input`, { type: 'click', x: 150, y: 115 });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'handoff_read_only', detail: expect.stringContaining('can see it but may not') });
    // Input outside the viewport, or of no known kind, is a 4xx naming the field, and changes nothing.
    const outside = await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'click', x: 5000, y: 10 });
    expect(outside.status).toBe(422);
    expect(JSON.stringify(await outside.json())).toContain('x');
  });

  it('is offered only with browser_handoff, and a page must be open to hand over', async () => {
    const browseOnly = await tenant.mint({ sub: 'acme:carol', capabilities: ['chat', 'browser'] });
    const tools = (await (await fetch(`${rt.url}/tools`, { headers: { authorization: `Bearer ${browseOnly}` } })).json()) as { tools: { name: string }[] };
    expect(tools.tools.map((tool) => tool.name)).not.toContain('browser_handoff');
    const carol = await tenant.mint({ sub: 'acme:carol', capabilities: CAPABILITIES });
    const withHandoff = (await (await fetch(`${rt.url}/tools`, { headers: { authorization: `Bearer ${carol}` } })).json()) as { tools: { name: string }[] };
    expect(withHandoff.tools.map((tool) => tool.name)).toContain('browser_handoff');
    fake.script(call('browser_handoff', { instructions: 'Sign in.' }), (request) => `told: ${lastTool(request)}`);
    const { done, sessionId } = await turn(carol, 'Hand me the page.');
    expect(done).toMatchObject({ requires_action: false, content: expect.stringContaining('open it with browser_open first') });
    const none = await post(carol, `/chat/sessions/${sessionId}/browser/frame`, {});
    expect(none.status).toBe(409);
    expect(((await none.json()) as { code: string }).code).toBe('no_browser_page');
  });

  it('stops an unattended run that hands a page over with needs_input, and turn.stopped says where the page waits', async () => {
    const alice = await tenant.mint({ sub: 'acme:ivy', scope: 'acme:ivy', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: `${siteUrl}/login` }), call('browser_handoff', { instructions: 'Sign in so I can fetch the invoices.' }));
    const created = await fetch(`${rt.url}/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Fetch this month\'s invoices.', run_at: new Date(Date.now() + 300).toISOString() }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const task = (await created.json()) as { id: string };
    const stoppedOf = () => receiver.requests.filter((request) => request.headers['x-event-type'] === 'turn.stopped').map((request) => JSON.parse(request.body) as { data: Record<string, unknown> });
    await eventually(async () => stoppedOf().some((event) => (event.data.origin as { task_id?: string }).task_id === task.id), { what: 'turn.stopped' });
    const stopped = stoppedOf().find((event) => (event.data.origin as { task_id?: string }).task_id === task.id)!;
    expect(stopped.data).toMatchObject({
      status: 'incomplete',
      finish_reason: 'needs_input',
      requires_action: true,
      handoffs: [{ tool_call_id: expect.any(String), instructions: 'Sign in so I can fetch the invoices.', read_only: false, url: `${siteUrl}/login` }],
    });
    // The person finds the page where the event says, and may act on it.
    const sessionId = stopped.data.session_id as string;
    expect((await frameOf(await post(alice, `/chat/sessions/${sessionId}/browser/frame`, {}))).handoff).toMatchObject({ instructions: 'Sign in so I can fetch the invoices.' });
    expect((await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'click', x: 150, y: 115 })).status).toBe(200);
  });

  it('never lets a model or a stored message see what the person types into a password field', async () => {
    const erin = await tenant.mint({ sub: 'acme:erin', scope: 'acme:erin', capabilities: CAPABILITIES });
    const { sessionId } = await handedOver(erin);
    await frameOf(await post(erin, `/chat/sessions/${sessionId}/browser/input`, { type: 'click', x: 150, y: 175 }));
    await frameOf(await post(erin, `/chat/sessions/${sessionId}/browser/input`, { type: 'text', text: 'hunter2-SECRET' }));
    const before = fake.requests.length;
    fake.script('not_done');
    expect(await (await post(erin, `/chat/sessions/${sessionId}/browser/check`)).json()).toMatchObject({ result: 'not_done' });
    fake.script(call('browser_snapshot', {}), (request) => (lastTool(request).includes('textbox "Password"') ? 'I see the form.' : `unexpected: ${lastTool(request)}`));
    expect((await turn(erin, 'Look at the page now.', sessionId)).done.content).toBe('I see the form.');
    // Neither the check's model nor the agent's saw it, and no stored message holds it.
    const seen = JSON.stringify(fake.requests.slice(before).map((request) => request.body));
    expect(seen).toContain('textbox \\"Password\\"');
    expect(seen).not.toContain('hunter2-SECRET');
    const stored = await (await fetch(`${rt.url}/chat/sessions/${sessionId}/messages?limit=100`, { headers: { authorization: `Bearer ${erin}` } })).text();
    expect(stored).toContain('(hidden: typed by the person)');
    expect(stored).not.toContain('hunter2-SECRET');
  });

  it('answers a page busy in its script within the call time and closes it; refuses selectors it cannot picture with 400', async () => {
    const frank = await tenant.mint({ sub: 'acme:frank', scope: 'acme:frank', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: `${siteUrl}/hidden` }), call('browser_handoff', { instructions: 'Look.' }));
    const hidden = await turn(frank, 'Show me.');
    for (const [selector, code] of [
      ['#hidden', 'selector_not_found'],
      ['head', 'selector_not_found'],
      ['body >> xpath=//p', 'invalid_selector'],
      ['internal:role=button', 'invalid_selector'],
    ] as const) {
      const refused = await post(frank, `/chat/sessions/${hidden.sessionId}/browser/frame`, { selector });
      expect(refused.status, selector).toBe(400);
      expect(((await refused.json()) as { code: string }).code, selector).toBe(code);
    }
    expect((await frameOf(await post(frank, `/chat/sessions/${hidden.sessionId}/browser/frame`, { selector: '#shown' }))).selector).toBe('#shown');

    fake.script(call('browser_open', { url: `${siteUrl}/busy` }), call('browser_handoff', { instructions: 'Press the button.' }));
    const busy = await turn(frank, 'Spin it.');
    const spun = await post(frank, `/chat/sessions/${busy.sessionId}/browser/input`, { type: 'click', x: 150, y: 115 });
    expect(spun.status).toBe(500);
    expect(await spun.json()).toMatchObject({ code: 'browser_page_busy', detail: expect.stringContaining('has been closed') });
    const gone = await post(frank, `/chat/sessions/${busy.sessionId}/browser/frame`, {});
    expect(gone.status).toBe(409);
    expect(((await gone.json()) as { code: string }).code).toBe('no_browser_page');
  });

  it('bounds screencasts per conversation, and ends them when the conversation is deleted', async () => {
    const gina = await tenant.mint({ sub: 'acme:gina', scope: 'acme:gina', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: `${siteUrl}/ticker` }), call('browser_handoff', { instructions: 'Watch.' }));
    const { sessionId } = await turn(gina, 'Show me the counter.');
    const open = (signal?: AbortSignal) => fetch(`${rt.url}/chat/sessions/${sessionId}/browser/stream`, { headers: { authorization: `Bearer ${gina}` }, ...(signal ? { signal } : {}) });
    const controller = new AbortController();
    const streams = await Promise.all(Array.from({ length: 4 }, () => open(controller.signal)));
    expect(streams.map((response) => response.status)).toEqual([200, 200, 200, 200]);
    const fifth = await open();
    expect(fifth.status).toBe(429);
    expect(((await fifth.json()) as { code: string }).code).toBe('too_many_streams');
    controller.abort();
    await eventually(async () => (await open(new AbortController().signal).then(async (response) => (await response.body?.cancel(), response.status))) === 200, { what: 'a place once the others left' });

    // Deleted while watched: the stream says so and ends, and the page is closed.
    const watched = await open();
    const events = (async () => {
      const seen: string[] = [];
      for await (const event of sseEvents(watched)) seen.push(event.event === 'closed' ? `closed: ${(event.data as { reason: string }).reason}` : event.event);
      return seen;
    })();
    // Ends the pause first (a paused conversation can be deleted, but let the agent's turn finish cleanly).
    fake.script('ok');
    await turn(gina, 'Thanks.', sessionId);
    expect((await fetch(`${rt.url}/chat/sessions/${sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${gina}` } })).status).toBe(200);
    // Either word may come first: the deletion's notice, or its context closing the page.
    expect((await events).at(-1)).toMatch(/^closed: (the conversation was deleted|the page was closed)/);
  });
});
