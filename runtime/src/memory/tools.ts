// The agent's memory tools (SPEC.md capability `memory`, flag `enable_memory`; docs/decisions/0044): remember a
// fact about the person, recall what was remembered (with the wiki pages they see), forget an item, and write a
// page of the project's wiki. Each runs for the person whose turn it is.
import type { Principal } from '../auth/authenticate.js';
import type { ServerTool } from '../chat/tools.js';
import { MAX_MEMORY_CHARS, MAX_WIKI_CHARS, MAX_WIKI_TITLE_CHARS, type MemoryService } from './service.js';

export const MEMORY_TOOL_NAMES = ['remember', 'recall', 'forget', 'write_wiki_page'] as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Text the model sent, trimmed; undefined when it is not text or is empty. */
const textArg = (value: unknown): string | undefined => (typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined);
/** No NUL and no lone surrogate is ever stored (decision 0027), whoever wrote the text. */
const storable = (text: string) => !text.includes('\u0000') && text.isWellFormed();

export function memoryTools(memory: MemoryService, principal: Principal): ServerTool[] {
  const needs = ['memory'] as const;
  return [
    {
      needs,
      definition: {
        name: 'remember',
        description:
          'Keep one durable fact about this person for later conversations: a preference, a detail of their situation, a decision they made. ' +
          'One short, self-contained statement per call. Do not keep secrets, passwords or anything they asked you not to keep.',
        parameters: {
          type: 'object',
          properties: { content: { type: 'string', description: `The fact, in a sentence (at most ${MAX_MEMORY_CHARS} characters)` } },
          required: ['content'],
        },
      },
      async run(args) {
        const content = textArg(args.content);
        if (!content) return { ok: false, message: 'remember needs `content`: the fact to keep, in a sentence.' };
        if (content.length > MAX_MEMORY_CHARS) return { ok: false, message: `That is ${content.length} characters; keep a fact in at most ${MAX_MEMORY_CHARS}.` };
        if (!storable(content)) return { ok: false, message: 'That text holds characters that cannot be stored; say it again in plain text.' };
        const item = await memory.remember(principal, content, null);
        return { ok: true, text: `Remembered (id ${item.id}).` };
      },
    },
    {
      needs,
      definition: {
        name: 'recall',
        description: 'Look up what you remember about this person, and the project wiki pages they may read, by meaning and by words.',
        parameters: {
          type: 'object',
          properties: {
            query: { type: 'string', description: 'What to look for' },
            k: { type: 'integer', minimum: 1, maximum: 20, description: 'How many of each (default 5)' },
          },
          required: ['query'],
        },
      },
      async run(args) {
        const query = textArg(args.query)?.slice(0, 1_000);
        if (!query) return { ok: false, message: 'recall needs a `query`: what to look for.' };
        const k = typeof args.k === 'number' && Number.isInteger(args.k) ? args.k : 5;
        const { memories, pages } = await memory.recall(principal, query, k);
        if (memories.length === 0 && pages.length === 0) return { ok: true, text: 'Nothing remembered matches.' };
        const lines = [
          ...memories.map((item) => `- (memory ${item.id}, ${item.created_at.slice(0, 10)}) ${item.content}`),
          ...pages.map((page) => `- (wiki page "${page.title}", updated ${page.updated_at.slice(0, 10)})\n${page.content.slice(0, 4_000)}`),
        ];
        return { ok: true, text: lines.join('\n') };
      },
    },
    {
      needs,
      definition: {
        name: 'forget',
        description: 'Forget one thing you remembered about this person, by the id recall gave; do it when they ask you to, or when it is no longer true.',
        parameters: { type: 'object', properties: { id: { type: 'string', description: 'The memory id' } }, required: ['id'] },
      },
      async run(args) {
        const id = textArg(args.id);
        if (!id || !UUID.test(id)) return { ok: false, message: 'forget needs the `id` of a memory, as recall shows it.' };
        try {
          await memory.forget(principal, id.toLowerCase());
          return { ok: true, text: `Forgotten (id ${id}).` };
        } catch (error) {
          return { ok: false, message: `Could not forget ${id}: ${(error as Error).message}` };
        }
      },
    },
    {
      needs,
      definition: {
        name: 'write_wiki_page',
        description:
          'Write a page of the project wiki, shared with the people this person works with: knowledge worth keeping for everyone (a procedure, an answer found), never private details. ' +
          'Writing a title that exists replaces that page.',
        parameters: {
          type: 'object',
          properties: {
            title: { type: 'string', description: `The page's title (at most ${MAX_WIKI_TITLE_CHARS} characters)` },
            content: { type: 'string', description: `The page, in Markdown (at most ${MAX_WIKI_CHARS} characters)` },
          },
          required: ['title', 'content'],
        },
      },
      async run(args) {
        const title = textArg(args.title);
        const content = textArg(args.content);
        if (!title || !content) return { ok: false, message: 'write_wiki_page needs a `title` and the `content`.' };
        if (title.length > MAX_WIKI_TITLE_CHARS || content.length > MAX_WIKI_CHARS) {
          return { ok: false, message: `A page's title is at most ${MAX_WIKI_TITLE_CHARS} characters and its content at most ${MAX_WIKI_CHARS}.` };
        }
        if (!storable(title) || !storable(content)) return { ok: false, message: 'That text holds characters that cannot be stored; write it again in plain text.' };
        const page = await memory.writeWikiPage(principal, title, content);
        return { ok: true, text: `Wrote wiki page "${page.title}" (id ${page.id}).` };
      },
    },
  ];
}
