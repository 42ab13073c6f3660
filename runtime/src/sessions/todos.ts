// The agent's plan for a conversation (SPEC.md capability `todo`, flag `enable_todo`; docs/decisions/0054): a
// `todo` tool that replaces the whole list each time it is called (so the plan is never half-updated), kept per
// conversation and gone with it, and `GET /chat/sessions/{id}/todos` for whoever may read the conversation.
import { sql, type Kysely } from 'kysely';
import type { ServerTool } from '../chat/tools.js';
import type { RuntimeSchema, TodoItem } from '../store/schema.js';

export const MAX_TODO_ITEMS = 50;
export const MAX_TODO_CHARS = 500;
const STATUSES = ['pending', 'in_progress', 'completed'] as const;

export class SessionTodos {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  /** The conversation's plan, in order; empty when the agent has kept none. */
  async of(tenantId: string, sessionId: string): Promise<TodoItem[]> {
    const row = await this.db.selectFrom('session_todos').select('items').where('tenant_id', '=', tenantId).where('session_id', '=', sessionId).executeTakeFirst();
    return row?.items ?? [];
  }

  async replace(tenantId: string, sessionId: string, items: TodoItem[]): Promise<void> {
    await this.db
      .insertInto('session_todos')
      .values({ session_id: sessionId, tenant_id: tenantId, items: JSON.stringify(items) })
      .onConflict((oc) => oc.column('session_id').doUpdateSet({ items: JSON.stringify(items), updated_at: sql<Date>`now()` }))
      .execute();
  }

  /** The `todo` tool of one caller's turns, offered under capability `todo`. */
  tool(tenantId: string): ServerTool {
    return {
      needs: ['todo'],
      definition: {
        name: 'todo',
        description:
          'Keep your plan for this conversation. Send the whole list each time: it replaces the one before. Use it for work of several steps: ' +
          'mark one item in_progress while you work on it and each completed as soon as it is done. The person can see the plan.',
        parameters: {
          type: 'object',
          properties: {
            items: {
              type: 'array',
              maxItems: MAX_TODO_ITEMS,
              items: {
                type: 'object',
                properties: {
                  content: { type: 'string', description: `The step, in a sentence (at most ${MAX_TODO_CHARS} characters)` },
                  status: { type: 'string', enum: [...STATUSES] },
                },
                required: ['content', 'status'],
              },
            },
          },
          required: ['items'],
        },
      },
      run: async (args, _signal, context) => {
        const items = planOf(args.items);
        if (typeof items === 'string') return { ok: false, message: items };
        await this.replace(tenantId, context.sessionId, items);
        const done = items.filter((item) => item.status === 'completed').length;
        const lines = items.map((item) => `${item.status === 'completed' ? '[x]' : item.status === 'in_progress' ? '[~]' : '[ ]'} ${item.id}. ${item.content}`);
        return { ok: true, text: [`Plan saved: ${items.length} item${items.length === 1 ? '' : 's'}, ${done} completed.`, ...lines].join('\n') };
      },
    };
  }
}

/** The model's list as items, or what is wrong with it in words it can act on. */
function planOf(value: unknown): TodoItem[] | string {
  if (!Array.isArray(value)) return 'todo needs `items`: the whole plan, as a list of {content, status}.';
  if (value.length > MAX_TODO_ITEMS) return `A plan holds at most ${MAX_TODO_ITEMS} items; merge some steps.`;
  const items: TodoItem[] = [];
  for (const [index, raw] of value.entries()) {
    const item = raw as { content?: unknown; status?: unknown };
    const content = typeof item?.content === 'string' ? item.content.trim() : '';
    if (content === '' || content.length > MAX_TODO_CHARS) return `Item ${index + 1} needs \`content\` of 1-${MAX_TODO_CHARS} characters.`;
    if (content.includes('\u0000') || !content.isWellFormed()) return `Item ${index + 1} holds characters that cannot be stored; write it again in plain text.`;
    if (!STATUSES.includes(item.status as TodoItem['status'])) return `Item ${index + 1} needs a \`status\`: one of ${STATUSES.join(', ')}.`;
    items.push({ id: String(index + 1), content, status: item.status as TodoItem['status'] });
  }
  return items;
}
