// When a replica on a shared store may trust the tenant stamps it cached (docs/decisions/0049). Every replica tells
// the others, over the event bus, once it has committed a write to the tenant tables, and counts what it hears; a
// stamp read under a count that still stands is current, within the time a notice takes to arrive. Pub/sub is at
// most once (a subscriber reconnecting misses what was sent meanwhile) and a write made outside the runtime sends no
// notice, so a stamp is also trusted for at most `TRUST_STAMP_MS`.
//
// A writer answers once it has heard its own notice back (or `ECHO_WAIT_MS` passed): Redis writes a published message
// to every subscriber in the same pass, so by then the other replicas' copies have left Redis, and a request sent
// after the write's answer reaches them behind the notice (read-your-writes, docs/decisions/0070).
import { randomUUID } from 'node:crypto';
import type { Logger } from '@agentplane/lib/logging';
import type { PubSub } from '@agentplane/lib/events/port';

export const TENANT_CHANGES_CHANNEL = 'runtime:tenant-changes';

/** The longest a cached stamp is trusted on a shared store when no notice says it changed. */
export const TRUST_STAMP_MS = 1_000;

/** The longest a writer waits to hear its own notice before it answers all the same. */
const ECHO_WAIT_MS = 250;

export class TenantChangeNotices {
  private heard = 0;
  /** Whether the subscription is up: only then can this process hear its own notices. */
  private listening = false;
  /** Names this process's notices, so it knows its own when they come back. */
  private readonly sender = randomUUID();
  private sent = 0;
  /** Own notices sent and not yet heard back, by number. */
  private readonly echoes = new Map<number, () => void>();

  constructor(
    private readonly pubsub: PubSub,
    private readonly logger: Logger,
  ) {}

  /** Notices heard so far, this process's own included: a count a cached stamp is tagged with. */
  count(): number {
    return this.heard;
  }

  /** Listens for the other replicas' notices; resolves to the way to stop. */
  async listen(): Promise<() => Promise<void>> {
    const stop = await this.pubsub.subscribe(TENANT_CHANGES_CHANNEL, (message) => {
      const notice = message as { sender?: unknown; n?: unknown } | null;
      // Our own notices were counted when sent; hearing one back only releases its writer.
      if (notice?.sender === this.sender && typeof notice.n === 'number') {
        this.echoes.get(notice.n)?.();
        return;
      }
      this.heard += 1;
    });
    this.listening = true;
    return async () => {
      this.listening = false;
      await stop();
    };
  }

  /**
   * This process committed a write to the tenant tables: its own caches go stale now, the others' when they hear.
   * Resolves once the notice is sent (the writer answers after that), never rejects.
   */
  async announce(): Promise<void> {
    this.heard += 1;
    const n = (this.sent += 1);
    let timer: NodeJS.Timeout | undefined;
    const echo = this.listening
      ? new Promise<void>((resolve) => {
          this.echoes.set(n, resolve);
          timer = setTimeout(resolve, ECHO_WAIT_MS);
        })
      : undefined;
    try {
      await this.pubsub.publish(TENANT_CHANGES_CHANNEL, { sender: this.sender, n });
      await echo;
    } catch (error) {
      this.logger.warn({ err: error }, `could not tell the other replicas a tenant changed; their caches trust it at most ${TRUST_STAMP_MS} ms more`);
    } finally {
      clearTimeout(timer);
      this.echoes.delete(n);
    }
  }
}
