// The agent's browser (SPEC.md capability `browser`, flag `enable_browser`; docs/decisions/0088): open a page, read it
// as an accessibility snapshot or as text, click, type, select, scroll and go back, in the conversation's own browser
// context. Each action answers with the page as it is afterwards (its snapshot, bounded), so the model sees what its
// action did; `browser_screenshot` shows a model that perceives images the page itself (docs/decisions/0091). Element
// references (`ref`) come from the latest snapshot. The turn engine knows none of this: it is a tool family.
import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { EGRESS_REFUSED_HEADER } from '@agentplane/lib/net/egress-proxy';
import type { FamilyTools, ToolCaller, ToolFamily } from '../chat/tool-registry.js';
import type { ServerTool, ServerToolOutcome } from '../chat/tools.js';
import type { BrowserPool, ConversationBrowser } from './pool.js';
import { pictureOf, screenshotOutcome } from './screenshot.js';
import { safeSnapshot } from './snapshot.js';

export const BROWSER_TOOL_NAMES = ['browser_open', 'browser_snapshot', 'browser_read', 'browser_click', 'browser_type', 'browser_select', 'browser_scroll', 'browser_back', 'browser_screenshot', 'browser_handoff'] as const;
/** How long a page handed over stays open for the person without anyone watching it, unless configured. */
export const DEFAULT_HANDOFF_MS = 15 * 60_000;
/** What the model gets of a snapshot or a page's text: the rest is said to be cut. */
export const MAX_BROWSER_RESULT_CHARS = 12_000;
/** How long an action, or a navigation, may take. */
const ACTION_MS = 10_000;
const NAVIGATION_MS = 20_000;
/** The most one call may take in all (a navigation, then the snapshot of what it led to), unless configured. */
export const DEFAULT_CALL_MS = 45_000;

const cut = (text: string) => (text.length > MAX_BROWSER_RESULT_CHARS ? `${text.slice(0, MAX_BROWSER_RESULT_CHARS)}\n[cut: ${text.length - MAX_BROWSER_RESULT_CHARS} more characters]` : text);

/** Where a conversation's browser is kept in the pool: under its tenant, then its owner (a forget closes theirs). */
export const conversationKey = (tenantId: string, subject: string, sessionId: string) => `${subjectPrefix(tenantId, subject)}${sessionId}`;
export const tenantPrefix = (tenantId: string) => `${tenantId}/`;
export const subjectPrefix = (tenantId: string, subject: string) => `${tenantPrefix(tenantId)}${encodeURIComponent(subject)}/`;

/** The page as the model reads it: where it is, its title, and its accessibility snapshot with element references. */
async function describe(page: Page): Promise<string> {
  const snapshot = await safeSnapshot(page, ACTION_MS);
  return cut(`Page: ${page.url()}\nTitle: ${await titleOf(page)}\n\n${snapshot}`);
}

/** The page's title, within the action time (a busy page never answers `page.title()`). */
export function titleOf(page: Page): Promise<string> {
  const title = page.title().catch(() => '');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(''), ACTION_MS)));
  return Promise.race([title, late]).finally(() => clearTimeout(timer));
}

/** An http(s) address the model gave, or what to tell it instead: other schemes (file:, chrome:...) are refused. */
function webAddress(tool: string, value: unknown): URL | string {
  try {
    const parsed = new URL(typeof value === 'string' ? value.trim() : '');
    if (parsed.protocol === 'http:' || parsed.protocol === 'https:') return parsed;
    return `${tool} opens http and https pages only, not ${parsed.protocol}`;
  } catch {
    return `${tool} needs an absolute http(s) \`url\`.`;
  }
}

/**
 * `act`'s outcome, within the call's deadline and the turn's cancel. A page's script can keep its renderer busy so
 * that calls without a timeout of their own (a title, a wheel) never return: past either, `stop` ends the page (which
 * ends its renderer) and the call fails, saying `busy`; a failure of `act` is said in words the model can act on.
 */
async function withinCall(
  act: () => Promise<ServerToolOutcome>,
  call: { callMs: number; signal: AbortSignal; doing: string; busy: string; stop: () => Promise<unknown> },
): Promise<ServerToolOutcome> {
  const { callMs, signal, doing } = call;
  let timer: NodeJS.Timeout | undefined;
  let cancel: (() => void) | undefined;
  const stopped = new Promise<'deadline' | 'cancelled'>((resolve) => {
    timer = setTimeout(() => resolve('deadline'), callMs);
    cancel = () => resolve('cancelled');
    signal.addEventListener('abort', cancel, { once: true });
  });
  try {
    const acting = act();
    acting.catch(() => undefined);
    const first = await Promise.race([acting, stopped]);
    if (first !== 'deadline' && first !== 'cancelled') return first;
    await call.stop().catch(() => undefined);
    if (first === 'cancelled') throw signal.reason;
    return { ok: false, message: `${doing} did not finish within ${Math.round(callMs / 1000)} s: ${call.busy}` };
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    return failure(error, doing);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', cancel!);
  }
}

/** An action's failure, said so the model can act on it (a stale ref, a refused address, a timeout). */
function failure(error: unknown, doing: string): ServerToolOutcome {
  const message = error instanceof Error ? error.message.split('\n')[0]! : String(error);
  if (/ERR_TUNNEL_CONNECTION_FAILED|ERR_PROXY|ERR_NAME_NOT_RESOLVED|ERR_CONNECTION_REFUSED/.test(message)) {
    return { ok: false, message: `${doing} failed: the address cannot be reached. The browser opens public web pages only (not this machine, private networks or cloud metadata).` };
  }
  if (/Timeout/i.test(message)) return { ok: false, message: `${doing} took too long and was given up (${message}).` };
  if (/ref|not found|resolve/i.test(message)) return { ok: false, message: `${doing} failed: ${message}. Take a new browser_snapshot: references change as the page does.` };
  return { ok: false, message: `${doing} failed: ${message}` };
}

function refArg(args: Record<string, unknown>): string | undefined {
  return typeof args.ref === 'string' && /^[a-z0-9]{1,32}$/i.test(args.ref) ? args.ref : undefined;
}

const NOTHING_TO_SEE = 'There is no page to see: open one with browser_open first.';

const refProperty = { ref: { type: 'string', description: 'The element, by its [ref=...] in the latest browser_snapshot (e.g. e12)' } };

/** The browser's tools for one turn; the conversation's context is held while a call runs. */
export function browserTools(pool: BrowserPool, caller: ToolCaller, callMs = DEFAULT_CALL_MS, handoffMs = DEFAULT_HANDOFF_MS): FamilyTools {
  const { principal } = caller;
  const needs = ['browser'] as const;
  /**
   * Runs `act` on the conversation's page, held for the call. Past the call's deadline, or when the turn is cancelled,
   * the page is closed (withinCall), and the next call opens a new one.
   */
  const onPage = async (sessionId: string, signal: AbortSignal, act: (page: Page, browser: ConversationBrowser) => Promise<ServerToolOutcome>, doing: string): Promise<ServerToolOutcome> => {
    const key = conversationKey(principal.tenantId, principal.claims.sub, sessionId);
    const browser = await pool.hold(key, signal);
    // The agent acts again: any hand-off of this page has ended (a turn waiting for the person makes no calls), so
    // the page goes back to the pool's usual idle rule.
    pool.keep(key, 0);
    let page: Page | undefined;
    try {
      return await withinCall(async () => act((page = await browser.page()), browser), {
        callMs,
        signal,
        doing,
        busy: 'the page was busy and has been closed. Open it again with browser_open.',
        stop: async () => page?.close({ runBeforeUnload: false }),
      });
    } finally {
      pool.release(browser);
    }
  };
  const tool = (name: string, description: string, properties: Record<string, unknown>, required: string[], run: ServerTool['run']): ServerTool => ({
    needs,
    definition: { name, description, parameters: { type: 'object', properties, required } },
    run,
  });
  const tools: ServerTool[] = [
    tool(
      'browser_open',
      "Open a web page in your browser for this conversation (cookies and logins stay for the conversation). Answers the page's accessibility snapshot, whose [ref=...] name elements for the other browser tools.",
      { url: { type: 'string', description: 'The http(s) address' } },
      ['url'],
      async (args, signal, context) => {
        const parsed = webAddress('browser_open', args.url);
        if (typeof parsed === 'string') return { ok: false, message: parsed };
        return onPage(
          context.sessionId,
          signal,
          async (page) => {
            const response = await page.goto(parsed.href, { waitUntil: 'domcontentloaded', timeout: NAVIGATION_MS });
            if (response?.headers()[EGRESS_REFUSED_HEADER] !== undefined) return failure(new Error('ERR_PROXY refused'), `Opening ${parsed.href}`);
            const status = response ? ` (HTTP ${response.status()})` : '';
            return { ok: true, text: `Opened${status}.\n${await describe(page)}` };
          },
          `Opening ${parsed.href}`,
        );
      },
    ),
    tool('browser_snapshot', "The current page's accessibility snapshot: its structure, text and [ref=...] of the elements you can act on.", {}, [], (_args, signal, context) =>
      onPage(context.sessionId, signal, async (page) => ({ ok: true, text: await describe(page) }), 'Reading the page'),
    ),
    tool('browser_read', "The current page's visible text, as a person reads it (for long articles; use browser_snapshot to act on the page).", {}, [], (_args, signal, context) =>
      onPage(
        context.sessionId,
        signal,
        async (page) => ({ ok: true, text: cut(`Page: ${page.url()}\nTitle: ${await titleOf(page)}\n\n${(await page.locator('body').innerText({ timeout: ACTION_MS })).replace(/\n{3,}/g, '\n\n')}`) }),
        'Reading the page',
      ),
    ),
    tool('browser_click', 'Click an element of the current page. Answers the page afterwards.', refProperty, ['ref'], (args, signal, context) => {
      const ref = refArg(args);
      if (!ref) return Promise.resolve({ ok: false, message: 'browser_click needs `ref`, from the latest browser_snapshot.' });
      return onPage(
        context.sessionId,
        signal,
        async (page) => {
          await page.getByRef(ref).click({ timeout: ACTION_MS });
          await page.waitForLoadState('domcontentloaded', { timeout: NAVIGATION_MS }).catch(() => undefined);
          return { ok: true, text: `Clicked ${ref}.\n${await describe(page)}` };
        },
        `Clicking ${ref}`,
      );
    }),
    tool(
      'browser_type',
      'Type text into a field of the current page, replacing what it holds; `submit` presses Enter after. Answers the page afterwards.',
      { ...refProperty, text: { type: 'string', description: 'What to type' }, submit: { type: 'boolean', description: 'Press Enter after typing (default false)' } },
      ['ref', 'text'],
      (args, signal, context) => {
        const ref = refArg(args);
        if (!ref || typeof args.text !== 'string') return Promise.resolve({ ok: false, message: 'browser_type needs `ref` (from the latest browser_snapshot) and `text`.' });
        const text = args.text.slice(0, 10_000);
        return onPage(
          context.sessionId,
          signal,
          async (page) => {
            const field = page.getByRef(ref);
            await field.fill(text, { timeout: ACTION_MS });
            if (args.submit === true) {
              await field.press('Enter', { timeout: ACTION_MS });
              await page.waitForLoadState('domcontentloaded', { timeout: NAVIGATION_MS }).catch(() => undefined);
            }
            return { ok: true, text: `Typed into ${ref}${args.submit === true ? ' and pressed Enter' : ''}.\n${await describe(page)}` };
          },
          `Typing into ${ref}`,
        );
      },
    ),
    tool(
      'browser_select',
      'Choose options of a select element of the current page, by their labels or values. Answers the page afterwards.',
      { ...refProperty, values: { type: 'array', items: { type: 'string' }, description: 'The options to choose' } },
      ['ref', 'values'],
      (args, signal, context) => {
        const ref = refArg(args);
        const values = Array.isArray(args.values) ? args.values.filter((value): value is string => typeof value === 'string').slice(0, 50) : [];
        if (!ref || values.length === 0) return Promise.resolve({ ok: false, message: 'browser_select needs `ref` (from the latest browser_snapshot) and `values`.' });
        return onPage(
          context.sessionId,
          signal,
          async (page) => {
            const chosen = await page.getByRef(ref).selectOption(values, { timeout: ACTION_MS });
            return { ok: true, text: `Chose ${chosen.join(', ')} in ${ref}.\n${await describe(page)}` };
          },
          `Choosing in ${ref}`,
        );
      },
    ),
    tool(
      'browser_scroll',
      'Scroll the current page up or down by about a screen (or to an element, with `ref`). Answers the page afterwards.',
      { direction: { type: 'string', enum: ['up', 'down'], description: 'Default down' }, ...refProperty },
      [],
      (args, signal, context) =>
        onPage(
          context.sessionId,
          signal,
          async (page) => {
            const ref = refArg(args);
            if (ref) await page.getByRef(ref).scrollIntoViewIfNeeded({ timeout: ACTION_MS });
            else await page.mouse.wheel(0, args.direction === 'up' ? -700 : 700);
            return { ok: true, text: `Scrolled ${ref ? `to ${ref}` : args.direction === 'up' ? 'up' : 'down'}.\n${await describe(page)}` };
          },
          'Scrolling',
        ),
    ),
    {
      needs: ['browser', 'input:image'],
      definition: {
        name: 'browser_screenshot',
        description:
          'See the current page as a picture (what is in view, or one element with `ref`): for layout, images, charts and anything the snapshot does not say. The picture is yours for this turn only; the text of the page is cheaper with browser_snapshot.',
        parameters: { type: 'object', properties: { ref: { type: 'string', description: 'Only this element, by its [ref=...] in the latest browser_snapshot (optional)' } }, required: [] },
      },
      run: (args, signal, context) => {
        const ref = refArg(args);
        if (args.ref !== undefined && !ref) return Promise.resolve({ ok: false, message: 'browser_screenshot takes `ref` from the latest browser_snapshot (e.g. e12), or no `ref` for the whole view.' });
        // A conversation without a page gets none opened just to be told so.
        if (!pool.has(conversationKey(principal.tenantId, principal.claims.sub, context.sessionId))) return Promise.resolve({ ok: false, message: NOTHING_TO_SEE });
        return onPage(
          context.sessionId,
          signal,
          async (page) => {
            if (page.url() === 'about:blank') return { ok: false, message: NOTHING_TO_SEE };
            return screenshotOutcome(await pictureOf(page, ACTION_MS, ref), { url: page.url(), title: await titleOf(page) }, ref);
          },
          ref ? `Picturing ${ref}` : 'Picturing the page',
        );
      },
    },
    tool('browser_back', 'Go back to the previous page of this conversation’s browser. Answers the page afterwards.', {}, [], (_args, signal, context) =>
      onPage(
        context.sessionId,
        signal,
        async (page) => {
          const response = await page.goBack({ waitUntil: 'domcontentloaded', timeout: NAVIGATION_MS });
          return response === null ? { ok: false, message: 'There is no earlier page to go back to.' } : { ok: true, text: `Went back.\n${await describe(page)}` };
        },
        'Going back',
      ),
    ),
    {
      needs: ['browser', 'browser_handoff'],
      definition: {
        name: 'browser_handoff',
        description:
          'Hand the current page to the person, with instructions, when a step is theirs to do: a log-in, a CAPTCHA, a payment, or a choice you must not make alone. The turn pauses while they use the page; when they are done, you go on with the page as they left it. Never ask them for passwords or codes in the chat instead.',
        parameters: {
          type: 'object',
          properties: {
            instructions: { type: 'string', description: 'What the person should do on the page, as they will read it' },
            read_only: { type: 'boolean', description: 'Only show them the page (they can watch, not act); default false' },
          },
          required: ['instructions'],
        },
      },
      run: (args, signal, context) => {
        const instructions = typeof args.instructions === 'string' ? args.instructions.trim().slice(0, 2_000) : '';
        if (instructions === '') return Promise.resolve({ ok: false, message: 'browser_handoff needs `instructions`: what the person should do on the page.' });
        const key = conversationKey(principal.tenantId, principal.claims.sub, context.sessionId);
        if (!pool.has(key)) return Promise.resolve({ ok: false, message: 'There is no page to hand over: open it with browser_open first.' });
        return onPage(
          context.sessionId,
          signal,
          async (page) => {
            const url = page.url();
            if (url === 'about:blank') return { ok: false, message: 'There is no page to hand over: open it with browser_open first.' };
            // Kept open while the person takes their time, whoever else needs the pool meanwhile, within the
            // tenant's and the person's share of the pool.
            if (!pool.keep(key, handoffMs)) {
              return { ok: false, message: 'The page cannot be handed over now: this person, or this project, already has as many pages handed over as the browser allows. Ask the person to finish those first.' };
            }
            const readOnly = args.read_only === true;
            return { ok: true, text: `Handed ${url} to the person${readOnly ? ' to look at' : ''}; the turn waits for them.`, handoff: { instructions, read_only: readOnly, url } };
          },
          'Handing the page over',
        );
      },
    },
  ];
  return { tools };
}

/**
 * `screenshot_url` (capability `web_search`, offered with the web tools where this runtime has a browser): a picture of
 * a public page, taken in a browser context of its own, never a conversation's, opened for the call and closed after
 * it, so its cookies are nobody's. The same guard and refusals as browser_open.
 */
export function screenshotUrlTool(pool: BrowserPool, caller: Pick<ToolCaller, 'principal'>, callMs = DEFAULT_CALL_MS): ServerTool {
  const { principal } = caller;
  return {
    needs: ['web_search', 'input:image'],
    definition: {
      name: 'screenshot_url',
      description:
        'See a web page as a picture: opens the address in a fresh browser (no logins, no cookies) and answers what is in view as an image. For layout, images and charts; read the text with browse_url.',
      parameters: { type: 'object', properties: { url: { type: 'string', description: 'The http(s) address of the page' } }, required: ['url'] },
    },
    run: async (args, signal) => {
      const parsed = webAddress('screenshot_url', args.url);
      if (typeof parsed === 'string') return { ok: false, message: parsed };
      const doing = `Picturing ${parsed.href}`;
      // Under the caller's part of the pool, so a tenant's erase or a forget closes it too; no conversation has this key.
      const key = `${subjectPrefix(principal.tenantId, principal.claims.sub)}~screenshot/${randomUUID()}`;
      const browser = await pool.hold(key, signal);
      try {
        const picture = async (): Promise<ServerToolOutcome> => {
          const page = await browser.page();
          const response = await page.goto(parsed.href, { waitUntil: 'domcontentloaded', timeout: NAVIGATION_MS });
          if (response?.headers()[EGRESS_REFUSED_HEADER] !== undefined) return failure(new Error('ERR_PROXY refused'), doing);
          // Its images and fonts, when they come soon; a page still loading is pictured as it is.
          await page.waitForLoadState('load', { timeout: ACTION_MS }).catch(() => undefined);
          return screenshotOutcome(await pictureOf(page, ACTION_MS), { url: page.url(), title: await titleOf(page) });
        };
        // Closing the context (below, however the call ends) ends the page, a busy one included.
        return await withinCall(picture, { callMs, signal, doing, busy: 'the page kept the browser busy.', stop: async () => undefined });
      } finally {
        pool.release(browser);
        await pool.closeMatching(key);
      }
    },
  };
}

/** The browser as a tool family of the turn; without a browser on this runtime it offers nothing. */
export function browserFamily(pool: BrowserPool | undefined, callMs = DEFAULT_CALL_MS, handoffMs = DEFAULT_HANDOFF_MS): ToolFamily {
  return {
    name: 'browser',
    forTurn: (caller) => {
      if (!pool) return [];
      // A new turn of the conversation ends any hand-off of its page (the next POST /chat does): the page goes back
      // to the pool's usual idle rule.
      if (caller.sessionId) pool.keep(conversationKey(caller.principal.tenantId, caller.principal.claims.sub, caller.sessionId), 0);
      return browserTools(pool, caller, callMs, handoffMs);
    },
  };
}
