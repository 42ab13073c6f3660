// What a turn writes, in the order its run needs: a tool step's message and answers behind the run's earlier writes,
// the steers taken at a boundary, a broken step's text, each model call's usage, and the run's end (one statement,
// then its `done` frame) or its failure. Kept together so that what a turn writes, and when, reads in one place.
import type { Logger } from '@agentplane/lib/logging';
import type { Usage } from '../../models/port.js';
import type { AuditEntry } from '../../governance/audit.js';
import type { Conversations, MessageRow, NewMessage } from '../../sessions/conversations.js';
import type { HistoryMessage } from '../history.js';
import type { Admission } from '../limits.js';
import type { RunStore } from '../runs.js';
import type { DeliveryRecord, TurnRecords, UsageRow } from '../turn-records.js';
import type { UsageRecorder } from '../usage.js';
import { doneFrame, errorFrame } from './frames.js';
import type { HeldRun, Outcome, RunLog, TerminalFrame, Turn, TurnTotals } from './turn.js';

/** What the writer needs besides the run's log. */
export interface TurnWriterDeps {
  conversations: Conversations;
  runs: RunStore;
  records: TurnRecords;
  usage: UsageRecorder;
  logger: Logger;
  /** Runs when a turn ended without a title on its conversation (auto_title); best effort. */
  onTitleWanted?: (turn: Turn) => void;
  /** Told of each ended turn and each model call's usage (the runtime's metrics). */
  observe?: { turnEnded(status: string): void; usage(inputTokens: number, outputTokens: number, costUsd: number | null): void };
}

export class TurnWriter {
  constructor(
    private readonly deps: TurnWriterDeps,
    private readonly log: RunLog,
  ) {}

  /** Starts a write after the run's earlier ones, without waiting for it (HeldRun.writes); answers its result. */
  private behind<T>(run: HeldRun, write: () => Promise<T>): Promise<T> {
    const written = run.writes.then(write);
    run.writes = written.then(() => undefined);
    // Observed where the run waits for its writes (and by whoever awaits the result).
    run.writes.catch(() => undefined);
    written.catch(() => undefined);
    return written;
  }

  /** A tool step's message and usage, written behind the run's earlier writes while its calls are made. */
  step(turn: Turn, run: HeldRun, message: { id: string; draftId: string | null; value: NewMessage }, usage: UsageRow | undefined): Promise<MessageRow> {
    return this.behind(run, () => this.deps.records.step({ tenantId: turn.tenantId, sessionId: turn.sessionId, runId: turn.runId, message, usage }));
  }

  /**
   * Tool answers (their deliveries and audit entries with them), written behind the run's earlier writes; the
   * conversation's followers then hear of them, after the step's own message when `kept` is given.
   */
  answers(turn: Turn, run: HeldRun, answers: NewMessage[], deliveries: DeliveryRecord[], audit: AuditEntry[], kept?: Promise<MessageRow>): void {
    this.behind(run, async () => {
      const rows = await this.deps.records.answers(turn, answers, deliveries, audit);
      await this.deps.conversations.notify(turn.tenantId, turn.sessionId, kept ? [await kept, ...rows] : rows);
    });
  }

  /** Steer messages waiting for this boundary become ordinary user messages. */
  async takeSteers(turn: Turn): Promise<MessageRow[]> {
    const steers = await this.deps.runs.takeSteers(turn.runId);
    return this.deps.conversations.append(
      turn.tenantId,
      turn.sessionId,
      // Only the owner may steer (docs/decisions/0026), so a steer message is the turn's subject's.
      steers.map((message) => ({ role: 'user' as const, content: message, runId: turn.runId, subject: turn.subject, metadata: { steer: true } })),
    );
  }

  /** The final message of a step: its draft settled, or appended when no draft was written. */
  async keep(turn: Turn, draftId: string | null, message: NewMessage): Promise<MessageRow> {
    if (draftId !== null) return this.deps.conversations.settleDraft(turn.tenantId, turn.sessionId, draftId, message);
    const [row] = await this.deps.conversations.append(turn.tenantId, turn.sessionId, [message]);
    return row!;
  }

  /** Adds a call's usage to the answer's totals and settles its reservation with it; returns the row to write for it. */
  async countUsage(turn: Turn, usage: Usage, totals: TurnTotals, admission: Admission): Promise<UsageRow> {
    const cost = await this.deps.usage.count({ price: turn.price, admission, usage });
    totals.inputTokens += usage.inputTokens;
    totals.outputTokens += usage.outputTokens;
    if (cost !== null) totals.costUsd = (totals.costUsd ?? 0) + cost;
    this.deps.observe?.usage(usage.inputTokens, usage.outputTokens, cost);
    return { model: turn.model, purpose: 'turn', inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, costUsd: cost };
  }

  /** Writes the usage row of a step that is not the run's last (the last one goes with the run's end). */
  async recordUsage(turn: Turn, row: UsageRow): Promise<void> {
    await this.deps.usage.write({ tenantId: turn.tenantId, sessionId: turn.sessionId, runId: turn.runId }, row);
  }

  /**
   * Ends the run in one statement: the last step's message and usage, its row, the session's rollup and pause; then
   * the `done` frame. A steer that arrived after the last boundary leaves the run running (`steered`): the caller
   * loops again. A run no longer ours (swept as lost) ends quietly: whoever swept it ended its log.
   */
  async complete(turn: Turn, run: HeldRun, outcome: Outcome, totals: TurnTotals, history: HistoryMessage[]): Promise<'ended' | 'steered' | 'gone'> {
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
    await Promise.all([notified, this.endStored(turn, doneFrame(turn, { ...outcome, messageId }, totals))]);
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
        await this.log.end(turn.tenantId, turn.runId, frame, { stored: true });
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

  /** Fails the run: keeps its drafts, ends its row and session as failed, then its `error` frame. */
  async fail(turn: Turn, error: unknown): Promise<void> {
    const frame = errorFrame(error, turn.runId, turn.sessionId);
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
    await this.log.end(turn.tenantId, turn.runId, frame);
  }
}

/** Tries at a stored run's `done` frame: 100 and 400 ms apart, about half a second in all. */
const DONE_FRAME_ATTEMPTS = 3;
