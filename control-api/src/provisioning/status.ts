// A project's provisioning at a glance, for the people who run it: whether its runtime and tenant are up (the
// provisioner's answer: on Kubernetes the Project's and Tenant's Ready conditions), and what of its configuration
// has not reached the runtime yet, with the outbox's last error.
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
        .select([sql<number>`count(*)::int`.as('n'), sql<string | null>`(array_agg(last_error order by id) filter (where last_error is not null))[1]`.as('last_error')])
        .where('project_id', '=', target.projectId)
        .where('delivered_at', 'is', null)
        .executeTakeFirstOrThrow(),
    ]);
    return {
      ready: status.ready,
      reason: status.reason,
      message: status.message,
      data_plane_url: status.dataPlaneUrl ?? null,
      pending_changes: pending.n,
      last_error: pending.last_error,
    };
  }
}
