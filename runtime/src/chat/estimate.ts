// What a model call may use, estimated before it is sent, so the project's token and spend caps can reserve it
// (docs/decisions/0075). Pessimistic on purpose: an estimate only matters while its call is in flight (the call is
// settled with what it used), and one too high only admits fewer calls at once near a cap, where one too low lets a
// burst run past it.
import type { ModelMessage, ModelTool } from '../models/port.js';
import type { ModelPrice } from '../tenants/configuration.js';
import { costOf } from './model-choice.js';
import { IMAGE_TOKENS, MESSAGE_OVERHEAD } from './history.js';

/**
 * Prompt tokens are counted from the request's size, not by a tokenizer: that would cost milliseconds per call on a
 * long conversation. English runs 4 or more UTF-8 bytes a token and code about 3.5; 3 errs high for both.
 */
const BYTES_PER_TOKEN = 3;
/** The least output a call is assumed to produce when it sets no bound of its own. */
export const OUTPUT_ALLOWANCE_FLOOR = 1024;
/** How many recent calls of a model the allowance looks back over. */
const RECENT_CALLS = 16;
/** Project and model pairs remembered per process; the oldest is forgotten first. */
const REMEMBERED = 4096;

export interface CallEstimate {
  tokens: number;
  costUsd: number | null;
}

/** The call a reservation is made for: what it sends and what its model's output costs. */
export interface PlannedCall {
  model: string;
  price: ModelPrice | undefined;
  messages: readonly ModelMessage[];
  tools?: readonly ModelTool[];
  /** The call's own bound on its output, when it sets one. */
  maxOutputTokens?: number;
}

/** The prompt's tokens, estimated from its size: every message's text, calls and pictures, and the tools' definitions. */
export function promptTokensOf(messages: readonly ModelMessage[], tools: readonly ModelTool[] = []): number {
  let bytes = 0;
  let tokens = 0;
  for (const message of messages) {
    bytes += Buffer.byteLength(message.content);
    if (message.role === 'assistant') for (const call of message.toolCalls ?? []) bytes += Buffer.byteLength(call.name) + Buffer.byteLength(call.arguments);
    if (message.role === 'tool') tokens += (message.images?.length ?? 0) * IMAGE_TOKENS;
    tokens += MESSAGE_OVERHEAD;
  }
  for (const tool of tools) bytes += Buffer.byteLength(JSON.stringify(tool));
  return tokens + Math.ceil(bytes / BYTES_PER_TOKEN);
}

/**
 * The output a call is assumed to produce: its own bound when it sets one, otherwise the most the model wrote in
 * this project's recent calls on this process, and never less than OUTPUT_ALLOWANCE_FLOOR (a model not called yet).
 * Calls set no bound today: a provider's own maximum (16k tokens and more) would hold a small cap to one call at a
 * time.
 */
export class OutputAllowances {
  private readonly recent = new Map<string, number[]>();

  allowance(tenantId: string, call: Pick<PlannedCall, 'model' | 'maxOutputTokens'>): number {
    if (call.maxOutputTokens !== undefined) return call.maxOutputTokens;
    return Math.max(OUTPUT_ALLOWANCE_FLOOR, ...(this.recent.get(`${tenantId}\n${call.model}`) ?? []));
  }

  /** Remembers what a call of the model wrote. */
  observe(tenantId: string, model: string, outputTokens: number): void {
    const key = `${tenantId}\n${model}`;
    const sizes = this.recent.get(key) ?? [];
    // Re-inserted, so the map's order is least recently used first.
    this.recent.delete(key);
    sizes.push(outputTokens);
    if (sizes.length > RECENT_CALLS) sizes.shift();
    this.recent.set(key, sizes);
    if (this.recent.size > REMEMBERED) this.recent.delete(this.recent.keys().next().value!);
  }

  estimate(tenantId: string, call: PlannedCall): CallEstimate {
    const inputTokens = promptTokensOf(call.messages, call.tools);
    const outputTokens = this.allowance(tenantId, call);
    return { tokens: inputTokens + outputTokens, costUsd: costOf(call.price, { inputTokens, outputTokens }) };
  }
}
