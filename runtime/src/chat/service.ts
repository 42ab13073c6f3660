// Turns as a service (SPEC.md Chat): starting one (checks, the pause it answers, the rows it writes, then the
// detached run), waiting for its result, resuming its stream, steering and cancelling it. Knows nothing of HTTP:
// routes hand it the principal and the parsed body.
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError, conflict, invalidArgument, notFound, permissionDenied } from '@agentplane/lib/errors';
import type { EventBus, RunLogEvent } from '@agentplane/lib/events/port';
import { kindOfStatus } from '@agentplane/lib/http/errors';
import type { Logger } from '@agentplane/lib/logging';
import { effectivePermission, requireCapability, tighterEffort, type Effort, type RequestFlags } from '@agentplane/lib/permissions';
import { claimsFromToken } from '@agentplane/lib/tokens/permission-claims';
import type { Principal } from '../auth/authenticate.js';
import { canSeeOwner, ownsConversation } from '../sessions/access.js';
import type { Conversations, MessageRow, NewMessage, SessionRow } from '../sessions/conversations.js';
import { sessionNotFound, type SessionService } from '../sessions/service.js';
import type { RuntimeSchema, SessionPending } from '../store/schema.js';
import type { TurnEngine } from './engine.js';
import type { UsageLimiter } from './limits.js';
import { chooseModel, limitsOf, type ModelChoice } from './model-choice.js';
import { newRunId, runLogKey, type RunRow, type RunStore } from './runs.js';
import { maxToolResultLength, type ChatRequestInput, type ChatResponseOutput, type Frame } from './schemas.js';
import type { CitationStyle, Source } from './citations.js';
import { approvalMessage, refusalMessage, ToolSet, type RequestNarrowing } from './tools.js';
import type { ToolRegistry } from './tool-registry.js';
import type { TurnRecords } from './turn-records.js';
import { guardrailsOf } from './guardrails.js';
import { doneFrame, errorFrame } from './turn/frames.js';
import { emptyTotals, type TerminalFrame } from './turn/turn.js';

/**
 * How a start went: the run was stored and started (its log has a `start` frame), or it was refused before anything
 * was stored; then `sessionId` is the conversation the caller named (null for a new one), and there is no run.
 */
export type StartOutcome =
  | {
      kind: 'started';
      runId: string;
      sessionId: string;
      /**
       * With `awaitEnd`: the run's terminal frame once it is in the log, straight from this process (the blocking
       * path need not follow the log); undefined when the run stopped without writing one here.
       */
      ended?: Promise<TerminalFrame | undefined>;
    }
  | { kind: 'refused'; error: unknown; sessionId: string | null };

export interface ChatServiceDeps {
  db: Kysely<RuntimeSchema>;
  events: EventBus;
  conversations: Conversations;
  sessions: SessionService;
  runs: RunStore;
  records: TurnRecords;
  engine: TurnEngine;
  limiter: UsageLimiter;
  logger: Logger;
  /**
   * The tool families that run tools for a caller (documents, memory, webhooks, MCP...), offered when their
   * capabilities are held; an MCP server's list may take a call to learn (then it is kept).
   */
  tools?: ToolRegistry;
  /**
   * The automatic document context: the best passages for a message, as the person's own search finds them; given
   * to a turn that offers `tool` (the search), so it reaches exactly those who may search.
   */
  documentContext?: { tool: string; find(principal: Principal, query: string): Promise<{ sources: Source[]; style?: CitationStyle }> };
}

/** What a turn's start stored: a run to launch (with the prompt's history), the same pause again, or no model to call. */
type Stored =
  | { kind: 'run'; rows: MessageRow[]; history: MessageRow[]; cleared?: NonNullable<SessionPending['cleared']> }
  | { kind: 'paused'; rows: MessageRow[]; pending: SessionPending }
  | { kind: 'no_model'; rows: MessageRow[] };

/** What answering a pause produced: tool messages to store, and what is still unanswered (null: nothing). */
interface PauseResolution {
  answers: NewMessage[];
  remaining: Omit<SessionPending, 'run_id'> | null;
  /** Approved server calls the run makes before its first model step (none while the pause remains). */
  cleared: NonNullable<SessionPending['cleared']>;
}

const runNotFound = (runId: string) => notFound(`run ${runId} not found`);
const runNotOwned = (runId: string) =>
  permissionDenied(`run ${runId} belongs to another subject's conversation: this token may read it but not change it`, { code: 'not_owner' });

export class ChatService {
  constructor(private readonly deps: ChatServiceDeps) {}

  /**
   * Starts a turn. Problems with the request itself (no `chat` capability, malformed tools, an unknown or not-owned
   * session) are thrown. A turn refused before anything is stored (the model cannot be chosen, a limit is reached,
   * a turn already runs in the session, the answers do not fit the pause) comes back as `refused`, naming only the
   * session the caller named: no run exists, so no run id is given (docs/decisions/0026). Once the run and its
   * messages are stored, everything is reported in the run's log, so the blocking and the streaming path agree.
   */
  async start(
    principal: Principal,
    request: ChatRequestInput,
    authorized?: SessionRow,
    options: {
      awaitEnd?: boolean;
      /** A subagent's run: its new conversation's parent. */
      parentSessionId?: string;
      /** The run's id, chosen by the caller (a task's fire names its run before starting it, so a repeat finds it). */
      runId?: string;
    } = {},
  ): Promise<StartOutcome> {
    const { deps } = this;
    requireCapability(principal.permission, 'chat', 'chat');
    const permission = effectivePermission({
      ceiling: principal.configuration.document.ceiling,
      token: claimsFromToken(principal.claims),
      request: requestFlagsOf(request),
    });
    if (request.system_prompt !== undefined) requireCapability(permission, 'system_prompt', 'a per-request system_prompt');
    const tools = ToolSet.forTurn(permission, request, (await deps.tools?.forTurn({ principal, permission, request: narrowingOf(request) })) ?? []);
    const answering = [request.tool_results, request.approval_decisions, request.question_answers].some((list) => list !== undefined && list.length > 0);
    checkUniqueIds(request);
    // Posting into a conversation changes it: only its owner may (a privileged reader gets 403). The route's
    // authorize step has usually found it already, for this same caller.
    const existing =
      request.session_id === undefined
        ? undefined
        : authorized?.id === request.session_id
          ? authorized
          : await deps.sessions.ownedSession(principal, request.session_id);
    if (!existing && answering) throw invalidArgument('nothing is waiting for an answer: answers go to the conversation that paused, named by session_id');

    const tenantId = principal.tenantId;
    const refused = (error: unknown): StartOutcome => {
      if (!(error instanceof AppError)) deps.logger.error({ err: error }, 'turn refused by an unexpected error');
      return { kind: 'refused', error, sessionId: existing?.id ?? null };
    };
    const guardrails = guardrailsOf(principal.configuration);
    // Answers to a pause an input check stops are refused before anything is stored, and the pause still waits: the
    // person answers again (a message is judged by the run, which ends the turn; docs/decisions/0064).
    const answered = answering && guardrails && !guardrails.input.empty ? personSaid({ ...request, message: undefined }) : undefined;
    const answerCheck = answered === undefined ? null : guardrails!.input.firstFiring(answered);
    if (answerCheck !== null) {
      return refused(invalidArgument(`This answer was stopped by the project's guardrail '${answerCheck}'; the question still waits for an answer.`, { code: 'guardrail' }));
    }
    let choice: ModelChoice;
    let stored: Stored;
    const sessionId = existing?.id ?? randomUUID();
    const runId = options.runId ?? newRunId();
    try {
      choice = chooseModel(principal.configuration, permission, principal.routing, request.model);
      // Before anything is stored: a refused turn leaves the conversation as it was.
      if (choice.kind === 'model') await deps.limiter.check(tenantId, limitsOf(principal.configuration));
    } catch (error) {
      return refused(error);
    }
    const configuration = principal.configuration.document;
    // The automatic document context, where the project chose it, for a message (not an answer to a pause) from
    // someone who may search.
    const context =
      choice.kind === 'model' && configuration.retrieval?.auto_context && request.message !== undefined && deps.documentContext && tools.get(deps.documentContext.tool)
        ? () => deps.documentContext!.find(principal, request.message!)
        : undefined;
    const calling =
      choice.kind === 'model'
        ? {
            tenantId,
            model: choice.model,
            target: choice.target,
            price: choice.price,
            tools,
            // The project's system prompt wins over the request's (SPEC.md Capabilities: system_prompt); what the
            // offered tools ask to be told (the skills this turn may load) follows it.
            systemPrompt: withGuidance(configuration.system_prompt ?? request.system_prompt ?? null, tools),
            effort: effortOf(request.effort, permission.maxEffort),
            limits: limitsOf(principal.configuration),
            maxContextTokens: permission.maxContextTokens,
          }
        : undefined;
    const model = choice.kind === 'model' ? choice.model : null;
    const start: Extract<Frame, { type: 'start' }> = { type: 'start', run_id: runId, session_id: sessionId, model };
    // A new conversation's first prompt is known before its rows are stored: its model call (and its log's start
    // frame) go out meanwhile; not when input guardrails must judge the message first.
    const early =
      calling && !existing && !answering && request.message !== undefined && !context && (guardrails === null || guardrails.input.empty)
        ? deps.engine.callEarly(calling, request.message, start)
        : undefined;
    try {
      stored = await this.store(principal, request, { existing, sessionId, runId, choice, answering, parentSessionId: options.parentSessionId });
    } catch (error) {
      if (early) deps.engine.abandon(early);
      return refused(error);
    }
    let settle: (frame: TerminalFrame | undefined) => void = () => undefined;
    const ended = options.awaitEnd ? new Promise<TerminalFrame | undefined>((resolve) => (settle = resolve)) : undefined;
    const endWith = async (frame: TerminalFrame) => {
      await deps.engine.end(tenantId, runId, frame);
      settle(frame);
    };

    // What the input guardrails judge; a project without them has nothing to gather.
    const said = guardrails && !guardrails.input.empty ? personSaid(request) : undefined;
    try {
      if (stored.kind === 'run' && choice.kind === 'model' && calling) {
        await deps.engine.launch(
          {
            ...calling,
            runId,
            sessionId,
            subject: principal.claims.sub,
            maxToolIterations: permission.maxToolIterations,
            autoTitle: permission.has('auto_title') && (existing === undefined || existing.title === ''),
            history: stored.history,
            ...(context ? { context } : {}),
            ...(stored.cleared && stored.cleared.length > 0 ? { cleared: stored.cleared } : {}),
            ...(guardrails ? { guardrails } : {}),
            ...(said !== undefined ? { inputText: said } : {}),
          },
          start,
          ended && settle,
          early,
        );
        // Sent, not waited for: the conversation's followers hear of the message as the caller hears of the run, and
        // a stream's first token is not held behind the publish (notify never throws).
        void deps.conversations.notify(tenantId, sessionId, stored.rows);
        return { kind: 'started', runId, sessionId, ...(ended ? { ended } : {}) };
      }
      // Not a run after all (a new conversation's plain message always is): its early start frame is the log's.
      if (early) deps.engine.discard(early);
      await (early ? early.logged : this.frame(tenantId, runId, start));
      await deps.conversations.notify(tenantId, sessionId, stored.rows);
      if (stored.kind === 'paused') {
        // The request left something unanswered (silence is neither answer): the same pause again, no model call.
        await endWith(
          doneFrame({ runId, sessionId, model }, { finishReason: null, content: '', messageId: null, pending: stored.pending }, emptyTotals()),
        );
      } else {
        // SPEC.md item 8: no shared fallback model; the turn ends at once and costs nothing.
        await endWith(
          doneFrame({ runId, sessionId, model: null }, { finishReason: 'no_model', content: '', messageId: null, pending: null }, emptyTotals()),
        );
      }
    } catch (error) {
      await endWith(errorFrame(error, runId, sessionId));
    }
    return { kind: 'started', runId, sessionId, ...(ended ? { ended } : {}) };
  }

  /**
   * The rows a turn starts with. A plain message that runs the model takes one statement (TurnRecords); anything
   * else (answers to a pause, a conversation holding one, a lapsed run to clear, no model) takes one transaction: the
   * session (new, or the caller's own locked), the run, the answers and the person's message, and the rollup. Any
   * failure stores nothing.
   */
  private async store(
    principal: Principal,
    request: ChatRequestInput,
    turn: { existing: SessionRow | undefined; sessionId: string; runId: string; choice: ModelChoice; answering: boolean; parentSessionId?: string | undefined },
  ): Promise<Stored> {
    const { deps } = this;
    const { existing, sessionId, runId, choice } = turn;
    const tenantId = principal.tenantId;
    const subject = principal.claims.sub;
    if (choice.kind === 'model' && !turn.answering && request.message !== undefined) {
      const start = { tenantId, sessionId, runId, subject, model: choice.model, message: request.message, parentSessionId: turn.parentSessionId, ...deps.runs.newLease() };
      if (!existing) {
        const row = await deps.records.startNewSession(start);
        return { kind: 'run', rows: [row], history: [row] };
      }
      const history = await deps.records.startInSession(start);
      if (history) return { kind: 'run', rows: history.slice(-1), history };
    }
    const model = choice.kind === 'model' ? choice.model : null;
    return deps.db.transaction().execute(async (trx): Promise<Stored> => {
      const session = existing
        ? await trx.selectFrom('sessions').selectAll().where('id', '=', existing.id).forUpdate().executeTakeFirst()
        : await deps.conversations.createSession(trx, { id: sessionId, tenantId, owner: subject, model, parentSessionId: turn.parentSessionId });
      // Deleted between the visibility check and this lock.
      if (!session) throw sessionNotFound(sessionId);
      await deps.runs.begin(trx, { id: runId, tenantId, sessionId, subject, model });
      const resolution = resolvePause(session.pending, request);
      const messages = resolution.answers.map((answer) => ({ ...answer, runId, subject }));
      if (request.message !== undefined) messages.push({ role: 'user', content: request.message, runId, subject });
      const rows = await deps.conversations.append(tenantId, sessionId, messages, trx);
      if (resolution.remaining) {
        const pending: SessionPending = { run_id: runId, ...resolution.remaining };
        await deps.runs.finish(trx, runId, { status: 'requires_action' });
        await deps.conversations.setRollup(trx, sessionId, { status: 'requires_action', pending });
        return { kind: 'paused', pending, rows };
      }
      if (choice.kind === 'none') {
        await deps.runs.finish(trx, runId, { status: 'completed', finishReason: 'no_model' });
        await deps.conversations.setRollup(trx, sessionId, { status: 'completed', pending: null });
        return { kind: 'no_model', rows };
      }
      await deps.conversations.setRollup(trx, sessionId, { status: 'running', model, pending: null });
      return { kind: 'run', rows, history: await deps.conversations.messagesOf(sessionId, trx), cleared: resolution.cleared };
    });
  }

  /**
   * What a route checks before it validates a turn's body: capability `chat`, then the conversation it names, which
   * the caller must see (404 otherwise, worded as for an unknown id) and own (403 otherwise).
   */
  async authorizeTurn(principal: Principal, sessionId: string | undefined): Promise<SessionRow | undefined> {
    requireCapability(principal.permission, 'chat', 'chat');
    return sessionId === undefined ? undefined : this.deps.sessions.ownedSession(principal, sessionId);
  }

  /** The frames of a run this request has just started, from its first: its caller is the one who started it. */
  follow(tenantId: string, runId: string, signal: AbortSignal): AsyncIterable<RunLogEvent<Frame>> {
    return this.deps.events.logs.tail<Frame>(runLogKey(tenantId, runId), 0, signal);
  }

  /** Reading a run's frames needs capability `chat`, as starting one does (403 before the run is looked up). */
  authorizeResume(principal: Principal): void {
    requireCapability(principal.permission, 'chat', 'chat');
  }

  /**
   * The run a re-sent `POST /chat/stream` with `Last-Event-ID` resumes (docs/decisions/0026): the one named by the
   * `X-Run-Id` request header, else the latest run of the conversation named by `session_id`.
   */
  async runToResume(principal: Principal, sessionId: string | undefined, runId: string | undefined): Promise<string> {
    if (runId !== undefined) {
      const run = await this.visibleRun(principal, runId);
      if (!run || (sessionId !== undefined && run.row.session_id !== sessionId)) throw runNotFound(runId);
      return runId;
    }
    if (sessionId === undefined) {
      throw invalidArgument('Last-Event-ID on POST /chat/stream resumes a run: name it with the X-Run-Id header, or name its conversation with session_id', {
        code: 'nothing_to_resume',
      });
    }
    await this.deps.sessions.visibleSession(principal, sessionId);
    const latest = await this.deps.runs.latestOf(principal.tenantId, sessionId);
    if (latest === undefined) throw notFound(`session ${sessionId} has no run to resume`, { code: 'nothing_to_resume' });
    return latest;
  }

  /**
   * The terminal frame of a run, waited for: from `ended` when this process runs it and said how it ended, else from
   * the run's log. The blocking path turns an `error` frame back into the error a client gets, carrying the run and
   * session ids.
   */
  async result(tenantId: string, runId: string, signal: AbortSignal, ended?: Promise<TerminalFrame | undefined>): Promise<ChatResponseOutput> {
    const frame = (ended && (await untilAborted(ended, signal))) || (await this.terminalInLog(tenantId, runId, signal));
    // The client went away (signal) or the log vanished (erased); either way there is nothing to answer.
    if (!frame) throw new AppError('unavailable', `run ${runId} ended without a result`, { extra: { run_id: runId } });
    if (frame.type === 'done') {
      const { type: _type, ...response } = frame;
      return response;
    }
    const { type: _type, status, message, retryable: _retryable, ...rest } = frame;
    throw new AppError(kindOfStatus(status), message, {
      code: rest.code,
      extra: { run_id: rest.run_id, session_id: rest.session_id, ...('reset_at' in rest ? { reset_at: rest.reset_at } : {}) },
    });
  }

  private async terminalInLog(tenantId: string, runId: string, signal: AbortSignal): Promise<TerminalFrame | undefined> {
    if (signal.aborted) return undefined;
    for await (const event of this.deps.events.logs.tail<Frame>(runLogKey(tenantId, runId), 0, signal)) {
      const frame = event.data;
      if (frame.type === 'done' || frame.type === 'error') return frame;
    }
    return undefined;
  }

  /**
   * The frames of a run after `afterId`, then live ones, for a resuming client. A run whose frames are no longer held
   * yields one terminal `error` frame naming its conversation; one nothing knows is 404.
   */
  async resume(principal: Principal, runId: string, afterId: number, signal: AbortSignal): Promise<AsyncIterable<RunLogEvent<Frame>>> {
    this.authorizeResume(principal);
    const row = (await this.visibleRun(principal, runId))?.row;
    const key = runLogKey(principal.tenantId, runId);
    const head = await this.deps.events.logs.read<Frame>(key, 0, 1);
    if (head.state === 'missing' && !row) throw runNotFound(runId);
    if (head.state === 'missing' || head.state === 'expired') {
      const sessionId = row?.session_id ?? null;
      // A run that failed (cut off by a drain, lost with its process) says why, from its row: the log of an earlier
      // life of an embedded process is gone, but the client can still tell it may retry.
      const failed = row?.status === 'failed' ? failureFrame(row) : null;
      const frame: Frame = failed ?? {
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
        const session = await this.deps.conversations.session(sessionId);
        if (session && (session.tenant_id !== principal.tenantId || !canSeeOwner(principal, session.owner))) throw runNotFound(runId);
      }
    }
    return this.deps.events.logs.tail<Frame>(key, afterId, signal);
  }

  /** Queues a message for the run's next step boundary (SPEC.md Chat: steer). */
  async steer(principal: Principal, runId: string, message: string): Promise<{ run_id: string; accepted: true; status: string | null }> {
    const row = await this.authorizeSteer(principal, runId);
    const queued = await this.deps.runs.queueSteer(principal.tenantId, runId, message);
    if (!queued) {
      throw conflict(`run ${runId} is not running (it is ${row.status === 'running' ? 'finishing' : row.status}); send the message with POST /chat instead`, {
        code: 'run_not_running',
        extra: { run_id: runId, session_id: row.session_id },
      });
    }
    await this.deps.engine.notify(row.lease_owner, { type: 'steer', run_id: runId });
    return { run_id: runId, accepted: true, status: 'running' };
  }

  /** Capability `steer`, then the run (404 unless its conversation is visible), then ownership of it (403). */
  async authorizeSteer(principal: Principal, runId: string): Promise<RunRow> {
    requireCapability(principal.permission, 'steer', 'steering a run');
    const run = await this.visibleRun(principal, runId);
    if (!run) throw runNotFound(runId);
    if (!ownsConversation(principal, run.owner)) throw runNotOwned(runId);
    return run.row;
  }

  /** Asks the run to stop. Idempotent, and 202 whether or not this process (or any) holds it (SPEC.md Errors rule 5). */
  async cancel(principal: Principal, runId: string): Promise<{ run_id: string; accepted: true; status: string | null }> {
    const row = await this.authorizeCancel(principal, runId);
    if (!row) return { run_id: runId, accepted: true, status: null };
    if (row.status === 'running') {
      await this.deps.runs.requestCancel(runId);
      await this.deps.engine.notify(row.lease_owner, { type: 'cancel', run_id: runId });
    }
    return { run_id: runId, accepted: true, status: row.status === 'running' ? 'cancelling' : row.status };
  }

  /**
   * Capability `chat`, then the run: one the caller cannot see is answered as an unknown one (202, nothing done:
   * undefined here); one it sees but does not own is 403.
   */
  async authorizeCancel(principal: Principal, runId: string): Promise<RunRow | undefined> {
    requireCapability(principal.permission, 'chat', 'chat');
    const run = await this.visibleRun(principal, runId).catch((error: unknown) => {
      if (error instanceof AppError && error.kind === 'not_found') return undefined;
      throw error;
    });
    if (!run) return undefined;
    if (!ownsConversation(principal, run.owner)) throw runNotOwned(runId);
    return run.row;
  }

  /** The run's row and its conversation's owner when the caller may see it; undefined when it has none; 404 when not visible. */
  private async visibleRun(principal: Principal, runId: string): Promise<{ row: RunRow; owner: string } | undefined> {
    const row = await this.deps.runs.get(runId);
    if (!row || row.tenant_id !== principal.tenantId) return undefined;
    const session = await this.deps.conversations.session(row.session_id);
    if (!session || !canSeeOwner(principal, session.owner)) throw runNotFound(runId);
    return { row, owner: session.owner };
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

/** The terminal `error` frame a failed run's row records; null when it recorded none. */
function failureFrame(row: RunRow): Extract<Frame, { type: 'error' }> | null {
  const error = row.error as { status?: unknown; code?: unknown; message?: unknown; retryable?: unknown } | null;
  if (!error || typeof error.status !== 'number' || typeof error.code !== 'string' || typeof error.message !== 'string') return null;
  const retryable = typeof error.retryable === 'boolean' ? error.retryable : new AppError(kindOfStatus(error.status), error.message).isRetryable;
  return { type: 'error', status: error.status, code: error.code, message: error.message, retryable, run_id: row.id, session_id: row.session_id };
}

/** The promise's value, or undefined as soon as the signal aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
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

/** What a request narrowed for itself beyond its flags (a subagent's run keeps it). */
export type { RequestNarrowing };

const narrowingOf = (request: ChatRequestInput): RequestNarrowing => ({ plugins: request.plugins, allowed_tools: request.allowed_tools });

/** The system prompt with what the offered server tools ask to be told; null when there is neither. */
function withGuidance(prompt: string | null, tools: ToolSet): string | null {
  const guidance = tools.list().flatMap((tool) => (tool.server?.guidance ? [tool.server.guidance] : []));
  return guidance.length === 0 ? prompt : [...(prompt === null ? [] : [prompt]), ...guidance].join('\n\n');
}

/** The request's effort capped by the token's; with no request, the cap itself (so a capped token never runs above it). */
function effortOf(requested: Effort | undefined, max: Effort | undefined): Effort | undefined {
  return tighterEffort(requested ?? max, max);
}

/**
 * What the person said in a request, for the input guardrails: their message, their answers to the agent's questions
 * and the notes of their approval decisions (tool results come from the app, not the person).
 */
function personSaid(request: ChatRequestInput): string | undefined {
  const said = [request.message, ...(request.question_answers ?? []).map((answer) => answer.answer), ...(request.approval_decisions ?? []).map((decision) => decision.note)];
  const texts = said.filter((text): text is string => typeof text === 'string' && text !== '');
  return texts.length > 0 ? texts.join('\n\n') : undefined;
}
