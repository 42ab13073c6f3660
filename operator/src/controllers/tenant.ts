// Wires Tenants to the work queue. A Tenant's deletion also wakes its Project (whose erase waits for its Tenants),
// and the Tenants of a Project are woken when the Project changes (registration waits for it to be Ready).
import type * as k8s from '@kubernetes/client-node';
import { GROUP, TENANTS, VERSION, type Project, type Tenant } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import type { KubeClient } from '../kube/client.js';
import { ObjectWatch } from '../kube/watch.js';
import type { TenantReconciler } from '../reconcilers/tenant/index.js';
import { objectKey } from './keys.js';
import type { Controller } from './project.js';

export function tenantController(deps: {
  kubeConfig: k8s.KubeConfig;
  kube: KubeClient;
  reconciler: TenantReconciler;
  enqueue: (key: string) => void;
  logger: Logger;
}): Controller & { onProject(project: Project): void } {
  const { kubeConfig, kube, enqueue, logger } = deps;
  const keyOf = (tenant: Tenant) => objectKey('Tenant', tenant.metadata.name, tenant.metadata.namespace);
  const tenants = new ObjectWatch<k8s.KubernetesObject>(
    kubeConfig,
    {
      name: 'tenants',
      path: `/apis/${GROUP}/${VERSION}/${TENANTS}`,
      list: () => kube.custom.listCustomObjectForAllNamespaces({ group: GROUP, version: VERSION, plural: TENANTS }) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
      onChange: (object, event) => {
        const tenant = object as unknown as Tenant;
        enqueue(keyOf(tenant));
        if (event === 'delete' || tenant.metadata.deletionTimestamp) enqueue(objectKey('Project', tenant.spec.project));
      },
    },
    logger,
  );
  return {
    watches: [tenants],
    keys: () => tenants.list().map((tenant) => keyOf(tenant as unknown as Tenant)),
    reconcile: (namespace, name) => deps.reconciler.reconcile(namespace, name),
    onProject(project) {
      for (const tenant of tenants.list()) {
        if ((tenant as unknown as Tenant).spec.project === project.metadata.name) enqueue(keyOf(tenant as unknown as Tenant));
      }
    },
  };
}
