// Labels and the owner reference every object made for a Project carries: the labels let the operator find (and
// prune) what it made, the owner reference lets the garbage collector remove what a deleted Project leaves behind.
import type * as k8s from '@kubernetes/client-node';
import { AppError } from '@agentplane/lib/errors';
import { API_VERSION, LABELS, MANAGED_BY, type Project } from '@agentplane/lib/kubernetes/resources';
import { RUNTIME_NAME } from './names.js';

export function projectLabels(project: Project, component?: string): Record<string, string> {
  return {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.partOf]: 'agentplane',
    [LABELS.project]: project.metadata.name,
    ...(component === undefined ? {} : { [LABELS.component]: component }),
  };
}

/**
 * What selects the runtime's Pods (Deployment, Service, NetworkPolicies, PodDisruptionBudget). Kept to labels that
 * never change, because a Deployment's selector is immutable; the namespace already scopes it to one project.
 */
export function runtimeSelector(): Record<string, string> {
  return { [LABELS.name]: RUNTIME_NAME, [LABELS.component]: 'runtime' };
}

/** Labels of the runtime's Pods and of the objects that exist for the runtime. */
export function runtimeLabels(project: Project): Record<string, string> {
  return { ...projectLabels(project, 'runtime'), ...runtimeSelector() };
}

export function ownerReference(project: Project): k8s.V1OwnerReference {
  const uid = project.metadata.uid;
  if (!uid) throw new AppError('internal', `Project ${project.metadata.name} has no metadata.uid: build its objects from the stored Project, not a draft`);
  return { apiVersion: API_VERSION, kind: 'Project', name: project.metadata.name, uid, controller: true, blockOwnerDeletion: true };
}

/** Metadata of an object in the project namespace. */
export function projectObjectMeta(project: Project, namespace: string, name: string, labels: Record<string, string>): k8s.V1ObjectMeta {
  return { name, namespace, labels, ownerReferences: [ownerReference(project)] };
}
