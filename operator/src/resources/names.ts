// Where a Project's things are found: its namespace, hosts, URLs and database. Derived from the Project's name and
// the operator's config alone, so the operator, the control-api and the tests compute the same answers.
import { projectNamespace, type Project } from '@agentplane/lib/kubernetes/resources';
import type { OperatorConfig } from '../config.js';

/** Names of the objects made in every project namespace (the contract the control-api and the chart rely on). */
export const RUNTIME_NAME = 'agent-runtime';
export const RUNTIME_SECRET_NAME = 'agentplane-runtime';
export const DATA_PLANE_INGRESS_NAME = 'data-plane';
export const QUOTA_NAME = 'project-quota';
/** The ResourceQuota that holds the project's sandbox count. */
export const SANDBOX_QUOTA_NAME = 'sandboxes';
export const LIMIT_RANGE_NAME = 'container-defaults';
/** The agent's browser (docs/decisions/0092): its Deployment, Service and container, and its named port. */
export const BROWSER_NAME = 'browser';
export const BROWSER_PORT_NAME = 'browser';
/** The runtime container's named port, used by the Service, the Ingress and the probes. */
export const RUNTIME_PORT_NAME = 'http';

export function projectNamespaceName(project: Project, config: OperatorConfig): string {
  return projectNamespace(project.metadata.name, config.projectNamespacePrefix);
}

/** The host customers reach the project's data plane on: the Project's own, or `<project>.<domain>`. */
export function dataPlaneHost(project: Project, config: OperatorConfig): string {
  return project.spec.dataPlane?.host ?? `${project.metadata.name}.${config.dataPlane.domain}`;
}

export function dataPlaneUrl(project: Project, config: OperatorConfig): string {
  return `${config.dataPlane.scheme}://${dataPlaneHost(project, config)}`;
}

/** Where the operator and the control-api reach the runtime's admin surface (in-cluster, or a test's own process). */
export function runtimeUrl(project: Project, config: OperatorConfig): string {
  return config.runtime.urlTemplate
    .replaceAll('{namespace}', projectNamespaceName(project, config))
    .replaceAll('{project}', project.metadata.name);
}

/**
 * The project's PostgreSQL database, which is also its role's name. Project names are DNS labels of at most 40
 * characters, so this is a valid unquoted identifier well under PostgreSQL's 63.
 */
export function projectDatabaseName(project: Project): string {
  return `agentplane_${project.metadata.name.replaceAll('-', '_')}`;
}

/** The runtime's Redis key prefix and blob-store key prefix: projects share the stores, never each other's keys. */
export function redisKeyPrefix(project: Project): string {
  return `agentplane:${project.metadata.name}:`;
}

export function blobKeyPrefix(project: Project): string {
  return `projects/${project.metadata.name}/`;
}
