// Reconciles one Tenant against its project's runtime, in order:
//   1. being deleted? -> the erase (./erase.ts)   2. finalizer   3. its Project exists, owns this namespace, is Ready
//   4. registered with the runtime (POST /tenants)   5. this generation's settings merged (PATCH /tenants/{id})
//   -> status (Registered, SettingsSynced, Ready, observedGeneration, registeredAt)
// At steady state it calls nothing and writes nothing: registration and settings are remembered in the status.
import { PROJECT_CONDITIONS, TENANT_CONDITIONS, TENANT_FINALIZER, type Condition, type Project, type Tenant } from '@agentplane/lib/kubernetes/resources';
import { ensureFinalizer } from '../../finalizers.js';
import type { ReconcileOutcome } from '../../queue.js';
import { RUNTIME_SECRET_NAME, projectNamespaceName, tenantRegistration } from '../../resources/index.js';
import { RuntimeRefusedError } from '../../runtime-client.js';
import { findCondition, setCondition, timestamp, writeStatus, type ConditionUpdate } from '../../status.js';
import { eraseTenant } from './erase.js';
import { runtimeAccess, runtimeFailure, type TenantReconcilerDeps } from './runtime-access.js';

export type { RuntimeAccess, TenantReconcilerDeps } from './runtime-access.js';

/** How soon a Tenant waiting on its Project looks again (the Project's own changes also wake it). */
export const PROJECT_WAIT_REQUEUE_MS = 10_000;

export class TenantReconciler {
  constructor(private readonly deps: TenantReconcilerDeps) {}

  async reconcile(namespace: string, name: string): Promise<ReconcileOutcome> {
    const { kube } = this.deps;
    const found = await kube.getCustom('Tenant', name, namespace);
    if (!found) return {};
    if (found.metadata.deletionTimestamp) return eraseTenant(this.deps, found);

    const tenant = await ensureFinalizer(kube, 'Tenant', found, TENANT_FINALIZER);
    if (!tenant || tenant.metadata.deletionTimestamp) return { requeueAfterMs: 0 };
    const generation = tenant.metadata.generation;

    const project = await kube.getCustom('Project', tenant.spec.project);
    const blocked = this.blockedBy(tenant, project);
    if (blocked) {
      await this.write(tenant, generation, [{ ...blocked.condition, type: TENANT_CONDITIONS.registered }], {});
      return blocked.requeue ? { requeueAfterMs: PROJECT_WAIT_REQUEUE_MS } : {};
    }

    const access = await runtimeAccess(this.deps, tenant, project);
    if (!access.adminKey) {
      await this.write(tenant, generation, [{ type: TENANT_CONDITIONS.registered, status: 'False', reason: 'AdminKeyMissing', message: `Secret ${namespace}/${RUNTIME_SECRET_NAME} has no admin-key yet` }], {});
      return { requeueAfterMs: PROJECT_WAIT_REQUEUE_MS };
    }
    const registration = tenantRegistration(tenant);
    const conditions: ConditionUpdate[] = [];
    let registeredAt = tenant.status?.registeredAt;
    try {
      const synced = findCondition(tenant.status?.conditions, TENANT_CONDITIONS.settingsSynced);
      let settingsSynced = synced?.status === 'True' && synced.observedGeneration === generation;
      if (!registeredAt) {
        // Recorded before asking: a request that times out may still have registered the tenant, and its erase
        // must then go through the runtime rather than assume there is nothing there.
        if (!tenant.status?.registrationAttemptedAt) await this.write(tenant, generation, [], { registrationAttemptedAt: timestamp() });
        const registered = await this.deps.runtime.registerTenant(access.url, access.adminKey, registration);
        registeredAt = timestamp();
        // A new tenant got this generation's settings with its registration.
        if (registered === 'created') settingsSynced = true;
      }
      if (!settingsSynced) {
        const body = { name: registration.name, settings_json: registration.settings_json };
        if ((await this.deps.runtime.updateTenant(access.url, access.adminKey, registration.tenant_id, body)) === 'unknown_tenant') {
          // The runtime lost it (its store was reset): register it again, with these settings.
          await this.deps.runtime.registerTenant(access.url, access.adminKey, registration);
          registeredAt = timestamp();
        }
      }
      conditions.push(
        { type: TENANT_CONDITIONS.registered, status: 'True', reason: 'Registered', message: `the runtime of project ${tenant.spec.project} has the tenant` },
        { type: TENANT_CONDITIONS.settingsSynced, status: 'True', reason: 'SettingsApplied', message: `the runtime has the settings of generation ${generation}` },
      );
    } catch (error) {
      const condition = runtimeFailure(error, registeredAt ? TENANT_CONDITIONS.settingsSynced : TENANT_CONDITIONS.registered);
      conditions.push(condition);
      await this.write(tenant, generation, conditions, { registeredAt });
      // Settings the runtime refuses stay refused until the spec changes, which brings the Tenant back here.
      if (error instanceof RuntimeRefusedError && error.status === 422) return {};
      throw error;
    }
    await this.write(tenant, generation, conditions, { registeredAt, observed: true });
    return {};
  }

  /** Why the tenant cannot be registered yet, if it cannot. */
  private blockedBy(tenant: Tenant, project: Project | null): { condition: Omit<ConditionUpdate, 'type'>; requeue: boolean } | undefined {
    const name = tenant.spec.project;
    if (!project || project.metadata.deletionTimestamp) {
      return {
        condition: { status: 'False', reason: project ? 'ProjectDeleting' : 'ProjectNotFound', message: project ? `project ${name} is being deleted` : `project ${name} does not exist` },
        requeue: Boolean(project),
      };
    }
    const expected = projectNamespaceName(project, this.deps.config);
    if (tenant.metadata.namespace !== expected) {
      return {
        condition: { status: 'False', reason: 'WrongNamespace', message: `a Tenant of project ${name} must live in namespace ${expected}; recreate it there` },
        requeue: false,
      };
    }
    const ready = findCondition(project.status?.conditions, PROJECT_CONDITIONS.ready);
    if (ready?.status !== 'True') {
      return {
        // The Project's reason only: its message may change on every one of its passes, and this one is copied to
        // every Tenant of the project.
        condition: { status: 'False', reason: 'ProjectNotReady', message: `project ${name} is not ready${ready ? ` (${ready.reason})` : ''}; registration waits for it` },
        requeue: true,
      };
    }
    return undefined;
  }

  /**
   * Writes what this pass learned about `generation`, the one it read and acted on: a newer generation that landed
   * meanwhile is not claimed as synced, so the next pass sends its settings.
   */
  private async write(
    tenant: Tenant,
    generation: number | undefined,
    conditions: ConditionUpdate[],
    facts: { registeredAt?: string | undefined; registrationAttemptedAt?: string; observed?: boolean },
  ): Promise<void> {
    await writeStatus(this.deps.kube, 'Tenant', tenant.metadata.name, tenant.metadata.namespace, [
      (status) => {
        for (const condition of conditions) status.conditions = setCondition(status.conditions, condition, generation);
        if (facts.registrationAttemptedAt && !status.registrationAttemptedAt) status.registrationAttemptedAt = facts.registrationAttemptedAt;
        if (facts.registeredAt) status.registeredAt = facts.registeredAt;
        status.conditions = setCondition(status.conditions, readyOf(status.conditions), generation);
        if (facts.observed) status.observedGeneration = generation;
      },
    ]);
  }
}

/** Ready follows Registered and SettingsSynced. */
function readyOf(conditions: Condition[] | undefined): ConditionUpdate {
  for (const type of [TENANT_CONDITIONS.registered, TENANT_CONDITIONS.settingsSynced]) {
    const condition = findCondition(conditions, type);
    if (!condition) return { type: TENANT_CONDITIONS.ready, status: 'False', reason: 'Registering', message: 'the operator is registering the tenant with its runtime' };
    if (condition.status !== 'True') return { type: TENANT_CONDITIONS.ready, status: 'False', reason: condition.reason, message: condition.message };
  }
  return { type: TENANT_CONDITIONS.ready, status: 'True', reason: 'Ready', message: 'registered and settings in sync' };
}
