// When a replica on a shared store may trust the tenant stamps it cached (docs/decisions/0049). Every replica tells
// the others, over the event bus, once it has committed a write to the tenant tables, and counts what it hears; a
// stamp read under a count that still stands is current, within the time a notice takes to arrive. Pub/sub is at
// most once (a subscriber reconnecting misses what was sent meanwhile) and a write made outside the runtime sends no
// notice, so a stamp is also trusted for at most `TRUST_STAMP_MS`.
import type { Logger } from '@agentplane/lib/logging';
import type { PubSub } from '@agentplane/lib/events/port';

export const TENANT_CHANGES_CHANNEL = 'runtime:tenant-changes';

/** The longest a cached stamp is trusted on a shared store when no notice says it changed. */
export const TRUST_STAMP_MS = 1_000;

export class TenantChangeNotices {
  private heard = 0;

  constructor(
    private readonly pubsub: PubSub,
    private readonly logger: Logger,
  ) {}

  /** Notices heard so far, this process's own included: a count a cached stamp is tagged with. */
  count(): number {
    return this.heard;
  }

  /** Listens for the other replicas' notices; resolves to the way to stop. */
  listen(): Promise<() => Promise<void>> {
    return this.pubsub.subscribe(TENANT_CHANGES_CHANNEL, () => {
      this.heard += 1;
    });
  }

  /**
   * This process committed a write to the tenant tables: its own caches go stale now, the others' when they hear.
   * Resolves once the notice is sent (the writer answers after that), never rejects.
   */
  async announce(): Promise<void> {
    this.heard += 1;
    await this.pubsub.publish(TENANT_CHANGES_CHANNEL, {}).catch((error: unknown) =>
      this.logger.warn({ err: error }, `could not tell the other replicas a tenant changed; their caches trust it at most ${TRUST_STAMP_MS} ms more`),
    );
  }
}
