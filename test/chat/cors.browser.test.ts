// Allowed origins in a real browser (docs/decisions/0029): a page on one loopback origin calls the data plane on
// another with a bearer token. From an allowed origin the chat answer, the X-Run-Id header and the stream's frames
// are readable; from an origin the project did not allow the browser blocks the call, and the server refused it
// (403, or the preflight) without doing the work. Skips with one line when Chromium is not installed.
import { createServer, type Server } from 'node:http';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { launchChromium, requireChromium, type TestBrowser } from '../harness/browser.js';
import { freePort } from '../harness/process.js';
import { configuredTenant } from '../harness/runtime.js';
import { chatWorld, type ChatWorld } from './fixture.js';

const chromiumPath = requireChromium();

/** A loopback origin serving one blank page: where the test's page scripts run. */
async function pageOrigin(): Promise<{ origin: string; server: Server }> {
  const port = await freePort();
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${port}`, server };
}

interface Answered {
  method: string;
  path: string;
  origin: string | undefined;
  status: number;
}

/** What a page's script saw of one call, or the error the browser gave it instead. */
type Seen = { ok: true; status: number; runId: string | null; text: string } | { ok: false; error: string };

/** Runs `fetch` inside the page, as the page's own script would, and reads the whole answer. */
function fetchFromPage(page: Page, url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<Seen> {
  return page.evaluate(
    async ({ url, init }) => {
      try {
        const res = await fetch(url, init);
        return { ok: true as const, status: res.status, runId: res.headers.get('x-run-id'), text: await res.text() };
      } catch (error) {
        return { ok: false as const, error: String(error) };
      }
    },
    { url, init },
  );
}

const frameNames = (text: string) => [...text.matchAll(/^event: ?(.+)$/gm)].map((match) => match[1]);

describe.skipIf(chromiumPath === null)('allowed origins in Chromium', () => {
  let world: ChatWorld;
  let browser: TestBrowser;
  let allowed: { origin: string; server: Server };
  let othersOnly: { origin: string; server: Server };
  let nobodys: { origin: string; server: Server };
  const answered: Answered[] = [];

  beforeAll(async () => {
    [allowed, othersOnly, nobodys] = await Promise.all([pageOrigin(), pageOrigin(), pageOrigin()]);
    world = await chatWorld({}, { configuration: { origins: [allowed.origin] } });
    // Another project on this runtime allows `othersOnly`, so its preflight passes and the request itself is judged.
    const other = await configuredTenant(world.rt, { ceiling: { capabilities: ['chat'] } });
    expect((await other.reconfigure({ origins: [othersOnly.origin] })).status).toBe(200);
    world.rt.server.on('request', (req, res) =>
      res.once('finish', () => answered.push({ method: req.method!, path: req.url!, origin: req.headers.origin, status: res.statusCode })),
    );
    browser = await launchChromium(chromiumPath!);
  });
  beforeEach(() => {
    answered.length = 0;
    world.fake.clearScripts();
  });
  afterAll(async () => {
    await browser?.close();
    await world?.stop();
    await Promise.all([allowed, othersOnly, nobodys].map((page) => page && new Promise((resolve) => page.server.close(resolve))));
  });

  async function openPage(origin: string): Promise<Page> {
    const page = await browser.context.newPage();
    await page.goto(`${origin}/`);
    return page;
  }

  const chatInit = (token: string, extra: Record<string, string> = {}) => ({
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...extra },
    body: JSON.stringify({ message: 'hello from the page' }),
  });

  const storedSessions = async () =>
    (await world.rt.runtime.database.db.selectFrom('sessions').select('id').where('tenant_id', '=', world.tenant.tenantId).execute()).length;

  it('lets an allowed page read the chat answer, X-Run-Id, and the stream frames live and replayed', async () => {
    const page = await openPage(allowed.origin);
    const token = await world.token();

    world.fake.script('an answer for the page');
    const blocking = await fetchFromPage(page, `${world.rt.url}/chat`, chatInit(token));
    expect(blocking).toMatchObject({ ok: true, status: 200, runId: expect.stringMatching(/^run_/) });
    expect(JSON.parse((blocking as { text: string }).text)).toMatchObject({ content: 'an answer for the page' });
    // The browser asked first: Authorization and a JSON body are not a simple request.
    expect(answered.map((a) => [a.method, a.path, a.status])).toEqual([
      ['OPTIONS', '/chat', 204],
      ['POST', '/chat', 200],
    ]);

    world.fake.script('streamed to the page');
    const stream = await fetchFromPage(page, `${world.rt.url}/chat/stream`, chatInit(token));
    expect(stream).toMatchObject({ ok: true, status: 200, runId: expect.stringMatching(/^run_/) });
    const live = frameNames((stream as { text: string }).text);
    expect(live[0]).toBe('start');
    expect(live.at(-1)).toBe('done');
    expect(live).toContain('token');

    // Resuming after the first frame: Last-Event-ID is a header the preflight must allow.
    const runId = (stream as { runId: string }).runId;
    const replay = await fetchFromPage(page, `${world.rt.url}/chat/stream/${runId}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${token}`, 'last-event-id': '1' },
    });
    expect(replay).toMatchObject({ ok: true, status: 200, runId });
    expect(frameNames((replay as { text: string }).text)).toEqual(live.slice(1));
    await page.close();
  });

  it('blocks a page whose origin the project did not allow; the server answered 403 and did nothing', async () => {
    const page = await openPage(othersOnly.origin);
    const token = await world.token();
    const sessions = await storedSessions();
    const calls = world.fake.chatRequests().length;
    world.fake.script('never sent');

    for (const path of ['/chat', '/chat/stream']) {
      const seen = await fetchFromPage(page, `${world.rt.url}${path}`, chatInit(token));
      expect(seen).toEqual({ ok: false, error: expect.stringContaining('Failed to fetch') });
    }
    // The preflight passed (another project allows this origin); the request, judged by the token's project, did not.
    expect(answered.filter((a) => a.method === 'POST').map((a) => [a.path, a.origin, a.status])).toEqual([
      ['/chat', othersOnly.origin, 403],
      ['/chat/stream', othersOnly.origin, 403],
    ]);
    expect(await storedSessions()).toBe(sessions);
    expect(world.fake.chatRequests()).toHaveLength(calls);
    await page.close();
  });

  it('never sends the request of a page no project allows: its preflight is refused', async () => {
    const page = await openPage(nobodys.origin);
    const seen = await fetchFromPage(page, `${world.rt.url}/chat`, chatInit(await world.token()));
    expect(seen).toEqual({ ok: false, error: expect.stringContaining('Failed to fetch') });
    expect(answered.map((a) => [a.method, a.path, a.status])).toEqual([['OPTIONS', '/chat', 403]]);
    await page.close();
  });
});
