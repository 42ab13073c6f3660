// A project's "Turns and usage" and "Events and deliveries" sections in Debian's Chromium, against a real control plane
// with a runtime behind it and the protocol-level fake provider, after real activity: a scheduled task whose events
// reach a receiver that fails first, chat turns, a webhook tool's call and a failed turn. The figures the console
// shows are the ones the control plane's API answers, each chart is an image named by its figures, Redeliver sends an
// event again (a new attempt the API shows), a rotation confirmed by name shows the new secret, the webhook URL is
// cleared after a confirmation and set again, and no section has a serious or critical axe violation, a page error or
// a policy violation. A new project's sections say plainly that nothing happened yet, with no empty chart.
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatReply, ChatRequest } from '../fakes/openai-server.js';
import { WebhookHandler } from '../fakes/webhook-handler.js';
import { eventually } from '../harness/eventually.js';
import { json } from '../harness/project.js';
import { chromiumPath, inPage, owner, seriousViolations, signIn, startConsoleStack, watchPage, type ConsoleStack } from './harness.js';

const MODEL = 'gpt-4o-mini';

interface TurnHealth {
  total: number;
  errored: number;
  consecutive_errors: number;
  last_error: { message: string } | null;
  last_success_at: string | null;
}
interface Usage {
  requests: number;
  model_calls: number;
  input_tokens: number;
  output_tokens: number;
  by_model: { model: string; model_calls: number; input_tokens: number; output_tokens: number }[];
}
interface Observability {
  requests: number;
  errors: number;
  by_status: Record<string, number>;
}
interface Delivery {
  id: string;
  type: string;
  status: string;
  attempts: number;
  attempt_log: unknown[];
  last_status: number | null;
  last_error: string | null;
}

describe.skipIf(chromiumPath === null)("a project's turns, usage, events and deliveries in the console", () => {
  let stack: ConsoleStack;
  let receiver: WebhookHandler;
  let toolHandler: WebhookHandler;
  let projectId: string;
  let adminKey: string;
  const send = (method: string, path: string, body?: unknown) =>
    stack.control.call(`/api/projects/${projectId}${path}`, { method, key: adminKey, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const read = async <T>(path: string) => json<T>(await send('GET', path), 200);

  // The model's answers, in order, for the turns this suite runs; the titles the runtime asks for after a
  // conversation's first turn (at a time of its own) are answered aside, so they take none of these.
  const answers: ChatReply[] = [];
  const answer = (request: ChatRequest): ChatReply => {
    const last = request.messages.at(-1)?.content;
    if (typeof last === 'string' && last.startsWith('Give this conversation a title')) return 'A short title';
    return answers.shift() ?? 'Fine.';
  };

  beforeAll(async () => {
    stack = await startConsoleStack();
    receiver = await WebhookHandler.start();
    toolHandler = await WebhookHandler.start();
    stack.provider.script(...Array.from({ length: 50 }, () => answer));

    const { control } = stack.control;
    const { account } = await control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const orgId = (await control.accounts.orgsOf(account.id))[0]!.id;
    const project = await control.projects.create(orgId, account.id, 'activity demo');
    projectId = project.id;
    adminKey = (await control.keys.create({ kind: 'account', accountId: account.id }, project.id, { scope: 'admin', name: 'admin' })).key;
    const capabilities = ['chat', 'tasks:read', 'tasks:write', 'webhook_tools'];
    await json(await send('PATCH', '', { ceiling: { capabilities } }), 200);
    await json(await send('POST', '/providers', { provider: 'openai_compatible', models: [MODEL], values: { api_key: stack.provider.apiKey, base_url: stack.provider.url } }), 201);
    await json(
      await send('POST', '/webhook-tools', {
        name: 'lookup_order',
        description: 'Look up an order by its id.',
        parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
        url: `${toolHandler.url}/orders`,
        requiresApproval: false,
      }),
      201,
    );
    await json(await send('PUT', '/webhook', { url: `${receiver.url}/hooks` }), 200);
    const version = (await control.projects.configurationDocument(projectId))!.version;
    await eventually(async () => (await stack.runtime.runtime.configurations.load(project.tenant_id))?.version === version, { what: `configuration version ${version} on the runtime` });
    const token = (await json<{ access_token: string }>(await send('POST', '/token', { subject: 'acme:alice', capabilities }), 200)).access_token;
    const chat = (message: string) => stack.runtime.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message }) });

    // A scheduled task fires: its two events go to the receiver, which fails the first attempt it sees.
    receiver.reply({ status: 500, body: 'not yet' }, { status: 204 });
    answers.push('Morning report sent.');
    await json(await stack.runtime.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ prompt: 'Send the morning report.', run_at: new Date(Date.now() + 500).toISOString() }) }), 201);
    await eventually(async () => (await read<{ deliveries: Delivery[] }>('/events')).deliveries.length === 2, { what: "the task's two events" });

    // Chat turns: one answered, one calling the webhook tool, then one the provider refuses.
    answers.push('Hello there.');
    await json(await chat('Hello'), 200);
    toolHandler.reply({ status: 200, body: 'Shipped on 3 March.' });
    answers.push({ toolCalls: [{ id: 'call_1', name: 'lookup_order', arguments: { order_id: 'A-1' } }] }, 'It shipped.');
    expect((await json<{ content: string }>(await chat('Where is A-1?'), 200)).content).toBe('It shipped.');
    answers.push({ status: 400, message: 'boom: the request was refused' });
    expect((await chat('This one fails')).status).not.toBe(200);

    // Everything has settled: the failed event delivered on its retry (about 5 s later), the titles written.
    await eventually(
      async () => {
        const { deliveries } = await read<{ deliveries: Delivery[] }>('/events');
        return deliveries.every((delivery) => delivery.status === 'delivered') && deliveries.some((delivery) => delivery.attempts === 2);
      },
      { what: 'both events delivered, one on its second attempt', timeoutMs: 30_000 },
    );
    await eventually(
      async () => {
        // (`since` moves with the clock: the counts are compared.)
        const counts = async () => JSON.stringify((await read<Usage>('/usage')).by_model);
        const before = await counts();
        await new Promise((settle) => setTimeout(settle, 700));
        return before === (await counts());
      },
      { what: 'usage that no longer changes' },
    );
  }, 180_000);
  afterAll(async () => {
    await receiver?.stop();
    await toolHandler?.stop();
    await stack?.stop();
  });

  /** The section of the page under the heading `name`. */
  const part = (page: Page, name: string) => page.locator('section').filter({ has: page.getByRole('heading', { level: 2, name, exact: true }) });

  /** The first list of figures in `section`, as term → description. */
  async function figures(section: Locator): Promise<Record<string, string>> {
    const list = section.locator('dl.figures').first();
    const terms = await list.locator('dt').allTextContents();
    const values = await list.locator('dd').allTextContents();
    return Object.fromEntries(terms.map((term, i) => [term, values[i]!.trim()]));
  }

  /** A number as the page writes it (in the browser's locale). */
  const shown = (page: Page, value: number) => inPage<string>(page, `(${value}).toLocaleString()`);

  async function openSection(page: Page, label: string): Promise<void> {
    await page.getByRole('navigation', { name: 'Project sections' }).getByRole('link', { name: label, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  }

  async function openProject(page: Page, name = 'activity demo'): Promise<void> {
    await page.goto(stack.url);
    await signIn(page);
    await page.getByRole('link', { name, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  }

  it('shows turn health, usage, outcomes and caps as the API answers them, with charts named by their figures', async () => {
    const page = await stack.browser.context.newPage();
    const { problems, violations } = await watchPage(page);
    await openProject(page);
    await openSection(page, 'Turns and usage');

    // Turn health: the figures are the API's, and the failed turn is the last error.
    const health = await read<TurnHealth>('/turns');
    expect(health.errored).toBeGreaterThanOrEqual(1);
    expect(health.consecutive_errors).toBe(1);
    expect(health.total).toBeGreaterThanOrEqual(4);
    const turnHealth = part(page, 'Turn health');
    await turnHealth.locator('dl.figures').waitFor();
    const healthShown = await figures(turnHealth);
    expect(healthShown).toMatchObject({ Turns: await shown(page, health.total), Failed: await shown(page, health.errored), 'Failed in a row': await shown(page, health.consecutive_errors) });
    expect(healthShown['Last error']).toContain(health.last_error!.message);
    expect(healthShown['Last success']).not.toBe('none');
    const outcomeChart = turnHealth.getByRole('img', { name: `Turns in the last 24 hours by outcome: failed ${health.errored}, did not fail ${health.total - health.errored}` });
    expect(await outcomeChart.count()).toBe(1);
    // The same figures are in a table under the chart.
    await turnHealth.getByText('Figures of “Turns in the last 24 hours by outcome”').click();
    await turnHealth.getByRole('row', { name: `failed ${health.errored}` }).waitFor();

    // Usage over the default period (24 hours), then over 7 days: the API's figures, a chart per model.
    const usagePart = part(page, 'Usage and costs');
    for (const period of ['24h', '7d'] as const) {
      if (period === '7d') await page.getByLabel('Period').selectOption('7d');
      const usage = await read<Usage>(`/usage?window=${period}`);
      expect(usage.requests).toBe(health.total);
      expect(usage.by_model.map((row) => row.model)).toEqual([MODEL]);
      const expected = {
        Turns: await shown(page, usage.requests),
        'Model calls': await shown(page, usage.model_calls),
        'Input tokens': await shown(page, usage.input_tokens),
        'Output tokens': await shown(page, usage.output_tokens),
      };
      await expect.poll(async () => figures(usagePart)).toMatchObject(expected);
      const name = period === '24h' ? 'the last 24 hours' : 'the last 7 days';
      expect(await usagePart.getByRole('img', { name: `Model calls by model in ${name}: ${MODEL} ${await shown(page, usage.model_calls)}` }).count()).toBe(1);
      const tokens = usage.by_model[0]!.input_tokens + usage.by_model[0]!.output_tokens;
      expect(await usagePart.getByRole('img', { name: `Tokens by model in ${name} (input and output): ${MODEL} ${await shown(page, tokens)}` }).count()).toBe(1);
      expect(await usagePart.getByRole('img', { name: new RegExp(`^Model calls by purpose in ${name}: .*turn `) }).count()).toBe(1);
      // No price is registered: the spend is said to be unknown, not drawn as zero.
      expect((await figures(usagePart)).Spend).toMatch(/^unknown/);
    }

    // Outcomes and latency over the same period.
    const observability = await read<Observability>('/observability?window=7d');
    const outcomes = part(page, 'Turn outcomes and latency');
    await expect.poll(async () => figures(outcomes)).toMatchObject({ Turns: await shown(page, observability.requests), Failed: await shown(page, observability.errors) });
    const statuses = Object.entries(observability.by_status)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, turns]) => `${status} ${turns}`)
      .join(', ');
    expect(await outcomes.getByRole('img', { name: `Turns by status in the last 7 days: ${statuses}` }).count()).toBe(1);
    expect(await outcomes.getByRole('img', { name: /^Turn latency in the last 7 days \(percentiles of turns that ended\): p50 [\d,.]+ ms, p95/ }).count()).toBe(1);

    // The caps: none set.
    expect(await figures(part(page, 'Usage caps'))).toEqual({ 'Model calls per minute': 'no cap', 'Tokens per minute': 'no cap', Spend: 'no cap' });

    // Every chart is an image with a name; axe finds nothing serious with a table opened.
    const charts = page.locator('svg');
    expect(await charts.count()).toBeGreaterThanOrEqual(6);
    for (const chart of await charts.all()) {
      expect(await chart.getAttribute('role')).toBe('img');
      expect(await chart.getAttribute('aria-label')).toMatch(/: /);
    }
    expect(await seriousViolations(page)).toEqual([]);
    expect(await violations()).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('lists event deliveries and tool calls as the API does, redelivers an event, and rotates the signing secret after naming it', async () => {
    const page = await stack.browser.context.newPage();
    await stack.browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.control.url });
    const { problems, violations } = await watchPage(page);
    await openProject(page);
    await openSection(page, 'Events and deliveries');

    // The webhook URL in force.
    await part(page, 'Webhook').getByText(`${receiver.url}/hooks`).waitFor();

    // The deliveries: one row each, with the API's status and attempts; the retried one shows its first failure.
    const deliveries = (await read<{ deliveries: Delivery[] }>('/events')).deliveries;
    const table = part(page, 'Event deliveries').getByRole('table');
    await table.waitFor();
    const rows = table.locator('tbody tr');
    expect(await rows.count()).toBe(deliveries.length);
    for (const [i, delivery] of deliveries.entries()) {
      const cells = await rows.nth(i).getByRole('cell').allTextContents();
      expect(cells[0]).toContain(delivery.type);
      expect(cells[2]).toMatch(new RegExp(`^${delivery.status}`));
      expect(cells[3]).toMatch(new RegExp(`^${delivery.attempt_log.length} attempts? of `));
      expect(cells[4]).toBe(delivery.last_error ?? `HTTP ${delivery.last_status}`);
    }
    const retried = deliveries.find((delivery) => delivery.attempts === 2)!;
    const retriedRow = rows.nth(deliveries.indexOf(retried));
    await retriedRow.locator('summary').click();
    await retriedRow.getByText(/HTTP 500 \(the receiver answered HTTP 500: not yet\)/).waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    // Redeliver: the page says what it did, and the API shows a new attempt, delivered.
    const sent = receiver.requests.length;
    const button = page.getByRole('button', { name: `Redeliver ${retried.type} delivery …${retried.id.slice(-6)}` });
    await button.click();
    await page.getByRole('status').filter({ hasText: `Sent ${retried.type} delivery …${retried.id.slice(-6)} again` }).waitFor();
    await eventually(() => receiver.requests.length > sent, { what: 'the redelivery at the receiver' });
    const after = await eventually(async () => {
      const again = (await read<{ deliveries: Delivery[] }>('/events')).deliveries.find((delivery) => delivery.id === retried.id)!;
      return again.status === 'delivered' && again.attempt_log.length === 3 ? again : undefined;
    }, { what: 'the redelivered event delivered, with its third attempt logged' });
    expect(after.attempts).toBe(1); // a fresh budget of attempts; the log keeps the earlier two
    // The page reads the list again while the delivery is pending, and shows the new attempt.
    await expect.poll(async () => (await retriedRow.getByRole('cell').nth(2).textContent())?.startsWith('delivered'), { timeout: 15_000 }).toBe(true);
    await retriedRow.locator('details ol li').nth(2).waitFor();
    expect(await retriedRow.getByRole('cell').nth(3).textContent()).toMatch(/^3 attempts, 1 since sent again/);

    // The filter narrows the list as the API's status parameter does.
    await page.getByLabel('Status', { exact: true }).selectOption('dead');
    await part(page, 'Event deliveries').getByText('No dead deliveries.').waitFor();
    expect((await read<{ deliveries: Delivery[] }>('/events?status=dead')).deliveries).toEqual([]);
    await page.getByLabel('Status', { exact: true }).selectOption('');
    await table.waitFor();

    // The webhook tool's call, as the API lists it.
    const calls = (await read<{ deliveries: { tool: string; status: number; result: string }[] }>('/webhook-tools/deliveries')).deliveries;
    expect(calls).toHaveLength(1);
    const toolRows = part(page, 'Webhook tool calls').locator('tbody tr');
    expect(await toolRows.count()).toBe(1);
    const toolCells = await toolRows.first().getByRole('cell').allTextContents();
    expect(toolCells.slice(1, 4)).toEqual(['lookup_order', 'acme:alice', `HTTP ${calls[0]!.status}`]);
    expect(toolCells[6]).toBe(calls[0]!.result);

    // The signing secret: hidden until asked for; a rotation is confirmed by name and shows the new one.
    const secretPart = part(page, 'Signing secret');
    const before = (await read<{ webhook_secret: string }>('/webhook-secret')).webhook_secret;
    expect(await page.content()).not.toContain(before);
    await secretPart.getByRole('button', { name: 'Show the secret' }).click();
    expect((await secretPart.getByLabel('Signing secret value').textContent())?.trim()).toBe(before);
    await secretPart.getByRole('button', { name: 'Rotate the webhook signing secret' }).click();
    const dialog = page.getByRole('dialog', { name: 'Rotate the webhook signing secret?' });
    await dialog.waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Rotate the webhook signing secret' }).click();
    const rotated = page.getByRole('region', { name: 'New signing secret' });
    const value = (await rotated.getByLabel('New signing secret value').textContent())!.trim();
    expect(value).toMatch(/^whsec_/);
    expect(value).not.toBe(before);
    expect((await read<{ webhook_secret: string }>('/webhook-secret')).webhook_secret).toBe(value);
    await rotated.getByRole('button', { name: 'Copy new signing secret' }).click();
    expect(await inPage<string>(page, 'navigator.clipboard.readText()')).toBe(value);
    await rotated.getByRole('button', { name: 'I have copied it' }).click();
    await rotated.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(value);
    expect(await seriousViolations(page)).toEqual([]);

    // The webhook URL: cleared after a confirmation naming it, then set again from the form.
    const webhookPart = part(page, 'Webhook');
    await webhookPart.getByRole('button', { name: 'Clear the webhook URL' }).click();
    await page.getByRole('dialog', { name: 'Clear the webhook URL?' }).getByRole('button', { name: 'Clear the webhook URL' }).click();
    await webhookPart.getByText('No webhook URL').waitFor();
    expect(await read('/webhook')).toEqual({ url: null });
    await webhookPart.getByLabel('Webhook URL', { exact: true }).fill(`${receiver.url}/hooks/again`);
    await webhookPart.getByRole('button', { name: 'Set webhook URL' }).click();
    await webhookPart.getByText(`${receiver.url}/hooks/again`).waitFor();
    expect(await read('/webhook')).toEqual({ url: `${receiver.url}/hooks/again` });

    expect(await violations()).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('says plainly that a new project has no turns, usage, events or tool calls yet, drawing no empty chart', async () => {
    const { control } = stack.control;
    const { account, token } = await control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
    const quiet = await control.projects.create((await control.accounts.orgsOf(account.id))[0]!.id, account.id, 'quiet project');
    await eventually(async () => (await stack.control.call(`/api/projects/${quiet.id}/turns`, { token })).status === 200, { what: "the new project's runtime" });
    const page = await stack.browser.context.newPage();
    const { problems, violations } = await watchPage(page);
    await openProject(page, 'quiet project');
    await openSection(page, 'Turns and usage');
    await part(page, 'Turn health').getByText('No turns in the last 24 hours.').waitFor();
    await part(page, 'Usage and costs').getByText('No usage in the last 24 hours: the project ran no turns and called no model.').waitFor();
    await part(page, 'Turn outcomes and latency').getByText('No turns in the last 24 hours.').waitFor();
    expect(await page.locator('svg').count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    await openSection(page, 'Events and deliveries');
    await part(page, 'Webhook').getByText("No webhook URL: events go nowhere but tasks' callback URLs.").waitFor();
    await part(page, 'Event deliveries').getByText('No events sent yet.').waitFor();
    await part(page, 'Webhook tool calls').getByText('No webhook tool has been called yet.').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    expect(await violations()).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  });
});
