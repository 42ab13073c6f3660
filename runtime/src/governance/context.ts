// How a project's turns fit their context window (SPEC.md control-plane `context`; docs/decisions/0062): what the
// engine does under `maxContextTokens` (chat/history.ts clampHistory), and what the project's own text costs of it,
// counted with the same tokenizer the engine counts with.
import { loadTokensOf, MESSAGE_OVERHEAD } from '../chat/history.js';
import type { StoredConfiguration } from '../tenants/configuration.js';

export interface ContextReport {
  /** The project's ceiling; a token may narrow it, never widen it. Null: no limit (the model's own applies). */
  max_context_tokens: number | null;
  strategy: 'drop_oldest_groups';
  /** In words: what is kept and what goes. */
  description: string;
  summarization: false;
  tokenizer: string;
  /** Framing each message costs beyond its text. */
  message_overhead_tokens: number;
  /** What the project's system prompt costs every turn (counted, framing included). */
  system_prompt_tokens: number;
  /** What is left for the conversation under the ceiling once the system prompt is paid; null without a ceiling. */
  history_budget_tokens: number | null;
}

export async function contextReport(configuration: StoredConfiguration): Promise<ContextReport> {
  const max = configuration.document.ceiling.maxContextTokens ?? null;
  const prompt = configuration.document.system_prompt;
  const tokensOf = await loadTokensOf();
  const systemPromptTokens = prompt ? tokensOf({ role: 'system', content: prompt }) : 0;
  return {
    max_context_tokens: max,
    strategy: 'drop_oldest_groups',
    description:
      'Each model call sends the system prompt, then the newest turns of the conversation that fit under the limit together with it, oldest first. ' +
      'A turn is kept or dropped whole: a user message, or an assistant message with the results of its tool calls; the newest is always kept. ' +
      'Nothing is summarized, and the stored conversation is never changed: only what is sent is trimmed.',
    summarization: false,
    tokenizer: 'o200k_base (exact for current OpenAI models; an estimate for other vendors\' models)',
    message_overhead_tokens: MESSAGE_OVERHEAD,
    system_prompt_tokens: systemPromptTokens,
    history_budget_tokens: max === null ? null : Math.max(0, max - systemPromptTokens),
  };
}
