// The console's main flow in Debian's Chromium, against a real control plane with a runtime behind it and the
// protocol-level fake provider: sign in, make a project, make a key (shown once, copied), register the provider and
// watch readiness turn to "can answer", chat in the playground with streamed tokens, a tool call, a question and an
// approval answered in place, open the session, revoke the key after a confirmation naming it, and find the revocation in the
// audit log. Every page passes axe-core (no serious or critical violation) under the console's policy, which nothing
// violates.
import type { Page } from 'playwright-core';
import type { ChatReply } from '../fakes/openai-server.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPath, inPage, seriousViolations, signIn, startConsoleStack, watchPage, type ConsoleStack } from './harness.js';

describe.skipIf(chromiumPath === null)('the console, from sign-in to the audit log', () => {
  let stack: ConsoleStack;
  beforeAll(async () => {
    stack = await startConsoleStack();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  /** Opens a section from the project's navigation and waits for its heading. */
  async function openSection(page: Page, label: string): Promise<void> {
    await page.getByRole('navigation', { name: 'Project sections' }).getByRole('link', { name: label, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
    expect(await seriousViolations(page), label).toEqual([]);
  }

  it('runs the first chat and the key life cycle through the console alone', async () => {
    const page = await stack.browser.context.newPage();
    await stack.browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.control.url });
    const { problems, violations } = await watchPage(page);
    let sessionToken: string | undefined;
    page.on('request', (request) => {
      const header = request.headers()['authorization'];
      if (header?.startsWith('Bearer ses_')) sessionToken = header.slice('Bearer '.length);
    });
    await page.goto(stack.url);
    await signIn(page);

    // Make a project and open it: the overview's checklist says turns cannot run yet, and why.
    await page.getByLabel('New project name').fill('support desk');
    await page.getByRole('button', { name: 'Make project' }).click();
    await page.getByRole('link', { name: 'support desk' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Not ready: turns cannot run yet.' }).waitFor();
    const steps = page.getByRole('list', { name: 'Readiness steps' });
    await steps.getByText('no provider is registered').waitFor();
    expect(await steps.getByRole('link', { name: 'Register a provider' }).count()).toBe(1);
    expect(await seriousViolations(page)).toEqual([]);
    const projectId = new URL(page.url()).pathname.split('/')[3]!;
    expect(projectId).toMatch(/^[0-9a-f-]{36}$/);

    // A key: shown once with a copy button; once dismissed it is nowhere on the page, and it works.
    await openSection(page, 'Keys');
    await page.getByLabel('Name').fill('backend');
    await page.getByRole('button', { name: 'Make key' }).click();
    const shown = page.getByRole('region', { name: 'Key backend' });
    const key = (await shown.getByLabel('Key backend value').textContent())!.trim();
    expect(key).toMatch(/^pk_/);
    expect(await seriousViolations(page)).toEqual([]);
    await shown.getByRole('button', { name: 'Copy key backend' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied to the clipboard.' }).waitFor();
    expect(await inPage<string>(page, 'navigator.clipboard.readText()')).toBe(key);
    await shown.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByRole('cell', { name: 'backend', exact: true }).waitFor();
    expect(await page.content()).not.toContain(key);
    expect((await stack.control.call(`/api/projects/${projectId}/capabilities`, { key })).status).toBe(200);

    // The provider: the key is tried against it first; a wrong one is refused and nothing is stored.
    await openSection(page, 'Providers');
    await page.getByLabel('API base URL').fill(stack.provider.url);
    await page.getByLabel('API key').fill('sk-not-the-right-key-0000');
    await page.getByLabel('Chat models (comma-separated)').fill('gpt-4o-mini');
    await page.getByRole('button', { name: 'Register provider' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByText('No provider yet').count()).toBe(1);
    await page.getByLabel('API key').fill(stack.provider.apiKey);
    await page.getByRole('button', { name: 'Register provider' }).click();
    await page.getByRole('status').filter({ hasText: 'Registered: gpt-4o-mini' }).waitFor();
    await page.getByRole('cell', { name: 'gpt-4o-mini', exact: true }).waitFor();
    expect(await page.getByLabel('API key').inputValue()).toBe('');

    // Readiness turns to "can answer" by itself (the report is read again every few seconds).
    await openSection(page, 'Overview');
    await page.getByRole('status').filter({ hasText: /^(Can answer|Ready)/ }).waitFor({ timeout: 20_000 });
    for (const done of ['runtime', 'provider', 'default-model']) {
      await steps.getByRole('heading', { level: 3, name: `${done} (done, essential)`, exact: true }).waitFor();
    }

    // The playground: a turn that calls a tool and streams its answer, then one that asks a question.
    // The model, as a function of the conversation: the service also asks it for titles, between turns.
    const approvalCall = 'call_approval_1';
    const model: ChatReply = (request) => {
      const last = request.messages.at(-1)!;
      const text = typeof last.content === 'string' ? last.content : '';
      if (text.startsWith('Give this conversation a title')) return 'Email and plans';
      if (last.role === 'tool' && text.startsWith('Remembered')) return { text: 'Noted: you prefer answers by email, and I will keep that in mind from now on.', dripMs: 60 };
      if (text === 'Please remember that I prefer email.') return { toolCalls: [{ name: 'remember', arguments: { content: 'Prefers answers by email.' } }] };
      if (text === 'What does my plan include?') return { toolCalls: [{ name: 'ask_user', arguments: { question: 'Which plan are you on?', options: ['free', 'pro'] } }] };
      if (text === 'Upgrade me to the yearly plan.') return { toolCalls: [{ id: approvalCall, name: 'request_approval', arguments: { action: 'Switch the account to yearly billing', detail: 'pro, yearly, from the next invoice' } }] };
      if (last.role === 'tool' && last.tool_call_id === approvalCall) return /refused|denied|not approved/i.test(text) ? 'Then I leave it as it is.' : 'Done: you are on yearly billing from the next invoice.';
      if (last.role === 'tool' && text.includes('pro')) return 'The pro plan includes priority support.';
      return `unexpected: ${JSON.stringify(last)}`;
    };
    stack.provider.script(...Array.from({ length: 12 }, () => model));
    await openSection(page, 'Playground');
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('Please remember that I prefer email.');
    await page.keyboard.press('Enter');
    const transcript = page.getByRole('log', { name: 'Conversation' });
    // Tokens arrive as they are made: the answer is seen partly written before the turn ends.
    const seen = new Set<string>();
    await expect
      .poll(
        async () => {
          const text = (await transcript.locator('.answer').last().textContent().catch(() => null)) ?? '';
          if (text) seen.add(text);
          return text;
        },
        { timeout: 20_000, interval: 20 },
      )
      .toBe('Noted: you prefer answers by email, and I will keep that in mind from now on.');
    expect(seen.size).toBeGreaterThan(2);
    await transcript.getByText('Tool remember').waitFor();
    await transcript.getByText(/returned: Remembered/).waitFor();
    await page.getByRole('status').filter({ hasText: 'Answered.' }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('What does my plan include?');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByRole('heading', { name: 'The agent is waiting for you' }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByLabel('Which plan are you on?').fill('pro');
    await page.getByRole('button', { name: 'Send and go on' }).click();
    await transcript.getByText('The pro plan includes priority support.').waitFor();
    // An approval: what the agent wants to do is shown, approving it lets the turn go on.
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('Upgrade me to the yearly plan.');
    await page.keyboard.press('Enter');
    const approval = page.getByRole('group', { name: 'Approve the action: Switch the account to yearly billing' });
    await approval.getByText('pro, yearly, from the next invoice').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await approval.getByLabel('Approve').check();
    await page.getByRole('button', { name: 'Send and go on' }).click();
    await transcript.getByText('Done: you are on yearly billing from the next invoice.').waitFor();

    // The transcript reads in the order things happened: the message, the tool call, then the answer.
    expect((await transcript.innerText()).replace(/\s+/g, ' ')).toMatch(/Please remember.*Tool remember.*returned: Remembered.*Noted: you prefer.*What does my plan include\?.*The pro plan/);

    // The session, as the project sees it: every message, in order.
    await page.getByRole('link', { name: 'open the session' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor();
    const messages = page.getByRole('list', { name: 'Messages' });
    await messages.getByText('Please remember that I prefer email.').waitFor();
    await messages.getByText('The pro plan includes priority support.').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('table').getByText(/^playground:owner$/).first().waitFor();

    // Revoke the key: the dialog names it, Cancel keeps it, the confirmation revokes it and the key stops working.
    await openSection(page, 'Keys');
    await page.getByRole('button', { name: /^Revoke key backend/ }).click();
    const dialog = page.getByRole('dialog', { name: /Revoke key backend \(…[0-9a-zA-Z_-]{4}\)\?/ });
    await dialog.waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await stack.control.call(`/api/projects/${projectId}/capabilities`, { key })).status).toBe(200);
    await page.getByRole('button', { name: /^Revoke key backend/ }).click();
    await dialog.getByRole('button', { name: /^Revoke key backend/ }).click();
    await page.getByRole('cell', { name: /^revoked / }).waitFor();
    expect((await stack.control.call(`/api/projects/${projectId}/capabilities`, { key })).status).toBe(401);

    // The audit log, filtered to revocations, shows it: by the signed-in account, answered ok.
    await openSection(page, 'Audit log');
    await page.getByLabel('Action').fill('DELETE /api/projects/{id}/keys/{keyId}');
    await page.getByRole('button', { name: 'Filter' }).click();
    const rows = page.getByRole('table').getByRole('row');
    await expect.poll(() => rows.count()).toBe(2);
    const me = (await (await stack.control.call('/api/me', { token: sessionToken! })).json()) as { account: { id: string } };
    await rows.nth(1).getByText(`account:${me.account.id}`).waitFor();
    await rows.nth(1).getByText('ok (200)').waitFor();

    expect(await violations()).toEqual([]);
    // The wrong provider key's refusal is the one error answer the flow asked for.
    expect(problems.filter((problem) => !/status of 4\d\d/.test(problem))).toEqual([]);
    await page.close();
  });
});
