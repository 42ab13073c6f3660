// The terminal frames of a run's log, built alike on every path that ends one: a run's own end, a start that stored
// a pause or found no model and so answers without a run, a failure.
import { AppError } from '@agentplane/lib/errors';
import { describeErrorFrame } from '@agentplane/lib/http/errors';
import type { ChatResponseOutput, Frame } from '../schemas.js';
import { handoffView } from '../tools.js';
import type { Outcome, Turn, TurnTotals } from './turn.js';

/** The `usage` of a ChatResponse. */
export function usageOut(totals: TurnTotals): ChatResponseOutput['usage'] {
  return {
    input_tokens: totals.inputTokens,
    output_tokens: totals.outputTokens,
    total_tokens: totals.inputTokens + totals.outputTokens,
    cost_usd: totals.costUsd,
  };
}

/** The `error` frame of a failure: the status and body a blocking call would answer with. */
export function errorFrame(error: unknown, runId: string, sessionId: string | null): Extract<Frame, { type: 'error' }> {
  const resetAt = error instanceof AppError ? error.extra?.reset_at : undefined;
  return {
    type: 'error',
    ...describeErrorFrame(error),
    run_id: runId,
    session_id: sessionId,
    ...(typeof resetAt === 'string' ? { reset_at: resetAt } : {}),
  };
}

/** The `done` frame of a turn: its answer, the pause it ends in, its usage and citations. */
export function doneFrame(
  turn: Pick<Turn, 'runId' | 'sessionId'> & { model: string | null },
  outcome: Omit<Outcome, 'status'>,
  totals: TurnTotals,
): Extract<Frame, { type: 'done' }> {
  const pending = outcome.pending;
  return {
    type: 'done',
    run_id: turn.runId,
    session_id: turn.sessionId,
    message_id: outcome.messageId,
    model: turn.model,
    content: outcome.content,
    finish_reason: outcome.finishReason,
    requires_action: pending !== null,
    tool_calls: pending?.tool_calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments as never })) ?? [],
    approvals: pending?.approvals.map(({ kind: _kind, ...approval }) => ({ ...approval, arguments: approval.arguments as never })) ?? [],
    questions: pending?.questions ?? [],
    handoffs: pending?.handoffs?.map(handoffView) ?? [],
    usage: usageOut(totals),
    citations: totals.citations,
  };
}
