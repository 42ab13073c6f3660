// What the Tenant reconciler and its erase share: their dependencies, where a tenant's runtime is and with which
// key, and how a failed runtime call reads as a condition.
import type * as k8s from '@kubernetes/client-node';
import { errorMessage } from '@agentplane/lib/errors';
import type { Project, Tenant } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import type { OperatorConfig } from '../../config.js';
import type { KubeClient } from '../../kube/client.js';
import { RUNTIME_SECRET_NAME, runtimeUrl } from '../../resources/index.js';
import { RuntimeRefusedError, RuntimeUnreachableError, type RuntimeClient } from '../../runtime-client.js';
import type { ConditionUpdate } from '../../status.js';
import { secretValues } from '../project/secrets.js';

export interface TenantReconcilerDeps {
  kube: KubeClient;
  config: OperatorConfig;
  logger: Logger;
  runtime: RuntimeClient;
}

/** Where a tenant's runtime is and the key it accepts. */
export interface RuntimeAccess {
  url: string;
  adminKey: string | undefined;
}

/** The runtime of a tenant's project: from the Project's status, or from the template when the Project is gone. */
export async function runtimeAccess(deps: TenantReconcilerDeps, tenant: Tenant, project: Project | null): Promise<RuntimeAccess> {
  const namespace = tenant.metadata.namespace!;
  const stand = project ?? ({ apiVersion: 'agentplane.io/v1alpha1', kind: 'Project', metadata: { name: tenant.spec.project }, spec: {} } satisfies Project);
  const secret = await deps.kube.getCached<k8s.V1Secret>({ apiVersion: 'v1', kind: 'Secret', name: RUNTIME_SECRET_NAME, namespace });
  return { url: project?.status?.runtimeUrl ?? runtimeUrl(stand, deps.config), adminKey: secretValues(secret)['admin-key'] };
}

/** A failed runtime call as a condition of the step it broke. */
export function runtimeFailure(error: unknown, type: string): ConditionUpdate {
  if (error instanceof RuntimeUnreachableError) return { type, status: 'False', reason: 'RuntimeUnreachable', message: errorMessage(error) };
  if (error instanceof RuntimeRefusedError) {
    if (error.status === 401) return { type, status: 'False', reason: 'AdminKeyRejected', message: `${errorMessage(error)}; the Secret's admin-key differs from the runtime's` };
    if (error.status === 422) return { type, status: 'False', reason: 'SettingsRejected', message: errorMessage(error) };
    return { type, status: 'False', reason: 'RuntimeError', message: errorMessage(error) };
  }
  return { type, status: 'False', reason: 'ReconcileFailed', message: errorMessage(error) };
}
