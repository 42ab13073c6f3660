// Screenshots the model sees (SPEC.md `input:image`, issue 31; docs/decisions/0091): a real runtime with Debian's
// Chromium behind the egress guard and the protocol-level fake model, which the real `openai` client sends its
// requests to. The pictures the fake receives are decoded in a second Chromium and their pixels read: the page is
// a known colour, so the model really got the page. `browser_screenshot` pictures the conversation's page (or one
// element); `screenshot_url` a page in a context of its own, whose cookies are nobody's. Neither is offered without
// `input:image`, frames and stored messages carry words, never the picture, and a later turn is not sent it again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer, type ChatRequest } from '../fakes/openai-server.js';
import { launchChromium, requireChromium, type TestBrowser } from '../harness/browser.js';
import { configuredTenant, startTestRuntime, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { MODEL, providerSection } from '../chat/fixture.js';
import { forbiddenSite, onLoopback, streamTurn, type LoopbackSite } from './world.js';

const chromium = requireChromium();

/** The page's colours: the view is blue, the button green (its label black); /whoami is green with the cookie, red without. */
const BLUE = [30, 144, 255];
const GREEN = [0, 160, 0];
const RED = [220, 0, 0];

type Part = { type: string; text?: string; image_url?: { url: string } };
type Frame = { type: string; name?: string; ok?: boolean; result?: string; session_id?: string; content?: string };

/** The data URIs of the pictures a request carried, and the text parts said beside them. */
function picturesIn(request: ChatRequest): { uris: string[]; said: string[] } {
  const parts = request.messages.filter((message) => message.role === 'user' && Array.isArray(message.content)).flatMap((message) => message.content as Part[]);
  return { uris: parts.filter((part) => part.type === 'image_url').map((part) => part.image_url!.url), said: parts.filter((part) => part.type === 'text').map((part) => part.text!) };
}

const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] });

describe.skipIf(!chromium)('screenshots the model sees', () => {
  let site: LoopbackSite;
  let siteUrl: string;
  let secret: LoopbackSite & { hits: string[] };
  let fake: FakeOpenAIServer;
  let rt: TestRuntime;
  let tenant: TestTenant;
  let decoder: TestBrowser;

  beforeAll(async () => {
    const css = (rgb: number[]) => `rgb(${rgb.join(',')})`;
    site = await onLoopback((req, res) => {
      const url = new URL(req.url ?? '/', 'http://site');
      res.setHeader('Content-Type', 'text/html');
      const page = (title: string, colour: number[], body = '') =>
        res.end(`<!doctype html><html><head><title>${title}</title></head><body style="margin:0;height:100vh;background:${css(colour)}">${body}</body></html>`);
      if (url.pathname === '/blue') {
        return page('Blue', BLUE, `<button style="position:absolute;left:100px;top:100px;width:300px;height:200px;border:0;background:${css(GREEN)}">Green</button>`);
      }
      if (url.pathname === '/set-cookie') {
        res.setHeader('Set-Cookie', 'who=alice; Path=/');
        return page('Cookie set', BLUE);
      }
      // Its script never lets the document finish.
      if (url.pathname === '/busy') return res.end('<!doctype html><title>Busy</title><script>for (;;) {}</script>');
      if (url.pathname === '/whoami') return /who=alice/.test(req.headers.cookie ?? '') ? page('Alice', GREEN) : page('Nobody', RED);
      res.writeHead(404).end();
    });
    siteUrl = site.url;
    secret = await forbiddenSite();

    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-screenshots-0001', chatModels: [MODEL] });
    // The site is on loopback: the operator lets it through by name; every other private address stays refused.
    // Two contexts at most: a throwaway context left open or held would soon leave screenshot_url none.
    rt = await startTestRuntime({
      env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', BROWSER_HOST: 'local', BROWSER_ALLOWED_DESTINATIONS: new URL(siteUrl).host, BROWSER_MAX_CONTEXTS: '2', BROWSER_CALL_SECONDS: '4' },
    });
    tenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'browser', 'web_search', 'input:image'], registeredModels: [MODEL] } });
    await tenant.reconfigure({ providers: providerSection(fake, [MODEL]), default_model: MODEL });
    decoder = await launchChromium(chromium!);
  });
  afterAll(async () => {
    await decoder?.close();
    await rt?.stop();
    await fake?.stop();
    site?.server.close();
    secret?.server.close();
  });

  /** The picture's size and the colour of its pixel at (x, y), decoded by Chromium from the data URI. */
  const pixel = async (uri: string, x: number, y: number): Promise<{ width: number; height: number; rgb: number[] }> => {
    const page = await decoder.context.newPage();
    try {
      // Sent as text: this file's types know no DOM.
      return (await page.evaluate(`(async () => {
        const image = new Image();
        image.src = ${JSON.stringify(uri)};
        await image.decode();
        const canvas = document.createElement('canvas');
        canvas.width = image.naturalWidth;
        canvas.height = image.naturalHeight;
        const context = canvas.getContext('2d');
        context.drawImage(image, 0, 0);
        return { width: image.naturalWidth, height: image.naturalHeight, rgb: [...context.getImageData(${x}, ${y}, 1, 1).data.slice(0, 3)] };
      })()`)) as { width: number; height: number; rgb: number[] };
    } finally {
      await page.close();
    }
  };
  /** A JPEG's colours are near the page's, not equal. */
  const near = (rgb: number[], want: number[]) => rgb.every((value, i) => Math.abs(value - want[i]!) <= 12);

  const turn = async (token: string, message: string, sessionId?: string) => {
    const streamed = await streamTurn<Frame>(rt.url, token, message, sessionId);
    return { ...streamed, ends: streamed.frames.filter((frame) => frame.type === 'tool_end') };
  };
  const toolsOf = async (token: string) => ((await (await fetch(`${rt.url}/tools`, { headers: { authorization: `Bearer ${token}` } })).json()) as { tools: { name: string }[] }).tools.map((tool) => tool.name);

  it('offers the screenshot tools only to a model that perceives images, and /capabilities says nothing is missing', async () => {
    const seeing = await tenant.mint({ capabilities: ['chat', 'browser', 'web_search', 'input:image'] });
    expect(await toolsOf(seeing)).toEqual(expect.arrayContaining(['browser_screenshot', 'screenshot_url', 'browser_open', 'browse_url']));
    const blind = await tenant.mint({ capabilities: ['chat', 'browser', 'web_search'] });
    const offered = await toolsOf(blind);
    expect(offered).toEqual(expect.arrayContaining(['browser_open', 'browse_url']));
    expect(offered.filter((name) => name.includes('screenshot'))).toEqual([]);
    // Each needs its family's capability as well.
    expect(await toolsOf(await tenant.mint({ capabilities: ['chat', 'input:image'] }))).not.toContain('screenshot_url');
    expect(await toolsOf(await tenant.mint({ capabilities: ['chat', 'web_search', 'input:image'] }))).not.toContain('browser_screenshot');
    const capabilities = (await (await fetch(`${rt.url}/capabilities`, { headers: { authorization: `Bearer ${seeing}` } })).json()) as { tools_not_offered: unknown[] };
    expect(capabilities.tools_not_offered).toEqual([]);
  });

  it("shows the model the conversation's page and one element of it, in tool frames that carry words only", async () => {
    const token = await tenant.mint({ sub: 'acme:alice', capabilities: ['chat', 'browser', 'input:image'] });
    fake.script(
      call('browser_open', { url: `${siteUrl}/blue` }),
      call('browser_screenshot', {}),
      (request) => {
        const ref = /button "Green" \[ref=(\w+)\]/.exec(request.messages.map((message) => String(message.content)).join('\n'))?.[1];
        if (!ref) throw new Error('no button "Green" in the snapshot');
        return call('browser_screenshot', { ref });
      },
      'I saw a blue page with a green button.',
    );
    const { frames, done, ends, sessionId } = await turn(token, 'What does the page look like?');
    expect(done.content).toBe('I saw a blue page with a green button.');
    expect(ends.map((frame) => [frame.name, frame.ok])).toEqual([
      ['browser_open', true],
      ['browser_screenshot', true],
      ['browser_screenshot', true],
    ]);
    expect(frames.filter((frame) => frame.type === 'tool_start').map((frame) => frame.name)).toEqual(['browser_open', 'browser_screenshot', 'browser_screenshot']);
    expect(ends[1]!.result).toMatch(/^Screenshot of http:\/\/127\.0\.0\.1:\d+\/blue \("Blue"\): 1280×800 pixels, JPEG, \d+ KiB\./);
    expect(ends[2]!.result).toMatch(/^Screenshot of element e\d+ of .*\/blue \("Blue"\): 300×200 pixels/);

    const requests = fake.chatRequests().slice(-4);
    // The view, after the first screenshot: 1280×800, blue where the button is not, green where it is.
    const first = picturesIn(requests[2]!);
    expect(first.uris).toHaveLength(1);
    expect(first.uris[0]).toMatch(/^data:image\/jpeg;base64,/);
    const view = await pixel(first.uris[0]!, 20, 20);
    expect([view.width, view.height]).toEqual([1280, 800]);
    expect(near(view.rgb, BLUE), `view pixel ${view.rgb}`).toBe(true);
    // Near the button's corner, away from its label.
    const button = await pixel(first.uris[0]!, 120, 280);
    expect(near(button.rgb, GREEN), `button pixel ${button.rgb}`).toBe(true);
    expect(first.said[0]).toMatch(/^The image answered by tool call /);
    // The element, after the second: all green. Both pictures are still in the run's prompt.
    const second = picturesIn(requests[3]!);
    expect(second.uris).toHaveLength(2);
    const element = await pixel(second.uris[1]!, 20, 180);
    expect([element.width, element.height]).toEqual([300, 200]);
    expect(near(element.rgb, GREEN), `element pixel ${element.rgb}`).toBe(true);

    // Words only, in frames and in the stored conversation.
    const data = first.uris[0]!.slice('data:image/jpeg;base64,'.length, 'data:image/jpeg;base64,'.length + 64);
    expect(JSON.stringify(frames)).not.toContain(data);
    const stored = await (await fetch(`${rt.url}/chat/sessions/${sessionId}/messages?limit=100`, { headers: { authorization: `Bearer ${token}` } })).text();
    expect(stored).toContain('Screenshot of');
    expect(stored).not.toContain(data);

    // A later turn is not sent the pictures again; the stored words say what they were.
    fake.script('No pictures now.');
    await turn(token, 'And now?', sessionId);
    const later = fake.chatRequests().at(-1)!;
    expect(picturesIn(later).uris).toEqual([]);
    expect(JSON.stringify(later.messages)).toContain('Screenshot of');
  });

  it('says there is nothing to see before a page is open', async () => {
    const token = await tenant.mint({ sub: 'acme:frank', capabilities: ['chat', 'browser', 'input:image'] });
    fake.script(call('browser_screenshot', {}), 'nothing yet');
    const { ends } = await turn(token, 'What do you see?');
    expect(ends.map((frame) => [frame.name, frame.ok, frame.result])).toEqual([['browser_screenshot', false, 'There is no page to see: open one with browser_open first.']]);
    expect(picturesIn(fake.chatRequests().at(-1)!).uris).toEqual([]);
  });

  it("pictures a page with screenshot_url in a browser of its own: the conversation's cookies are not there", async () => {
    const token = await tenant.mint({ sub: 'acme:bob', capabilities: ['chat', 'browser', 'web_search', 'input:image'] });
    fake.script(
      call('browser_open', { url: `${siteUrl}/set-cookie` }),
      call('browser_open', { url: `${siteUrl}/whoami` }),
      call('browser_screenshot', {}),
      call('screenshot_url', { url: `${siteUrl}/whoami` }),
      'done',
    );
    const { ends } = await turn(token, 'Who am I, in your browser and in a fresh one?');
    expect(ends.map((frame) => [frame.name, frame.ok])).toEqual([
      ['browser_open', true],
      ['browser_open', true],
      ['browser_screenshot', true],
      ['screenshot_url', true],
    ]);
    expect(ends[3]!.result).toMatch(/^Screenshot of http:\/\/127\.0\.0\.1:\d+\/whoami \("Nobody"\): 1280×800 pixels/);
    const { uris } = picturesIn(fake.chatRequests().at(-1)!);
    expect(uris).toHaveLength(2);
    // The conversation's browser has the cookie (green); screenshot_url's has none (red).
    expect(near((await pixel(uris[0]!, 640, 400)).rgb, GREEN)).toBe(true);
    expect(near((await pixel(uris[1]!, 640, 400)).rgb, RED)).toBe(true);
  });

  it('refuses with screenshot_url, in words the model can act on, addresses the guard refuses and other schemes', async () => {
    const token = await tenant.mint({ sub: 'acme:carol', capabilities: ['chat', 'web_search', 'input:image'] });
    const tries = [`http://127.0.0.1:${secret.port}/`, `http://localhost:${secret.port}/`, `${rt.url}/health`, 'http://169.254.169.254/latest/meta-data/', 'file:///etc/passwd', 'chrome://version', 'not a url'];
    fake.script(...tries.map((url) => call('screenshot_url', { url })), 'done');
    const { frames, ends } = await turn(token, 'Picture these.');
    expect(frames.filter((frame) => frame.type === 'tool_start').map((frame) => frame.name)).toEqual(tries.map(() => 'screenshot_url'));
    expect(ends).toHaveLength(tries.length);
    for (const [index, end] of ends.entries()) {
      expect(end.ok, tries[index]).toBe(false);
      expect(end.result, tries[index]).toMatch(/cannot be reached|opens http and https pages only|needs an absolute http\(s\) `url`/);
    }
    expect(secret.hits).toEqual([]);
    expect(fake.chatRequests().slice(-tries.length).flatMap((request) => picturesIn(request).uris)).toEqual([]);
  });

  it('gives up on a page whose script keeps the browser busy, and gives its context back to the pool', async () => {
    const token = await tenant.mint({ sub: 'acme:erin', capabilities: ['chat', 'web_search', 'input:image'] });
    fake.script(call('screenshot_url', { url: `${siteUrl}/busy` }), call('screenshot_url', { url: `${siteUrl}/busy` }), call('screenshot_url', { url: `${siteUrl}/blue` }), 'done');
    const { ends } = await turn(token, 'Picture the busy page.');
    expect(ends.map((frame) => [frame.name, frame.ok])).toEqual([
      ['screenshot_url', false],
      ['screenshot_url', false],
      ['screenshot_url', true],
    ]);
    expect(ends[0]!.result).toMatch(/did not finish within 4 s: the page kept the browser busy/);
    const { uris } = picturesIn(fake.chatRequests().at(-1)!);
    expect(uris).toHaveLength(1);
    expect(near((await pixel(uris[0]!, 20, 20)).rgb, BLUE)).toBe(true);
  });

  it('refuses the screenshot tools to a model that does not perceive images, and sends no picture', async () => {
    const token = await tenant.mint({ sub: 'acme:dave', capabilities: ['chat', 'browser', 'web_search'] });
    fake.script(call('browser_open', { url: `${siteUrl}/blue` }), call('browser_screenshot', {}), call('screenshot_url', { url: `${siteUrl}/blue` }), 'done');
    const { ends } = await turn(token, 'Look at the page.');
    expect(ends.map((frame) => [frame.name, frame.ok])).toEqual([
      ['browser_open', true],
      ['browser_screenshot', false],
      ['screenshot_url', false],
    ]);
    expect(ends[1]!.result).toMatch(/not available in this conversation/);
    const requests = fake.chatRequests().slice(-4);
    expect(requests.flatMap((request) => picturesIn(request).uris)).toEqual([]);
    expect((requests[0]!.tools as { function: { name: string } }[]).map((tool) => tool.function.name).filter((name) => name.includes('screenshot'))).toEqual([]);
  });
});
