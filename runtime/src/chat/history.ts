// A conversation as the model sees it: the stored messages turned into model messages (every tool call answered,
// in the order providers require), then clamped to the token's context ceiling with a real tokenizer (o200k, what
// current OpenAI models use; for other vendors' models it is an estimate, not an exact count). The tokenizer's
// tables cost ~70 MiB and a quarter second to load: the first turn that clamps its history loads them, not the start.
import type { ModelMessage, ModelToolCall } from '../models/port.js';
import type { MessageRow, NewMessage } from '../sessions/conversations.js';
import { INPUT_STOPPED, INPUT_WITHHELD } from './guardrails.js';

/** What a call without a stored result is answered with (a fork, a cancel, or a crash cut the turn short). */
export const UNANSWERED_CALL = 'No result: this call was not completed.';

/** Every message and call costs a few tokens of framing beyond its text (OpenAI's published rule of thumb). */
export const MESSAGE_OVERHEAD = 4;

/** What a model's prompt is built from: a stored message, or one of the run's own not stored yet. */
export type HistoryMessage = Pick<MessageRow, 'role' | 'content' | 'tool_calls' | 'tool_call_id'>;

/** A message of the run's own as history, before its write has landed. */
export function historyMessage(message: NewMessage): HistoryMessage {
  return { role: message.role, content: message.content, tool_calls: message.toolCalls ?? null, tool_call_id: message.toolCallId ?? null };
}

/**
 * Model messages in conversation order. A tool message is placed right after the assistant message that made its
 * call, wherever it was stored (answers to a pause can arrive after a later user message), and a call with no
 * result gets one, so the sequence is always one a provider accepts.
 */
export function toModelMessages(rows: readonly HistoryMessage[]): ModelMessage[][] {
  const results = new Map<string, HistoryMessage>();
  for (const row of rows) if (row.role === 'tool' && row.tool_call_id) results.set(row.tool_call_id, row);
  const stopped = stoppedInputs(rows);
  const said = (row: HistoryMessage) => (stopped.has(row) ? INPUT_WITHHELD : row.content);
  const groups: ModelMessage[][] = [];
  for (const row of rows) {
    if (row.role === 'user') groups.push([{ role: 'user', content: said(row) }]);
    else if (row.role === 'assistant') {
      const calls: ModelToolCall[] = row.tool_calls ?? [];
      const group: ModelMessage[] = [{ role: 'assistant', content: row.content, ...(calls.length > 0 ? { toolCalls: calls } : {}) }];
      for (const call of calls) {
        const result = results.get(call.id);
        group.push({ role: 'tool', toolCallId: call.id, content: result ? said(result) : UNANSWERED_CALL });
      }
      groups.push(group);
    }
    // Tool messages travel with their call; one whose call is not stored (cannot happen through the engine) is dropped.
  }
  return groups;
}

/**
 * What the person said that an input guardrail stopped (docs/decisions/0064): the messages, steers and answers just
 * before an answer that says so. Kept in the conversation for people to read, never shown to the model again.
 */
function stoppedInputs(rows: readonly HistoryMessage[]): Set<HistoryMessage> {
  const stopped = new Set<HistoryMessage>();
  rows.forEach((row, i) => {
    if (row.role !== 'assistant' || !row.content.startsWith(INPUT_STOPPED)) return;
    for (let j = i - 1; j >= 0 && (rows[j]!.role === 'user' || rows[j]!.role === 'tool'); j--) stopped.add(rows[j]!);
  });
  return stopped;
}

let tokenizer: Promise<(text: string) => number> | undefined;

/** What a message costs in the context window, tool calls' names and arguments included. */
export async function loadTokensOf(): Promise<(message: ModelMessage) => number> {
  const countTokens = await (tokenizer ??= import('gpt-tokenizer').then((module) => module.countTokens));
  return (message) => {
    let text = message.content;
    if (message.role === 'assistant' && message.toolCalls) text += message.toolCalls.map((call) => call.name + call.arguments).join('');
    return countTokens(text) + MESSAGE_OVERHEAD;
  };
}

/**
 * The newest groups that fit in `maxTokens` together with the system prompt, oldest first. A group (a user message,
 * or an assistant message with its tool results) is kept or dropped whole; the newest group is always kept, since a
 * turn without its own message means nothing. Unset `maxTokens` keeps everything.
 */
export async function clampHistory(system: ModelMessage | null, groups: readonly ModelMessage[][], maxTokens: number | undefined): Promise<ModelMessage[]> {
  const head = system ? [system] : [];
  if (maxTokens === undefined) return [...head, ...groups.flat()];
  const tokensOf = await loadTokensOf();
  let budget = maxTokens - (system ? tokensOf(system) : 0);
  const kept: ModelMessage[][] = [];
  for (let i = groups.length - 1; i >= 0; i--) {
    const group = groups[i]!;
    const cost = group.reduce((sum, message) => sum + tokensOf(message), 0);
    if (kept.length > 0 && cost > budget) break;
    kept.unshift(group);
    budget -= cost;
  }
  return [...head, ...kept.flat()];
}
