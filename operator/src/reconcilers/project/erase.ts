// A Project's finalizer (DESIGN.md flow 5), in order, each stage idempotent so a restart anywhere resumes it:
//   1. delete every Tenant in the project's namespace and wait until all are gone: their own finalizers erase
//      each tenant through the runtime, which still runs;
//   2. drop the project's database (ending its sessions) and its role;
//   3. delete the namespace (the runtime and everything else in it) and wait until it is gone;
// then remove the finalizer. While it waits, Ready=False says on what, and the pass is requeued.
import type * as k8s from '@kubernetes/client-node';
import { errorMessage } from '@agentplane/lib/errors';
import { PROJECT_CONDITIONS, PROJECT_FINALIZER, TENANT_CONDITIONS, type Project } from '@agentplane/lib/kubernetes/resources';
import { finalize, type EraseProgress } from '../../finalizers.js';
import type { ReconcileOutcome } from '../../queue.js';
import { namespaceConflict, ownsNamespace, projectDatabaseName, projectNamespaceName } from '../../resources/index.js';
import { findCondition, setCondition, writeStatus, type ConditionUpdate } from '../../status.js';
import type { ProjectReconcilerDeps } from './deps.js';

/** How often a Project being erased checks on what it waits for (Tenant deletions also wake it). */
export const ERASE_REQUEUE_MS = 2_000;

export async function eraseProject(deps: ProjectReconcilerDeps, project: Project): Promise<ReconcileOutcome> {
  const progress = await finalize(deps.kube, 'Project', project, PROJECT_FINALIZER, () => eraseStages(deps, project));
  if (progress.done) deps.logger.info({ project: project.metadata.name }, 'project erased');
  return progress.done ? {} : { requeueAfterMs: progress.requeueAfterMs ?? ERASE_REQUEUE_MS };
}

async function eraseStages(deps: ProjectReconcilerDeps, project: Project): Promise<EraseProgress> {
  const { kube, config, databases } = deps;
  const name = project.metadata.name;
  // Where the Project was provisioned, even if the namespace prefix has changed since.
  const namespace = project.status?.namespace ?? projectNamespaceName(project, config);

  const tenants = (await kube.listCustom('Tenant', namespace)).filter((tenant) => tenant.spec.project === name);
  if (tenants.length > 0) {
    for (const tenant of tenants) {
      if (!tenant.metadata.deletionTimestamp) await kube.deleteCustom('Tenant', tenant.metadata.name, namespace);
    }
    const why = tenants
      .map((tenant) => {
        const erased = findCondition(tenant.status?.conditions, TENANT_CONDITIONS.erased);
        return `tenant ${tenant.metadata.name}: ${erased && erased.status === 'False' ? erased.message : 'erase in progress'}`;
      })
      .sort()
      .join('; ');
    await waiting(deps, project, {
      reason: 'ErasingTenants',
      message: `deleting: ${tenants.length} tenant${tenants.length === 1 ? '' : 's'} of namespace ${namespace} still being erased (${why})`,
    });
    return { done: false };
  }

  if (databases) {
    const database = projectDatabaseName(project);
    try {
      await databases.drop(database);
    } catch (error) {
      await waiting(deps, project, {
        reason: 'DatabaseDropFailed',
        message: `deleting: dropping database and role ${database} failed: ${errorMessage(error)}`,
      });
      throw error;
    }
  }

  const existing = await kube.get<k8s.V1Namespace>({ apiVersion: 'v1', kind: 'Namespace', name: namespace });
  // A namespace the Project could not have (the operator's own, a system one, another Project's) stays.
  if (existing && (ownsNamespace(existing, project) || !namespaceConflict(existing, project, config))) {
    if (!existing.metadata?.deletionTimestamp) await kube.delete({ apiVersion: 'v1', kind: 'Namespace', name: namespace });
    await waiting(deps, project, { reason: 'DeletingNamespace', message: `deleting: waiting for namespace ${namespace} to be deleted` });
    return { done: false };
  }
  deps.logger.info({ project: name, namespace }, 'project namespace and database gone');
  return { done: true };
}

/** Ready=False with what the erase waits on. */
async function waiting(deps: ProjectReconcilerDeps, project: Project, why: Pick<ConditionUpdate, 'reason' | 'message'>): Promise<void> {
  await writeStatus(deps.kube, 'Project', project.metadata.name, undefined, [
    (status, current) => {
      status.conditions = setCondition(status.conditions, { type: PROJECT_CONDITIONS.ready, status: 'False', ...why }, current.metadata.generation);
    },
  ]);
}
