// What a deploy waits on: requests and runs in flight, and whether the process is draining. On SIGTERM the
// process takes no new work (only /health, /ready and /metrics are still answered, so probes keep working),
// finishes accepted requests, runs and streams within the grace period, cuts off what is left so it ends with a
// retryable error, then exits; a signal sent again later exits at once (docs/decisions/0028, 0071).
import type { Server } from 'node:http';
import type { Logger } from '../logging.js';

/**
 * How long work cut off at the end of the grace period gets to record how far it came (a run keeps its text and
 * ends its log with a retryable `error` frame, which its streams deliver). A pod's termination grace period must
 * cover the drain grace plus this.
 */
export const CUT_OFF_SECONDS = 5;

/** Requests a draining process still answers: probes and scrapes connect anew, and must not be refused. */
export const answeredWhileDraining: ReadonlySet<string> = new Set(['/health', '/ready', '/metrics']);

export class Lifecycle {
  private requests = 0;
  private work = 0;
  private drainingSince: Date | null = null;
  private idleWaiters: (() => void)[] = [];
  private readonly drainStarted = new AbortController();
  private readonly graceEnded = new AbortController();

  /**
   * Aborts when the drain starts. Endless streams (a conversation's events) end on it, their clients reconnect to
   * another replica; runs and the streams that follow them are accepted work and go on to their terminal frame.
   */
  get drainSignal(): AbortSignal {
    return this.drainStarted.signal;
  }

  /** Aborts when the grace period ends with work still running: runs stop, keeping what they wrote. */
  get cutOffSignal(): AbortSignal {
    return this.graceEnded.signal;
  }

  get inFlight(): { requests: number; runs: number; total: number } {
    return { requests: this.requests, runs: this.work, total: this.requests + this.work };
  }

  get draining(): boolean {
    return this.drainingSince !== null;
  }

  /** Counts one accepted request until the returned `done` is called (extra calls are ignored). */
  beginRequest(): () => void {
    return this.begin('requests');
  }

  /** Counts one unit of detached work (a run) that must finish before the process exits. */
  beginWork(): () => void {
    return this.begin('work');
  }

  private begin(counter: 'requests' | 'work'): () => void {
    this[counter] += 1;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this[counter] -= 1;
      this.notifyIfIdle();
    };
  }

  /**
   * Starts draining: new requests other than probes are refused (createHttpApp), idle keep-alive sockets are
   * closed, and this resolves once every accepted request and run is done. When `graceMs` passes first, work still
   * running is cut off (`cutOffSignal`) and gets `cutOffMs` to record how far it came.
   */
  async drain(servers: Server[], graceMs: number, cutOffMs = CUT_OFF_SECONDS * 1000): Promise<'idle' | 'timeout'> {
    this.drainingSince ??= new Date();
    this.drainStarted.abort();
    // The listener stays open: a probe connects anew and must be answered. Busy sockets close after their answer.
    for (const server of servers) server.closeIdleConnections();
    if (await this.idleWithin(graceMs)) return 'idle';
    this.graceEnded.abort();
    await this.idleWithin(cutOffMs);
    return 'timeout';
  }

  private idleWithin(timeoutMs: number): Promise<boolean> {
    if (this.inFlight.total === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private notifyIfIdle(): void {
    if (this.inFlight.total !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const waiter of waiters) waiter();
  }
}

/**
 * How long after the first stop signal another one is still the same request. A terminal's Ctrl-C and systemd's stop
 * signal a whole process group, so a server under `npm start` gets each signal twice within milliseconds (directly,
 * and forwarded by npm; once more per launcher in between): those copies must not force the exit. A person who means
 * "stop now" signals again later (docs/decisions/0071).
 */
export const REPEATED_SIGNAL_SECONDS = 2;

export interface ShutdownOptions {
  lifecycle: Lifecycle;
  servers: Server[];
  logger: Logger;
  graceMs: number;
  /** Closes stores and connections after the drain. */
  close: () => Promise<void>;
  exit?: (code: number) => void;
  /** A monotonic clock in milliseconds (tests give their own). */
  now?: () => number;
}

/**
 * What a stop signal does: the first drains, stops listening, closes and exits 0 (1 when work was cut off); one within
 * `REPEATED_SIGNAL_SECONDS` of the first is a copy of it and changes nothing; one after that exits at once with 1.
 */
export function stopOnSignal(options: ShutdownOptions): (signal: NodeJS.Signals) => void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const now = options.now ?? (() => performance.now());
  let firstAt: number | null = null;
  return (signal) => {
    if (firstAt !== null) {
      const sinceFirstMs = now() - firstAt;
      if (sinceFirstMs < REPEATED_SIGNAL_SECONDS * 1000) {
        // Under `npm start` every stop brings one: the "draining" line already told a person how to force the exit.
        options.logger.debug({ signal, since_first_ms: Math.round(sinceFirstMs) }, 'already draining: the same stop signal again');
        return;
      }
      options.logger.warn({ signal, since_first_ms: Math.round(sinceFirstMs) }, 'signalled again: exiting now');
      exit(1);
      return;
    }
    firstAt = now();
    options.logger.info({ signal, in_flight: options.lifecycle.inFlight.total, exit_now: `signal again ${REPEATED_SIGNAL_SECONDS} s or more from now` }, 'draining');
    void (async () => {
      const outcome = await options.lifecycle.drain(options.servers, options.graceMs);
      if (outcome === 'timeout') options.logger.warn({ in_flight: options.lifecycle.inFlight }, 'drain timed out: work was cut off');
      for (const server of options.servers) {
        server.close();
        server.closeAllConnections();
      }
      await options.close().catch((err: unknown) => options.logger.error({ err }, 'error while closing'));
      options.logger.info('stopped');
      // Work cut off by the grace period is a failed stop, and says so to whoever supervises the process.
      exit(outcome === 'idle' ? 0 : 1);
    })();
  };
}

/** SIGTERM and SIGINT stop the process through one `stopOnSignal`: either signal is the same request. */
export function exitOnSignals(options: ShutdownOptions): void {
  const onSignal = stopOnSignal(options);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
