// The project namespace and what bounds everything in it: Pod Security `restricted`, the runtime's identity (a
// ServiceAccount bound to the chart's ClusterRole in this namespace only), and the ResourceQuota and LimitRange
// the Project asks for.
import type * as k8s from '@kubernetes/client-node';
import { LABELS, type Project, type ResourceAmounts } from '@agentplane/lib/kubernetes/resources';
import type { OperatorConfig } from '../config.js';
import { ownerReference, projectLabels, projectObjectMeta, runtimeLabels } from './metadata.js';
import { COMPUTER_DEFAULTS } from '@agentplane/lib/computer';
import { LIMIT_RANGE_NAME, QUOTA_NAME, RUNTIME_NAME, SANDBOX_QUOTA_NAME, projectNamespaceName } from './names.js';

/** Pod Security admission labels: every Pod in a project namespace must meet the `restricted` profile. */
export const POD_SECURITY_LABELS: Readonly<Record<string, string>> = {
  'pod-security.kubernetes.io/enforce': 'restricted',
  'pod-security.kubernetes.io/enforce-version': 'latest',
  'pod-security.kubernetes.io/audit': 'restricted',
  'pod-security.kubernetes.io/audit-version': 'latest',
  'pod-security.kubernetes.io/warn': 'restricted',
  'pod-security.kubernetes.io/warn-version': 'latest',
};

export function buildNamespace(project: Project, config: OperatorConfig): k8s.V1Namespace {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: projectNamespaceName(project, config),
      labels: { ...projectLabels(project), ...POD_SECURITY_LABELS },
      ownerReferences: [ownerReference(project)],
    },
  };
}

/** Namespaces no Project may take over, whatever the prefix makes of its name. */
const SYSTEM_NAMESPACES = new Set(['default', 'kube-system', 'kube-public', 'kube-node-lease']);

/**
 * Why an existing namespace must not become this Project's, if it must not. A namespace an admin made ahead of the
 * operator (with their own keys in its Secret, say) is adopted; the operator's own, a system one, or another
 * Project's never is, since the Project's erase ends by deleting its namespace.
 */
export function namespaceConflict(existing: k8s.V1Namespace, project: Project, config: OperatorConfig): string | undefined {
  const name = existing.metadata?.name ?? '';
  if (name === config.namespace) return `namespace ${name} is the operator's own`;
  if (SYSTEM_NAMESPACES.has(name) || name.startsWith('kube-')) return `namespace ${name} is a system namespace`;
  const otherOwner = (existing.metadata?.ownerReferences ?? []).find((ref) => ref.kind === 'Project' && ref.uid !== project.metadata.uid);
  if (otherOwner) return `namespace ${name} belongs to project ${otherOwner.name}`;
  const labelled = existing.metadata?.labels?.[LABELS.project];
  if (labelled !== undefined && labelled !== project.metadata.name) return `namespace ${name} belongs to project ${labelled}`;
  return undefined;
}

/** Whether the namespace is this Project's (made or adopted by the operator for it): only then may its erase delete it. */
export function ownsNamespace(existing: k8s.V1Namespace, project: Project): boolean {
  return (existing.metadata?.ownerReferences ?? []).some((ref) => ref.kind === 'Project' && ref.uid === project.metadata.uid);
}

export function buildServiceAccount(project: Project, namespace: string): k8s.V1ServiceAccount {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: projectObjectMeta(project, namespace, RUNTIME_NAME, runtimeLabels(project)) };
}

/**
 * Grants the runtime the chart's ClusterRole (tasks and sandboxes: Jobs, CronJobs, Pods, exec, logs) in its own
 * namespace only: a RoleBinding, never a ClusterRoleBinding, so one project's runtime cannot touch another's.
 */
export function buildRoleBinding(project: Project, namespace: string, config: OperatorConfig): k8s.V1RoleBinding {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: projectObjectMeta(project, namespace, RUNTIME_NAME, runtimeLabels(project)),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: config.runtime.clusterRole },
    subjects: [{ kind: 'ServiceAccount', name: RUNTIME_NAME, namespace }],
  };
}

/** What all the project's Pods may use together; none when the Project sets no quota (or an empty one). */
export function buildResourceQuota(project: Project, namespace: string): k8s.V1ResourceQuota | undefined {
  const quota = project.spec.quota;
  if (!quota) return undefined;
  const hard: Record<string, string> = {
    ...prefixed('requests', quota.requests),
    ...prefixed('limits', quota.limits),
    ...(quota.pods === undefined ? {} : { pods: String(quota.pods) }),
  };
  if (Object.keys(hard).length === 0) return undefined;
  return { apiVersion: 'v1', kind: 'ResourceQuota', metadata: projectObjectMeta(project, namespace, QUOTA_NAME, projectLabels(project)), spec: { hard } };
}

/**
 * The project's sandbox count, held by the API server as well as by the runtime's own counting (docs/decisions/0081):
 * each sandbox holds exactly one PersistentVolumeClaim (its /workspace, kept while it is paused), and nothing else in
 * the namespace claims any, so counting claims counts sandboxes. None when the operator runs no sandboxes.
 */
export function buildSandboxQuota(project: Project, namespace: string, config: OperatorConfig): k8s.V1ResourceQuota | undefined {
  if (!config.runtime.sandboxes) return undefined;
  const max = project.spec.computer?.maxSandboxes ?? COMPUTER_DEFAULTS.max_sandboxes;
  return {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: projectObjectMeta(project, namespace, SANDBOX_QUOTA_NAME, projectLabels(project)),
    spec: { hard: { persistentvolumeclaims: String(max) } },
  };
}

/** What a container that states no requests or limits of its own gets; none when the Project sets no defaults. */
export function buildLimitRange(project: Project, namespace: string): k8s.V1LimitRange | undefined {
  const defaults = project.spec.containerDefaults;
  const defaultRequest = amounts(defaults?.requests);
  const defaultLimit = amounts(defaults?.limits);
  if (!defaultRequest && !defaultLimit) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'LimitRange',
    metadata: projectObjectMeta(project, namespace, LIMIT_RANGE_NAME, projectLabels(project)),
    spec: {
      limits: [{ type: 'Container', ...(defaultRequest ? { defaultRequest } : {}), ...(defaultLimit ? { _default: defaultLimit } : {}) }],
    },
  };
}

/** `{cpu, memory}` without unset entries; undefined when nothing is set. */
function amounts(values: ResourceAmounts | undefined): Record<string, string> | undefined {
  const set: Record<string, string> = {};
  if (values?.cpu !== undefined) set.cpu = values.cpu;
  if (values?.memory !== undefined) set.memory = values.memory;
  return Object.keys(set).length > 0 ? set : undefined;
}

function prefixed(prefix: 'requests' | 'limits', values: ResourceAmounts | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(amounts(values) ?? {}).map(([resource, quantity]) => [`${prefix}.${resource}`, quantity]));
}
