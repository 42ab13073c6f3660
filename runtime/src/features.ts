// What a feature brings to the composition root (STYLE.md 16): its part of the tenant erase, its shutdown hooks and
// its background timers. The root makes one host, hands it to each feature's `register...` function and shuts it down
// before the stores close; it never lists a feature's tables, timers or closers itself.
import type { Logger } from '@agentplane/lib/logging';
import type { SubjectForgetter, SubjectRows, SubjectStep } from './governance/forget.js';
import type { EraseStep, RowPurge, TenantEraser } from './tenants/erase.js';

export interface FeatureHost {
  /** A step of the tenant erase outside the row purge; steps of one phase run in registration order. */
  eraseStep(step: EraseStep): void;
  /** A table's rows of a tenant, purged inside the erase transaction in registration order (children before parents). */
  eraseRows(purge: RowPurge): void;
  /** Work before one subject's rows go when they are forgotten (their runs stopped, their bytes removed). */
  forgetStep(step: SubjectStep): void;
  /** A table's rows of one subject, deleted inside the forget's transaction in registration order. */
  forgetRows(rows: SubjectRows): void;
  /** Runs at shutdown, before the stores close; hooks run last registered first. */
  onShutdown(hook: () => Promise<void>): void;
  /**
   * Runs `work` every `intervalMs` (and once at once with `now`) until shutdown, never keeping the process alive;
   * a failure is logged as a warning naming `what`.
   */
  every(what: string, intervalMs: number, work: () => Promise<unknown>, options?: { now?: boolean }): void;
}

export class Features implements FeatureHost {
  private readonly hooks: (() => Promise<void>)[] = [];

  constructor(
    private readonly eraser: TenantEraser,
    private readonly forgetter: SubjectForgetter,
    private readonly logger: Logger,
  ) {}

  forgetStep(step: SubjectStep): void {
    this.forgetter.registerStep(step);
  }

  forgetRows(rows: SubjectRows): void {
    this.forgetter.registerRows(rows);
  }

  eraseStep(step: EraseStep): void {
    this.eraser.registerStep(step);
  }

  eraseRows(purge: RowPurge): void {
    this.eraser.registerRows(purge);
  }

  onShutdown(hook: () => Promise<void>): void {
    this.hooks.unshift(hook);
  }

  every(what: string, intervalMs: number, work: () => Promise<unknown>, options: { now?: boolean } = {}): void {
    // A round still going when the next is due is not joined by another: two sweeps at once would both act on what
    // each read before the other acted (a sandbox paused twice, a row set back to a state it just left).
    let running = false;
    const run = () => {
      if (running) return;
      running = true;
      void work()
        .catch((err: unknown) => this.logger.warn({ err }, `${what} failed`))
        .finally(() => (running = false));
    };
    if (options.now) run();
    const timer = setInterval(run, intervalMs);
    timer.unref();
    this.onShutdown(async () => clearInterval(timer));
  }

  /** Runs every shutdown hook; one failing is logged and the rest still run. */
  async shutdown(): Promise<void> {
    for (const hook of this.hooks) await hook().catch((err: unknown) => this.logger.error({ err }, 'error while closing'));
  }
}
