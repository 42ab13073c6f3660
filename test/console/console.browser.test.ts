// The web console (docs/decisions/0083, 0084) built from its sources and served by a real control plane, driven in
// Debian's Chromium: sign in with the keyboard, make a project and see it listed, sign out (the session is revoked and
// was never stored by the page), and a reload signs out. Every answer under /console carries the strict
// Content-Security-Policy, no policy violation happens, an inline script is refused, and axe-core finds no serious
// or critical violation on any page. The build's initial JavaScript is measured from the built files.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, type TestBrowser } from '../harness/browser.js';
import { startTestControl, type TestControl } from '../harness/control.js';
import { buildConsole, chromiumPath, inPage, owner, seriousViolations } from './harness.js';

let dist: string;
// Built from the sources on every run, as `npm run build:console` builds it, into a directory of this suite's own.
beforeAll(async () => {
  dist = await buildConsole();
});
afterAll(() => rmSync(dist, { recursive: true, force: true }));

describe('the console build', () => {
  it('loads only module script files, no inline script, and at most 250 KB of gzipped JavaScript at first', () => {
    const html = readFileSync(join(dist, 'index.html'), 'utf8');
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, body] of scripts) {
      expect(body!.trim()).toBe('');
      expect(attributes).toMatch(/\btype="module"/);
      expect(attributes).toMatch(/\bsrc="\/console\/assets\/[^"]+\.js"/);
    }
    expect(html).not.toMatch(/\son[a-z]+=/i); // no inline event handlers either
    const initial = [
      ...scripts.map(([, attributes]) => /\bsrc="([^"]+)"/.exec(attributes!)![1]!),
      ...[...html.matchAll(/<link\b[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g)].map((match) => match[1]!),
    ];
    const gzipped = initial.reduce((sum, url) => sum + gzipSync(readFileSync(join(dist, url.replace(/^\/console\//, '')))).length, 0);
    console.log(`console initial JavaScript: ${initial.length} file(s), ${(gzipped / 1024).toFixed(1)} KB gzipped`);
    expect(gzipped).toBeLessThanOrEqual(250 * 1024);
  });
});

describe.skipIf(chromiumPath === null)('the console in Chromium', () => {
  let control: TestControl;
  let browser: TestBrowser;

  beforeAll(async () => {
    control = await startTestControl({ ...owner, CONSOLE_DIR: dist });
    browser = await launchChromium(chromiumPath!);
  });
  afterAll(async () => {
    await browser?.close();
    await control?.stop();
  });

  it('signs in, makes a project and lists it, signs out, under a policy nothing violates', async () => {
    const page = await browser.context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('response', (response) => {
      if (response.status() === 404) problems.push(`not found: ${response.url()}`);
    });
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
    });
    // Installed through the protocol before any of the page's own scripts run. (Page code is written as text here:
    // this checkout type-checks tests without the DOM's types.)
    await page.addInitScript({
      content: `window.cspViolations = [];
        document.addEventListener('securitypolicyviolation', (event) => window.cspViolations.push(event.effectiveDirective + ' ' + event.blockedURI));`,
    });
    const violations = () => inPage<string[]>(page, 'window.cspViolations');
    const consoleAnswers: { url: string; csp: string | undefined }[] = [];
    page.on('response', (response) => {
      if (new URL(response.url()).pathname.startsWith('/console')) consoleAnswers.push({ url: response.url(), csp: response.headers()['content-security-policy'] });
    });
    let sessionToken: string | undefined;
    page.on('request', (request) => {
      const header = request.headers()['authorization'];
      if (header?.startsWith('Bearer ses_')) sessionToken = header.slice('Bearer '.length);
    });

    const first = await page.goto(`${control.url}/console`);
    expect(first!.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe('/console/');
    const csp = first!.headers()['content-security-policy']!;
    for (const directive of ["default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"]) expect(csp).toContain(directive);
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');

    // Sign in with the keyboard alone: the email field has the focus, Tab reaches the password, Enter submits.
    await expect.poll(() => inPage<string | undefined>(page, 'document.activeElement?.id')).toBe('email');
    expect(await seriousViolations(page)).toEqual([]);
    await page.keyboard.type(owner.AGENTPLANE_OWNER_EMAIL);
    await page.keyboard.press('Tab');
    await page.keyboard.type('not the password');
    await page.keyboard.press('Enter');
    await page.getByRole('alert').filter({ hasText: /invalid email or password/i }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByLabel('Password').fill(owner.AGENTPLANE_OWNER_PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Organizations' }).waitFor();
    await page.getByText('No projects yet.').waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    // The credential is in the page's memory only.
    expect(await inPage(page, '({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie })')).toEqual({ local: 0, session: 0, cookie: '' });
    expect(sessionToken).toMatch(/^ses_/);

    // Make a project from the keyboard: it is listed, and the control plane has it.
    await page.getByLabel('New project name').focus();
    await page.keyboard.type('console demo');
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: 'Made project console demo.' }).waitFor();
    await page.getByRole('list', { name: 'Projects of default' }).getByText('console demo').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    const me = (await (await control.call('/api/me', { token: sessionToken! })).json()) as { orgs: { id: string }[] };
    const listed = (await (await control.call(`/api/orgs/${me.orgs[0]!.id}/projects`, { token: sessionToken! })).json()) as { projects: { name: string }[] };
    expect(listed.projects.map((project) => project.name)).toEqual(['console demo']);

    // Sign out: back to the sign-in page, and the session token no longer works.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in to agentplane' }).waitFor();
    expect((await control.call('/api/me', { token: sessionToken! })).status).toBe(401);

    // A reload signs out: nothing survives it.
    await page.getByLabel('Email').fill(owner.AGENTPLANE_OWNER_EMAIL);
    await page.getByLabel('Password').fill(owner.AGENTPLANE_OWNER_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('list', { name: 'Projects of default' }).getByText('console demo').waitFor();
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Sign in to agentplane' }).waitFor();

    // Every console answer carried the policy, and nothing the console did violated it.
    expect(consoleAnswers.length).toBeGreaterThanOrEqual(4);
    for (const answer of consoleAnswers) expect(answer.csp, answer.url).toBe(csp);
    expect(await violations()).toEqual([]);
    // The failed sign-in's 401 is the one console error a browser logs by itself.
    expect(problems.filter((problem) => !/status of 401/.test(problem))).toEqual([]);

    // The policy is enforced: an inline script put into the page does not run, and is reported.
    const ran = await inPage<boolean>(
      page,
      `(async () => {
        const script = document.createElement('script');
        script.textContent = 'window.inlineRan = true';
        document.body.append(script);
        await new Promise((settle) => setTimeout(settle, 100));
        return window.inlineRan === true;
      })()`,
    );
    expect(ran).toBe(false);
    expect(await violations()).toEqual([expect.stringMatching(/^script-src-elem inline$/)]);
    await page.close();
  });
});
