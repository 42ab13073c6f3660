// Reconciles one Project, CloudNativePG-style: a flat list of ordered steps, each of which may stop the pass and ask
// for a requeue, then one status write. A Project being deleted runs its finalizer instead (./erase.ts).
//   1. finalizer  2. replicas the stores allow  3. namespace  4. database and role  5. runtime Secret values
//   6. desired objects, then prune  7. the Deployment's availability  8. the runtime's /ready
//   -> status (conditions, observedGeneration, URLs)
import type * as k8s from '@kubernetes/client-node';
import { PROJECT_CONDITIONS, PROJECT_FINALIZER, type Condition, type Project } from '@agentplane/lib/kubernetes/resources';
import { errorMessage } from '@agentplane/lib/errors';
import { applyObject, applyObjects, pruneObjects } from '../../apply.js';
import { ensureFinalizer } from '../../finalizers.js';
import type { ReconcileOutcome } from '../../queue.js';
import {
  PROJECT_OBJECT_KINDS,
  RUNTIME_NAME,
  RUNTIME_SECRET_NAME,
  buildNamespace,
  buildProjectObjects,
  dataPlaneUrl,
  namespaceConflict,
  projectDatabaseName,
  projectNamespaceName,
  runtimeUrl,
  type RuntimeSecretValues,
} from '../../resources/index.js';
import { findCondition, setCondition, writeStatus, type ConditionUpdate } from '../../status.js';
import { ProjectDatabases } from './database.js';
import type { ProjectReconcilerDeps } from './deps.js';
import { eraseProject } from './erase.js';
import { newAdminKey, newBrowserToken, newDatabasePassword, newMasterKey, secretValues } from './secrets.js';

export type { ProjectReconcilerDeps } from './deps.js';

/** How soon a Project that is not Ready yet is looked at again, besides the watch events that also wake it. */
export const NOT_READY_REQUEUE_MS = 5_000;

/** How soon a Project refused its namespace looks again (a namespace going away does not wake it). */
export const CONFLICT_REQUEUE_MS = 60_000;

/** What one pass learns, step by step; written to the status at the end. */
interface ProjectPass {
  project: Project;
  namespace: string;
  conditions: ConditionUpdate[];
  secret: Record<string, string>;
  databaseUrl?: string;
  secrets?: RuntimeSecretValues;
  /** Whether every object of this generation was applied (observedGeneration may advance). */
  applied: boolean;
  /** The Project went away or began deleting mid-pass: its status is the erase's to write now. */
  superseded: boolean;
  /** Why this spec cannot run with the operator's configuration, if it cannot: its objects are not applied. */
  refused?: ConditionUpdate;
  runtimeReady: boolean;
}

type StepOutcome = { requeueAfterMs: number } | undefined;
type Step = (pass: ProjectPass) => Promise<StepOutcome>;

/** A step's failure, already described by the condition it set. */
class StepFailed extends Error {
  constructor(readonly condition: ConditionUpdate, cause: unknown) {
    super(condition.message, { cause });
  }
}

export class ProjectReconciler {
  private readonly steps: Step[] = [
    (pass) => this.ensureFinalizer(pass),
    (pass) => this.checkReplicas(pass),
    (pass) => this.ensureNamespace(pass),
    (pass) => this.ensureDatabase(pass),
    (pass) => this.resolveSecrets(pass),
    (pass) => this.applyObjects(pass),
    (pass) => this.checkAvailability(pass),
    (pass) => this.checkReadiness(pass),
  ];

  constructor(private readonly deps: ProjectReconcilerDeps) {}

  async reconcile(name: string): Promise<ReconcileOutcome> {
    const project = await this.deps.kube.getCustom('Project', name);
    if (!project) return {};
    if (project.metadata.deletionTimestamp) return eraseProject(this.deps, project);

    const pass: ProjectPass = {
      project,
      namespace: projectNamespaceName(project, this.deps.config),
      conditions: [],
      secret: {},
      applied: false,
      superseded: false,
      runtimeReady: false,
    };
    let stop: StepOutcome;
    let failure: unknown;
    try {
      for (const step of this.steps) {
        stop = await step(pass);
        if (stop) break;
      }
    } catch (error) {
      failure = error;
      if (error instanceof StepFailed) pass.conditions.push(error.condition);
    }
    if (pass.superseded) return stop ?? {};
    await this.writeStatus(pass, failure);
    if (failure) throw failure;
    return stop ?? (pass.runtimeReady ? {} : { requeueAfterMs: NOT_READY_REQUEUE_MS });
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Steps

  private async ensureFinalizer(pass: ProjectPass): Promise<StepOutcome> {
    const updated = await ensureFinalizer(this.deps.kube, 'Project', pass.project, PROJECT_FINALIZER);
    // Gone or being deleted since it was read: the next event brings it back here.
    if (!updated || updated.metadata.deletionTimestamp) {
      pass.superseded = true;
      return { requeueAfterMs: 0 };
    }
    pass.project = updated;
    return undefined;
  }

  /**
   * More than one runtime replica works only on shared stores: each replica would otherwise keep its own embedded
   * database (a tenant registered through the Service would exist on one replica only), its own events (a stream
   * could not resume, a cancel not arrive, on another) and its own files. Such a spec is refused, not quietly run
   * on one replica: its objects are not applied, and the runtime of the last accepted spec keeps serving (and stays
   * Ready, so its tenants and their configuration keep flowing); SpecAccepted=False says why.
   */
  private async checkReplicas(pass: ProjectPass): Promise<StepOutcome> {
    const replicas = pass.project.spec.runtime?.replicas ?? 1;
    const { databaseAdminUrl, redisUrl, s3 } = this.deps.config.stores;
    const missing = [
      databaseAdminUrl ? undefined : 'PostgreSQL (PROJECT_DATABASE_ADMIN_URL)',
      redisUrl ? undefined : 'Redis (RUNTIME_REDIS_URL)',
      s3 ? undefined : 'an S3 store (RUNTIME_S3_BUCKET)',
    ].filter((store) => store !== undefined);
    if (replicas <= 1 || missing.length === 0) {
      pass.conditions.push({ type: PROJECT_CONDITIONS.specAccepted, status: 'True', reason: 'Accepted', message: 'the operator can run this spec' });
      return undefined;
    }
    pass.refused = {
      type: PROJECT_CONDITIONS.specAccepted,
      status: 'False',
      reason: 'SharedStoresRequired',
      message: `spec.runtime.replicas is ${replicas}, but replicas share nothing without ${missing.join(', ')} configured on the operator; set replicas to 1 or configure the stores`,
    };
    pass.conditions.push(pass.refused);
    return undefined;
  }

  private async ensureNamespace(pass: ProjectPass): Promise<StepOutcome> {
    const { kube, config } = this.deps;
    const existing = await kube.getCached<k8s.V1Namespace>({ apiVersion: 'v1', kind: 'Namespace', name: pass.namespace });
    if (existing?.metadata?.deletionTimestamp) {
      pass.conditions.push({
        type: PROJECT_CONDITIONS.namespaceReady,
        status: 'False',
        reason: 'NamespaceTerminating',
        message: `namespace ${pass.namespace} is being deleted; the operator recreates it once it is gone`,
      });
      return { requeueAfterMs: NOT_READY_REQUEUE_MS };
    }
    const conflict = existing && namespaceConflict(existing, pass.project, config);
    if (conflict) {
      pass.conditions.push({
        type: PROJECT_CONDITIONS.namespaceReady,
        status: 'False',
        reason: 'NamespaceConflict',
        message: `${conflict}, so project ${pass.project.metadata.name} cannot have it; rename the project or set another PROJECT_NAMESPACE_PREFIX`,
      });
      return { requeueAfterMs: CONFLICT_REQUEUE_MS };
    }
    await this.failingAs({ type: PROJECT_CONDITIONS.namespaceReady, reason: 'NamespaceFailed', what: `creating namespace ${pass.namespace}` }, () =>
      // The namespace was just read: apply it against that, not a second read.
      applyObject(kube, buildNamespace(pass.project, config), existing),
    );
    return undefined;
  }

  private async ensureDatabase(pass: ProjectPass): Promise<StepOutcome> {
    const { kube, databases } = this.deps;
    const secret = await kube.getCached<k8s.V1Secret>({ apiVersion: 'v1', kind: 'Secret', name: RUNTIME_SECRET_NAME, namespace: pass.namespace });
    pass.secret = secretValues(secret);
    if (!databases) {
      pass.conditions.push({
        type: PROJECT_CONDITIONS.databaseReady,
        status: 'True',
        reason: 'NoDatabaseConfigured',
        message: 'no PostgreSQL server is configured (PROJECT_DATABASE_ADMIN_URL), so the runtime keeps its data in its Pod',
      });
      return undefined;
    }
    const name = projectDatabaseName(pass.project);
    const kept = ProjectDatabases.passwordOf(pass.secret['database-url']);
    const password = kept ?? newDatabasePassword();
    // While the runtime is not Ready the role's password is set again from the Secret: should anything have left
    // the two apart (a deposed leader's late ALTER ROLE), the runtime could not log in, and this mends it.
    const ready = findCondition(pass.project.status?.conditions, PROJECT_CONDITIONS.ready)?.status === 'True';
    await this.failingAs({ type: PROJECT_CONDITIONS.databaseReady, reason: 'DatabaseUnavailable', what: `setting up database and role ${name}` }, () =>
      databases.ensure(name, password, kept === undefined || !ready),
    );
    pass.databaseUrl = databases.connectionUrl(name, password);
    pass.conditions.push({ type: PROJECT_CONDITIONS.databaseReady, status: 'True', reason: 'DatabaseReady', message: `database and role ${name} exist` });
    return undefined;
  }

  private async resolveSecrets(pass: ProjectPass): Promise<StepOutcome> {
    pass.secrets = {
      adminKey: pass.secret['admin-key'] || newAdminKey(),
      masterKey: pass.secret['master-key'] || newMasterKey(),
      fireKey: pass.secret['task-fire-key'] || newAdminKey(),
      ...(this.deps.config.runtime.browser ? { browserToken: pass.secret['browser-token'] || newBrowserToken() } : {}),
      ...(pass.databaseUrl ? { databaseUrl: pass.databaseUrl } : {}),
    };
    return undefined;
  }

  private async applyObjects(pass: ProjectPass): Promise<StepOutcome> {
    // A refused spec changes nothing: what runs is the last accepted one, whose availability and readiness the
    // next steps still report. A spec change or an operator restarted with the stores brings the Project back.
    if (pass.refused) return undefined;
    const { kube, config, logger } = this.deps;
    const name = pass.project.metadata.name;
    const desired = buildProjectObjects(pass.project, config, pass.secrets!);
    const report = await this.failingAs({ type: PROJECT_CONDITIONS.namespaceReady, reason: 'ApplyFailed', what: `applying the objects of project ${name}` }, async () => {
      const { applied } = await applyObjects(kube, desired);
      const pruned = await pruneObjects(kube, name, pass.namespace, PROJECT_OBJECT_KINDS, desired);
      return { applied, pruned };
    });
    if (report.applied.length > 0 || report.pruned.length > 0) logger.info({ project: name, ...report }, 'project objects changed');
    pass.applied = true;
    pass.conditions.push({
      type: PROJECT_CONDITIONS.namespaceReady,
      status: 'True',
      reason: 'NamespaceReady',
      message: `namespace ${pass.namespace} holds the runtime's account, network policies, quota and limits as specified`,
    });
    return undefined;
  }

  private async checkAvailability(pass: ProjectPass): Promise<StepOutcome> {
    const deployment = await this.deps.kube.getCached<k8s.V1Deployment>({ apiVersion: 'apps/v1', kind: 'Deployment', name: RUNTIME_NAME, namespace: pass.namespace });
    const wanted = deployment?.spec?.replicas ?? 1;
    const status = deployment?.status;
    const caughtUp = (status?.observedGeneration ?? 0) >= (deployment?.metadata?.generation ?? 1);
    const updated = status?.updatedReplicas ?? 0;
    const available = status?.availableReplicas ?? 0;
    if (caughtUp && updated >= wanted && available >= wanted) {
      pass.conditions.push({
        type: PROJECT_CONDITIONS.runtimeAvailable,
        status: 'True',
        reason: 'ReplicasAvailable',
        message: `${available} of ${wanted} runtime replicas are available`,
      });
      return undefined;
    }
    const rollingOut = !caughtUp || updated < wanted;
    pass.conditions.push({
      type: PROJECT_CONDITIONS.runtimeAvailable,
      status: 'False',
      reason: rollingOut ? 'RolloutInProgress' : 'ReplicasUnavailable',
      message: rollingOut
        ? `deployment ${pass.namespace}/${RUNTIME_NAME} is rolling out: ${updated} of ${wanted} replicas updated, ${available} available`
        : `${available} of ${wanted} runtime replicas are available; see the Pods in namespace ${pass.namespace} (kubectl get pods -n ${pass.namespace})`,
    });
    return { requeueAfterMs: NOT_READY_REQUEUE_MS };
  }

  private async checkReadiness(pass: ProjectPass): Promise<StepOutcome> {
    const url = runtimeUrl(pass.project, this.deps.config);
    const { ready, detail } = await this.deps.runtime.ready(url);
    pass.runtimeReady = ready;
    pass.conditions.push(
      ready
        ? { type: PROJECT_CONDITIONS.ready, status: 'True', reason: 'RuntimeReady', message: `the runtime at ${url} is serving` }
        : { type: PROJECT_CONDITIONS.ready, status: 'False', reason: 'RuntimeNotReady', message: `the runtime at ${url} is not ready: ${detail}` },
    );
    return ready ? undefined : { requeueAfterMs: NOT_READY_REQUEUE_MS };
  }

  // ---------------------------------------------------------------------------------------------------------------

  /** Runs one step's work; a failure sets the step's condition False with the reason and what went wrong. */
  private async failingAs<T>(failure: { type: string; reason: string; what: string }, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw new StepFailed({ type: failure.type, status: 'False', reason: failure.reason, message: `${failure.what} failed: ${errorMessage(error)}` }, error);
    }
  }

  private async writeStatus(pass: ProjectPass, failure: unknown): Promise<void> {
    const { kube, config } = this.deps;
    const { project } = pass;
    const generation = project.metadata.generation;
    await writeStatus(kube, 'Project', project.metadata.name, undefined, [
      (status) => {
        status.namespace = pass.namespace;
        status.dataPlaneUrl = dataPlaneUrl(project, config);
        status.runtimeUrl = runtimeUrl(project, config);
        for (const update of pass.conditions.filter((c) => c.type !== PROJECT_CONDITIONS.ready)) {
          status.conditions = setCondition(status.conditions, update, generation);
        }
        status.conditions = setCondition(status.conditions, readyCondition(pass, status.conditions, failure), generation);
        if (pass.applied && !failure) status.observedGeneration = generation;
      },
    ], project);
  }
}

/**
 * Ready: True only when the runtime answered /ready this pass (a refused spec does not change that: the runtime of
 * the last accepted one serves); else why not, from the first condition not True.
 */
function readyCondition(pass: ProjectPass, conditions: Condition[] | undefined, failure: unknown): ConditionUpdate {
  const fromStep = pass.conditions.find((c) => c.type === PROJECT_CONDITIONS.ready);
  if (fromStep && !failure) return fromStep;
  if (pass.refused) return { ...pass.refused, type: PROJECT_CONDITIONS.ready };
  for (const type of [PROJECT_CONDITIONS.namespaceReady, PROJECT_CONDITIONS.databaseReady, PROJECT_CONDITIONS.runtimeAvailable]) {
    const condition = pass.conditions.find((c) => c.type === type) ?? findCondition(conditions, type);
    if (condition && condition.status !== 'True') return { type: PROJECT_CONDITIONS.ready, status: 'False', reason: condition.reason, message: condition.message };
  }
  if (failure) return { type: PROJECT_CONDITIONS.ready, status: 'False', reason: 'ReconcileFailed', message: errorMessage(failure) };
  return { type: PROJECT_CONDITIONS.ready, status: 'False', reason: 'Provisioning', message: 'the operator is setting the project up' };
}
