// Every object a Project should have in its namespace, in the order they are applied: identity and fences first
// (ServiceAccount, RoleBinding, NetworkPolicies, quota, limits), then the Secret the runtime reads, then the runtime
// and the ways to reach it.
import type * as k8s from '@kubernetes/client-node';
import type { Project } from '@agentplane/lib/kubernetes/resources';
import type { OperatorConfig } from '../config.js';
import { projectNamespaceName } from './names.js';
import { buildBrowserObjects } from './browser.js';
import { buildLimitRange, buildResourceQuota, buildRoleBinding, buildSandboxQuota, buildServiceAccount } from './namespace.js';
import { buildNetworkPolicies } from './network.js';
import { buildDataPlaneIngress, buildRuntimeDeployment, buildRuntimeDisruptionBudget, buildRuntimeService } from './runtime.js';
import { buildRuntimeSecret, type RuntimeSecretValues } from './secret.js';

export function buildProjectObjects(project: Project, config: OperatorConfig, secrets: RuntimeSecretValues): k8s.KubernetesObject[] {
  const namespace = projectNamespaceName(project, config);
  const quota = buildResourceQuota(project, namespace);
  const limitRange = buildLimitRange(project, namespace);
  const sandboxQuota = buildSandboxQuota(project, namespace, config);
  return [
    buildServiceAccount(project, namespace),
    buildRoleBinding(project, namespace, config),
    ...buildNetworkPolicies(project, namespace, config),
    ...(quota ? [quota] : []),
    ...(sandboxQuota ? [sandboxQuota] : []),
    ...(limitRange ? [limitRange] : []),
    buildRuntimeSecret(project, namespace, config, secrets),
    buildRuntimeDeployment(project, namespace, config, secrets),
    buildRuntimeService(project, namespace, config),
    buildDataPlaneIngress(project, namespace, config),
    buildRuntimeDisruptionBudget(project, namespace),
    ...buildBrowserObjects(project, namespace, config, secrets),
  ];
}

/**
 * The kinds buildProjectObjects can produce (the Namespace is cluster-scoped and handled on its own): the
 * reconciler prunes owned objects of these kinds that are no longer desired.
 */
export const PROJECT_OBJECT_KINDS: ReadonlyArray<{ apiVersion: string; kind: string; plural: string }> = [
  { apiVersion: 'v1', kind: 'ServiceAccount', plural: 'serviceaccounts' },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', plural: 'rolebindings' },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', plural: 'networkpolicies' },
  { apiVersion: 'v1', kind: 'ResourceQuota', plural: 'resourcequotas' },
  { apiVersion: 'v1', kind: 'LimitRange', plural: 'limitranges' },
  { apiVersion: 'v1', kind: 'Secret', plural: 'secrets' },
  { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments' },
  { apiVersion: 'v1', kind: 'Service', plural: 'services' },
  { apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', plural: 'ingresses' },
  { apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', plural: 'poddisruptionbudgets' },
];
