// The configuration outbox (DESIGN.md flow 2): every change a runtime must know is queued in the same
// transaction as the change itself, then delivered by a relay that retries with backoff until the runtime has
// it. A push always carries the project's current configuration, so entries delivered late or twice are harmless.
// A project's entries go out strictly in order: its tenant, then its configurations, and last its removal.
import type { Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { Logger } from '@agentplane/lib/logging';
import type { ControlSchema } from '../store/schema.js';
import type { Provisioner, TenantConfigurationDocument } from './provisioner.js';

export type OutboxKind = 'register_tenant' | 'push_configuration' | 'remove_project';

/** Queues a delivery inside the caller's transaction, so it exists exactly when the change committed; resolves to its id. */
export async function enqueue(
  trx: Transaction<ControlSchema> | Kysely<ControlSchema>,
  entry: { projectId: string; tenantId: string; kind: OutboxKind; payload?: Record<string, unknown> },
): Promise<number> {
  const { id } = await trx
    .insertInto('outbox')
    .values({ project_id: entry.projectId, tenant_id: entry.tenantId, kind: entry.kind, payload: JSON.stringify(entry.payload ?? {}) })
    .returning('id')
    .executeTakeFirstOrThrow();
  return id;
}

export interface OutboxRelayOptions {
  /** How long a claimed entry is left to its deliverer before another replica may take it. */
  leaseMs?: number;
  maxBackoffMs?: number;
  batchSize?: number;
  /**
   * How often every project's configuration is pushed again although nothing changed, so a runtime that lost it,
   * was restored to an older one or holds other content is brought back to the control plane's (0025). A push the
   * runtime already holds changes nothing there. 0 turns it off.
   */
  resyncIntervalMs?: number;
}

/** How often a write waiting for its delivery looks whether another replica delivered it. */
const DELIVERY_POLL_MS = 25;

export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private lastResync = Date.now();
  private running: Promise<unknown> | undefined;
  /** The pass asked for while one runs: it starts when that one ends, and everyone who asked waits for it. */
  private next: Promise<void> | undefined;

  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly provisioner: Provisioner,
    private readonly configurationOf: (projectId: string) => Promise<TenantConfigurationDocument | null>,
    private readonly logger: Logger,
    private readonly options: OutboxRelayOptions = {},
  ) {}

  /**
   * One pass: claims due entries (a lease, so replicas do not deliver the same one at once), delivers each
   * project's in order, and stops at a project's first failure so a configuration never overtakes its tenant.
   * An entry waits while an earlier one of its project is leased or backing off, so no replica delivers it ahead
   * of that one either (a removal never runs beside a registration still in flight).
   */
  async deliverDue(): Promise<{ delivered: number; failed: number }> {
    const leaseMs = this.options.leaseMs ?? 60_000;
    const claimed = await this.db.transaction().execute(async (trx) => {
      const now = new Date();
      const due = await trx
        .selectFrom('outbox')
        .select('id')
        .where('delivered_at', 'is', null)
        .where('next_attempt_at', '<=', now)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('outbox as earlier')
                .select('earlier.id')
                .whereRef('earlier.project_id', '=', 'outbox.project_id')
                .whereRef('earlier.id', '<', 'outbox.id')
                .where('earlier.delivered_at', 'is', null)
                .where('earlier.next_attempt_at', '>', now),
            ),
          ),
        )
        .orderBy('id')
        .limit(this.options.batchSize ?? 100)
        .forUpdate()
        .skipLocked()
        .execute();
      if (due.length === 0) return [];
      return trx
        .updateTable('outbox')
        .set({ next_attempt_at: new Date(Date.now() + leaseMs) })
        .where('id', 'in', due.map((row) => row.id))
        .returningAll()
        .execute();
    });

    let delivered = 0;
    let failed = 0;
    const byProject = new Map<string, typeof claimed>();
    for (const entry of claimed.sort((a, b) => a.id - b.id)) byProject.set(entry.project_id, [...(byProject.get(entry.project_id) ?? []), entry]);
    for (const entries of byProject.values()) {
      for (const [index, entry] of entries.entries()) {
        try {
          await this.deliver(entry);
          await this.db.updateTable('outbox').set({ delivered_at: new Date(), last_error: null }).where('id', '=', entry.id).execute();
          delivered += 1;
        } catch (error) {
          failed += 1;
          const attempts = entry.attempts + 1;
          const backoff = Math.min(this.options.maxBackoffMs ?? 60_000, 500 * 2 ** Math.min(attempts, 16));
          const message = (error as Error).message.slice(0, 500);
          this.logger.warn({ outbox_id: entry.id, kind: entry.kind, project_id: entry.project_id, attempts, err: message }, 'delivery to the runtime failed; will retry');
          // This entry and the project's later ones wait for the retry, in order.
          const waiting = entries.slice(index).map((e) => e.id);
          await this.db
            .updateTable('outbox')
            .set({ last_error: message, next_attempt_at: new Date(Date.now() + backoff) })
            .where('id', 'in', waiting)
            .execute();
          await this.db.updateTable('outbox').set({ attempts }).where('id', '=', entry.id).execute();
          break;
        }
      }
    }
    return { delivered, failed };
  }

  /**
   * Queues a push of its current configuration for every project that has none waiting: the runtime's copy is
   * checked against the control plane's by the push itself (the same content is a no-op there; anything else is
   * replaced). Returns how many were queued.
   */
  async resync(): Promise<number> {
    this.lastResync = Date.now();
    const queued = await this.db
      .insertInto('outbox')
      .columns(['project_id', 'tenant_id', 'kind', 'payload'])
      .expression((eb) =>
        eb
          .selectFrom('projects')
          .select(['projects.id', 'projects.tenant_id', sql<string>`'push_configuration'::text`.as('kind'), sql<string>`'{}'::jsonb`.as('payload')])
          .where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom('outbox')
                  .select('outbox.id')
                  .whereRef('outbox.project_id', '=', 'projects.id')
                  .where('outbox.kind', '=', 'push_configuration')
                  .where('outbox.delivered_at', 'is', null),
              ),
            ),
          ),
      )
      .executeTakeFirst();
    return Number(queued.numInsertedOrUpdatedRows ?? 0);
  }

  /** Runs passes every `intervalMs` (and soon after `kick`); returns a stop function that waits for the pass in flight. */
  start(intervalMs = 1000): () => Promise<void> {
    const tick = () => {
      this.timer = setTimeout(() => void this.pass().finally(tick), intervalMs);
      this.timer.unref();
    };
    tick();
    return async () => {
      clearTimeout(this.timer);
      this.timer = undefined;
      await this.running;
    };
  }

  /** Asks for a pass now (after a change was queued) rather than at the next tick. */
  kick(): void {
    void this.pass();
  }

  /**
   * Waits until the project's entries up to `throughId` are delivered, for at most `timeoutMs`: a write answers once
   * the runtime holds what it changed (read-your-writes, docs/decisions/0070). Passes are run here rather than left
   * to the timer; an entry another replica claimed is seen delivered by looking again every few milliseconds. Gives
   * up at once when one of those entries has failed (it is backing off). Resolves to whether they were delivered;
   * never rejects (the entries stay queued either way).
   */
  async awaitDelivered(projectId: string, throughId: number, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const waiting = () =>
      this.db
        .selectFrom('outbox')
        .select([sql<number>`count(*)::int`.as('undelivered'), sql<number>`count(*) filter (where last_error is not null)::int`.as('failing')])
        .where('project_id', '=', projectId)
        .where('id', '<=', throughId)
        .where('delivered_at', 'is', null)
        .executeTakeFirstOrThrow();
    try {
      for (;;) {
        await this.pass();
        const { undelivered, failing } = await waiting();
        if (undelivered === 0) return true;
        // The runtime refused or could not be reached, and the entry waits out its backoff: waiting longer here
        // would only hold the write's answer back (a Kubernetes project whose runtime is still coming up, say).
        if (failing > 0) return false;
        const left = deadline - Date.now();
        if (left <= 0) return false;
        await new Promise((resolve) => setTimeout(resolve, Math.min(DELIVERY_POLL_MS, left)));
      }
    } catch (error) {
      this.logger.warn({ err: error, project_id: projectId }, 'could not tell whether a change reached the runtime');
      return false;
    }
  }

  /** The number of entries not yet delivered, for readiness and tests. */
  async pending(projectId?: string): Promise<number> {
    let query = this.db.selectFrom('outbox').select(sql<number>`count(*)::int`.as('n')).where('delivered_at', 'is', null);
    if (projectId) query = query.where('project_id', '=', projectId);
    return (await query.executeTakeFirstOrThrow()).n;
  }

  /**
   * Runs a pass, one at a time. Asked while one runs, it resolves once a pass that started after the asking has
   * ended (what was queued meanwhile may have been claimed too late for the running one); callers asking together
   * share that pass.
   */
  private pass(): Promise<void> {
    if (this.running) {
      this.next ??= this.running.then(() => {
        this.next = undefined;
        return this.pass();
      });
      return this.next;
    }
    const resyncMs = this.options.resyncIntervalMs ?? 5 * 60_000;
    const resync = resyncMs > 0 && Date.now() - this.lastResync >= resyncMs ? this.resync() : Promise.resolve(0);
    const running = resync
      .then(() => this.deliverDue())
      .catch((err: unknown) => this.logger.error({ err }, 'outbox pass failed'))
      .then(() => {
        this.running = undefined;
      });
    this.running = running;
    return running;
  }

  private async deliver(entry: { kind: OutboxKind; project_id: string; tenant_id: string; payload: Record<string, unknown> }): Promise<void> {
    const target = { projectId: entry.project_id, tenantId: entry.tenant_id };
    if (entry.kind === 'remove_project') {
      await this.provisioner.removeProject(target);
      return;
    }
    // A project deleted since this entry was queued: its removal follows, so there is nothing to make or tell.
    const project = await this.db.selectFrom('projects').select('id').where('id', '=', entry.project_id).executeTakeFirst();
    if (!project) return;
    if (entry.kind === 'register_tenant') {
      await this.provisioner.registerTenant(target, String(entry.payload.name ?? ''));
      return;
    }
    const document = await this.configurationOf(entry.project_id);
    if (document) await this.provisioner.pushConfiguration(target, document);
  }
}
