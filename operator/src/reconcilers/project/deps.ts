// What the Project reconciler and its erase are given by the composition root.
import type { Logger } from '@agentplane/lib/logging';
import type { OperatorConfig } from '../../config.js';
import type { KubeClient } from '../../kube/client.js';
import type { RuntimeClient } from '../../runtime-client.js';
import type { ProjectDatabases } from './database.js';

export interface ProjectReconcilerDeps {
  kube: KubeClient;
  config: OperatorConfig;
  logger: Logger;
  runtime: RuntimeClient;
  /** Absent when no PostgreSQL server is configured: runtimes then keep their data in the Pod. */
  databases: ProjectDatabases | undefined;
}
