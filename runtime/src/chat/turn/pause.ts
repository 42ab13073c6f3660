// Answering a pause (SPEC.md Approval pause): what a request's tool results, approval decisions and answers to
// questions make of the pause its conversation holds. Pure, so the rules of a pause read apart from the statements
// that store their result.
import { invalidArgument } from '@agentplane/lib/errors';
import type { NewMessage } from '../../sessions/conversations.js';
import type { SessionPending } from '../../store/schema.js';
import { maxToolResultLength, type ChatRequestInput } from '../schemas.js';
import { approvalMessage, handoffEndedMessage, refusalMessage } from '../tools.js';

export interface PauseResolution {
  answers: NewMessage[];
  remaining: Omit<SessionPending, 'run_id'> | null;
  /** Approved server calls the run makes before its first model step (none while the pause remains). */
  cleared: NonNullable<SessionPending['cleared']>;
}

/**
 * Applies the answers of a request to the pause its session holds (SPEC.md Approval pause). Answers to ids that are
 * not waiting are 400; an approved client call goes back to the client as the identical call; a refusal tells the
 * agent to stop; anything left unanswered keeps the turn paused.
 */
export function resolvePause(pending: SessionPending | null, request: ChatRequestInput): PauseResolution {
  const results = request.tool_results ?? [];
  const decisions = request.approval_decisions ?? [];
  const answersToQuestions = request.question_answers ?? [];
  if (!pending) {
    if (results.length + decisions.length + answersToQuestions.length > 0) {
      throw invalidArgument('nothing in this conversation is waiting for an answer', { code: 'nothing_pending' });
    }
    return { answers: [], remaining: null, cleared: [] };
  }
  const notWaiting = (field: string, id: string, what: string) =>
    invalidArgument(`${field}: tool_call_id '${id}' is not waiting for ${what}`, { code: 'not_pending' });
  const calls = new Map(pending.tool_calls.map((call) => [call.id, call]));
  const approvals = new Map(pending.approvals.map((approval) => [approval.tool_call_id, approval]));
  const questions = new Map(pending.questions.map((question) => [question.tool_call_id, question]));
  for (const result of results) if (!calls.has(result.tool_call_id)) throw notWaiting('tool_results', result.tool_call_id, 'a result');
  for (const decision of decisions) if (!approvals.has(decision.tool_call_id)) throw notWaiting('approval_decisions', decision.tool_call_id, 'a decision');
  for (const answer of answersToQuestions) if (!questions.has(answer.tool_call_id)) throw notWaiting('question_answers', answer.tool_call_id, 'an answer');

  const answers: NewMessage[] = [];
  const resultById = new Map(results.map((result) => [result.tool_call_id, result]));
  const decisionById = new Map(decisions.map((decision) => [decision.tool_call_id, decision]));
  const answerById = new Map(answersToQuestions.map((answer) => [answer.tool_call_id, answer]));

  const remainingCalls: SessionPending['tool_calls'] = [];
  for (const call of pending.tool_calls) {
    const result = resultById.get(call.id);
    if (!result) {
      remainingCalls.push(call);
      continue;
    }
    const text = typeof result.content === 'string' ? result.content : JSON.stringify(result.content);
    const content = (result.is_error ? `Error: ${text}` : text).slice(0, maxToolResultLength);
    answers.push({ role: 'tool', content, toolCallId: call.id, name: call.name, ...(result.is_error ? { metadata: { is_error: true } } : {}) });
  }
  const remainingApprovals: SessionPending['approvals'] = [];
  const cleared: NonNullable<SessionPending['cleared']> = [...(pending.cleared ?? [])];
  for (const approval of pending.approvals) {
    const decision = decisionById.get(approval.tool_call_id);
    if (!decision) {
      remainingApprovals.push(approval);
      continue;
    }
    const name = approval.tool ?? 'request_approval';
    const metadata = { approved: decision.approved, ...(decision.note === undefined ? {} : { note: decision.note }) };
    if (!decision.approved) {
      answers.push({ role: 'tool', content: refusalMessage(decision.note), toolCallId: approval.tool_call_id, name, metadata });
    } else if (approval.kind === 'client') {
      // The identical call, now cleared to run, goes to the client on this round.
      remainingCalls.push({ id: approval.tool_call_id, name: approval.tool!, arguments: approval.arguments });
    } else if (approval.kind === 'server') {
      // The service runs the identical call itself, once the turn goes on.
      cleared.push({ id: approval.tool_call_id, name: approval.tool!, arguments: approval.arguments });
    } else {
      answers.push({ role: 'tool', content: approvalMessage(decision.note), toolCallId: approval.tool_call_id, name, metadata });
    }
  }
  const remainingQuestions: SessionPending['questions'] = [];
  for (const question of pending.questions) {
    const answer = answerById.get(question.tool_call_id);
    if (!answer) remainingQuestions.push(question);
    else answers.push({ role: 'tool', content: answer.answer, toolCallId: question.tool_call_id, name: 'ask_user' });
  }
  // A hand-off ends with the person's next request, whatever it holds (their message, answers, or nothing).
  for (const handoff of pending.handoffs ?? []) answers.push({ role: 'tool', content: handoffEndedMessage(handoff), toolCallId: handoff.tool_call_id, name: 'browser_handoff' });
  const open = remainingCalls.length + remainingApprovals.length + remainingQuestions.length > 0;
  if (open) {
    return {
      answers,
      remaining: { tool_calls: remainingCalls, approvals: remainingApprovals, questions: remainingQuestions, ...(cleared.length > 0 ? { cleared } : {}) },
      cleared: [],
    };
  }
  return { answers, remaining: null, cleared };
}
