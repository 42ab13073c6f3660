// A Tenant's finalizer: the ordered erase of DESIGN.md flow 5 runs inside the runtime (`DELETE /tenants/{id}`: stop
// schedules and runs, delete sandboxes, purge rows all or nothing, then vectors and stored bytes); the operator
// records the runtime's report in status.erase and removes the finalizer only after that write. An erase that
// cannot complete (runtime unreachable, a failed step) keeps the finalizer, says why in Erased=False and is
// retried with backoff. A tenant to which no registration was ever sent has nothing to erase there.
import { isDeepStrictEqual } from 'node:util';
import { TENANT_CONDITIONS, TENANT_FINALIZER, type Tenant, type TenantEraseReport } from '@agentplane/lib/kubernetes/resources';
import { AppError } from '@agentplane/lib/errors';
import { finalize, type EraseProgress } from '../../finalizers.js';
import type { ReconcileOutcome } from '../../queue.js';
import { findCondition, setCondition, timestamp, writeStatus, type ConditionUpdate } from '../../status.js';
import { runtimeAccess, runtimeFailure, type TenantReconcilerDeps } from './runtime-access.js';

/** The erase did not complete; the queue retries it with backoff. */
export class EraseNotCompleteError extends AppError {
  constructor(message: string) {
    super('unavailable', message, { code: 'erase_incomplete' });
    this.name = 'EraseNotCompleteError';
  }
}

export async function eraseTenant(deps: TenantReconcilerDeps, tenant: Tenant): Promise<ReconcileOutcome> {
  await finalize(deps.kube, 'Tenant', tenant, TENANT_FINALIZER, () => runErase(deps, tenant));
  deps.logger.info({ tenant: tenant.metadata.name, namespace: tenant.metadata.namespace }, 'tenant erased');
  return {};
}

async function runErase(deps: TenantReconcilerDeps, tenant: Tenant): Promise<EraseProgress> {
  const tenantId = tenant.spec.tenantId;
  // Already recorded by a pass that stopped before it could remove the finalizer: do not erase (and report) twice.
  if (findCondition(tenant.status?.conditions, TENANT_CONDITIONS.erased)?.status === 'True' && tenant.status?.erase?.complete) return { done: true };
  const nothingToErase = (reason: string, message: string) =>
    record(deps, tenant, { type: TENANT_CONDITIONS.erased, status: 'True', reason, message }, { complete: true, erasedAt: timestamp(), steps: [] });
  // No registration was ever sent (the marker is written before the request), so no runtime can hold the tenant.
  // This is also the only way out for a Tenant that was never let near a runtime (wrong namespace, no Project).
  const neverAsked = !tenant.status?.registrationAttemptedAt && !tenant.status?.registeredAt && findCondition(tenant.status?.conditions, TENANT_CONDITIONS.registered)?.status !== 'True';
  if (neverAsked) return nothingToErase('NeverRegistered', 'the tenant was never sent to a runtime, so there was nothing to erase');

  const project = await deps.kube.getCustom('Project', tenant.spec.project);
  const access = await runtimeAccess(deps, tenant, project);
  if (!access.adminKey) {
    return failed(deps, tenant, { type: TENANT_CONDITIONS.erased, status: 'False', reason: 'AdminKeyMissing', message: `the project's Secret has no admin-key, so the runtime at ${access.url} cannot be asked to erase the tenant` });
  }
  let outcome;
  try {
    outcome = await deps.runtime.eraseTenant(access.url, access.adminKey, tenantId);
  } catch (error) {
    return failed(deps, tenant, runtimeFailure(error, TENANT_CONDITIONS.erased));
  }
  switch (outcome.kind) {
    case 'erased':
      return record(deps, tenant, { type: TENANT_CONDITIONS.erased, status: 'True', reason: 'Erased', message: `the runtime erased the tenant: ${summary(outcome.report)}` }, outcome.report);
    case 'unknown_tenant':
      return nothingToErase('NothingToErase', `the runtime at ${access.url} has no tenant ${tenantId}, so there was nothing to erase`);
    case 'incomplete':
      return failed(deps, tenant, { type: TENANT_CONDITIONS.erased, status: 'False', reason: 'EraseIncomplete', message: `the erase is incomplete and will be retried: ${outcome.detail}` }, outcome.report);
  }
}

/** Writes the outcome and the report: the finalizer goes only after this write succeeded. */
async function record(deps: TenantReconcilerDeps, tenant: Tenant, condition: ConditionUpdate, report: TenantEraseReport): Promise<EraseProgress> {
  await write(deps, tenant, condition, report);
  return { done: true };
}

async function failed(deps: TenantReconcilerDeps, tenant: Tenant, condition: ConditionUpdate, report?: TenantEraseReport): Promise<EraseProgress> {
  await write(deps, tenant, condition, report);
  throw new EraseNotCompleteError(`tenant ${tenant.metadata.namespace}/${tenant.metadata.name}: ${condition.message}`);
}

async function write(deps: TenantReconcilerDeps, tenant: Tenant, condition: ConditionUpdate, report: TenantEraseReport | undefined): Promise<void> {
  await writeStatus(deps.kube, 'Tenant', tenant.metadata.name, tenant.metadata.namespace, [
    (status, current) => {
      status.conditions = setCondition(status.conditions, condition, current.metadata.generation);
      status.conditions = setCondition(
        status.conditions,
        condition.status === 'True'
          ? { type: TENANT_CONDITIONS.ready, status: 'False', reason: 'Erased', message: 'the tenant is erased; the object goes next' }
          : { type: TENANT_CONDITIONS.ready, status: 'False', reason: condition.reason, message: condition.message },
        current.metadata.generation,
      );
      if (report) status.erase = keepingErasedAt(status.erase, report);
    },
  ]);
}

/**
 * The report to record: the one already recorded when the runtime reported the same steps again (only its time
 * differs), so a retried erase that fails the same way writes nothing; every write would wake the Tenant at once
 * and defeat the retry's backoff.
 */
export function keepingErasedAt(recorded: TenantEraseReport | undefined, report: TenantEraseReport): TenantEraseReport {
  if (!recorded) return report;
  const { erasedAt: _recordedAt, ...recordedRest } = recorded;
  const { erasedAt: _reportedAt, ...reportRest } = report;
  return isDeepStrictEqual(recordedRest, reportRest) ? recorded : report;
}

function summary(report: TenantEraseReport): string {
  const rows = Object.values(report.rowsDeleted ?? {}).reduce((a, b) => a + b, 0);
  return `${report.steps.length} steps done, ${rows} rows deleted`;
}
