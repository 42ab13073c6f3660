// The project page's documents, tools, and tasks and triggers sections in Chromium, against a real control plane
// and runtime: a document added shows with its status until it is ready, is read again on asking, and is gone (for
// the control plane too) once its deletion is confirmed; a webhook tool's secret is shown once and nowhere after it
// is dismissed (nor after a reload), rotating shows a new one, deleting asks naming the tool; an MCP server (the
// SDK's own, on loopback) registered shows the tools it was found to have; a skill package is published and removed;
// tasks and triggers made on the data plane are listed, a trigger made here shows its URL once, that URL takes
// events, and a rotation shows the next URL once. No page error, no policy violation, and axe-core finds no serious
// or critical violation on any section.
import { createHmac } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestMcpServer } from '../fakes/mcp-server.js';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { chromiumPath, inPage, owner, seriousViolations, signIn, startConsoleStack, watchPage, type ConsoleStack } from './harness.js';

const bodyText = (page: Page) => inPage<string>(page, 'document.body.innerText');

describe.skipIf(chromiumPath === null)('the project page: documents, tools, tasks and triggers', () => {
  let stack: ConsoleStack;
  let mcp: TestMcpServer;
  let handler: WebhookHandler;
  let page: Page;
  let watch: Awaited<ReturnType<typeof watchPage>>;
  let sessionToken: string | undefined;
  let projectId: string;

  const control = async <T>(path: string, init: RequestInit = {}) => {
    const response = await stack.control.call(`/api/projects/${projectId}${path}`, { ...init, token: sessionToken! });
    const text = await response.text();
    expect(response.ok, text).toBe(true);
    return JSON.parse(text) as T;
  };
  const openSection = async (label: string) => {
    await page.getByRole('navigation', { name: 'Project sections' }).getByRole('link', { name: label, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  };
  /** Opens a confirmation, checks its question names the target, and confirms. */
  const confirm = async (name: string) => {
    await page.getByRole('button', { name, exact: true }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: `${name}?` }).waitFor();
    await dialog.getByRole('button', { name, exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
  };
  const openProject = async () => {
    await page.getByRole('list', { name: 'Projects of default' }).getByRole('link', { name: 'tools demo' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  };

  beforeAll(async () => {
    [stack, mcp, handler] = await Promise.all([startConsoleStack(), TestMcpServer.start(), WebhookHandler.start()]);
    page = await stack.browser.context.newPage();
    watch = await watchPage(page);
    page.on('request', (request) => {
      const header = request.headers()['authorization'];
      if (header?.startsWith('Bearer ses_')) sessionToken = header.slice('Bearer '.length);
    });
    await page.goto(stack.url);
    await signIn(page);
    await page.getByLabel('New project name').fill('tools demo');
    await page.keyboard.press('Enter');
    await openProject();
    projectId = /\/projects\/([0-9a-f-]{36})/.exec(page.url())![1]!;
    // A provider with an embedding model, so the corpus's documents are read.
    await control('/providers', {
      method: 'POST',
      body: JSON.stringify({ provider: 'openai_compatible', models: ['gpt-4o-mini'], values: { api_key: stack.provider.apiKey, base_url: stack.provider.url, embedding_model: 'text-embedding-3-small' } }),
    });
  });
  afterAll(async () => {
    await page?.close();
    await Promise.all([stack?.stop(), mcp?.stop(), handler?.stop()]);
  });

  it('adds a document from a text file, shows its status, and deletes it after naming it', async () => {
    await openSection('Documents');
    await page.getByText('No documents yet.').waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByLabel(/^Text file/).setInputFiles({ name: 'refunds.md', mimeType: 'text/markdown', buffer: Buffer.from('# Refunds\n\nRefunds are made within 30 days.\n') });
    await expect.poll(() => page.getByLabel('Text', { exact: true }).inputValue()).toContain('Refunds are made within 30 days.');
    expect(await page.getByLabel('Title').inputValue()).toBe('refunds.md');
    expect(await page.getByLabel('Format').inputValue()).toBe('text/markdown');
    await page.getByRole('button', { name: 'Add document' }).click();
    await page.getByRole('status').filter({ hasText: 'Added refunds.md' }).waitFor();

    const row = page.getByRole('row').filter({ hasText: 'refunds.md' });
    await row.waitFor();
    const status = () => row.getByRole('cell').nth(3).innerText();
    expect(await status()).toMatch(/^(uploading|uploaded|processing|ready)/);
    // The list is read again while the document is being read: it shows ready, with its chunks, as the control plane does.
    await expect.poll(status, { timeout: 30_000 }).toBe('ready');
    const listed = await control<{ documents: { title: string; content_type: string; status: string; chunk_count: number }[] }>('/documents');
    expect(listed.documents).toEqual([expect.objectContaining({ title: 'refunds.md', content_type: 'text/markdown', status: 'ready' })]);
    expect(await row.getByRole('cell').nth(4).innerText()).toBe(String(listed.documents[0]!.chunk_count));

    // Reading it again: the control plane sees a new ingest, and the list shows it ready again.
    const ingestedAt = async () => (await control<{ documents: { status: string; ingested_at: string | null }[] }>('/documents')).documents[0]!;
    const first = (await ingestedAt()).ingested_at;
    await page.getByRole('button', { name: 'Read again document refunds.md' }).click();
    await expect
      .poll(
        async () => {
          const now = await ingestedAt();
          return now.status === 'ready' && now.ingested_at !== first;
        },
        { timeout: 30_000 },
      )
      .toBe(true);
    await expect.poll(status, { timeout: 30_000 }).toBe('ready');
    expect(await seriousViolations(page)).toEqual([]);

    await confirm('Delete document refunds.md');
    await page.getByText('No documents yet.').waitFor();
    expect((await control<{ documents: unknown[] }>('/documents')).documents).toEqual([]);
  });

  it('shows a webhook tool\'s secret once, a rotated one once, and deletes the tool after naming it', async () => {
    await openSection('Tools');
    await page.getByText('No webhook tools yet.').waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByLabel('Name (what the model calls it)').fill('lookup_order');
    await page.getByLabel(/^Description/).fill('Looks an order up by its id.');
    await page.getByLabel('Handler URL').fill(handler.url);
    await page.getByLabel(/^Parameters/).fill('{"type": "object", "properties": {"order_id": {"type": "string"}}}');
    await page.getByRole('button', { name: 'Publish webhook tool' }).click();
    const secret = await page.getByLabel('Signing secret of lookup_order value').innerText();
    expect(secret.length).toBeGreaterThanOrEqual(16);
    expect(await seriousViolations(page)).toEqual([]);
    const [tool] = (await control<{ tools: { id: string; name: string; parameters: unknown }[] }>('/webhook-tools')).tools;
    expect(tool).toMatchObject({ name: 'lookup_order', parameters: { type: 'object' } });
    expect(JSON.stringify(tool)).not.toContain(secret);

    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByRole('row').filter({ hasText: 'lookup_order' }).waitFor();
    expect(await bodyText(page)).not.toContain(secret);
    // Away and back, and a reload (which signs out): the secret is nowhere.
    await openSection('Documents');
    await openSection('Tools');
    await page.getByRole('row').filter({ hasText: 'lookup_order' }).waitFor();
    expect(await bodyText(page)).not.toContain(secret);
    // Signing in again after the reload shows the page the address names.
    await page.reload();
    await page.getByLabel('Email').fill(owner.AGENTPLANE_OWNER_EMAIL);
    await page.getByLabel('Password').fill(owner.AGENTPLANE_OWNER_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Tools' }).waitFor();
    await page.getByRole('row').filter({ hasText: 'lookup_order' }).waitFor();
    expect(await bodyText(page)).not.toContain(secret);

    // Rotating asks first, then shows the new secret once and says the old one verifies for 24 hours.
    await confirm('Rotate the secret of webhook tool lookup_order');
    const rotated = await page.getByLabel('New signing secret of lookup_order value').innerText();
    expect(rotated.length).toBeGreaterThanOrEqual(16);
    expect(rotated).not.toBe(secret);
    expect(await bodyText(page)).toMatch(/old secret still verifies until .* \(24 hours\)/);
    const [afterRotation] = (await control<{ tools: { previousSecretUntil: string | null }[] }>('/webhook-tools')).tools;
    expect(afterRotation!.previousSecretUntil).not.toBeNull();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await bodyText(page)).not.toContain(rotated);

    await confirm('Delete webhook tool lookup_order');
    await page.getByText('No webhook tools yet.').waitFor();
    expect((await control<{ tools: unknown[] }>('/webhook-tools')).tools).toEqual([]);
  });

  it('registers an MCP server, shows the tools it was found to have, and deletes it after naming it', async () => {
    await page.getByText('No MCP servers yet.').waitFor();
    await page.getByLabel(/^Name \(its tools/).fill('crm');
    await page.getByLabel(/^URL \(Streamable HTTP or SSE\)/).fill(mcp.url);
    await page.getByRole('button', { name: 'Register MCP server' }).click();
    await page.getByRole('status').filter({ hasText: 'Probe of crm: answered on streamable_http with 3 tools: add, whoami, fail.' }).waitFor();
    // Once the change reaches the runtime, the list says what its loader found.
    const row = page.getByRole('row').filter({ hasText: 'crm' });
    await row.getByText('3 tools: add, whoami, fail').waitFor({ timeout: 30_000 });
    expect(await seriousViolations(page)).toEqual([]);
    expect((await control<{ servers: { name: string }[] }>('/mcp')).servers.map((server) => server.name)).toEqual(['crm']);

    await confirm('Delete MCP server crm');
    await page.getByText('No MCP servers yet.').waitFor();
    expect((await control<{ servers: unknown[] }>('/mcp')).servers).toEqual([]);
  });

  it('publishes a skill package and deletes it after naming it', async () => {
    await page.getByText('No skills yet.').waitFor();
    const skill = '---\nname: refunds\ndescription: How refunds are handled\n---\nRefund within 30 days.\n';
    await page.getByLabel(/^Package/).setInputFiles({ name: 'SKILL.md', mimeType: 'text/markdown', buffer: Buffer.from(skill) });
    await page.getByRole('button', { name: 'Publish skills' }).click();
    await page.getByRole('status').filter({ hasText: /^Published .*: refunds\./ }).waitFor();
    const [plugin] = (await control<{ plugins: { name: string; skills: { name: string }[] }[] }>('/skills')).plugins;
    expect(plugin!.skills.map((one) => one.name)).toEqual(['refunds']);
    await page.getByRole('row').filter({ hasText: 'How refunds' }).or(page.getByRole('row').filter({ hasText: plugin!.name })).first().waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await confirm(`Delete skill package ${plugin!.name}`);
    await page.getByText('No skills yet.').waitFor();
    expect((await control<{ plugins: unknown[] }>('/skills')).plugins).toEqual([]);
  });

  it('lists the tasks and triggers that exist, and makes a trigger whose URL is shown once and takes events', async () => {
    // An end-user schedules a task and makes a trigger on the data plane.
    const { access_token: alice } = await control<{ access_token: string }>('/token', { method: 'POST', body: JSON.stringify({ subject: 'acme:alice' }) });
    const asAlice = async (path: string, body: unknown) => {
      const response = await fetch(`${stack.runtime.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(response.status, await response.clone().text()).toBe(201);
    };
    await asAlice('/tasks', { name: 'Weekly report', prompt: 'Send the weekly report.', interval_seconds: 3600 });
    await asAlice('/triggers', { name: 'CRM', prompt: 'A CRM event came in: act on it.' });

    await openSection('Tasks and triggers');
    const task = page.getByRole('row').filter({ hasText: 'Weekly report' });
    await task.waitFor();
    expect(await task.innerText()).toMatch(/acme:alice\s+scheduled\s+every 3600 s/);
    const theirs = page.getByRole('row').filter({ hasText: 'CRM' });
    await theirs.waitFor();
    expect(await theirs.innerText()).toContain('only its owner changes it');
    expect(await seriousViolations(page)).toEqual([]);

    // A signed trigger made here: its URL and secret are shown once, and the URL takes a signed event.
    await page.getByLabel('Name', { exact: true }).fill('Deploys');
    await page.getByLabel(/^Prompt/).fill('A deploy finished: tell the team.');
    await page.getByLabel(/Events must be signed/).check();
    await page.getByRole('button', { name: 'Make trigger' }).click();
    const url = await page.getByLabel('URL of trigger Deploys value').innerText();
    const signingSecret = await page.getByLabel('Signing secret of trigger Deploys value').innerText();
    expect(url).toMatch(/\/triggers\/[^/]+$/);
    expect(await seriousViolations(page)).toEqual([]);
    const event = JSON.stringify({ deploy: 42 });
    const fired = await fetch(url.replace(/^https?:\/\/[^/]+/, stack.runtime.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-signature': `sha256=${createHmac('sha256', signingSecret).update(event).digest('hex')}` },
      body: event,
    });
    expect(fired.status, await fired.clone().text()).toBe(200);
    for (const region of ['URL of trigger Deploys', 'Signing secret of trigger Deploys']) {
      await page.getByRole('region', { name: region }).getByRole('button', { name: 'I have copied it' }).click();
    }
    await page.getByRole('button', { name: 'Make trigger' }).waitFor();
    const text = await bodyText(page);
    expect(text).not.toContain(url);
    expect(text).not.toContain(signingSecret);

    // Rotating shows the new URL once; the old one still answers for a day.
    const ours = page.getByRole('row').filter({ hasText: 'Deploys' });
    await ours.waitFor();
    await confirm(`Rotate the URL of trigger Deploys (…${url.slice(-4)})`);
    const newUrl = await page.getByLabel('URL of trigger Deploys value').innerText();
    expect(newUrl).not.toBe(url);
    expect(await bodyText(page)).toMatch(/old URL answers until .* \(24 hours\)/);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await bodyText(page)).not.toContain(newUrl);
    await ours.getByText(/the old URL answers until/).waitFor();

    // Only the console's own trigger can be removed from here; its removal names it.
    await confirm(`Delete trigger Deploys (…${newUrl.slice(-4)})`);
    await ours.waitFor({ state: 'detached' });
    await theirs.waitFor();
  });

  it('logged no error and violated no policy on any of these sections', async () => {
    expect(await watch.violations()).toEqual([]);
    expect(watch.problems).toEqual([]);
  });
});
