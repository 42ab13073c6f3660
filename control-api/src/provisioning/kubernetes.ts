// The kubernetes provisioner: a project is a cluster-scoped Project resource and its tenant a Tenant in the project's
// namespace, both written here and reconciled by the operator (DESIGN.md flow 4). The control-api reads their
// conditions for readiness, waits for the Tenant to be Ready before pushing configuration, and pushes it over the
// runtime's admin channel (status.runtimeUrl, key from the namespace's Secret), never through a resource: the
// document carries provider keys in clear. docs/decisions/0024-kubernetes-provisioner.md.
import * as k8s from '@kubernetes/client-node';
import { withCallDeadline } from '@agentplane/lib/kubernetes/kube-config';
import { AppError } from '@agentplane/lib/errors';
import {
  API_VERSION,
  GROUP,
  LABELS,
  PROJECT_CONDITIONS,
  PROJECTS,
  projectNamespace,
  TENANT_CONDITIONS,
  TENANTS,
  VERSION,
  type Condition,
  type Project,
  type Tenant,
} from '@agentplane/lib/kubernetes/resources';
import type { Provisioner, ProvisioningStatus, TenantCalls, TenantConfigurationDocument, TenantTarget } from './provisioner.js';
import { adminKeyRefused, RuntimeAdminClient } from './runtime-admin.js';

/** The Secret the operator writes in each project namespace, and its key holding the runtime's admin key. */
export const RUNTIME_SECRET = 'agentplane-runtime';
export const ADMIN_KEY_ENTRY = 'admin-key';

/** Marks the resources this program writes, as the operator marks its own. */
const MANAGED_BY_CONTROL_API = 'agentplane-control-api';

export interface KubernetesProvisionerOptions {
  kubeConfig: k8s.KubeConfig;
  /** The operator's PROJECT_NAMESPACE_PREFIX. */
  projectNamespacePrefix: string;
  /** How long a call to a project's runtime may take. */
  timeoutMs?: number;
}

/** A kubeconfig from a file, or the Pod's service account when none is named; fails at start outside a Pod. */
export function loadKubeConfig(path: string | undefined): k8s.KubeConfig {
  const config = new k8s.KubeConfig();
  if (path) {
    config.loadFromFile(path);
    return withCallDeadline(config);
  }
  config.loadFromCluster();
  if (/\/\/undefined:/.test(config.getCurrentCluster()?.server ?? '')) {
    throw new Error('PROVISIONER=kubernetes without KUBECONFIG needs the in-cluster service account, and this is not a Pod (KUBERNETES_SERVICE_HOST is unset): set KUBECONFIG');
  }
  // Calls with a deadline, over kept-alive connections (client-node alone opens one per call).
  return withCallDeadline(config);
}

export class KubernetesProvisioner implements Provisioner {
  private readonly custom: k8s.CustomObjectsApi;
  private readonly core: k8s.CoreV1Api;
  /** Runtime admin keys by project, read from the project's Secret; read again when the runtime refuses one. */
  private readonly adminKeys = new Map<string, string>();

  constructor(private readonly options: KubernetesProvisionerOptions) {
    this.custom = options.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    this.core = options.kubeConfig.makeApiClient(k8s.CoreV1Api);
  }

  /**
   * Writes the Project (when missing) and then the Tenant in the project's namespace, and succeeds only once the
   * operator reports the Tenant Ready: until then the outbox retries, and the project's configuration waits.
   */
  async registerTenant(target: TenantTarget, name: string): Promise<void> {
    const project = await this.ensureProject(target.projectId, name);
    const tenant = await this.ensureTenant(target, name, project);
    const ready = conditionOf(tenant, TENANT_CONDITIONS.ready);
    if (ready?.status === 'True') return;
    throw new AppError(
      'unavailable',
      `Tenant ${this.namespaceOf(target.projectId)}/${target.tenantId} is not Ready yet (${ready ? `${ready.reason}: ${ready.message}` : 'the operator has not reported on it yet'}); its configuration waits`,
    );
  }

  async pushConfiguration(target: TenantTarget, document: TenantConfigurationDocument): Promise<void> {
    await this.holdSandboxCount(target.projectId, document.computer?.max_sandboxes);
    await this.onRuntime(target, (runtime) => runtime.pushConfiguration(target.tenantId, document), 'its configuration cannot be pushed');
  }

  /**
   * Writes the project's sandbox count into its Project, where the operator's ResourceQuota follows it
   * (docs/decisions/0081), before the runtime hears it: a lowered count is held by the API server as soon as by the
   * runtime. Unset (a project that never set its computer) leaves the operator's default.
   */
  private async holdSandboxCount(projectId: string, max: number | undefined): Promise<void> {
    if (max === undefined) return;
    const project = await this.readProject(projectId);
    if (!project || project.spec.computer?.maxSandboxes === max) return;
    try {
      await this.custom.patchClusterCustomObject(
        { group: GROUP, version: VERSION, plural: PROJECTS, name: projectId, body: { spec: { computer: { maxSandboxes: max } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
    } catch (error) {
      throw apiFailure(`write the sandbox count of Project ${projectId}`, error);
    }
  }

  withRuntime<T>(target: TenantTarget, call: (runtime: TenantCalls) => Promise<T>): Promise<T> {
    return this.onRuntime(target, call, 'its runtime cannot be reached');
  }

  private async onRuntime<T>(target: TenantTarget, call: (runtime: RuntimeAdminClient) => Promise<T>, unreachable: string): Promise<T> {
    const project = await this.readProject(target.projectId);
    if (!project) throw new AppError('unavailable', `Project ${target.projectId} does not exist: ${unreachable}`);
    const url = project.status?.runtimeUrl;
    if (!url) throw new AppError('unavailable', `Project ${target.projectId} has no runtime URL in its status yet: ${describeReady(project)}`);
    const attempt = async () => call(new RuntimeAdminClient({ url, adminKey: await this.adminKey(target.projectId), ...this.timeout() }));
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof AppError) || error.code !== adminKeyRefused) throw error;
      // The operator may have replaced the Secret since the key was cached: read it again, once.
      this.adminKeys.delete(target.projectId);
      return attempt();
    }
  }

  /**
   * Deletes the Project. The operator's finalizer erases its Tenants (each one's ordered erase), then drops the
   * project's database and deletes its namespace; the delete being accepted is success here.
   */
  async removeProject({ projectId }: TenantTarget): Promise<void> {
    this.adminKeys.delete(projectId);
    try {
      await this.custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS, name: projectId, propagationPolicy: 'Background' });
    } catch (error) {
      if (statusOf(error) === 404) return;
      throw apiFailure(`delete Project ${projectId}`, error);
    }
  }

  /** The Project's Ready condition while it is not Ready, then the Tenant's. */
  async status(target: TenantTarget): Promise<ProvisioningStatus> {
    try {
      const project = await this.readProject(target.projectId);
      if (!project) return { ready: false, reason: 'ProjectPending', message: `the Project ${target.projectId} is not written yet; the control-api's outbox writes it` };
      const dataPlaneUrl = project.status?.dataPlaneUrl ? { dataPlaneUrl: project.status.dataPlaneUrl } : {};
      const projectReady = conditionOf(project, PROJECT_CONDITIONS.ready);
      if (!projectReady) return { ready: false, reason: 'AwaitingOperator', message: `the operator has not reported on Project ${target.projectId} yet`, ...dataPlaneUrl };
      if (projectReady.status !== 'True') return { ready: false, reason: projectReady.reason, message: `Project ${target.projectId}: ${projectReady.message}`, ...dataPlaneUrl };
      const tenant = await this.readTenant(target);
      const namespaced = `${this.namespaceOf(target.projectId)}/${target.tenantId}`;
      if (!tenant) return { ready: false, reason: 'TenantPending', message: `the Tenant ${namespaced} is not written yet; the control-api's outbox writes it`, ...dataPlaneUrl };
      const tenantReady = conditionOf(tenant, TENANT_CONDITIONS.ready);
      if (!tenantReady) return { ready: false, reason: 'AwaitingOperator', message: `the operator has not reported on Tenant ${namespaced} yet`, ...dataPlaneUrl };
      return { ready: tenantReady.status === 'True', reason: tenantReady.reason, message: `Tenant ${namespaced}: ${tenantReady.message}`, ...dataPlaneUrl };
    } catch (error) {
      return { ready: false, reason: 'KubernetesUnavailable', message: (error as Error).message };
    }
  }

  private async ensureProject(projectId: string, name: string): Promise<Project> {
    const existing = await this.readProject(projectId);
    if (existing) {
      if (existing.metadata.deletionTimestamp) throw new AppError('unavailable', `Project ${projectId} is being deleted; its tenant is not registered`);
      return existing;
    }
    const body: Project = {
      apiVersion: API_VERSION,
      kind: 'Project',
      metadata: { name: projectId, labels: { [LABELS.partOf]: 'agentplane', [LABELS.managedBy]: MANAGED_BY_CONTROL_API } },
      spec: { displayName: name },
    };
    try {
      return (await this.custom.createClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS, body })) as Project;
    } catch (error) {
      // Written by an earlier attempt that did not hear the answer.
      if (statusOf(error) === 409) return (await this.readProject(projectId))!;
      throw apiFailure(`create Project ${projectId}`, error);
    }
  }

  private async ensureTenant(target: TenantTarget, name: string, project: Project): Promise<Tenant> {
    const existing = await this.readTenant(target);
    if (existing) return existing;
    const namespace = this.namespaceOf(target.projectId);
    const body: Tenant = {
      apiVersion: API_VERSION,
      kind: 'Tenant',
      metadata: {
        name: target.tenantId,
        namespace,
        labels: { [LABELS.partOf]: 'agentplane', [LABELS.managedBy]: MANAGED_BY_CONTROL_API, [LABELS.project]: target.projectId },
      },
      spec: { tenantId: target.tenantId, project: target.projectId, displayName: name },
    };
    try {
      return (await this.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: TENANTS, body })) as Tenant;
    } catch (error) {
      const status = statusOf(error);
      if (status === 409) return (await this.readTenant(target))!;
      // The operator makes the namespace (404 until it has; 403 while an old one of the same name terminates).
      if (status === 404 || (status === 403 && /being terminated/.test(messageOf(error)))) {
        throw new AppError('unavailable', `the namespace ${namespace} is not there yet: the operator makes it for Project ${target.projectId} (${describeReady(project)})`);
      }
      throw apiFailure(`create Tenant ${namespace}/${target.tenantId}`, error);
    }
  }

  private async readProject(projectId: string): Promise<Project | undefined> {
    try {
      return (await this.custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS, name: projectId })) as Project;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw apiFailure(`read Project ${projectId}`, error);
    }
  }

  private async readTenant({ projectId, tenantId }: TenantTarget): Promise<Tenant | undefined> {
    const namespace = this.namespaceOf(projectId);
    try {
      return (await this.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: TENANTS, name: tenantId })) as Tenant;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw apiFailure(`read Tenant ${namespace}/${tenantId}`, error);
    }
  }

  private async adminKey(projectId: string): Promise<string> {
    const cached = this.adminKeys.get(projectId);
    if (cached) return cached;
    const namespace = this.namespaceOf(projectId);
    let secret: k8s.V1Secret;
    try {
      secret = await this.core.readNamespacedSecret({ name: RUNTIME_SECRET, namespace });
    } catch (error) {
      if (statusOf(error) === 404) throw new AppError('unavailable', `the Secret ${namespace}/${RUNTIME_SECRET} is not there yet: the operator writes it`);
      throw apiFailure(`read Secret ${namespace}/${RUNTIME_SECRET}`, error);
    }
    const encoded = secret.data?.[ADMIN_KEY_ENTRY];
    if (!encoded) throw new AppError('unavailable', `the Secret ${namespace}/${RUNTIME_SECRET} has no ${ADMIN_KEY_ENTRY}`);
    const key = Buffer.from(encoded, 'base64').toString('utf8');
    this.adminKeys.set(projectId, key);
    return key;
  }

  private namespaceOf(projectId: string): string {
    return projectNamespace(projectId, this.options.projectNamespacePrefix);
  }

  private timeout(): { timeoutMs?: number } {
    return this.options.timeoutMs === undefined ? {} : { timeoutMs: this.options.timeoutMs };
  }
}

function conditionOf(object: Project | Tenant, type: string): Condition | undefined {
  return object.status?.conditions?.find((condition) => condition.type === type);
}

/** The Project's Ready condition in a sentence, for messages about what the control-api is waiting on. */
function describeReady(project: Project): string {
  const ready = conditionOf(project, PROJECT_CONDITIONS.ready);
  return ready ? `Project Ready=${ready.status}, ${ready.reason}: ${ready.message}` : 'the operator has not reported on the Project yet';
}

function statusOf(error: unknown): number | undefined {
  return error instanceof k8s.ApiException ? error.code : undefined;
}

/** The API server's own message (a Status object's `message`), not the client's dump of headers. */
function messageOf(error: unknown): string {
  if (error instanceof k8s.ApiException) {
    try {
      const body = (typeof error.body === 'string' ? JSON.parse(error.body) : error.body) as { message?: string } | undefined;
      if (body?.message) return body.message;
    } catch {
      // Not a Status object: fall back to the code.
    }
    return `HTTP ${error.code}`;
  }
  return (error as Error).message;
}

function apiFailure(what: string, error: unknown): AppError {
  return new AppError('unavailable', `could not ${what} on the Kubernetes API server: ${messageOf(error)}`, { cause: error });
}
