// The runs this process holds (DESIGN.md "Runs"): a run is detached from the request that started it, launched here
// and held under a lease; cancel and steer reach it through pub/sub or its row, and runs whose process stopped are
// failed by a sweep. A held run goes through the turn in order: the input guardrails, the approved calls it starts
// with, the model and tool loop (turn/loop.ts), then what it writes at its end (turn/persist.ts), with exactly one
// terminal frame.
import { LogClosedError, type EventBus } from '@agentplane/lib/events/port';
import type { Lifecycle } from '@agentplane/lib/http/lifecycle';
import type { Logger } from '@agentplane/lib/logging';
import type { HistoryMessage } from './history.js';
import {
  RunCancelledError,
  RunInterruptedError,
  RunLeaseLostError,
  runControlChannel,
  runLogKey,
  runLostError,
  type RunControl,
  type RunRow,
} from './runs.js';
import type { Frame } from './schemas.js';
import { callEarly, discardEarly } from './turn/early-call.js';
import { TurnLoop, type TurnLoopDeps } from './turn/loop.js';
import { TurnWriter, type TurnWriterDeps } from './turn/persist.js';
import { ToolCalls } from './turn/tool-calls.js';
import { emptyTotals, type EarlyCall, type EarlyTurn, type HeldRun, type TerminalFrame, type Turn } from './turn/turn.js';

export interface EngineDeps extends TurnLoopDeps, TurnWriterDeps {
  events: EventBus;
  lifecycle: Lifecycle;
  logger: Logger;
  leaseSeconds: number;
}

export class TurnEngine {
  /** Runs this process holds, by id: cancel from this process reaches them without a pub/sub round trip. */
  private readonly held = new Map<string, HeldRun>();

  /** The one timer that renews the leases of every run this process holds; running only while it holds any. */
  private leaseKeeper: NodeJS.Timeout | undefined;

  /** What a held run goes through: its model and tool loop, its tool calls, and what it writes. */
  private readonly writer: TurnWriter;
  private readonly tools: ToolCalls;
  private readonly loop: TurnLoop;

  constructor(private readonly deps: EngineDeps) {
    this.writer = new TurnWriter(deps, this);
    this.tools = new ToolCalls(deps.logger, this, this.writer);
    this.loop = new TurnLoop(deps, this, this.writer, this.tools);
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
        await this.writer.fail(turn, error);
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
   * A held run, in order: the input guardrails on the person's message, the approved calls it starts with, the
   * model and tool loop, then its end written (again, while a steer that came late keeps it going); or its failure.
   */
  private async execute(turn: Turn, run: HeldRun): Promise<void> {
    const { controller } = run;
    const totals = emptyTotals();
    const history: HistoryMessage[] = [...turn.history];
    try {
      let outcome = await this.loop.inputStopped(turn, run);
      if (!outcome) {
        if (turn.cleared) history.push(...(await this.tools.makeCleared(turn, run, totals)));
        outcome = await this.loop.run(turn, run, history, totals);
      }
      while (!run.lost) {
        const ended = await this.writer.complete(turn, run, outcome, totals, history);
        // A steer arrived after the last boundary: the loop runs again under the same run, lease and subscription.
        if (ended !== 'steered') break;
        run.steerNoticed = true;
        outcome = await this.loop.run(turn, run, history, totals);
      }
    } catch (error) {
      // The writes still under way land (or fail) before the run's end is written after them.
      await run.writes.catch(() => undefined);
      run.writes = Promise.resolve();
      if (run.lost) return;
      if (controller.signal.aborted && controller.signal.reason instanceof RunCancelledError) {
        await this.writer.complete(turn, run, { status: 'cancelled', finishReason: 'cancelled', content: '', messageId: null, pending: null }, totals, history);
        return;
      }
      await this.writer.fail(turn, error);
    } finally {
      this.drop(run);
      this.release(turn.runId);
      // A run that stopped without ending its log here (swept as lost by another replica): its waiter reads the log.
      run.ended?.(undefined);
      // The tool families' end-of-turn work (a sandbox paused), after the answer: never delays or fails the turn.
      void turn.tools.ended((family, error) => this.deps.logger.warn({ err: error, run_id: turn.runId, family }, "a tool family's end-of-turn work failed"));
    }
  }

  /**
   * Sends a turn's first model call before the turn is stored, for a prompt known without the store: a new
   * conversation's first step, which sees the system prompt and the person's message alone (a turn with automatic
   * document context searches first, and is not called early). The start statement and the provider's answer then
   * overlap instead of following each other. The limiter is asked first, as the run's first step would.
   */
  callEarly(turn: EarlyTurn, message: string, start: Extract<Frame, { type: 'start' }>): EarlyCall {
    return callEarly(this.deps, this, turn, message, start);
  }

  /** Drops the early call of a turn that was not stored, and closes the log its start frame opened. */
  abandon(early: EarlyCall): void {
    this.discard(early);
    early.logged.then(() => this.deps.events.logs.close(early.key)).catch(() => undefined);
  }

  /** Drops an early call no run took over: aborts it, lets its stream end and releases its reservation. */
  discard(early: EarlyCall): void {
    discardEarly(early);
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

  /** How many of the tenant's runs (one subject's, when named) are running. */
  async runsOf(tenantId: string, subject?: string): Promise<number> {
    return (await this.deps.runs.runningOf(tenantId, subject)).length;
  }

  /** Cancels every running run of a tenant, wherever it runs (the first step of a tenant erase). */
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
}
