// Turns as a service (SPEC.md Chat): starting one (prepared in turn/prepare.ts, then launched as a detached run, or
// answered at once when it stored a pause or has no model), waiting for its result, resuming its stream, steering and
// cancelling it. Knows nothing of HTTP: routes hand it the principal and the parsed body.
import { AppError, conflict, invalidArgument, notFound, permissionDenied } from '@agentplane/lib/errors';
import type { EventBus, RunLogEvent } from '@agentplane/lib/events/port';
import { kindOfStatus } from '@agentplane/lib/http/errors';
import { requireCapability } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import { canSeeOwner, ownsConversation } from '../sessions/access.js';
import type { SessionRow } from '../sessions/conversations.js';
import type { TurnEngine } from './engine.js';
import { runLogKey, type RunRow } from './runs.js';
import type { ChatRequestInput, ChatResponseOutput, Frame } from './schemas.js';
import { doneFrame, errorFrame } from './turn/frames.js';
import { prepareTurn, type PreparationDeps, type Refused } from './turn/prepare.js';
import { emptyTotals, type TerminalFrame } from './turn/turn.js';

/**
 * How a start went: the run was stored and started (its log has a `start` frame), or it was refused before anything
 * was stored (turn/prepare.ts).
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
  | Refused;

export interface ChatServiceDeps extends PreparationDeps {
  events: EventBus;
  engine: TurnEngine;
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
    const prepared = await prepareTurn(deps, principal, request, authorized, options);
    if (prepared.kind === 'refused') return prepared;
    const { tenantId, runId, sessionId, start, early, stored, turn } = prepared;
    let settle: (frame: TerminalFrame | undefined) => void = () => undefined;
    const ended = options.awaitEnd ? new Promise<TerminalFrame | undefined>((resolve) => (settle = resolve)) : undefined;
    const endWith = async (frame: TerminalFrame) => {
      await deps.engine.end(tenantId, runId, frame);
      settle(frame);
    };
    try {
      if (turn) {
        await deps.engine.launch(turn, start, ended && settle, early);
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
          doneFrame({ runId, sessionId, model: start.model }, { finishReason: null, content: '', messageId: null, pending: stored.pending }, emptyTotals()),
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

/** What a request narrowed for itself beyond its flags (a subagent's run keeps it). */
export type { RequestNarrowing } from './tools.js';
