// What the console's browser suites share: the console built from its sources into a directory of the suite's own
// (suites run in parallel; none writes another's files), a control plane serving it with a runtime behind it on
// loopback and the protocol-level fake provider, Debian's Chromium, signing in, and the page checks every suite makes:
// axe-core's serious and critical violations, policy violations and errors the page logged.
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { launchChromium, requireChromium, type TestBrowser } from '../harness/browser.js';
import { startTestControl, type TestControl } from '../harness/control.js';
import { makeTempDir } from '../harness/process.js';
import { startTestRuntime, type TestRuntime } from '../harness/runtime.js';

export const chromiumPath = requireChromium();
export const consoleRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../console');
export const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * Builds the console as `npm run build:console` does (a production build: the test runner's NODE_ENV would bundle
 * React's development build) into `outDir`, or a new directory; answers the directory.
 */
export async function buildConsole(outDir = makeTempDir('console')): Promise<string> {
  const vite = join(dirname(createRequire(import.meta.url).resolve('vite/package.json')), 'bin/vite.js');
  await promisify(execFile)(process.execPath, [vite, 'build', consoleRoot, '--config', join(consoleRoot, 'vite.config.ts'), '--outDir', outDir, '--emptyOutDir', '--logLevel', 'warn'], {
    env: { ...process.env, NODE_ENV: 'production' },
  });
  return outDir;
}

export interface ConsoleStack {
  control: TestControl;
  runtime: TestRuntime;
  provider: FakeOpenAIServer;
  browser: TestBrowser;
  /** The console's address: `${control.url}/console`. */
  url: string;
  stop(): Promise<void>;
}

/**
 * A control plane serving a freshly built console, its projects provisioned on a runtime on loopback (private URLs
 * allowed, so the fake provider on 127.0.0.1 can be registered), the fake provider with `gpt-4o-mini`, and Chromium.
 */
export async function startConsoleStack(options: { runtimeEnv?: Record<string, string> } = {}): Promise<ConsoleStack> {
  const dir = await buildConsole();
  const runtime = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', ...options.runtimeEnv } });
  const control = await startTestControl(
    { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', CONSOLE_DIR: dir, DATA_PLANE_URL: runtime.url },
    { provisioner: new LocalProvisioner({ runtimeUrl: runtime.url, adminKey: runtime.adminKey, timeoutMs: 5000 }) },
  );
  const provider = await FakeOpenAIServer.start({ apiKey: 'sk-fake-console-0123456789', chatModels: ['gpt-4o-mini'], embeddingModels: { 'text-embedding-3-small': 1536 } });
  const browser = await launchChromium(chromiumPath!);
  return {
    control,
    runtime,
    provider,
    browser,
    url: `${control.url}/console`,
    async stop() {
      await browser.close();
      await provider.close();
      await control.stop();
      await runtime.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Signs in as the owner on the sign-in page `page` shows, and waits for the organizations. */
export async function signIn(page: Page): Promise<void> {
  await page.getByLabel('Email').fill(owner.AGENTPLANE_OWNER_EMAIL);
  await page.getByLabel('Password').fill(owner.AGENTPLANE_OWNER_PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Organizations' }).waitFor();
}

/** axe-core's serious and critical violations on the page as it is now, one line each. */
export async function seriousViolations(page: Page): Promise<string[]> {
  // Evaluated through the protocol, not added as a script element: the page's policy refuses inline scripts.
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const results = await (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string | null; help: string; nodes: { target: unknown }[] }[] }> } }).axe.run();
    return results.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => JSON.stringify(n.target)) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.impact} ${v.id}: ${v.help} ${v.targets.join(' ')}`);
}

/** The value of an expression evaluated in the page (through the protocol, so the page's policy does not apply). */
export const inPage = <T>(page: Page, expression: string): Promise<T> => page.evaluate(expression) as Promise<T>;

/**
 * Collects what went wrong on a page from now on: uncaught errors, errors it logged, answers of 404 or 5xx, and
 * Content-Security-Policy violations (`violations()`, read from the page).
 */
export async function watchPage(page: Page): Promise<{ problems: string[]; violations(): Promise<string[]> }> {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() === 404 || response.status() >= 500) problems.push(`${response.status()}: ${response.url()}`);
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
  return { problems, violations: () => inPage<string[]>(page, 'window.cspViolations') };
}
