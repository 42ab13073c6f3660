// Reconciles one Tenant against its project's runtime, as the Project reconciler does: a flat list of ordered steps,
// each of which may stop the pass and ask for a requeue, then one status write. A Tenant being deleted runs its
// finalizer instead (./erase.ts).
//   1. finalizer   2. its Project exists, owns this namespace, is Ready   3. the runtime's admin key is known
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
import { runtimeAccess, runtimeFailure, type RuntimeAccess, type TenantReconcilerDeps } from './runtime-access.js';

export type { RuntimeAccess, TenantReconcilerDeps } from './runtime-access.js';

/** How soon a Tenant waiting on its Project looks again (the Project's own changes also wake it). */
export const PROJECT_WAIT_REQUEUE_MS = 10_000;

/** What one pass learns, step by step; written to the status at the end. */
interface TenantPass {
  tenant: Tenant;
  /** The generation this pass read and acts on: a newer one that lands meanwhile is not claimed as synced. */
  generation: number | undefined;
  project: Project | null;
  access?: RuntimeAccess & { adminKey: string };
  conditions: ConditionUpdate[];
  registeredAt: string | undefined;
  settingsSynced: boolean;
  /** Every step of this generation ran: observedGeneration may advance. */
  observed: boolean;
  /** The Tenant went away or began deleting mid-pass: its status is the erase's to write now. */
  superseded: boolean;
}

/** A step either lets the pass go on (undefined) or ends it with this outcome. */
type StepOutcome = ReconcileOutcome | undefined;
type Step = (pass: TenantPass) => Promise<StepOutcome>;

export class TenantReconciler {
  private readonly steps: Step[] = [
    (pass) => this.ensureFinalizer(pass),
    (pass) => this.waitForProject(pass),
    (pass) => this.findRuntime(pass),
    (pass) => this.register(pass),
    (pass) => this.syncSettings(pass),
  ];

  constructor(private readonly deps: TenantReconcilerDeps) {}

  async reconcile(namespace: string, name: string): Promise<ReconcileOutcome> {
    const found = await this.deps.kube.getCustom('Tenant', name, namespace);
    if (!found) return {};
    if (found.metadata.deletionTimestamp) return eraseTenant(this.deps, found);

    const pass: TenantPass = {
      tenant: found,
      generation: found.metadata.generation,
      project: null,
      conditions: [],
      registeredAt: found.status?.registeredAt,
      settingsSynced: false,
      observed: false,
      superseded: false,
    };
    let outcome: StepOutcome;
    let failure: unknown;
    try {
      for (const step of this.steps) {
        outcome = await step(pass);
        if (outcome) break;
      }
    } catch (error) {
      failure = error;
    }
    if (pass.superseded) return outcome ?? {};
    await this.writeStatus(pass);
    // Settings the runtime refuses stay refused until the spec changes, which brings the Tenant back here.
    if (failure instanceof RuntimeRefusedError && failure.status === 422) return {};
    if (failure) throw failure;
    return outcome ?? {};
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Steps

  private async ensureFinalizer(pass: TenantPass): Promise<StepOutcome> {
    const tenant = await ensureFinalizer(this.deps.kube, 'Tenant', pass.tenant, TENANT_FINALIZER);
    if (!tenant || tenant.metadata.deletionTimestamp) {
      pass.superseded = true;
      return { requeueAfterMs: 0 };
    }
    pass.tenant = tenant;
    pass.generation = tenant.metadata.generation;
    const synced = findCondition(tenant.status?.conditions, TENANT_CONDITIONS.settingsSynced);
    pass.settingsSynced = synced?.status === 'True' && synced.observedGeneration === pass.generation;
    return undefined;
  }

  private async waitForProject(pass: TenantPass): Promise<StepOutcome> {
    pass.project = await this.deps.kube.getCustom('Project', pass.tenant.spec.project);
    const blocked = this.blockedBy(pass.tenant, pass.project);
    if (!blocked) return undefined;
    pass.conditions.push({ ...blocked.condition, type: TENANT_CONDITIONS.registered });
    return blocked.requeue ? { requeueAfterMs: PROJECT_WAIT_REQUEUE_MS } : {};
  }

  private async findRuntime(pass: TenantPass): Promise<StepOutcome> {
    const access = await runtimeAccess(this.deps, pass.tenant, pass.project);
    if (!access.adminKey) {
      const message = `Secret ${pass.tenant.metadata.namespace}/${RUNTIME_SECRET_NAME} has no admin-key yet`;
      pass.conditions.push({ type: TENANT_CONDITIONS.registered, status: 'False', reason: 'AdminKeyMissing', message });
      return { requeueAfterMs: PROJECT_WAIT_REQUEUE_MS };
    }
    pass.access = { ...access, adminKey: access.adminKey };
    return undefined;
  }

  private async register(pass: TenantPass): Promise<StepOutcome> {
    if (pass.registeredAt) return undefined;
    const { url, adminKey } = pass.access!;
    try {
      // Recorded before asking, the pass's one write ahead of its end: a request that times out may still have
      // registered the tenant, and its erase must then go through the runtime rather than assume nothing is there.
      if (!pass.tenant.status?.registrationAttemptedAt) await this.recordRegistrationAttempt(pass.tenant);
      const registered = await this.deps.runtime.registerTenant(url, adminKey, tenantRegistration(pass.tenant));
      pass.registeredAt = timestamp();
      // A new tenant got this generation's settings with its registration.
      if (registered === 'created') pass.settingsSynced = true;
    } catch (error) {
      pass.conditions.push(runtimeFailure(error, TENANT_CONDITIONS.registered));
      throw error;
    }
    return undefined;
  }

  private async syncSettings(pass: TenantPass): Promise<StepOutcome> {
    const { url, adminKey } = pass.access!;
    const registration = tenantRegistration(pass.tenant);
    try {
      if (!pass.settingsSynced) {
        const body = { name: registration.name, settings_json: registration.settings_json };
        if ((await this.deps.runtime.updateTenant(url, adminKey, registration.tenant_id, body)) === 'unknown_tenant') {
          // The runtime lost it (its store was reset): register it again, with these settings.
          await this.deps.runtime.registerTenant(url, adminKey, registration);
          pass.registeredAt = timestamp();
        }
      }
    } catch (error) {
      pass.conditions.push(runtimeFailure(error, TENANT_CONDITIONS.settingsSynced));
      throw error;
    }
    pass.conditions.push(
      { type: TENANT_CONDITIONS.registered, status: 'True', reason: 'Registered', message: `the runtime of project ${pass.tenant.spec.project} has the tenant` },
      { type: TENANT_CONDITIONS.settingsSynced, status: 'True', reason: 'SettingsApplied', message: `the runtime has the settings of generation ${pass.generation}` },
    );
    pass.observed = true;
    return undefined;
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

  /** The one status write of a pass: its conditions, what it recorded, Ready derived from them. */
  private async writeStatus(pass: TenantPass): Promise<void> {
    const { tenant, generation } = pass;
    await writeStatus(this.deps.kube, 'Tenant', tenant.metadata.name, tenant.metadata.namespace, [
      (status) => {
        for (const condition of pass.conditions) status.conditions = setCondition(status.conditions, condition, generation);
        if (pass.registeredAt) status.registeredAt = pass.registeredAt;
        status.conditions = setCondition(status.conditions, readyOf(status.conditions), generation);
        if (pass.observed) status.observedGeneration = generation;
      },
    ], tenant);
  }

  private async recordRegistrationAttempt(tenant: Tenant): Promise<void> {
    await writeStatus(this.deps.kube, 'Tenant', tenant.metadata.name, tenant.metadata.namespace, [
      (status) => {
        status.registrationAttemptedAt ??= timestamp();
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
