// Wires Projects to the work queue: a Project's own changes. (Changes to what the operator made for it, such as its
// runtime Deployment's availability, wake it through the owned-object cache: ../kube/owned.ts, wired in app.ts.)
import * as k8s from '@kubernetes/client-node';
import { GROUP, PROJECTS, VERSION, type Project } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import type { KubeClient } from '../kube/client.js';
import { ObjectWatch } from '../kube/watch.js';
import type { ProjectReconciler } from '../reconcilers/project/index.js';
import { objectKey } from './keys.js';

export interface Controller {
  watches: ObjectWatch<k8s.KubernetesObject>[];
  /** The key of every object watched: what a resync (or a new leader) enqueues. */
  keys(): string[];
  reconcile(namespace: string, name: string): ReturnType<ProjectReconciler['reconcile']>;
}

export function projectController(deps: {
  kubeConfig: k8s.KubeConfig;
  kube: KubeClient;
  reconciler: ProjectReconciler;
  enqueue: (key: string) => void;
  /** Also told of every Project change (its Tenants wait on it). */
  onProject: (project: Project) => void;
  logger: Logger;
}): Controller {
  const { kubeConfig, kube, enqueue, logger } = deps;
  const projects = new ObjectWatch<k8s.KubernetesObject>(
    kubeConfig,
    {
      name: 'projects',
      path: `/apis/${GROUP}/${VERSION}/${PROJECTS}`,
      list: () => kube.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS }) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
      onChange: (object) => {
        const project = object as unknown as Project;
        enqueue(objectKey('Project', project.metadata.name));
        deps.onProject(project);
      },
    },
    logger,
  );
  return {
    watches: [projects],
    keys: () => projects.list().map((project) => objectKey('Project', project.metadata!.name!)),
    reconcile: (_namespace, name) => deps.reconciler.reconcile(name),
  };
}
