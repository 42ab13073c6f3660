import { randomUUID } from 'node:crypto';
// The agent loop of one run (DESIGN.md "Runs"): detached from the request that started it, it calls the model,
// relays what it says into the run log, handles the tool calls it makes (refusing anything outside the turn's tool
// set, pausing on client calls, approvals and questions), picks up steer messages at step boundaries, and ends with
// exactly one terminal frame. Its process holds a lease on the run; cancel reaches it through pub/sub.
import { AppError } from '@agentplane/lib/errors';
import { LogClosedError, type EventBus } from '@agentplane/lib/events/port';
import { describeErrorFrame } from '@agentplane/lib/http/errors';
import { storableText } from '@agentplane/lib/http/text';
import type { Lifecycle } from '@agentplane/lib/http/lifecycle';
import type { Logger } from '@agentplane/lib/logging';
import type { Effort } from '@agentplane/lib/permissions';
import type { LanguageModel, ModelFactory, ModelFinishReason, ModelMessage, ModelToolCall, StreamPart, Usage } from '../models/port.js';
import type { Conversations, MessageRow, NewMessage } from '../sessions/conversations.js';
import type { SessionPending } from '../store/schema.js';
import { clampHistory, historyMessage, toModelMessages, type HistoryMessage } from './history.js';
import type { Admission, PlannedCall, UsageLimiter, UsageLimits } from './limits.js';
import type { ModelPrice } from '../tenants/configuration.js';
import type { DraftKeeper } from './drafts.js';
import type { DeliveryRecord, TurnRecords, UsageRow } from './turn-records.js';
import { firstFiring, OutputGate, withheld, type Moderate, type TurnGuardrails } from './guardrails.js';
import type { AuditEntry } from '../governance/audit.js';
import type { UsageRecorder } from './usage.js';
import {
  RunCancelledError,
  RunInterruptedError,
  RunLeaseLostError,
  runControlChannel,
  runLogKey,
  runLostError,
  type RunControl,
  type RunRow,
  type RunStatus,
  type RunStore,
} from './runs.js';
import { citeSources, type CitationStyle, type Source } from './citations.js';
import type { ChatResponseOutput, CitationOutput, Frame } from './schemas.js';
import { parseArguments, toolNotAvailable, type ClearedCall, type ServerTool, type ServerToolOutcome, type ToolSet } from './tools.js';
import type { ProviderTarget } from '../models/port.js';

/** Everything a run needs, decided before it starts (ChatService.start). */
export interface Turn {
  runId: string;
  sessionId: string;
  tenantId: string;
  /** The subject whose turn this is (the conversation's owner): what it writes is recorded as theirs. */
  subject: string;
  model: string;
  target: ProviderTarget;
  price: ModelPrice | undefined;
  tools: ToolSet;
  systemPrompt: string | null;
  effort: Effort | undefined;
  limits: UsageLimits | undefined;
  maxToolIterations: number | undefined;
  maxContextTokens: number | undefined;
  /** Title the conversation after this turn when it has none. */
  autoTitle: boolean;
  /**
   * The project's automatic document context (docs/decisions/0045): the passages the person may read that best
   * match their message, handed to the model with the system prompt before its first step.
   */
  context?: () => Promise<{ sources: Source[]; style?: CitationStyle }>;
  /**
   * The conversation as the turn's start left it, its new messages last: the first step's prompt. The run keeps it
   * up to date with what it writes itself (it alone writes to the session while it runs), so no step re-reads it.
   */
  history: MessageRow[];
  /** Server calls the person approved (SPEC.md Approval pause): made before the first model step. */
  cleared?: ClearedCall[];
  /** The project's guardrails (docs/decisions/0064), and the person's message its input checks judge. */
  guardrails?: TurnGuardrails;
  inputText?: string;
}

export interface TurnTotals {
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
  /** What the turn's document searches found, numbered as the answer cites them. */
  citations: CitationOutput[];
}

/** The `usage` of a ChatResponse. */
export function usageOut(totals: TurnTotals): ChatResponseOutput['usage'] {
  return {
    input_tokens: totals.inputTokens,
    output_tokens: totals.outputTokens,
    total_tokens: totals.inputTokens + totals.outputTokens,
    cost_usd: totals.costUsd,
  };
}

export const emptyTotals = (): TurnTotals => ({ inputTokens: 0, outputTokens: 0, costUsd: null, citations: [] });

/** Finish reasons of the model that the turn reports (null: the agent finished on its own). */
const reportedFinish: Partial<Record<ModelFinishReason, 'length' | 'content_filter'>> = { length: 'length', content_filter: 'content_filter' };

export interface EngineDeps {
  events: EventBus;
  conversations: Conversations;
  runs: RunStore;
  records: TurnRecords;
  limiter: UsageLimiter;
  usage: UsageRecorder;
  models: ModelFactory;
  lifecycle: Lifecycle;
  logger: Logger;
  leaseSeconds: number;
  /** Runs when a turn ended without a title on its conversation (auto_title); best effort. */
  onTitleWanted?: (turn: Turn) => void;
  /** Saves the assistant text of steps being streamed, for all runs together (never per token). */
  drafts: DraftKeeper;
  /** Moderation models for the guardrails that name one; without it those checks never fire. */
  moderate?: Moderate;
  /** Told of each ended turn and each model call's usage (the runtime's metrics). */
  observe?: { turnEnded(status: string): void; usage(inputTokens: number, outputTokens: number, costUsd: number | null): void };
}

interface Outcome {
  status: Exclude<RunStatus, 'running' | 'failed'>;
  finishReason: ChatResponseOutput['finish_reason'];
  content: string;
  messageId: string | null;
  pending: SessionPending | null;
  /** The last step's message and usage, not yet written: the statement that ends the run writes them. */
  last?: { draftId: string | null; message: NewMessage; usage: UsageRow | undefined };
  /** The last step's token frames on their way to the log, while the statement that ends the run is written. */
  tokensLogged?: Promise<void>;
}

/** A run this process holds: how to stop it, and whether a steer was announced since its last boundary. */
interface HeldRun {
  controller: AbortController;
  steerNoticed: boolean;
  /** The lease renewal found the run no longer this process's (finished elsewhere, or swept as lost). */
  lost: boolean;
  /** Told the terminal frame once it is in the log, or undefined when the run stopped without writing one here. */
  ended?: (frame: TerminalFrame | undefined) => void;
  /** The first model call, sent before the run was stored; its first step takes it over or drops it. */
  early?: EarlyCall;
  /**
   * The run's writes still under way, in the order they were started: a tool step's message and answers are written
   * while its calls and the next model call are made. Whatever writes after them (a steer taken, a broken step's
   * text, the run's end) waits for them first; a failure among them fails the run there.
   */
  writes: Promise<void>;
}

export type TerminalFrame = Extract<Frame, { type: 'done' | 'error' }>;

/** What a turn's first model call needs before the turn is stored. */
export type EarlyTurn = Pick<Turn, 'tenantId' | 'model' | 'target' | 'price' | 'tools' | 'systemPrompt' | 'effort' | 'limits' | 'maxContextTokens'>;

/**
 * A turn's first model call, sent while the turn's rows are stored (docs/decisions/0050). The run takes it over at
 * launch when its first prompt is the one the call was sent with; otherwise, and when the turn was not stored, it
 * is dropped.
 */
export interface EarlyCall {
  /** The call's own: aborted when the call is dropped, and by the run's (a cancel, a drain's cut-off) once taken over. */
  controller: AbortController;
  /**
   * The call under way: its prompt, its parts and its reservation on the project's caps. Rejects as the call would
   * have (the limiter's refusal, say).
   */
  started: Promise<{ messages: ModelMessage[]; parts: AsyncIterable<StreamPart>; stream: AsyncIterator<StreamPart>; admission: Admission }>;
  /** The run's `start` frame, appended to its log meanwhile too; rejects when the log refused it. */
  logged: Promise<void>;
  /** The run's log. */
  key: string;
}

export class TurnEngine {
  /** Runs this process holds, by id: cancel from this process reaches them without a pub/sub round trip. */
  private readonly held = new Map<string, HeldRun>();

  /** The one timer that renews the leases of every run this process holds; running only while it holds any. */
  private leaseKeeper: NodeJS.Timeout | undefined;

  constructor(private readonly deps: EngineDeps) {
    // The grace period of a drain ran out: runs stop now, keeping what they wrote, and end with a retryable error.
    deps.lifecycle.cutOffSignal.addEventListener(
      'abort',
      () => {
        for (const run of this.held.values()) run.controller.abort(new RunInterruptedError());
      },
      { once: true },
    );
  }

  get heldRuns(): number {
    return this.held.size;
  }

  /** Appends a frame to a run's log. A log already closed (the run was swept as lost) takes nothing more. */
  async frame(tenantId: string, runId: string, frame: Frame): Promise<void> {
    try {
      await this.deps.events.logs.append(runLogKey(tenantId, runId), frame);
    } catch (error) {
      if (error instanceof LogClosedError) return;
      throw error;
    }
  }

  /**
   * Writes the terminal frame and closes the log. With `stored`, the run's end is already stored as the frame says,
   * so a caller waiting on this process has its answer while the frame is appended rather than after: the frame
   * adds nothing to what the database holds (docs/decisions/0068).
   */
  async end(tenantId: string, runId: string, frame: TerminalFrame, options: { stored?: boolean } = {}): Promise<void> {
    const waiter = this.held.get(runId);
    if (options.stored) waiter?.ended?.(frame);
    try {
      await this.deps.events.logs.appendLast(runLogKey(tenantId, runId), frame);
    } catch (error) {
      if (!(error instanceof LogClosedError)) throw error;
    }
    waiter?.ended?.(frame);
  }

  /** The `error` frame of a failure: the status and body a blocking call would answer with. */
  errorFrame(error: unknown, runId: string, sessionId: string | null): Extract<Frame, { type: 'error' }> {
    const resetAt = error instanceof AppError ? error.extra?.reset_at : undefined;
    return {
      type: 'error',
      ...describeErrorFrame(error),
      run_id: runId,
      session_id: sessionId,
      ...(typeof resetAt === 'string' ? { reset_at: resetAt } : {}),
    };
  }

  /**
   * Starts the run: holds it (so cancel and steer notices for it are heard on this process's channel), writes its
   * `start` frame (or waits for the early call's append of it), then runs it in the background. Holding comes
   * before anyone can learn the run's id: from the frame once the caller answers, so a notice sent then finds it.
   * The caller has stored the running row.
   */
  async launch(turn: Turn, start: Extract<Frame, { type: 'start' }>, ended?: HeldRun['ended'], early?: EarlyCall): Promise<void> {
    const finished = this.deps.lifecycle.beginWork();
    const run = this.hold(turn, early);
    if (ended) run.ended = ended;
    try {
      await (early ? early.logged : this.frame(turn.tenantId, turn.runId, start));
    } catch (error) {
      // The log took no start frame (the event port failed): the run never calls the model, its row and session are
      // failed here so the conversation is free for a retry, and the caller answers the error (nobody could follow
      // a log that has no start).
      try {
        await this.fail(turn, error);
      } catch (failure) {
        this.deps.logger.error({ err: failure, run_id: turn.runId }, 'could not fail a run whose start frame was refused');
      } finally {
        this.drop(run);
        this.release(turn.runId);
        finished();
      }
      throw error;
    }
    void this.execute(turn, run)
      .catch((error: unknown) => this.deps.logger.error({ err: error, run_id: turn.runId }, 'run failed outside its own handling'))
      .finally(finished);
  }

  /**
   * Sends a turn's first model call before the turn is stored, for a prompt known without the store: a new
   * conversation's first step, which sees the system prompt and the person's message alone (a turn with automatic
   * document context searches first, and is not called early). The start statement and the provider's answer then
   * overlap instead of following each other. The limiter is asked first, as the run's first step would.
   */
  callEarly(turn: EarlyTurn, message: string, start: Extract<Frame, { type: 'start' }>): EarlyCall {
    const controller = new AbortController();
    // Nobody knows the run's id before the turn is stored and answered, so no one can follow its log early: the
    // start frame's round trip to the event port overlaps the store too.
    const logged = this.frame(turn.tenantId, start.run_id, start);
    logged.catch(() => undefined);
    const started = (async () => {
      const messages = await this.promptOf(turn, turn.systemPrompt ?? '', [[{ role: 'user', content: message }]]);
      const admission = await this.deps.limiter.admit(turn.tenantId, turn.limits, () => planned(turn, messages));
      const stream = this.call(turn, this.deps.models(turn.target, turn.model), messages, controller.signal)[Symbol.asyncIterator]();
      // A stream runs nothing until asked: asking for its first part sends the request now.
      return { messages, stream, parts: resumed(stream.next(), stream), admission };
    })();
    // Not awaited until the run's first step: a refusal is that step's to report, or nobody's when it is dropped.
    started.catch(() => undefined);
    return { controller, started, logged, key: runLogKey(turn.tenantId, start.run_id) };
  }

  /** Drops the early call of a turn that was not stored, and closes the log its start frame opened. */
  abandon(early: EarlyCall): void {
    this.discard(early);
    early.logged.then(() => this.deps.events.logs.close(early.key)).catch(() => undefined);
  }

  /** Drops an early call no run took over: aborts it, lets its stream end and releases its reservation. */
  discard(early: EarlyCall): void {
    early.controller.abort();
    early.started
      .then(async ({ stream, admission }) => {
        await admission.settle(null);
        await stream.return?.(undefined);
      })
      .catch(() => undefined);
  }

  /** Drops the early call a run still holds, if any. */
  private drop(run: HeldRun): void {
    if (!run.early) return;
    this.discard(run.early);
    run.early = undefined;
  }

  /** Cancels a run this process holds; false when it holds none by that id. */
  cancelHeld(runId: string): boolean {
    const run = this.held.get(runId);
    if (!run) return false;
    run.controller.abort(new RunCancelledError());
    return true;
  }

  /**
   * Fails the runs whose process stopped renewing their lease: their row, their session's rollup, and a terminal
   * `error` frame (500 `run_lost`) for whoever follows their log. Any replica may do it; each run is failed once.
   */
  async sweepLost(): Promise<number> {
    const lost = await this.deps.runs.sweepLost();
    for (const run of lost) await this.endLost(run, 'run lost: its process stopped renewing the lease');
    return lost.length;
  }

  /**
   * Fails at once every run an earlier life of this process left running. Only for a store no other process uses
   * (the embedded database, whose data-dir lock proves it): there, a run this life does not hold has no one running it.
   */
  async recoverAbandoned(): Promise<number> {
    const abandoned = await this.deps.runs.failAbandoned();
    for (const run of abandoned) await this.endLost(run, 'run lost: the process running it stopped before this start');
    return abandoned.length;
  }

  /** What is left to do for a run failed as lost: keep its text, free its session, end its log if one is held. */
  private async endLost(run: RunRow, why: string): Promise<void> {
    const error = runLostError();
    await this.deps.conversations.settleDraftsOf(run.tenant_id, run.session_id, run.id);
    await this.deps.conversations.markFailed(run.session_id);
    // A log this process never held (in-process events of an earlier life) is not started here: a resume reads the
    // run's row instead, whatever Last-Event-ID it sends.
    const key = runLogKey(run.tenant_id, run.id);
    const head = await this.deps.events.logs.read(key, 0, 1).catch(() => ({ state: 'missing' as const }));
    if (head.state !== 'missing') {
      await this.end(run.tenant_id, run.id, { type: 'error', ...error, retryable: true, run_id: run.id, session_id: run.session_id }).catch((err: unknown) =>
        this.deps.logger.warn({ err, run_id: run.id }, 'could not end the log of a lost run'),
      );
    }
    this.deps.logger.warn({ run_id: run.id, tenant_id: run.tenant_id }, why);
  }

  /** Cancels every running run of a tenant, wherever it runs (the first step of a tenant erase). */
  /** How many of the tenant's runs (one subject's, when named) are running. */
  async runsOf(tenantId: string, subject?: string): Promise<number> {
    return (await this.deps.runs.runningOf(tenantId, subject)).length;
  }

  async cancelTenantRuns(tenantId: string, subject?: string): Promise<number> {
    const running = await this.deps.runs.runningOf(tenantId, subject);
    for (const run of running) {
      await this.deps.runs.requestCancel(run.id);
      if (!this.cancelHeld(run.id)) await this.notify(run.lease_owner, { type: 'cancel', run_id: run.id });
    }
    return running.length;
  }

  /**
   * Tells the process holding a run (its lease owner) to cancel it or take a steer. Best effort: the holder also
   * reads both from the run's row at each lease renewal.
   */
  async notify(leaseOwner: string | null, control: RunControl): Promise<void> {
    if (leaseOwner === null) return;
    if (leaseOwner === this.deps.runs.owner) {
      this.control(control);
      return;
    }
    await this.deps.events.pubsub.publish(runControlChannel(leaseOwner), control).catch((error: unknown) =>
      this.deps.logger.warn({ err: error, run_id: control.run_id }, 'could not notify the process holding a run; it reads the row at its next lease renewal'),
    );
  }

  /**
   * Listens on this process's control channel for the runs it holds, once for the life of the process. Resolves
   * to the way to stop listening.
   */
  async listen(): Promise<() => Promise<void>> {
    return this.deps.events.pubsub.subscribe(runControlChannel(this.deps.runs.owner), (message) => this.control(message as RunControl));
  }

  private control(message: RunControl | null): void {
    const run = typeof message?.run_id === 'string' ? this.held.get(message.run_id) : undefined;
    if (!run) return;
    if (message!.type === 'cancel') run.controller.abort(new RunCancelledError());
    else if (message!.type === 'steer') run.steerNoticed = true;
  }

  private hold(turn: Turn, early?: EarlyCall): HeldRun {
    const run: HeldRun = { controller: new AbortController(), steerNoticed: false, lost: false, writes: Promise.resolve(), ...(early ? { early } : {}) };
    // Whatever stops the run stops its early call; dropping the call (a first prompt it does not match) stops only it.
    if (early) run.controller.signal.addEventListener('abort', () => early.controller.abort(run.controller.signal.reason), { once: true });
    this.held.set(turn.runId, run);
    if (this.deps.lifecycle.cutOffSignal.aborted) run.controller.abort(new RunInterruptedError());
    if (!this.leaseKeeper) {
      this.leaseKeeper = setInterval(() => void this.renewLeases(), Math.max(200, (this.deps.leaseSeconds * 1000) / 3));
      this.leaseKeeper.unref();
    }
    return run;
  }

  private release(runId: string): void {
    this.held.delete(runId);
    if (this.held.size === 0 && this.leaseKeeper) {
      clearInterval(this.leaseKeeper);
      this.leaseKeeper = undefined;
    }
  }

  /**
   * Renews the lease of every run held here in one statement, however many there are (5,000 open streams renew as
   * one statement every third of a lease, not 500 a second), and reads back what others asked of them meanwhile (a
   * cancel or steer whose notice was missed). A held run the statement did not renew is no longer this process's.
   */
  private async renewLeases(): Promise<void> {
    const ids = [...this.held.keys()];
    if (ids.length === 0) return;
    let states: Map<string, { cancelRequested: boolean; steerWaiting: boolean }>;
    try {
      states = await this.deps.runs.renewAll(ids);
    } catch (error) {
      this.deps.logger.warn({ err: error, runs: ids.length }, 'lease renewal failed');
      return;
    }
    for (const id of ids) {
      const run = this.held.get(id);
      if (!run) continue; // ended while the statement ran
      const state = states.get(id);
      if (!state) {
        run.lost = true;
        run.controller.abort(new RunLeaseLostError());
        continue;
      }
      if (state.cancelRequested) run.controller.abort(new RunCancelledError());
      if (state.steerWaiting) run.steerNoticed = true;
    }
  }

  private async execute(turn: Turn, run: HeldRun): Promise<void> {
    const { controller } = run;
    const totals = emptyTotals();
    const history: HistoryMessage[] = [...turn.history];
    try {
      let outcome = await this.inputStopped(turn, run);
      if (!outcome) {
        if (turn.cleared) history.push(...(await this.makeCleared(turn, run, totals)));
        outcome = await this.loop(turn, run, history, totals);
      }
      while (!run.lost) {
        const ended = await this.complete(turn, run, outcome, totals, history);
        // A steer arrived after the last boundary: the loop runs again under the same run, lease and subscription.
        if (ended !== 'steered') break;
        run.steerNoticed = true;
        outcome = await this.loop(turn, run, history, totals);
      }
    } catch (error) {
      // The writes still under way land (or fail) before the run's end is written after them.
      await run.writes.catch(() => undefined);
      run.writes = Promise.resolve();
      if (run.lost) return;
      if (controller.signal.aborted && controller.signal.reason instanceof RunCancelledError) {
        await this.complete(turn, run, { status: 'cancelled', finishReason: 'cancelled', content: '', messageId: null, pending: null }, totals, history);
        return;
      }
      await this.fail(turn, error);
    } finally {
      this.drop(run);
      this.release(turn.runId);
      // A run that stopped without ending its log here (swept as lost by another replica): its waiter reads the log.
      run.ended?.(undefined);
      // The tool families' end-of-turn work (a sandbox paused), after the answer: never delays or fails the turn.
      void turn.tools.ended((family, error) => this.deps.logger.warn({ err: error, run_id: turn.runId, family }, "a tool family's end-of-turn work failed"));
    }
  }

  /** The automatic context's passages, numbered as the answer cites them; null without any (or when the search failed). */
  private async contextOf(turn: Turn, totals: TurnTotals): Promise<string | null> {
    if (!turn.context) return null;
    try {
      const { sources, style } = await turn.context();
      if (sources.length === 0) return null;
      // citeSources says how to cite them, in the project's style.
      return `Passages from the documents this person may read that may bear on their message (the search tool finds more):\n\n${citeSources(totals.citations, sources, style)}`;
    } catch (error) {
      this.deps.logger.warn({ err: error, run_id: turn.runId }, 'automatic document context failed; the turn goes on without it');
      return null;
    }
  }

  private async loop(turn: Turn, run: HeldRun, history: HistoryMessage[], totals: TurnTotals): Promise<Outcome> {
    const { deps } = this;
    const signal = run.controller.signal;
    const model = deps.models(turn.target, turn.model);
    let toolRounds = 0;
    let lastMessageId: string | null = null;
    const system = [turn.systemPrompt, await this.contextOf(turn, totals)].filter((part): part is string => part !== null).join('\n\n');
    for (;;) {
      if (run.steerNoticed) {
        run.steerNoticed = false;
        // Steers join the conversation after the last step's answers, judged by the input checks as a message is.
        await run.writes;
        const steers = await this.takeSteers(turn);
        history.push(...steers);
        for (const steer of turn.guardrails && !turn.guardrails.input.empty ? steers : []) {
          const check = await firstFiring(turn.guardrails!.input, steer.content, deps.moderate, turn.target, signal);
          if (check !== null) return guardrailStop('input', check, { draftId: null, message: { role: 'assistant', content: '', runId: turn.runId, subject: turn.subject, model: turn.model }, usage: undefined });
        }
      }
      if (signal.aborted) return this.stopped(signal, lastMessageId);
      const messages = await this.promptOf(turn, system, toModelMessages(history));
      // Every model call reserves against the caps before it is sent: the early call did when it went out.
      const early = await this.takeEarly(run, messages);
      const admission = early?.admission ?? (await deps.limiter.admit(turn.tenantId, turn.limits, () => planned(turn, messages)));
      const step = await this.step(turn, model, messages, signal, totals, admission, early?.parts);
      const finishedOwnWay = step.calls.length === 0;
      const outOfRounds = !finishedOwnWay && turn.maxToolIterations !== undefined && toolRounds >= turn.maxToolIterations;
      const lastStep = step.failure === undefined && step.fired === null && (finishedOwnWay || outOfRounds);
      // A token frame the log refused fails the step, as it would have mid-stream; only the run's last step, with
      // no output guardrails to judge it first, leaves its frames to land while the run's end is written.
      if (!lastStep || turn.guardrails) await step.logged;
      if (step.failure !== undefined) {
        // What arrived before the failure stays readable in the session (SPEC.md Errors rule 10), marked incomplete;
        // calls of a broken step are dropped, since their arguments may be cut short.
        // Under output guardrails, only what was judged and relayed: the text held back was never judged whole.
        await run.writes;
        if (step.usage) await this.recordUsage(turn, step.usage);
        if (step.shown !== '') {
          const kept = await this.keep(turn, step.draftId, {
            role: 'assistant', content: step.shown, runId: turn.runId, subject: turn.subject, model: turn.model, metadata: { incomplete: true },
          });
          history.push(kept);
          lastMessageId = kept.id;
        }
        if (signal.aborted) return this.stopped(signal, lastMessageId, step.shown);
        throw step.failure;
      }
      const message: NewMessage = {
        role: 'assistant', content: step.text, runId: turn.runId, subject: turn.subject, toolCalls: step.calls.length > 0 ? step.calls : null, model: turn.model,
      };
      // An output guardrail fired while the answer streamed: the step was stopped, and its text is withheld.
      if (step.fired !== null) return guardrailStop('output', step.fired, { draftId: step.draftId, message, usage: step.usage });
      if (lastStep) {
        // The last step: its message and usage are written by the statement that ends the run, the answer withheld
        // when an output guardrail fires on it (its moderation models included), and what was held back relayed
        // when none does.
        const check = turn.guardrails ? await firstFiring(turn.guardrails.output, step.text, deps.moderate, turn.target, signal) : null;
        if (check !== null) return guardrailStop('output', check, { draftId: step.draftId, message, usage: step.usage });
        await step.release();
        return {
          status: 'completed',
          finishReason: outOfRounds ? 'max_tool_iterations' : (reportedFinish[step.finishReason] ?? null),
          content: step.text,
          messageId: null,
          pending: null,
          last: { draftId: step.draftId, message, usage: step.usage },
          tokensLogged: step.logged,
        };
      }
      // Text said beside the calls is judged whole (its moderation models included) before what was held is relayed.
      const besideCalls = turn.guardrails ? await firstFiring(turn.guardrails.output, step.text, deps.moderate, turn.target, signal) : null;
      if (besideCalls !== null) return guardrailStop('output', besideCalls, { draftId: step.draftId, message, usage: step.usage });
      await step.release();
      // The step's message and usage are written while its calls are made, and its answers while the next model call
      // is (a handler's and a provider's round trips hide the statements); whatever writes after them waits for them.
      const messageId = step.draftId ?? randomUUID();
      const kept = this.behind(run, () =>
        deps.records.step({ tenantId: turn.tenantId, sessionId: turn.sessionId, runId: turn.runId, message: { id: messageId, draftId: step.draftId, value: message }, usage: step.usage }),
      );
      toolRounds += 1;
      const { pending, answers, deliveries, audit, stop } = await this.handleCalls(turn, step.calls, signal, totals);
      this.behind(run, async () => {
        const rows = await deps.records.answers(turn, answers, deliveries, audit);
        await deps.conversations.notify(turn.tenantId, turn.sessionId, [await kept, ...rows]);
      });
      history.push(historyMessage(message), ...answers.map(historyMessage));
      lastMessageId = messageId;
      if (pending) return { status: 'requires_action', finishReason: null, content: step.text, messageId: lastMessageId, pending };
      // A subagent that could not finish: the turn ends here rather than go on without its work.
      if (stop) return { status: 'completed', finishReason: stop, content: step.text, messageId: lastMessageId, pending: null };
    }
  }

  /** The turn's end when an input guardrail fires on the person's message: no model is called. */
  private async inputStopped(turn: Turn, run: HeldRun): Promise<Outcome | undefined> {
    if (!turn.guardrails || turn.inputText === undefined) return undefined;
    const check = await firstFiring(turn.guardrails.input, turn.inputText, this.deps.moderate, turn.target, run.controller.signal);
    if (check === null) return undefined;
    return guardrailStop('input', check, { draftId: null, message: { role: 'assistant', content: '', runId: turn.runId, subject: turn.subject, model: turn.model }, usage: undefined });
  }

  /** A step's prompt: the system text (none when empty), then the conversation, clamped to the turn's context. */
  private promptOf(turn: Pick<Turn, 'maxContextTokens'>, system: string, conversation: ModelMessage[][]): Promise<ModelMessage[]> {
    return clampHistory(system === '' ? null : { role: 'system', content: system }, conversation, turn.maxContextTokens);
  }

  /**
   * The parts and reservation of the run's early call, when this first step's prompt is the one it was sent with (a
   * steer taken meanwhile changes it); the call is dropped otherwise. Throws what the early call threw.
   */
  private async takeEarly(run: HeldRun, messages: ModelMessage[]): Promise<{ parts: AsyncIterable<StreamPart>; admission: Admission } | undefined> {
    const early = run.early;
    if (!early) return undefined;
    run.early = undefined;
    const started = await early.started;
    if (JSON.stringify(started.messages) === JSON.stringify(messages)) return { parts: started.parts, admission: started.admission };
    this.discard(early);
    return undefined;
  }

  /** The model call of a step: its parts as they come. */
  private call(turn: EarlyTurn, model: LanguageModel, messages: ModelMessage[], signal: AbortSignal): AsyncIterable<StreamPart> {
    const tools = turn.tools.definitions();
    return model.stream({
      model: turn.model,
      messages,
      ...(tools.length > 0 ? { tools } : {}),
      ...(turn.effort === undefined ? {} : { effort: turn.effort }),
      signal,
    });
  }

  /**
   * One model call, relayed token by token (the early call's parts when it was sent before the run was stored). A
   * failure comes back as `failure`, with whatever text arrived first. The call's reservation is settled here, with
   * its usage, or released when it reported none.
   */
  private async step(
    turn: Turn,
    model: LanguageModel,
    messages: ModelMessage[],
    signal: AbortSignal,
    totals: TurnTotals,
    admission: Admission,
    early?: AsyncIterable<StreamPart>,
  ) {
    let text = '';
    const calls: ModelToolCall[] = [];
    let finishReason: ModelFinishReason = 'stop';
    let usage: Usage | undefined;
    let failure: unknown;
    const draft = this.deps.drafts.start({ tenantId: turn.tenantId, sessionId: turn.sessionId, runId: turn.runId, subject: turn.subject, model: turn.model });
    const tokens = new TokenRelay((frame) => this.frame(turn.tenantId, turn.runId, frame));
    // Output guardrails judge the text before it is relayed (or drafted), and stop the step when one fires.
    const gate = turn.guardrails && !turn.guardrails.output.empty ? new OutputGate(turn.guardrails.output) : undefined;
    let fired: string | null = null;
    try {
      for await (const part of early ?? this.call(turn, model, messages, signal)) {
        if (part.type === 'text-delta') {
          if (part.text === '') continue;
          // A provider's text may hold what no store takes (NUL, a lone surrogate): kept, as U+FFFD.
          const piece = storableText(part.text);
          text += piece;
          if (!gate) {
            await tokens.send({ type: 'token', text: piece });
            draft.grow(text);
            continue;
          }
          const verdict = gate.grow(text);
          // Leaving the loop ends the model's stream: nothing more of this answer is asked for.
          if (verdict.fired !== null) {
            fired = verdict.fired;
            break;
          }
          if (verdict.release !== '') {
            await tokens.send({ type: 'token', text: verdict.release });
            draft.grow(gate.shown(text));
          }
        } else if (part.type === 'tool-call') {
          const { id, name, arguments: args } = part.call;
          calls.push({ id: storableText(id), name: storableText(name), arguments: storableText(args) });
        }
        else if (part.type === 'finish') {
          finishReason = part.finishReason;
          usage = part.usage;
        } else failure = part.error;
      }
    } catch (error) {
      // A save in flight lands before whoever handles this settles the run's drafts.
      await tokens.flushed().catch(() => undefined);
      await draft.settled();
      await admission.settle(null);
      throw error;
    }
    // The step's last token frames may still be on their way to the log: the caller waits for them before it writes
    // anything that depends on them, and a run's last step lets them overlap the statement that ends it.
    const logged = tokens.flushed();
    logged.catch(() => undefined);
    const draftId = await draft.settled();
    // Counted now (the caps and the answer's totals); the row is written with the step's message. A call that reported
    // no usage (it failed, or a guardrail stopped it) counts nothing, and its reservation is released.
    const row = usage ? await this.countUsage(turn, usage, totals, admission) : undefined;
    if (!usage) await admission.settle(null);
    /** Relays what the gate held back, once the whole text has passed. */
    const release = async () => {
      const rest = gate?.rest(text) ?? '';
      if (rest !== '') await this.frame(turn.tenantId, turn.runId, { type: 'token', text: rest });
    };
    return { text, shown: gate ? gate.shown(text) : text, calls, finishReason, failure, draftId, usage: row, fired, release, logged };
  }

  /**
   * Tool calls of one step. Calls outside the turn's set, or with arguments that are not a JSON object, are answered
   * with a refusal the model can read (and the turn goes on); client calls, approvals and questions pause the turn.
   */
  private async handleCalls(
    turn: Turn,
    calls: ModelToolCall[],
    signal: AbortSignal,
    totals: TurnTotals,
  ): Promise<{ pending: SessionPending | null; answers: NewMessage[]; deliveries: DeliveryRecord[]; audit: AuditEntry[]; stop?: 'subagents_incomplete' }> {
    const pending: SessionPending = { run_id: turn.runId, tool_calls: [], approvals: [], questions: [] };
    const answers: NewMessage[] = [];
    const deliveries: DeliveryRecord[] = [];
    const audit: AuditEntry[] = [];
    let stop: 'subagents_incomplete' | undefined;
    const refuse = async (call: ModelToolCall, result: string, args: unknown) => {
      await this.frame(turn.tenantId, turn.runId, { type: 'tool_start', tool_call_id: call.id, name: call.name, arguments: args });
      await this.frame(turn.tenantId, turn.runId, { type: 'tool_end', tool_call_id: call.id, name: call.name, ok: false, result });
      answers.push({ role: 'tool', content: result, toolCallId: call.id, name: call.name, runId: turn.runId, subject: turn.subject });
    };
    for (const call of calls) {
      const tool = turn.tools.get(call.name);
      const args = parseArguments(call.arguments);
      if (!tool) {
        await refuse(call, toolNotAvailable(call.name), args ?? call.arguments);
        continue;
      }
      if (!args) {
        await refuse(call, `The arguments of '${call.name}' were not a JSON object; call it again with valid JSON arguments.`, call.arguments);
        continue;
      }
      if (tool.kind === 'server' && tool.server && !tool.requiresApproval) {
        const { stop: stopped, delivery, ok, ...answer } = await this.runServerCall(turn, tool.server, { id: call.id, name: call.name, arguments: args }, signal, totals);
        stop ??= stopped;
        answers.push(answer);
        if (delivery) deliveries.push(delivery);
        audit.push(toolCallEntry(turn, call.id, call.name, tool.server.origin ?? 'builtin', ok));
      } else if (tool.kind === 'ask_user') {
        const options = Array.isArray(args.options) ? args.options.filter((option): option is string => typeof option === 'string') : undefined;
        pending.questions.push({ tool_call_id: call.id, question: String(args.question ?? ''), ...(options && options.length > 0 ? { options } : {}) });
      } else if (tool.kind === 'request_approval') {
        pending.approvals.push({
          tool_call_id: call.id,
          action: oneLine(String(args.action ?? 'approve this step')),
          detail: typeof args.detail === 'string' ? args.detail : '',
          tool: null,
          arguments: args,
          kind: 'request_approval',
        });
      } else if (tool.requiresApproval) {
        pending.approvals.push({
          tool_call_id: call.id,
          action: oneLine(tool.definition.description) || `call ${call.name}`,
          detail: JSON.stringify(args),
          tool: call.name,
          arguments: args,
          kind: tool.kind === 'server' ? 'server' : 'client',
        });
      } else {
        pending.tool_calls.push({ id: call.id, name: call.name, arguments: args });
      }
    }
    const paused = pending.tool_calls.length + pending.approvals.length + pending.questions.length > 0;
    return { pending: paused ? pending : null, answers, deliveries, audit, ...(stop ? { stop } : {}) };
  }

  /**
   * One call of a tool the service runs, between its tool_start and tool_end frames; a failure is the call's result
   * (the model reads it and the turn goes on).
   */
  private async runServerCall(
    turn: Turn,
    server: ServerTool,
    call: ClearedCall,
    signal: AbortSignal,
    totals: TurnTotals,
  ): Promise<NewMessage & { ok: boolean; stop?: 'subagents_incomplete'; delivery?: DeliveryRecord }> {
    await this.frame(turn.tenantId, turn.runId, { type: 'tool_start', tool_call_id: call.id, name: call.name, arguments: call.arguments });
    const context = { sessionId: turn.sessionId, runId: turn.runId, toolCallId: call.id, model: turn.model };
    const outcome = await server.run(call.arguments, signal, context).catch((error: unknown): ServerToolOutcome => {
      if (signal.aborted) throw signal.reason;
      this.deps.logger.warn({ err: error, run_id: turn.runId, tool: call.name }, 'server tool failed');
      return { ok: false, message: `${call.name} failed: ${error instanceof Error ? error.message : String(error)}` };
    });
    // A handler's or a page's text may hold what no store takes (NUL, a lone surrogate): kept, as U+FFFD.
    const result = storableText(!outcome.ok ? outcome.message : 'text' in outcome ? outcome.text : citeSources(totals.citations, outcome.sources, outcome.style));
    await this.frame(turn.tenantId, turn.runId, { type: 'tool_end', tool_call_id: call.id, name: call.name, ok: outcome.ok, result });
    const stop = !outcome.ok ? outcome.stop : undefined;
    return {
      role: 'tool',
      content: result,
      toolCallId: call.id,
      name: call.name,
      runId: turn.runId,
      subject: turn.subject,
      ok: outcome.ok,
      ...(stop ? { stop } : {}),
      ...(outcome.delivery ? { delivery: outcome.delivery } : {}),
    };
  }

  /**
   * The approved server calls the turn starts with, made and their results stored. A tool this turn no longer
   * offers (its capability or the tool itself gone since the pause) is refused as any call outside the set is.
   */
  private async makeCleared(turn: Turn, run: HeldRun, totals: TurnTotals): Promise<HistoryMessage[]> {
    const signal = run.controller.signal;
    const answers: NewMessage[] = [];
    const deliveries: DeliveryRecord[] = [];
    const audit: AuditEntry[] = [];
    for (const call of turn.cleared ?? []) {
      const tool = turn.tools.get(call.name);
      if (tool?.kind === 'server' && tool.server) {
        const { stop: _stop, delivery, ok, ...answer } = await this.runServerCall(turn, tool.server, call, signal, totals);
        answers.push(answer);
        if (delivery) deliveries.push(delivery);
        audit.push(toolCallEntry(turn, call.id, call.name, tool.server.origin ?? 'builtin', ok));
        continue;
      }
      const result = toolNotAvailable(call.name);
      await this.frame(turn.tenantId, turn.runId, { type: 'tool_start', tool_call_id: call.id, name: call.name, arguments: call.arguments });
      await this.frame(turn.tenantId, turn.runId, { type: 'tool_end', tool_call_id: call.id, name: call.name, ok: false, result });
      answers.push({ role: 'tool', content: result, toolCallId: call.id, name: call.name, runId: turn.runId, subject: turn.subject });
    }
    this.behind(run, async () => {
      const rows = await this.deps.records.answers(turn, answers, deliveries, audit);
      await this.deps.conversations.notify(turn.tenantId, turn.sessionId, rows);
    });
    return answers.map(historyMessage);
  }

  /** Starts a write after the run's earlier ones, without waiting for it (HeldRun.writes); answers its result. */
  private behind<T>(run: HeldRun, write: () => Promise<T>): Promise<T> {
    const written = run.writes.then(write);
    run.writes = written.then(() => undefined);
    // Observed where the run waits for its writes (and by whoever awaits the result).
    run.writes.catch(() => undefined);
    written.catch(() => undefined);
    return written;
  }

  /** Steer messages waiting for this boundary become ordinary user messages. */
  private async takeSteers(turn: Turn): Promise<MessageRow[]> {
    const steers = await this.deps.runs.takeSteers(turn.runId);
    return this.deps.conversations.append(
      turn.tenantId,
      turn.sessionId,
      // Only the owner may steer (docs/decisions/0026), so a steer message is the turn's subject's.
      steers.map((message) => ({ role: 'user' as const, content: message, runId: turn.runId, subject: turn.subject, metadata: { steer: true } })),
    );
  }

  /** The final message of a step: its draft settled, or appended when no draft was written. */
  private async keep(turn: Turn, draftId: string | null, message: NewMessage): Promise<MessageRow> {
    if (draftId !== null) return this.deps.conversations.settleDraft(turn.tenantId, turn.sessionId, draftId, message);
    const [row] = await this.deps.conversations.append(turn.tenantId, turn.sessionId, [message]);
    return row!;
  }

  /** A stopped run: cancelled by the person, or else (cut off by a drain) thrown, so it fails with that reason. */
  private stopped(signal: AbortSignal, messageId: string | null, content = ''): Outcome {
    if (!(signal.reason instanceof RunCancelledError)) throw signal.reason;
    return { status: 'cancelled', finishReason: 'cancelled', content, messageId, pending: null };
  }

  /** Adds a call's usage to the answer's totals and settles its reservation with it; returns the row to write for it. */
  private async countUsage(turn: Turn, usage: Usage, totals: TurnTotals, admission: Admission): Promise<UsageRow> {
    const cost = await this.deps.usage.count({ price: turn.price, admission, usage });
    totals.inputTokens += usage.inputTokens;
    totals.outputTokens += usage.outputTokens;
    if (cost !== null) totals.costUsd = (totals.costUsd ?? 0) + cost;
    this.deps.observe?.usage(usage.inputTokens, usage.outputTokens, cost);
    return { model: turn.model, purpose: 'turn', inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, costUsd: cost };
  }

  /** Writes the usage row of a step that is not the run's last (the last one goes with the run's end). */
  private async recordUsage(turn: Turn, row: UsageRow): Promise<void> {
    await this.deps.usage.write({ tenantId: turn.tenantId, sessionId: turn.sessionId, runId: turn.runId }, row);
  }

  /**
   * Ends the run in one statement: the last step's message and usage, its row, the session's rollup and pause; then
   * the `done` frame. A steer that arrived after the last boundary leaves the run running (`steered`): the caller
   * loops again. A run no longer ours (swept as lost) ends quietly: whoever swept it ended its log.
   */
  private async complete(turn: Turn, run: HeldRun, outcome: Outcome, totals: TurnTotals, history: HistoryMessage[]): Promise<'ended' | 'steered' | 'gone'> {
    const { deps } = this;
    // The run's end is written after its other writes; one that failed fails the run instead.
    await run.writes;
    const last = outcome.last;
    const ending = deps.records.end({
      tenantId: turn.tenantId,
      sessionId: turn.sessionId,
      runId: turn.runId,
      ending: { status: outcome.status, finishReason: outcome.finishReason },
      rollup: { status: outcome.status, model: turn.model, pending: outcome.pending },
      ...(last ? { message: { draftId: last.draftId, value: last.message } } : {}),
      ...(last?.usage ? { usage: last.usage } : {}),
      // Only an agent that finished on its own answers a late steer; a limit, a pause or a cancel ends the run.
      unlessSteered: outcome.status === 'completed' && outcome.finishReason === null,
    });
    let tokensRefused: { error: unknown } | undefined;
    const [ended] = await Promise.all([
      ending.catch(async (error: unknown) => {
        // The statement that ends the run failed: its last answer and usage are kept on their own if they can be
        // (best effort; the database may be what failed), and the run then fails as any other.
        if (last) {
          if (last.usage) await this.recordUsage(turn, last.usage).catch(() => undefined);
          await this.keep(turn, last.draftId, { ...last.message, metadata: { ...last.message.metadata, incomplete: true } }).catch(() => undefined);
        }
        throw error;
      }),
      // The last token frames land while the statement runs, and before the `done` frame (one connection keeps the
      // log's appends in order).
      outcome.tokensLogged?.catch((error: unknown) => void (tokensRefused = { error })),
    ]);
    if (ended.message) history.push(ended.message);
    // The conversation's followers hear of the message while the log takes its `done` frame: both are stored by now.
    const notified = ended.message ? deps.conversations.notify(turn.tenantId, turn.sessionId, [ended.message]) : undefined;
    if (ended.outcome !== 'ended') {
      await notified;
      // A steered run streams on: text its log refused would be missing from what its followers read for good, so
      // it fails, as a refused frame mid-stream fails it.
      if (tokensRefused && ended.outcome === 'steered') throw tokensRefused.error;
      return ended.outcome;
    }
    // A frame the log refused leaves a gap a follower reads past: the run's end is stored, and its `done` frame
    // carries the whole answer (docs/decisions/0068).
    if (tokensRefused) deps.logger.warn({ err: tokensRefused.error, run_id: turn.runId }, 'the last token frames of a run did not reach its log; its done frame carries the answer');
    const messageId = ended.message?.id ?? outcome.messageId;
    deps.observe?.turnEnded(outcome.status);
    await Promise.all([notified, this.endStored(turn, this.doneFrame(turn, { ...outcome, messageId }, totals))]);
    if (turn.autoTitle && outcome.status !== 'cancelled') deps.onTitleWanted?.(turn);
    return 'ended';
  }

  /**
   * The `done` frame of a run whose end is stored. Its waiter has the answer at once; the append is tried again
   * when it fails, and never turns into an `error` frame: the run completed, whatever its log could take. A log
   * that takes none of the tries stays without a terminal frame (logged): its followers wait until they leave or
   * the log expires, as they did when a failed run's `error` frame could not be written either.
   */
  private async endStored(turn: Turn, frame: TerminalFrame): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.end(turn.tenantId, turn.runId, frame, { stored: true });
        return;
      } catch (error) {
        if (attempt === DONE_FRAME_ATTEMPTS) {
          this.deps.logger.error({ err: error, run_id: turn.runId }, 'could not write the done frame of a run whose end is stored');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100 * 4 ** (attempt - 1)));
      }
    }
  }

  doneFrame(
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
      usage: usageOut(totals),
      citations: totals.citations,
    };
  }

  private async fail(turn: Turn, error: unknown): Promise<void> {
    const frame = this.errorFrame(error, turn.runId, turn.sessionId);
    if (frame.status >= 500) this.deps.logger.error({ err: error, run_id: turn.runId }, 'run failed');
    else this.deps.logger.info({ run_id: turn.runId, status: frame.status, code: frame.code }, 'run ended with an error');
    // Text of a step that broke off outside its own handling is kept too.
    await this.deps.conversations.settleDraftsOf(turn.tenantId, turn.sessionId, turn.runId).catch((err: unknown) =>
      this.deps.logger.warn({ err, run_id: turn.runId }, 'could not settle the draft of a failed run'),
    );
    await this.deps.runs.end(
      turn.runId,
      { status: 'failed', error: { status: frame.status, code: frame.code, message: frame.message, retryable: frame.retryable } },
      {
        alongside: async (trx, moved) => {
          if (moved) await this.deps.conversations.setRollup(trx, turn.sessionId, { status: 'failed', model: turn.model });
        },
      },
    );
    this.deps.observe?.turnEnded('failed');
    await this.end(turn.tenantId, turn.runId, frame);
  }
}

/** The audit log's entry of a server tool's call: for whom, which tool, how it went. */
function toolCallEntry(turn: Turn, toolCallId: string, tool: string, origin: string, ok: boolean): AuditEntry {
  return {
    tenantId: turn.tenantId,
    actor: turn.subject,
    actorKind: 'end_user',
    action: 'tool_call',
    resource: { tool, origin, run_id: turn.runId, session_id: turn.sessionId, tool_call_id: toolCallId },
    outcome: ok ? 'ok' : 'failed',
  };
}

/** The end of a turn a guardrail stopped: its last message says which check fired (and is all it says). */
function guardrailStop(side: 'input' | 'output', check: string, last: NonNullable<Outcome['last']>): Outcome {
  const content = withheld(side, check);
  return {
    status: 'completed',
    finishReason: 'guardrail',
    content,
    messageId: null,
    pending: null,
    last: { ...last, message: { ...last.message, content, toolCalls: null, metadata: { guardrail: { side, check } } } },
  };
}

/**
 * A stream whose first part was asked for already: that part, then the rest. Left early, it ends the stream
 * underneath too, whether or not it got past the first part.
 */
async function* resumed<T>(first: Promise<IteratorResult<T>>, rest: AsyncIterator<T>): AsyncGenerator<T, void, undefined> {
  let delegated = false;
  try {
    const head = await first;
    if (head.done) return;
    yield head.value;
    delegated = true;
    yield* { [Symbol.asyncIterator]: () => rest };
  } finally {
    if (!delegated) await rest.return?.(undefined);
  }
}

/** Token frames in flight at most before the relay waits for the log: a slow event port slows the step, not memory. */
const TOKENS_IN_FLIGHT = 64;
/** Tries at a stored run's `done` frame: 100 and 400 ms apart, about half a second in all. */
const DONE_FRAME_ATTEMPTS = 3;

/**
 * Token frames of one step, appended without waiting for each: the event port keeps their order (one connection to
 * Redis, a synchronous in-process append), so they go out pipelined instead of one round trip after another. The
 * step waits for them all before it ends, and a failed append fails the step there.
 */
class TokenRelay {
  private readonly inFlight = new Set<Promise<void>>();
  private failure: { error: unknown } | undefined;

  constructor(private readonly append: (frame: Frame) => Promise<void>) {}

  async send(frame: Frame): Promise<void> {
    if (this.failure) throw this.failure.error;
    const sent: Promise<void> = this.append(frame).then(
      () => void this.inFlight.delete(sent),
      (error: unknown) => {
        this.inFlight.delete(sent);
        this.failure ??= { error };
      },
    );
    this.inFlight.add(sent);
    if (this.inFlight.size >= TOKENS_IN_FLIGHT) await Promise.all(this.inFlight);
  }

  /** Resolves when every frame sent is in the log; rejects with the first append that failed. */
  async flushed(): Promise<void> {
    await Promise.all(this.inFlight);
    if (this.failure) throw this.failure.error;
  }
}

/** The first line of a text, trimmed to what fits on one line of a UI. */
function oneLine(text: string): string {
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** A step's model call as the caps' estimate sees it (built only for a project with a token or spend cap). */
function planned(turn: EarlyTurn, messages: ModelMessage[]): PlannedCall {
  return { model: turn.model, price: turn.price, messages, tools: turn.tools.definitions() };
}
