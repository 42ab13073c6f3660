// The model and tool loop of one run (DESIGN.md "Runs"): each step calls the model and relays what it says into the
// run's log, the step's tool calls are handled, steer messages are picked up at step boundaries, and the project's
// guardrails may stop it. It ends in an Outcome for the engine to hand to the writer; what it writes on the way goes
// through the writer too, so the order of the run's writes is kept in one place.
import { randomUUID } from 'node:crypto';
import { storableText } from '@agentplane/lib/http/text';
import type { Logger } from '@agentplane/lib/logging';
import type { LanguageModel, ModelFactory, ModelFinishReason, ModelMessage, ModelToolCall, StreamPart, Usage } from '../../models/port.js';
import type { NewMessage } from '../../sessions/conversations.js';
import { citeSources } from '../citations.js';
import type { DraftKeeper } from '../drafts.js';
import { firstFiring, OutputGate, withheld, type Moderate } from '../guardrails.js';
import { forgetOlderPictures, historyMessage, toModelMessages, type HistoryMessage } from '../history.js';
import type { Admission, UsageLimiter } from '../limits.js';
import { RunCancelledError } from '../runs.js';
import { discardEarly } from './early-call.js';
import { callModel, planned, promptOf, TokenRelay } from './model-call.js';
import type { TurnWriter } from './persist.js';
import type { ToolCalls } from './tool-calls.js';
import type { HeldRun, Outcome, RunLog, Turn, TurnTotals } from './turn.js';

/** What the loop needs besides the run's log, its writer and its tool calls. */
export interface TurnLoopDeps {
  models: ModelFactory;
  limiter: UsageLimiter;
  /** Saves the assistant text of steps being streamed, for all runs together (never per token). */
  drafts: DraftKeeper;
  /** Moderation models for the guardrails that name one; without it those checks never fire. */
  moderate?: Moderate;
  logger: Logger;
}

/** Finish reasons of the model that the turn reports (null: the agent finished on its own). */
const reportedFinish: Partial<Record<ModelFinishReason, 'length' | 'content_filter'>> = { length: 'length', content_filter: 'content_filter' };

export class TurnLoop {
  constructor(
    private readonly deps: TurnLoopDeps,
    private readonly log: RunLog,
    private readonly writer: TurnWriter,
    private readonly tools: ToolCalls,
  ) {}

  /** The turn's end when an input guardrail fires on the person's message: no model is called. */
  async inputStopped(turn: Turn, run: HeldRun): Promise<Outcome | undefined> {
    if (!turn.guardrails || turn.inputText === undefined) return undefined;
    const check = await firstFiring(turn.guardrails.input, turn.inputText, this.deps.moderate, turn.target, run.controller.signal);
    if (check === null) return undefined;
    return guardrailStop('input', check, { draftId: null, message: { role: 'assistant', content: '', runId: turn.runId, subject: turn.subject, model: turn.model }, usage: undefined });
  }

  /** The steps of the run, from its first prompt until it ends, pauses or is stopped. */
  async run(turn: Turn, run: HeldRun, history: HistoryMessage[], totals: TurnTotals): Promise<Outcome> {
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
        const steers = await this.writer.takeSteers(turn);
        history.push(...steers);
        for (const steer of turn.guardrails && !turn.guardrails.input.empty ? steers : []) {
          const check = await firstFiring(turn.guardrails!.input, steer.content, deps.moderate, turn.target, signal);
          if (check !== null) return guardrailStop('input', check, { draftId: null, message: { role: 'assistant', content: '', runId: turn.runId, subject: turn.subject, model: turn.model }, usage: undefined });
        }
      }
      if (signal.aborted) return this.stopped(signal, lastMessageId);
      const messages = await promptOf(turn, system, toModelMessages(history));
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
        if (step.usage) await this.writer.recordUsage(turn, step.usage);
        if (step.shown !== '') {
          const kept = await this.writer.keep(turn, step.draftId, {
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
      const kept = this.writer.step(turn, run, { id: messageId, draftId: step.draftId, value: message }, step.usage);
      toolRounds += 1;
      const { pending, answers, images, deliveries, audit, stop } = await this.tools.handleCalls(turn, step.calls, signal, totals);
      this.writer.answers(turn, run, answers, deliveries, audit, kept);
      // A result's pictures go with it into this run's next prompts; they are not stored (docs/decisions/0091).
      history.push(historyMessage(message), ...answers.map((answer) => historyMessage(answer, images.get(answer.toolCallId ?? ''))));
      if (images.size > 0) forgetOlderPictures(history);
      lastMessageId = messageId;
      if (pending) return { status: 'requires_action', finishReason: null, content: step.text, messageId: lastMessageId, pending };
      // A subagent that could not finish: the turn ends here rather than go on without its work.
      if (stop) return { status: 'completed', finishReason: stop, content: step.text, messageId: lastMessageId, pending: null };
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
    discardEarly(early);
    return undefined;
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
    const tokens = new TokenRelay((frame) => this.log.frame(turn.tenantId, turn.runId, frame));
    // Output guardrails judge the text before it is relayed (or drafted), and stop the step when one fires.
    const gate = turn.guardrails && !turn.guardrails.output.empty ? new OutputGate(turn.guardrails.output) : undefined;
    let fired: string | null = null;
    try {
      for await (const part of early ?? callModel(turn, model, messages, signal)) {
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
    const row = usage ? await this.writer.countUsage(turn, usage, totals, admission) : undefined;
    if (!usage) await admission.settle(null);
    /** Relays what the gate held back, once the whole text has passed. */
    const release = async () => {
      const rest = gate?.rest(text) ?? '';
      if (rest !== '') await this.log.frame(turn.tenantId, turn.runId, { type: 'token', text: rest });
    };
    return { text, shown: gate ? gate.shown(text) : text, calls, finishReason, failure, draftId, usage: row, fired, release, logged };
  }

  /** A stopped run: cancelled by the person, or else (cut off by a drain) thrown, so it fails with that reason. */
  private stopped(signal: AbortSignal, messageId: string | null, content = ''): Outcome {
    if (!(signal.reason instanceof RunCancelledError)) throw signal.reason;
    return { status: 'cancelled', finishReason: 'cancelled', content, messageId, pending: null };
  }
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
