// Turns as a service (SPEC.md Chat): starting one (checks, the pause it answers, the rows it writes, then the
// detached run), waiting for its result, resuming its stream, steering and cancelling it. Knows nothing of HTTP:
// routes hand it the principal and the parsed body.
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError, conflict, invalidArgument, notFound, permissionDenied } from '@agentplane/lib/errors';
import type { EventBus, RunLogEvent } from '@agentplane/lib/events/port';
import { kindOfStatus } from '@agentplane/lib/http/errors';
import type { Logger } from '@agentplane/lib/logging';
import { effectivePermission, tighterEffort, type EffectivePermission, type Effort, type RequestFlags } from '@agentplane/lib/permissions';
import { claimsFromToken } from '@agentplane/lib/tokens/permission-claims';
import type { Principal } from '../auth/authenticate.js';
import { canSeeOwner } from '../sessions/access.js';
import type { Conversations, NewMessage } from '../sessions/conversations.js';
import { sessionNotFound, type SessionService } from '../sessions/service.js';
import type { RuntimeSchema, SessionPending } from '../store/schema.js';
import type { TenantService } from '../tenants/service.js';
import { emptyTotals, type TurnEngine } from './engine.js';
import type { UsageLimiter } from './limits.js';
import { chooseModel, limitsOf, type ModelChoice } from './model-choice.js';
import { newRunId, runControlChannel, runLogKey, type RunRow, type RunStore } from './runs.js';
import { maxToolResultLength, type ChatRequestInput, type ChatResponseOutput, type Frame } from './schemas.js';
import { approvalMessage, refusalMessage, ToolSet } from './tools.js';

export interface StartedRun {
  runId: string;
  sessionId: string;
}

export interface ChatServiceDeps {
  db: Kysely<RuntimeSchema>;
  events: EventBus;
  conversations: Conversations;
  sessions: SessionService;
  runs: RunStore;
  engine: TurnEngine;
  limiter: UsageLimiter;
  tenants: TenantService;
  logger: Logger;
}

/** What answering a pause produced: tool messages to store, and what is still unanswered (null: nothing). */
interface PauseResolution {
  answers: NewMessage[];
  remaining: Omit<SessionPending, 'run_id'> | null;
}

const runNotFound = (runId: string) => notFound(`run ${runId} not found`);

export class ChatService {
  constructor(private readonly deps: ChatServiceDeps) {}

  /**
   * Starts a turn and returns its ids once its `start` frame is written. Problems with the request itself (no `chat`
   * capability, malformed tools, an unknown session) are thrown; everything from choosing the model on is reported
   * in the run's log as its terminal `error` frame, so the blocking and the streaming path say the same thing.
   */
  async start(principal: Principal, request: ChatRequestInput): Promise<StartedRun> {
    const { deps } = this;
    requireCapability(principal.permission, 'chat', 'chat');
    const permission = effectivePermission({
      ceiling: principal.configuration.document.ceiling,
      token: claimsFromToken(principal.claims),
      request: requestFlagsOf(request),
    });
    if (request.system_prompt !== undefined) requireCapability(permission, 'system_prompt', 'a per-request system_prompt');
    const tools = ToolSet.forTurn(permission, request);
    const answering = [request.tool_results, request.approval_decisions, request.question_answers].some((list) => list !== undefined && list.length > 0);
    if (request.message === undefined && !answering) {
      throw invalidArgument('message is required unless the request answers a pause (tool_results, approval_decisions or question_answers)');
    }
    checkUniqueIds(request);
    const existing = request.session_id === undefined ? undefined : await deps.sessions.visibleSession(principal, request.session_id);
    if (!existing && answering) throw invalidArgument('nothing is waiting for an answer: answers go to the conversation that paused, named by session_id');

    const tenantId = principal.tenantId;
    const sessionId = existing?.id ?? randomUUID();
    const runId = newRunId();
    let choice: ModelChoice;
    try {
      choice = chooseModel(principal.configuration, permission, await deps.tenants.routing(tenantId), request.model);
    } catch (error) {
      await this.frame(tenantId, runId, { type: 'start', run_id: runId, session_id: sessionId, model: request.model ?? null });
      await deps.engine.end(tenantId, runId, deps.engine.errorFrame(error, runId, sessionId));
      return { runId, sessionId };
    }
    const model = choice.kind === 'model' ? choice.model : null;
    await this.frame(tenantId, runId, { type: 'start', run_id: runId, session_id: sessionId, model });

    try {
      const limits = limitsOf(principal.configuration);
      // Before anything is stored: a refused turn leaves the conversation as it was.
      if (choice.kind === 'model') await deps.limiter.check(tenantId, limits);
      const result = await deps.db.transaction().execute(async (trx) => {
        const session = existing
          ? await trx.selectFrom('sessions').selectAll().where('id', '=', existing.id).forUpdate().executeTakeFirst()
          : await deps.conversations.createSession(trx, { id: sessionId, tenantId, owner: principal.claims.sub, model });
        // Deleted between the visibility check and this lock.
        if (!session) throw sessionNotFound(sessionId);
        await deps.runs.begin(trx, { id: runId, tenantId, sessionId, subject: principal.claims.sub, model });
        const resolution = resolvePause(session.pending, request);
        const stored = resolution.answers.map((answer) => ({ ...answer, runId }));
        if (request.message !== undefined) stored.push({ role: 'user', content: request.message, runId });
        const rows = await deps.conversations.append(tenantId, sessionId, stored, trx);
        if (resolution.remaining) {
          const pending: SessionPending = { run_id: runId, ...resolution.remaining };
          await deps.runs.finish(trx, runId, { status: 'requires_action' });
          await deps.conversations.setRollup(trx, sessionId, { status: 'requires_action', pending });
          return { kind: 'paused' as const, pending, rows };
        }
        if (choice.kind === 'none') {
          await deps.runs.finish(trx, runId, { status: 'completed', finishReason: 'no_model' });
          await deps.conversations.setRollup(trx, sessionId, { status: 'completed', pending: null });
          return { kind: 'no_model' as const, rows };
        }
        await deps.conversations.setRollup(trx, sessionId, { status: 'running', model, pending: null });
        return { kind: 'run' as const, rows };
      });
      await deps.conversations.notify(tenantId, sessionId, result.rows);

      if (result.kind === 'paused') {
        // The request left something unanswered (silence is neither answer): the same pause again, no model call.
        await deps.engine.end(
          tenantId,
          runId,
          deps.engine.doneFrame({ runId, sessionId, model }, { finishReason: null, content: '', messageId: null, pending: result.pending }, emptyTotals()),
        );
      } else if (result.kind === 'no_model' || choice.kind === 'none') {
        // SPEC.md item 8: no shared fallback model; the turn ends at once and costs nothing.
        await deps.engine.end(
          tenantId,
          runId,
          deps.engine.doneFrame({ runId, sessionId, model: null }, { finishReason: 'no_model', content: '', messageId: null, pending: null }, emptyTotals()),
        );
      } else {
        const configuration = principal.configuration.document;
        deps.engine.launch({
          runId,
          sessionId,
          tenantId,
          model: choice.model,
          target: choice.target,
          price: choice.price,
          tools,
          // The project's system prompt wins over the request's (SPEC.md Capabilities: system_prompt).
          systemPrompt: configuration.system_prompt ?? request.system_prompt ?? null,
          effort: effortOf(request.effort, permission.maxEffort),
          limits,
          maxToolIterations: permission.maxToolIterations,
          maxContextTokens: permission.maxContextTokens,
          autoTitle: permission.has('auto_title') && (existing === undefined || existing.title === ''),
        });
      }
    } catch (error) {
      await deps.engine.end(tenantId, runId, deps.engine.errorFrame(error, runId, sessionId));
    }
    return { runId, sessionId };
  }

  /**
   * The terminal frame of a run, waited for. The blocking path turns an `error` frame back into the error a client
   * gets, carrying the run and session ids.
   */
  async result(tenantId: string, runId: string, signal: AbortSignal): Promise<ChatResponseOutput> {
    for await (const event of this.deps.events.logs.tail<Frame>(runLogKey(tenantId, runId), 0, signal)) {
      const frame = event.data;
      if (frame.type === 'done') {
        const { type: _type, ...response } = frame;
        return response;
      }
      if (frame.type === 'error') {
        const { type: _type, status, message, retryable: _retryable, ...rest } = frame;
        throw new AppError(kindOfStatus(status), message, { code: rest.code, extra: { run_id: rest.run_id, session_id: rest.session_id, ...('reset_at' in rest ? { reset_at: rest.reset_at } : {}) } });
      }
    }
    // The client went away (signal) or the log vanished (erased); either way there is nothing to answer.
    throw new AppError('unavailable', `run ${runId} ended without a result`, { extra: { run_id: runId } });
  }

  /**
   * The frames of a run after `afterId`, then live ones, for a resuming client. A run whose frames are no longer held
   * yields one terminal `error` frame naming its conversation; one nothing knows is 404.
   */
  async resume(principal: Principal, runId: string, afterId: number, signal: AbortSignal): Promise<AsyncIterable<RunLogEvent<Frame>>> {
    const row = await this.visibleRun(principal, runId);
    const key = runLogKey(principal.tenantId, runId);
    const head = await this.deps.events.logs.read<Frame>(key, 0, 1);
    if (head.state === 'missing' && !row) throw runNotFound(runId);
    if (head.state === 'missing' || head.state === 'expired') {
      const sessionId = row?.session_id ?? null;
      const frame: Frame = {
        type: 'error',
        status: 404,
        code: 'run_events_expired',
        message: sessionId
          ? `the events of run ${runId} are no longer held; its conversation is session ${sessionId} (GET /chat/sessions/${sessionId}/messages)`
          : `the events of run ${runId} are no longer held`,
        retryable: false,
        run_id: runId,
        session_id: sessionId,
      };
      return (async function* () {
        yield { id: afterId + 1, data: frame };
      })();
    }
    if (!row) {
      // A run refused before it stored anything has no row; its log names the session it was for.
      const start = head.events[0]?.data;
      const sessionId = start?.type === 'start' ? start.session_id : undefined;
      if (sessionId) {
        const session = await this.deps.db.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirst();
        if (session && (session.tenant_id !== principal.tenantId || !canSeeOwner(principal, session.owner))) throw runNotFound(runId);
      }
    }
    return this.deps.events.logs.tail<Frame>(key, afterId, signal);
  }

  /** Queues a message for the run's next step boundary (SPEC.md Chat: steer). */
  async steer(principal: Principal, runId: string, message: string): Promise<{ run_id: string; accepted: true; status: string | null }> {
    requireCapability(principal.permission, 'steer', 'steering a run');
    const row = await this.visibleRun(principal, runId);
    if (!row) throw runNotFound(runId);
    const queued = await this.deps.runs.queueSteer(principal.tenantId, runId, message);
    if (!queued) {
      throw conflict(`run ${runId} is not running (it is ${row.status === 'running' ? 'finishing' : row.status}); send the message with POST /chat instead`, {
        code: 'run_not_running',
        extra: { run_id: runId, session_id: row.session_id },
      });
    }
    await this.deps.events.pubsub.publish(runControlChannel(principal.tenantId, runId), { type: 'steer' }).catch(() => undefined);
    return { run_id: runId, accepted: true, status: 'running' };
  }

  /** Asks the run to stop. Idempotent, and 202 whether or not this process (or any) holds it (SPEC.md Errors rule 5). */
  async cancel(principal: Principal, runId: string): Promise<{ run_id: string; accepted: true; status: string | null }> {
    requireCapability(principal.permission, 'chat', 'chat');
    const row = await this.visibleRun(principal, runId).catch(() => undefined);
    if (!row) return { run_id: runId, accepted: true, status: null };
    if (row.status === 'running') {
      await this.deps.runs.requestCancel(runId);
      if (!this.deps.engine.cancelHeld(runId)) {
        await this.deps.events.pubsub.publish(runControlChannel(principal.tenantId, runId), { type: 'cancel' });
      }
    }
    return { run_id: runId, accepted: true, status: row.status === 'running' ? 'cancelling' : row.status };
  }

  /** The run's row when the caller may see its conversation; undefined when it has none; 404 when not visible. */
  private async visibleRun(principal: Principal, runId: string): Promise<RunRow | undefined> {
    const row = await this.deps.runs.get(runId);
    if (!row || row.tenant_id !== principal.tenantId) return undefined;
    const session = await this.deps.db.selectFrom('sessions').select('owner').where('id', '=', row.session_id).executeTakeFirst();
    if (!session || !canSeeOwner(principal, session.owner)) throw runNotFound(runId);
    return row;
  }

  private async frame(tenantId: string, runId: string, frame: Frame): Promise<void> {
    await this.deps.engine.frame(tenantId, runId, frame);
  }
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
    return { answers: [], remaining: null };
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
  const open = remainingCalls.length + remainingApprovals.length + remainingQuestions.length > 0;
  return { answers, remaining: open ? { tool_calls: remainingCalls, approvals: remainingApprovals, questions: remainingQuestions } : null };
}

function checkUniqueIds(request: ChatRequestInput): void {
  for (const [field, list] of [
    ['tool_results', request.tool_results],
    ['approval_decisions', request.approval_decisions],
    ['question_answers', request.question_answers],
  ] as const) {
    const seen = new Set<string>();
    for (const item of list ?? []) {
      if (seen.has(item.tool_call_id)) throw invalidArgument(`${field}: tool_call_id '${item.tool_call_id}' is answered twice`);
      seen.add(item.tool_call_id);
    }
  }
}

function requestFlagsOf(request: ChatRequestInput): RequestFlags {
  const { message: _m, session_id: _s, model: _mo, system_prompt: _sp, effort: _e, tools: _t, question_answers: _q, approval_decisions: _a, tool_results: _r, ...flags } =
    request;
  return flags;
}

function requireCapability(permission: EffectivePermission, capability: Parameters<EffectivePermission['has']>[0], what: string): void {
  if (!permission.has(capability)) throw permissionDenied(`${what} needs capability '${capability}', which this token does not hold`, { code: 'capability_denied' });
}

/** The request's effort capped by the token's; with no request, the cap itself (so a capped token never runs above it). */
function effortOf(requested: Effort | undefined, max: Effort | undefined): Effort | undefined {
  return tighterEffort(requested ?? max, max);
}
