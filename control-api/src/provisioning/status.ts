// A project's provisioning at a glance, for the people who run it: whether its runtime and tenant are up (the
// provisioner's answer: on Kubernetes the Project's and Tenant's Ready conditions), and what of its configuration
// has not reached the runtime yet, with the outbox's last error. A delivery that keeps failing makes it not ready.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { ControlSchema } from '../store/schema.js';
import type { Provisioner, ProvisioningStatus, TenantTarget } from './provisioner.js';

export interface ProvisioningView {
  ready: boolean;
  reason: string;
  message: string;
  /** The project's own data-plane URL when the provisioner gives it one (Kubernetes); null: the shared one. */
  data_plane_url: string | null;
  /** Changes queued for the runtime and not yet delivered. */
  pending_changes: number;
  /** Why the earliest of them has not gone through yet; null when none failed. */
  last_error: string | null;
}

/** Where a project's queued changes stand. */
export interface DeliveryState {
  pending: number;
  lastError: string | null;
  /** Some change has failed `FAILING_DELIVERY_ATTEMPTS` times or more and is still not delivered. */
  failing: boolean;
  message: string;
}

/**
 * After this many failed attempts a change that has not reached the runtime makes the project not ready: the
 * runtime is up, but it serves another configuration than the control plane's (keys a mint uses, a ceiling).
 */
export const FAILING_DELIVERY_ATTEMPTS = 3;

const noRuntime: ProvisioningStatus = {
  ready: false,
  reason: 'NoRuntime',
  message: 'no runtime is configured (RUNTIME_URL and RUNTIME_ADMIN_KEY): changes are queued until one is',
};

export class ProvisioningReport {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    /** Absent when no runtime is configured. */
    private readonly provisioner: Provisioner | undefined,
  ) {}

  /** The provisioner's answer and the state of the project's deliveries, apart: readiness reports them as two steps. */
  async check(target: TenantTarget): Promise<{ runtime: ProvisioningStatus; delivery: DeliveryState }> {
    const [runtime, pending] = await Promise.all([
      this.provisioner?.status(target) ?? Promise.resolve<ProvisioningStatus>(noRuntime),
      this.db
        .selectFrom('outbox')
        .select([
          sql<number>`count(*)::int`.as('n'),
          sql<string | null>`(array_agg(last_error order by id) filter (where last_error is not null))[1]`.as('last_error'),
          sql<number>`coalesce(max(attempts), 0)::int`.as('attempts'),
        ])
        .where('project_id', '=', target.projectId)
        .where('delivered_at', 'is', null)
        .executeTakeFirstOrThrow(),
    ]);
    const failing = pending.attempts >= FAILING_DELIVERY_ATTEMPTS;
    return {
      runtime,
      delivery: {
        pending: pending.n,
        lastError: pending.last_error,
        failing,
        message: failing
          ? `${pending.n} change(s) have not reached the runtime after ${pending.attempts} attempts; the outbox keeps retrying: ${pending.last_error ?? 'no error recorded'}`
          : pending.n > 0
            ? `${pending.n} change(s) on their way to the runtime`
            : 'the runtime holds the current configuration',
      },
    };
  }

  async of(target: TenantTarget): Promise<ProvisioningView> {
    const { runtime, delivery } = await this.check(target);
    // The runtime being up is not enough: a change that keeps failing to reach it leaves it serving another
    // configuration, so the project is not ready until it gets there.
    const failing = runtime.ready && delivery.failing;
    return {
      ready: runtime.ready && !failing,
      reason: failing ? 'ConfigurationNotDelivered' : runtime.reason,
      message: failing ? delivery.message : runtime.message,
      data_plane_url: runtime.dataPlaneUrl ?? null,
      pending_changes: delivery.pending,
      last_error: delivery.lastError,
    };
  }
}
