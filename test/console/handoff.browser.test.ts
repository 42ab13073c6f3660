// The hand-off in the console, with two Chromium instances: the agent's (the runtime's own, behind its egress guard)
// opens a sign-in page and hands it over in the playground; the person's (this test's) sees the page live in the
// hand-off viewer, clicks into its field, types, presses Tab with the viewer's button, signs in with Enter, asks the
// check, and presses "I'm done": the agent goes on with the page as the person left it; the console's reader then
// watches the page from the Sessions section, with nothing to act with. No page error, no policy violation, and
// axe-core finds no serious or critical violation with the viewer open.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest } from '../fakes/openai-server.js';
import { chromiumPath, seriousViolations, signIn, startConsoleStack, watchPage, type ConsoleStack } from './harness.js';

const lastTool = (request: ChatRequest) => String([...request.messages].reverse().find((message) => message.role === 'tool')?.content ?? '');

describe.skipIf(chromiumPath === null)('the hand-off viewer in the console', () => {
  let site: Server;
  let siteUrl: string;
  const logins: string[] = [];
  let stack: ConsoleStack;
  let page: Page;
  let sessionToken: string | undefined;

  beforeAll(async () => {
    site = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://site');
      res.setHeader('Content-Type', 'text/html');
      const page = (title: string, body: string) =>
        res.end(`<!doctype html><html><head><title>${title}</title><style>body{margin:0;font:16px sans-serif} input{position:absolute;left:100px;width:300px;height:40px;box-sizing:border-box} #user{top:100px} #pass{top:180px} button{position:absolute;left:100px;top:260px}</style></head><body>${body}</body></html>`);
      if (url.pathname === '/login') return page('Sign in', '<form action="/welcome"><input id="user" name="user" aria-label="User"><input id="pass" name="pass" type="password" aria-label="Password"><button>Sign in</button></form>');
      if (url.pathname === '/welcome') {
        logins.push(`${url.searchParams.get('user')}:${url.searchParams.get('pass')}`);
        return page('Welcome', `<h1>Welcome, ${(url.searchParams.get('user') ?? '').replace(/[^a-z]/g, '')}</h1>`);
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    stack = await startConsoleStack({ runtimeEnv: { BROWSER_HOST: 'local', BROWSER_ALLOWED_DESTINATIONS: new URL(siteUrl).host } });
    page = await stack.browser.context.newPage();
    page.on('request', (request) => {
      const header = request.headers()['authorization'];
      if (header?.startsWith('Bearer ses_')) sessionToken = header.slice('Bearer '.length);
    });
  });
  afterAll(async () => {
    await stack?.stop();
    site?.close();
  });

  it('shows the page live, forwards clicks and keys, checks, and hands the page back to the agent', async () => {
    const { problems, violations } = await watchPage(page);
    await page.goto(stack.url);
    await signIn(page);
    await page.getByLabel('New project name').fill('hand-off desk');
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: 'hand-off desk' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    const projectId = /\/projects\/([0-9a-f-]{36})/.exec(page.url())![1]!;
    const registered = await stack.control.call(`/api/projects/${projectId}/providers`, {
      method: 'POST',
      token: sessionToken!,
      body: JSON.stringify({ provider: 'openai_compatible', models: ['gpt-4o-mini'], values: { api_key: stack.provider.apiKey, base_url: stack.provider.url } }),
    });
    expect(registered.status, await registered.clone().text()).toBe(201);

    // The agent opens the sign-in page and hands it over.
    stack.provider.script(
      { toolCalls: [{ name: 'browser_open', arguments: { url: `${siteUrl}/login` } }] },
      { toolCalls: [{ name: 'browser_handoff', arguments: { instructions: 'Please sign in as alice.' } }] },
    );
    await page.getByRole('navigation', { name: 'Project sections' }).getByRole('link', { name: 'Playground', exact: true }).click();
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('Sign me in to the site.');
    await page.keyboard.press('Enter');
    const viewer = page.getByRole('region', { name: 'The agent handed you a page' });
    await viewer.getByText('Please sign in as alice.').waitFor();
    const picture = viewer.getByRole('img', { name: `The page handed over: ${siteUrl}/login` });
    await picture.waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    // A click where the user field is on the page (its picture is drawn smaller: the viewer scales the point).
    await picture.scrollIntoViewIfNeeded();
    const box = (await picture.boundingBox())!;
    const scale = box.width / 1280;
    await page.mouse.click(box.x + 250 * scale, box.y + 120 * scale);
    await page.keyboard.type('alice');
    await viewer.getByRole('button', { name: 'Tab', exact: true }).click();
    await picture.focus();
    await page.keyboard.type('s3cret');
    await page.keyboard.press('Enter');
    await expect.poll(() => logins, { timeout: 20_000 }).toEqual(['alice:s3cret']);
    await viewer.getByRole('img', { name: `The page handed over: ${siteUrl}/welcome?user=alice&pass=s3cret` }).waitFor();

    // The check, answered by the small model.
    stack.provider.script('done');
    await viewer.getByRole('button', { name: "Check whether I'm done" }).click();
    await viewer.getByText('The check says: it looks done').waitFor();

    // Done: the agent goes on with the page as left, and the viewer closes.
    stack.provider.script(
      (request) => (lastTool(request).includes('a check of the page suggested the task is done') ? { toolCalls: [{ name: 'browser_snapshot', arguments: {} }] } : `unexpected: ${lastTool(request)}`),
      (request) => (lastTool(request).includes('Welcome, alice') ? 'You are signed in as alice.' : `unexpected page: ${lastTool(request)}`),
    );
    await viewer.getByRole('button', { name: "I'm done", exact: true }).click();
    const transcript = page.getByRole('log', { name: 'Conversation' });
    await transcript.getByText('You are signed in as alice.').waitFor();
    await viewer.waitFor({ state: 'detached' });
    expect(await transcript.getByText("I'm done with the page.").count()).toBe(1);

    // A reader of the project watches the conversation's page from the Sessions section, and has nothing to act with.
    await page.getByRole('link', { name: 'open the session' }).click();
    await page.getByRole('button', { name: 'Watch its browser page' }).click();
    const watcher = page.getByRole('region', { name: "The conversation's browser page" });
    await watcher.getByRole('img', { name: `The page handed over: ${siteUrl}/welcome?user=alice&pass=s3cret` }).waitFor();
    expect(await watcher.getByText('only the conversation\'s owner acts on its page').count()).toBe(1);
    expect(await watcher.getByRole('button', { name: 'Tab', exact: true }).count()).toBe(0);
    expect(await watcher.getByRole('img').getAttribute('tabindex')).toBe('-1');
    expect(await seriousViolations(page)).toEqual([]);
    await watcher.getByRole('button', { name: 'Stop watching' }).click();
    await watcher.waitFor({ state: 'detached' });
    expect(problems).toEqual([]);
    expect(await violations()).toEqual([]);
  });
});
