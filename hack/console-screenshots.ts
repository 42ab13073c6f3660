// `npm run console:screenshots`: refreshes the console's screenshots in docs/console/. It starts what the console's
// browser tests start (a control plane serving a fresh build, a runtime, the fake provider, Debian's Chromium), walks a
// project through its first chat as a person would, and photographs each main page at 1280×800.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromiumPath, signIn, startConsoleStack } from '../test/console/harness.js';

const out = resolve(fileURLToPath(new URL('../docs/console/', import.meta.url)));
if (!chromiumPath) {
  console.error('Chromium is not installed: run `bash hack/test-deps.sh` first');
  process.exit(1);
}
mkdirSync(out, { recursive: true });

const stack = await startConsoleStack();
try {
  const page = await stack.browser.context.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  const shoot = async (name: string) => {
    await page.screenshot({ path: join(out, `${name}.png`) });
    console.log(`docs/console/${name}.png`);
  };
  const open = async (label: string) => {
    await page.getByRole('navigation', { name: 'Project sections' }).getByRole('link', { name: label, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  };

  await page.goto(stack.url);
  await page.getByRole('heading', { name: 'Sign in to agentplane' }).waitFor();
  await shoot('sign-in');
  await signIn(page);
  await page.getByLabel('New project name').fill('support desk');
  await page.getByRole('button', { name: 'Make project' }).click();
  await page.getByRole('link', { name: 'support desk' }).waitFor();
  await shoot('organizations');
  await page.getByRole('link', { name: 'support desk' }).click();
  await page.getByRole('status').filter({ hasText: 'Not ready' }).waitFor();
  await shoot('readiness-not-ready');

  await open('Keys');
  await page.getByLabel('Name').fill('backend');
  await page.getByRole('button', { name: 'Make key' }).click();
  await page.getByRole('region', { name: 'Key backend' }).waitFor();
  await shoot('key-shown-once');
  await page.getByRole('button', { name: 'I have copied it' }).click();

  await open('Providers');
  await page.getByLabel('API base URL').fill(stack.provider.url);
  await page.getByLabel('API key').fill(stack.provider.apiKey);
  await page.getByLabel('Chat models (comma-separated)').fill('gpt-4o-mini');
  await page.getByRole('button', { name: 'Register provider' }).click();
  await page.getByRole('status').filter({ hasText: 'Registered' }).waitFor();
  await shoot('providers');

  await open('Overview');
  await page.getByRole('status').filter({ hasText: /^(Can answer|Ready)/ }).waitFor({ timeout: 20_000 });
  await shoot('readiness-can-answer');

  await open('Playground');
  stack.provider.script('Hello! I can help with your account, billing and orders. What would you like to do?');
  await page.getByRole('textbox', { name: 'Message', exact: true }).fill('Hello, what can you do?');
  await page.keyboard.press('Enter');
  await page.getByRole('status').filter({ hasText: 'Answered' }).waitFor();
  await shoot('playground');

  await page.getByRole('link', { name: 'open the session' }).click();
  await page.getByRole('list', { name: 'Messages' }).waitFor();
  await shoot('sessions');

  await open('Turns and usage');
  await page.getByRole('heading', { level: 2 }).first().waitFor();
  await shoot('turns-and-usage');

  await open('Audit log');
  await page.getByRole('table').waitFor();
  await shoot('audit-log');
} finally {
  await stack.stop();
}
