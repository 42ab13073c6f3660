// What a deploy waits on: requests and runs in flight, and whether the process is draining. On SIGTERM the
// process stops accepting connections, finishes accepted work, then exits; a second SIGTERM exits at once.
import type { Server } from 'node:http';
import type { Logger } from '../logging.js';

export class Lifecycle {
  private requests = 0;
  private work = 0;
  private drainingSince: Date | null = null;
  private idleWaiters: (() => void)[] = [];
  private readonly drainStarted = new AbortController();

  /**
   * Aborts when the drain starts. Long-lived streams end on it (their clients reconnect to another replica with
   * Last-Event-ID) so they do not hold a deploy; runs are work and go on.
   */
  get drainSignal(): AbortSignal {
    return this.drainStarted.signal;
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

  /** Stops the servers accepting connections and resolves once every accepted request and run is done. */
  async drain(servers: Server[], timeoutMs: number): Promise<'idle' | 'timeout'> {
    this.drainingSince ??= new Date();
    this.drainStarted.abort();
    for (const server of servers) {
      server.close();
      // Idle keep-alive sockets would hold close() open; busy ones finish their current request first.
      server.closeIdleConnections();
    }
    if (this.inFlight.total === 0) return 'idle';
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), timeoutMs);
      timer.unref();
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve('idle');
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

export interface ShutdownOptions {
  lifecycle: Lifecycle;
  servers: Server[];
  logger: Logger;
  graceMs: number;
  /** Closes stores and connections after the drain. */
  close: () => Promise<void>;
  exit?: (code: number) => void;
}

/** SIGTERM/SIGINT: drain, close, exit 0. A second signal exits at once with 1. */
export function exitOnSignals(options: ShutdownOptions): void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      options.logger.warn({ signal }, 'second signal: exiting now');
      exit(1);
      return;
    }
    stopping = true;
    options.logger.info({ signal, in_flight: options.lifecycle.inFlight.total }, 'draining');
    void (async () => {
      const outcome = await options.lifecycle.drain(options.servers, options.graceMs);
      if (outcome === 'timeout') options.logger.warn({ in_flight: options.lifecycle.inFlight }, 'drain timed out: work was cut off');
      await options.close().catch((err: unknown) => options.logger.error({ err }, 'error while closing'));
      options.logger.info('stopped');
      // Work cut off by the grace period is a failed stop, and says so to whoever supervises the process.
      exit(outcome === 'idle' ? 0 : 1);
    })();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
