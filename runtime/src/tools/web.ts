// Web search and page reads (SPEC.md capability `web_search`, flag `enable_web_search`; docs/decisions/0055). Search
// sits behind a small port with two adapters: Brave Search's API (a vendor, the project's key) and SearXNG's JSON
// API (an engine a customer hosts). A page is read through the guarded fetch (every redirect vetted, pinned
// addresses), within a size and a time limit, and its readable text taken out by Mozilla's Readability over
// linkedom. `screenshot_url` pictures a page in the browser, so it is offered with these where the runtime has one
// (runtime/src/browsers/tools.ts).
import { Parser } from 'htmlparser2';
import { storableText } from '@agentplane/lib/http/text';
import { cappedText, readUpTo } from '@agentplane/lib/net/capped';
import type { GuardedFetch } from '@agentplane/lib/net/guarded-fetch';
import type { ServerTool } from '../chat/tools.js';
import type { WebSearchSection } from '../tenants/schemas.js';

export interface SearchHit {
  title: string;
  url: string;
  snippet: string;
}

/** The search port: an engine that answers a query with ranked hits. */
export interface SearchEngine {
  search(query: string, count: number, signal?: AbortSignal): Promise<SearchHit[]>;
}

/** A search that failed, in words the model (or the admin trying the key) can act on. */
export class SearchFailed extends Error {}

/** What is kept of a page or a search as the tool result. */
export const MAX_WEB_RESULT_CHARS = 20_000;
/** The most of a page that is read. */
export const MAX_PAGE_BYTES = 2 * 1024 * 1024;
export const MAX_SEARCH_RESULTS = 10;
const DEFAULT_SEARCH_RESULTS = 5;
/** The most a search engine's answer may carry. */
const MAX_SEARCH_ANSWER_BYTES = 2 * 1024 * 1024;

async function answerOf(response: Response, vendor: string): Promise<unknown> {
  if (response.status === 401 || response.status === 403) throw new SearchFailed(`${vendor} refused the key (HTTP ${response.status})`);
  if (response.status === 429) throw new SearchFailed(`${vendor} is rate limiting this project's searches (HTTP 429); try again later`);
  if (!response.ok) throw new SearchFailed(`${vendor} answered HTTP ${response.status}`);
  let text: string;
  try {
    text = await cappedText(response, MAX_SEARCH_ANSWER_BYTES, vendor);
  } catch {
    throw new SearchFailed(`${vendor} answered more than ${MAX_SEARCH_ANSWER_BYTES / 1024 / 1024} MiB`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new SearchFailed(`${vendor} answered with something that is not JSON`);
  }
}

const text = (value: unknown) => (typeof value === 'string' ? storableText(value).replace(/<[^>]+>/g, '') : '');

/** Brave Search's web search API: `X-Subscription-Token`, `web.results[]`. */
export class BraveSearch implements SearchEngine {
  constructor(
    private readonly options: { baseUrl: string; apiKey: string; fetch: GuardedFetch },
  ) {}

  async search(query: string, count: number, signal?: AbortSignal): Promise<SearchHit[]> {
    const url = new URL('/res/v1/web/search', this.options.baseUrl);
    url.search = new URLSearchParams({ q: query, count: String(count) }).toString();
    const response = await this.options.fetch(url, { headers: { accept: 'application/json', 'x-subscription-token': this.options.apiKey }, ...(signal ? { signal } : {}) });
    const body = (await answerOf(response, 'Brave Search')) as { web?: { results?: Array<{ title?: unknown; url?: unknown; description?: unknown }> } };
    return (body.web?.results ?? []).slice(0, count).map((hit) => ({ title: text(hit.title), url: text(hit.url), snippet: text(hit.description) }));
  }
}

/** SearXNG's JSON API (`format=json`), as an instance the customer hosts serves it; a key, when set, as a bearer. */
export class SearxngSearch implements SearchEngine {
  constructor(private readonly options: { baseUrl: string; apiKey?: string | undefined; fetch: GuardedFetch }) {}

  async search(query: string, count: number, signal?: AbortSignal): Promise<SearchHit[]> {
    const url = new URL('search', this.options.baseUrl.endsWith('/') ? this.options.baseUrl : `${this.options.baseUrl}/`);
    url.search = new URLSearchParams({ q: query, format: 'json' }).toString();
    const headers: Record<string, string> = { accept: 'application/json', ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}) };
    const response = await this.options.fetch(url, { headers, ...(signal ? { signal } : {}) });
    const body = (await answerOf(response, 'The SearXNG instance')) as { results?: Array<{ title?: unknown; url?: unknown; content?: unknown }> };
    return (body.results ?? []).slice(0, count).map((hit) => ({ title: text(hit.title), url: text(hit.url), snippet: text(hit.content) }));
  }
}

export function searchEngineOf(section: WebSearchSection, fetch: GuardedFetch): SearchEngine {
  return section.provider === 'brave'
    ? new BraveSearch({ baseUrl: section.base_url, apiKey: section.api_key ?? '', fetch })
    : new SearxngSearch({ baseUrl: section.base_url, apiKey: section.api_key, fetch });
}

export class WebTools {
  /** `readMs`: the most a page read may take in all, its body read to the end (the fetch's own limit is on silence). */
  constructor(private readonly options: { fetch: GuardedFetch; searchFetch: GuardedFetch; readMs: number }) {}

  /** `web_search` (when the project chose a search engine) and `browse_url`, both under capability `web_search`. */
  for(section: WebSearchSection | undefined): ServerTool[] {
    const tools: ServerTool[] = [];
    if (section) {
      const engine = searchEngineOf(section, this.options.searchFetch);
      tools.push({
        needs: ['web_search'],
        definition: {
          name: 'web_search',
          description: 'Search the web. Answers the best results, each with its title, address and a snippet; read a page with browse_url before relying on it.',
          parameters: {
            type: 'object',
            properties: {
              query: { type: 'string', description: 'What to search for' },
              count: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_RESULTS, description: `How many results (default ${DEFAULT_SEARCH_RESULTS})` },
            },
            required: ['query'],
          },
        },
        run: async (args, signal) => {
          const query = typeof args.query === 'string' ? args.query.trim().slice(0, 400) : '';
          if (query === '') return { ok: false, message: 'web_search needs a `query`.' };
          const count = typeof args.count === 'number' && Number.isInteger(args.count) ? Math.min(MAX_SEARCH_RESULTS, Math.max(1, args.count)) : DEFAULT_SEARCH_RESULTS;
          try {
            const hits = await engine.search(query, count, signal);
            if (hits.length === 0) return { ok: true, text: `No results for "${query}".` };
            return { ok: true, text: hits.map((hit, i) => `${i + 1}. ${hit.title}\n${hit.url}\n${hit.snippet}`).join('\n\n').slice(0, MAX_WEB_RESULT_CHARS) };
          } catch (error) {
            if (signal.aborted) throw signal.reason;
            return { ok: false, message: `The search failed: ${error instanceof Error ? error.message : String(error)}` };
          }
        },
      });
    }
    tools.push({
      needs: ['web_search'],
      definition: {
        name: 'browse_url',
        description: "Read a web page: its title and readable text (navigation and clutter left out). Use it on an address from web_search or the person's message.",
        parameters: { type: 'object', properties: { url: { type: 'string', description: 'The http(s) address of the page' } }, required: ['url'] },
      },
      run: async (args, signal) => {
        const url = typeof args.url === 'string' ? args.url.trim() : '';
        if (!/^https?:\/\//i.test(url)) return { ok: false, message: 'browse_url needs an http(s) `url`.' };
        try {
          return { ok: true, text: await this.read(url, signal) };
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          return { ok: false, message: `Could not read ${url}: ${error instanceof Error ? error.message : String(error)}` };
        }
      },
    });
    return tools;
  }

  /** A page's title and readable text, within the size and time limits. */
  async read(url: string, signal?: AbortSignal): Promise<string> {
    const deadline = AbortSignal.timeout(this.options.readMs);
    try {
      return await this.readWithin(url, signal ? AbortSignal.any([signal, deadline]) : deadline);
    } catch (error) {
      if (deadline.aborted && !signal?.aborted) throw new Error(`the page did not answer within ${this.options.readMs} ms`);
      throw error;
    }
  }

  private async readWithin(url: string, signal: AbortSignal): Promise<string> {
    const response = await this.options.fetch(url, { headers: { accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5', 'user-agent': 'agentplane-browse' }, signal });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`the page answered HTTP ${response.status}`);
    }
    const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const { text: body, cut } = await readUpTo(response, MAX_PAGE_BYTES);
    const where = response.url && response.url !== url ? ` (redirected to ${response.url})` : '';
    const note = cut ? `\n\n[the page is larger than ${MAX_PAGE_BYTES / 1024 / 1024} MiB: only its start was read]` : '';
    if (type === 'text/html' || type === 'application/xhtml+xml' || type === '') {
      // Readability walks the DOM with work that grows much faster than the page on deep nesting (a page of 1,000
      // nested elements took seconds, the process blocked): a page past these bounds is read as its plain text.
      const shape = htmlShape(body);
      let title = shape.title;
      let content = shape.text;
      if (shape.depth <= MAX_READABLE_DEPTH && shape.elements <= MAX_READABLE_ELEMENTS) {
        const { parseHTML } = await import('linkedom');
        const { Readability } = await import('@mozilla/readability');
        const { document } = parseHTML(body);
        const article = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0], { maxElemsToParse: MAX_READABLE_ELEMENTS }).parse();
        title = storableText(article?.title ?? document.title ?? '').trim();
        content = article?.textContent ?? document.body?.textContent ?? '';
      }
      return `${title === '' ? '' : `# ${title}\n`}${url}${where}\n\n${normalize(content)}${note}`.slice(0, MAX_WEB_RESULT_CHARS);
    }
    if (type.startsWith('text/') || type === 'application/json' || type.endsWith('+json') || type.endsWith('+xml') || type === 'application/xml') {
      return `${url}${where}\n\n${normalize(body)}${note}`.slice(0, MAX_WEB_RESULT_CHARS);
    }
    throw new Error(`its content type ${type} is not a page that can be read as text`);
  }
}

/** Deepest nesting and most elements a page may have to be read with Readability. */
const MAX_READABLE_DEPTH = 100;
const MAX_READABLE_ELEMENTS = 10_000;
/** Elements whose text is not the page's. */
const SILENT = new Set(['script', 'style', 'noscript', 'template', 'svg']);

/** A page's nesting depth, element count, title and plain text, in one streaming pass (no tree, no recursion). */
function htmlShape(html: string): { depth: number; elements: number; title: string; text: string } {
  let depth = 0;
  let deepest = 0;
  let elements = 0;
  let silent = 0;
  let inTitle = false;
  let title = '';
  const text: string[] = [];
  const parser = new Parser(
    {
      onopentag(name) {
        elements += 1;
        deepest = Math.max(deepest, ++depth);
        if (SILENT.has(name)) silent += 1;
        if (name === 'title') inTitle = true;
        if (name === 'p' || name === 'br' || name === 'div' || /^h[1-6]$/.test(name) || name === 'li') text.push('\n');
      },
      onclosetag(name) {
        depth = Math.max(0, depth - 1);
        if (SILENT.has(name)) silent = Math.max(0, silent - 1);
        if (name === 'title') inTitle = false;
      },
      ontext(data) {
        if (inTitle) title += data;
        else if (silent === 0) text.push(data);
      },
    },
    { decodeEntities: true },
  );
  parser.write(html);
  parser.end();
  return { depth: deepest, elements, title: storableText(title).trim(), text: text.join('') };
}

/** Runs of blank space made one space, and at most one blank line between paragraphs. */
function normalize(value: string): string {
  return storableText(value)
    .replace(/[ \t\f\v\r]+/g, ' ')
    .replace(/ ?\n ?/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
