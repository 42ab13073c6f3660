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

  async of(target: TenantTarget): Promise<ProvisioningView> {
    const [status, pending] = await Promise.all([
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
    // The runtime being up is not enough: a change that keeps failing to reach it leaves it serving another
    // configuration, so the project is not ready until it gets there.
    const failing = status.ready && pending.attempts >= FAILING_DELIVERY_ATTEMPTS;
    return {
      ready: status.ready && !failing,
      reason: failing ? 'ConfigurationNotDelivered' : status.reason,
      message: failing
        ? `${pending.n} change(s) have not reached the runtime after ${pending.attempts} attempts; the outbox keeps retrying: ${pending.last_error ?? 'no error recorded'}`
        : status.message,
      data_plane_url: status.dataPlaneUrl ?? null,
      pending_changes: pending.n,
      last_error: pending.last_error,
    };
  }
}
