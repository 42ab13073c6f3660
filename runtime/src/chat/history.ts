// A conversation as the model sees it: the stored messages turned into model messages (every tool call answered,
// in the order providers require), then clamped to the token's context ceiling with a real tokenizer (o200k, what
// current OpenAI models use; for other vendors' models it is an estimate, not an exact count). The tokenizer's
// tables cost ~70 MiB and a quarter second to load: the first turn that clamps its history loads them, not the start.
import type { ModelImage, ModelMessage, ModelToolCall } from '../models/port.js';
import type { MessageRow, NewMessage } from '../sessions/conversations.js';
import { INPUT_STOPPED, INPUT_WITHHELD } from './guardrails.js';

/** What a call without a stored result is answered with (a fork, a cancel, or a crash cut the turn short). */
export const UNANSWERED_CALL = 'No result: this call was not completed.';

/** Every message and call costs a few tokens of framing beyond its text (OpenAI's published rule of thumb). */
export const MESSAGE_OVERHEAD = 4;

/**
 * What a picture costs in the context window: a 1280×800 screenshot at OpenAI's high detail (six 512-pixel tiles of
 * 170 tokens, and 85). Other vendors count differently; this is the estimate the clamp and the caps work with.
 */
export const IMAGE_TOKENS = 1_105;

/**
 * The most pictures one prompt carries: the newest tool results' (docs/decisions/0091). Older results keep their text,
 * which says what the picture was.
 */
export const MAX_PROMPT_IMAGES = 4;

/**
 * What a model's prompt is built from: a stored message, or one of the run's own not stored yet. `images` are a tool
 * result's pictures, held in the run's memory only: a stored message never has them, so a later turn does not see them.
 */
export type HistoryMessage = Pick<MessageRow, 'role' | 'content' | 'tool_calls' | 'tool_call_id'> & { images?: ModelImage[] };

/** A message of the run's own as history, before its write has landed, with a tool result's pictures. */
export function historyMessage(message: NewMessage, images?: ModelImage[]): HistoryMessage {
  return {
    role: message.role,
    content: message.content,
    tool_calls: message.toolCalls ?? null,
    tool_call_id: message.toolCallId ?? null,
    ...(images && images.length > 0 ? { images } : {}),
  };
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
  const pictured = newestPictures(rows);
  const said = (row: HistoryMessage) => (stopped.has(row) ? INPUT_WITHHELD : row.content);
  const groups: ModelMessage[][] = [];
  for (const row of rows) {
    if (row.role === 'user') groups.push([{ role: 'user', content: said(row) }]);
    else if (row.role === 'assistant') {
      const calls: ModelToolCall[] = row.tool_calls ?? [];
      const group: ModelMessage[] = [{ role: 'assistant', content: row.content, ...(calls.length > 0 ? { toolCalls: calls } : {}) }];
      for (const call of calls) {
        const result = results.get(call.id);
        const images = result && pictured.get(result);
        group.push({ role: 'tool', toolCallId: call.id, content: result ? said(result) : UNANSWERED_CALL, ...(images ? { images } : {}) });
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

/**
 * Lets go of the pictures no prompt of this run can carry any more (all but the newest MAX_PROMPT_IMAGES): a run
 * that takes many screenshots holds four, not all of them.
 */
export function forgetOlderPictures(rows: HistoryMessage[]): void {
  const kept = newestPictures(rows);
  for (const row of rows) {
    if (!row.images) continue;
    const images = kept.get(row);
    if (images) row.images = images;
    else delete row.images;
  }
}

/** The pictures a prompt carries: the newest MAX_PROMPT_IMAGES of the tool results'. */
function newestPictures(rows: readonly HistoryMessage[]): Map<HistoryMessage, ModelImage[]> {
  const kept = new Map<HistoryMessage, ModelImage[]>();
  let left = MAX_PROMPT_IMAGES;
  for (let i = rows.length - 1; i >= 0 && left > 0; i--) {
    const images = rows[i]!.images;
    if (!images || images.length === 0) continue;
    const taken = images.slice(-left);
    kept.set(rows[i]!, taken);
    left -= taken.length;
  }
  return kept;
}

let tokenizer: Promise<(text: string) => number> | undefined;

/** What a message costs in the context window, tool calls' names and arguments and a tool's pictures included. */
export async function loadTokensOf(): Promise<(message: ModelMessage) => number> {
  const countTokens = await (tokenizer ??= import('gpt-tokenizer').then((module) => module.countTokens));
  return (message) => {
    let text = message.content;
    if (message.role === 'assistant' && message.toolCalls) text += message.toolCalls.map((call) => call.name + call.arguments).join('');
    const pictures = message.role === 'tool' ? (message.images?.length ?? 0) : 0;
    return countTokens(text) + MESSAGE_OVERHEAD + pictures * IMAGE_TOKENS;
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
