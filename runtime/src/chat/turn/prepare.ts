// Preparing a turn (SPEC.md Chat): everything decided and stored before its run starts, or a refusal before
// anything is stored. Authorization and the tool set, the conversation (new, or the caller's own), the pause it
// answers, the model, the rows the turn starts with, and the Turn its run takes; a new conversation's first model
// call goes out meanwhile (turn/early-call.ts).
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AppError, invalidArgument } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import { effectivePermission, requireCapability, tighterEffort, type Effort, type RequestFlags } from '@agentplane/lib/permissions';
import { claimsFromToken } from '@agentplane/lib/tokens/permission-claims';
import type { Principal } from '../../auth/authenticate.js';
import type { Conversations, MessageRow, SessionRow } from '../../sessions/conversations.js';
import { sessionNotFound, type SessionService } from '../../sessions/service.js';
import type { RuntimeSchema, SessionPending } from '../../store/schema.js';
import type { CitationStyle, Source } from '../citations.js';
import { guardrailsOf } from '../guardrails.js';
import type { UsageLimiter } from '../limits.js';
import { chooseModel, limitsOf, type ModelChoice } from '../model-choice.js';
import { newRunId, type RunStore } from '../runs.js';
import type { ChatRequestInput, Frame } from '../schemas.js';
import type { ToolRegistry } from '../tool-registry.js';
import { ToolSet, type RequestNarrowing } from '../tools.js';
import type { TurnRecords } from '../turn-records.js';
import { resolvePause } from './pause.js';
import type { EarlyCall, EarlyTurn, Turn } from './turn.js';

export interface PreparationDeps {
  db: Kysely<RuntimeSchema>;
  conversations: Conversations;
  sessions: SessionService;
  runs: RunStore;
  records: TurnRecords;
  /** The engine's early call (turn/early-call.ts): a new conversation's first model call, sent while the turn is stored. */
  engine: {
    callEarly(turn: EarlyTurn, message: string, start: Extract<Frame, { type: 'start' }>): EarlyCall;
    abandon(early: EarlyCall): void;
  };
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

/**
 * A turn refused before anything was stored: `sessionId` is the conversation the caller named (null for a new one),
 * and there is no run.
 */
export interface Refused {
  kind: 'refused';
  error: unknown;
  sessionId: string | null;
}

/** What a turn's start stored: a run to launch (with the prompt's history), the same pause again, or no model to call. */
export type Stored =
  | { kind: 'run'; rows: MessageRow[]; history: MessageRow[]; cleared?: NonNullable<SessionPending['cleared']> }
  | { kind: 'paused'; rows: MessageRow[]; pending: SessionPending }
  | { kind: 'no_model'; rows: MessageRow[] };

/** A turn stored and ready to go on: its `start` frame, the early call sent for it, and the Turn its run takes. */
export interface Prepared {
  kind: 'prepared';
  tenantId: string;
  runId: string;
  sessionId: string;
  start: Extract<Frame, { type: 'start' }>;
  /** Its first model call, sent while it was stored; the start frame is appended by it. */
  early: EarlyCall | undefined;
  stored: Stored;
  /** The run to launch; undefined when what was stored is the same pause again or a turn without a model. */
  turn: Turn | undefined;
}

/**
 * Prepares a turn. Problems with the request itself (no `chat` capability, malformed tools, an unknown or not-owned
 * session) are thrown; a turn refused before anything is stored comes back as `refused` (ChatService.start).
 */
export async function prepareTurn(
  deps: PreparationDeps,
  principal: Principal,
  request: ChatRequestInput,
  authorized: SessionRow | undefined,
  options: {
    /** A subagent's run: its new conversation's parent. */
    parentSessionId?: string;
    /** The run's id, chosen by the caller (a task's fire names its run before starting it, so a repeat finds it). */
    runId?: string;
  },
): Promise<Prepared | Refused> {
  requireCapability(principal.permission, 'chat', 'chat');
  const permission = effectivePermission({
    ceiling: principal.configuration.document.ceiling,
    token: claimsFromToken(principal.claims),
    request: requestFlagsOf(request),
  });
  if (request.system_prompt !== undefined) requireCapability(permission, 'system_prompt', 'a per-request system_prompt');
  const tools = ToolSet.forTurn(permission, request, (await deps.tools?.forTurn({ principal, permission, request: narrowingOf(request), sessionId: request.session_id })) ?? []);
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
  const refused = (error: unknown): Refused => {
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
    stored = await store(deps, principal, request, { existing, sessionId, runId, choice, answering, parentSessionId: options.parentSessionId });
  } catch (error) {
    if (early) deps.engine.abandon(early);
    return refused(error);
  }

  // What the input guardrails judge; a project without them has nothing to gather.
  const said = guardrails && !guardrails.input.empty ? personSaid(request) : undefined;
  const turn: Turn | undefined =
    stored.kind === 'run' && choice.kind === 'model' && calling
      ? {
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
        }
      : undefined;
  return { kind: 'prepared', tenantId, runId, sessionId, start, early, stored, turn };
}

/**
 * The rows a turn starts with. A plain message that runs the model takes one statement (TurnRecords); anything
 * else (answers to a pause, a conversation holding one, a lapsed run to clear, no model) takes one transaction: the
 * session (new, or the caller's own locked), the run, the answers and the person's message, and the rollup. Any
 * failure stores nothing.
 */
async function store(
  deps: PreparationDeps,
  principal: Principal,
  request: ChatRequestInput,
  turn: { existing: SessionRow | undefined; sessionId: string; runId: string; choice: ModelChoice; answering: boolean; parentSessionId?: string | undefined },
): Promise<Stored> {
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
