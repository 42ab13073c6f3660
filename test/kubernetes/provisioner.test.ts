// The control-api with PROVISIONER=kubernetes against a real API server, driven through its HTTP API. The test plays
// the operator's part by hand (namespace, Secret, the resources' status, the finalizer) and points the Project's
// runtime URL at a real runtime, so what is checked is what the control-api itself does: it writes the Project and
// Tenant, holds the configuration back until the Tenant is Ready, reports the resources' conditions, and deletes
// the Project when the project is deleted.
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GROUP,
  LABELS,
  PROJECT_FINALIZER,
  PROJECTS,
  TENANTS,
  VERSION,
  projectNamespace,
  type Condition,
  type Project,
  type Tenant,
} from '@agentplane/lib/kubernetes/resources';
import { startTestControl, type TestControl } from '../harness/control.js';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { startTestRuntime, type TestRuntime } from '../harness/runtime.js';

const binaries = kubernetesBinaries();
const crdDir = fileURLToPath(new URL('../../crds/', import.meta.url));
/** Long enough for a few of the outbox's doubling retries (0.5 s up to 60 s) under a busy machine. */
const backoffWait = 60_000;
const stepTimeout = 3 * backoffWait;
const owner = { email: 'owner@example.com', password: 'a long enough password' };

interface ProjectWithProvisioning {
  id: string;
  tenant_id: string;
  provisioning: { ready: boolean; reason: string; message: string; data_plane_url: string | null; pending_changes: number; last_error: string | null };
}

function condition(type: string, status: 'True' | 'False', reason: string, message: string): Condition {
  return { type, status, reason, message, lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), observedGeneration: 1 };
}

describe.skipIf(!binaries)('the kubernetes provisioner on a real API server', () => {
  let cluster: KubernetesCluster;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let rt: TestRuntime;
  let api: TestControl;
  let session: string;
  let orgId: string;

  // State of the project the ordered steps below follow.
  let projectId: string;
  let tenantId: string;
  let namespace: string;

  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;
  const shown = (id = projectId) => json<ProjectWithProvisioning>(api.call(`/api/projects/${id}`, { token: session }));
  const readProject = async (name = projectId) => (await custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS, name })) as Project;
  const readTenant = async () => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: TENANTS, name: tenantId })) as Tenant;
  const gone = async (read: () => Promise<unknown>) => {
    try {
      await read();
      return false;
    } catch (error) {
      if (error instanceof k8s.ApiException && error.code === 404) return true;
      throw error;
    }
  };
  const createProject = async (name: string) => {
    const res = await api.call(`/api/orgs/${orgId}/projects`, { method: 'POST', token: session, body: JSON.stringify({ name }) });
    expect(res.status).toBe(201);
    return json<{ id: string; tenant_id: string }>(res);
  };

  // The operator's writes, by hand.
  const setProjectStatus = async (status: Project['status']) => {
    const current = await readProject();
    await custom.replaceClusterCustomObjectStatus({ group: GROUP, version: VERSION, plural: PROJECTS, name: projectId, body: { ...current, status } });
  };
  const setTenantReady = async (ready: Condition) => {
    const current = await readTenant();
    await custom.replaceNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, namespace, plural: TENANTS, name: tenantId, body: { ...current, status: { observedGeneration: 1, conditions: [ready] } } });
  };
  const writeAdminKey = async (adminKey: string) => {
    const body: k8s.V1Secret = { metadata: { name: 'agentplane-runtime', namespace }, stringData: { 'admin-key': adminKey } };
    try {
      await core.createNamespacedSecret({ namespace, body });
    } catch (error) {
      if (!(error instanceof k8s.ApiException && error.code === 409)) throw error;
      await core.replaceNamespacedSecret({ name: 'agentplane-runtime', namespace, body });
    }
  };

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { controllerManager: false, kwok: false });
    const applied = await cluster.kubectl(['apply', '-f', crdDir]);
    if (applied.code !== 0) throw new Error(`applying the CRDs failed:\n${applied.stderr}`);
    const established = await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', `crd/${PROJECTS}.${GROUP}`, `crd/${TENANTS}.${GROUP}`]);
    if (established.code !== 0) throw new Error(`the CRDs were not established:\n${established.stderr}`);
    custom = cluster.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
    core = cluster.kubeConfig().makeApiClient(k8s.CoreV1Api);

    rt = await startTestRuntime();
    api = await startTestControl({
      AGENTPLANE_OWNER_EMAIL: owner.email,
      AGENTPLANE_OWNER_PASSWORD: owner.password,
      PROVISIONER: 'kubernetes',
      KUBECONFIG: cluster.kubeconfigPath,
    });
    session = (await json<{ token: string }>(api.call('/api/auth/login', { method: 'POST', body: JSON.stringify(owner) }))).token;
    orgId = (await json<{ orgs: { id: string }[] }>(api.call('/api/me', { token: session }))).orgs[0]!.id;
  });
  afterAll(async () => {
    await api?.stop();
    await rt?.stop();
    await cluster?.stop();
  });

  it('creating a project writes its Project, and waits for the operator to make the namespace before writing the Tenant', async () => {
    ({ id: projectId, tenant_id: tenantId } = await createProject('support'));
    namespace = projectNamespace(projectId);

    const project = await eventually(readProject, { what: `Project ${projectId}` });
    expect(project.spec).toEqual({ displayName: 'support' });
    expect(project.metadata.labels).toMatchObject({ [LABELS.partOf]: 'agentplane' });

    // No namespace yet: the Tenant cannot be written, and the project says why it waits.
    const waiting = await eventually(
      async () => {
        const { provisioning } = await shown();
        return Boolean(provisioning.last_error?.includes(`namespace ${namespace} is not there yet`)) && provisioning;
      },
      { what: 'the outbox to report the missing namespace', timeoutMs: backoffWait },
    );
    expect(waiting).toMatchObject({ ready: false, reason: 'AwaitingOperator' });
    expect(waiting.pending_changes).toBeGreaterThanOrEqual(2);

    // The operator's first pass: the finalizer, the namespace, the runtime's Secret (with a key the runtime will
    // refuse: rotated since), and a status whose runtime is not up yet.
    await custom.replaceClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PROJECTS,
      name: projectId,
      body: { ...project, metadata: { ...project.metadata, finalizers: [PROJECT_FINALIZER] } },
    });
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await writeAdminKey('a-stale-admin-key-the-runtime-no-longer-takes');
    await setProjectStatus({
      observedGeneration: 1,
      namespace,
      runtimeUrl: rt.url,
      dataPlaneUrl: `https://${projectId}.agentplane.test`,
      conditions: [condition('Ready', 'False', 'RuntimeUnavailable', 'the agent-runtime Deployment has 0 of 1 replicas available')],
    });

    const tenant = await eventually(readTenant, { what: `Tenant ${namespace}/${tenantId}`, timeoutMs: backoffWait });
    expect(tenant.spec).toEqual({ tenantId, project: projectId, displayName: 'support' });
    expect(tenant.metadata.labels).toMatchObject({ [LABELS.project]: projectId, [LABELS.partOf]: 'agentplane' });

    // Readiness is the Project's own condition while the Project is not Ready.
    const { provisioning } = await shown();
    expect(provisioning).toMatchObject({ ready: false, reason: 'RuntimeUnavailable', data_plane_url: `https://${projectId}.agentplane.test` });
    expect(provisioning.message).toContain('0 of 1 replicas available');
    const connect = await json<{ data_url: string }>(api.call(`/api/projects/${projectId}/connect`, { token: session }));
    expect(connect.data_url).toBe(`https://${projectId}.agentplane.test`);
  }, stepTimeout);

  it('pushes no configuration until the Tenant is Ready, then pushes it with the admin key from the Secret', async () => {
    // The operator registers the tenant with the runtime but has not reported it Ready.
    expect((await rt.admin('/tenants', { method: 'POST', body: JSON.stringify({ tenant_id: tenantId, name: 'support' }) })).status).toBe(201);
    await setTenantReady(condition('Ready', 'False', 'SettingsPending', 'the runtime has not taken the settings yet'));
    await eventually(async () => (await shown()).provisioning.last_error?.includes('SettingsPending') === true, { what: 'the outbox to wait on the Tenant', timeoutMs: backoffWait });
    expect(await rt.runtime.configurations.load(tenantId)).toBeFalsy();

    await setProjectStatus({ ...(await readProject()).status, conditions: [condition('Ready', 'True', 'RuntimeAvailable', 'the runtime answers /ready')] });
    await setTenantReady(condition('Ready', 'True', 'Registered', 'registered with the runtime and settings in sync'));

    // The key in the Secret is refused; once the operator writes the current one, the push goes through.
    await eventually(async () => (await shown()).provisioning.last_error?.includes('refused to push configuration: 401') === true, { what: 'the stale key refused', timeoutMs: backoffWait });
    expect(await rt.runtime.configurations.load(tenantId)).toBeFalsy();
    await writeAdminKey(rt.adminKey);
    const version = (await api.control.projects.configurationDocument(projectId))!.version;
    await eventually(async () => (await rt.runtime.configurations.load(tenantId))?.version === version, { what: 'the configuration at the runtime', timeoutMs: backoffWait });

    // A later change goes straight through.
    const prompt = await api.call(`/api/projects/${projectId}/system-prompt`, { method: 'PUT', token: session, body: JSON.stringify({ system_prompt: 'Be brief.' }) });
    expect(prompt.status).toBe(200);
    await eventually(async () => (await rt.runtime.configurations.load(tenantId))?.document.system_prompt === 'Be brief.', { what: 'the new system prompt at the runtime' });

    const { provisioning } = await shown();
    expect(provisioning).toMatchObject({ ready: true, reason: 'Registered', pending_changes: 0, last_error: null });
    // The provider keys travel over the admin channel only: nothing of the configuration is in a resource.
    expect(JSON.stringify(await readTenant())).not.toContain('Be brief.');
    expect(JSON.stringify(await readProject())).not.toContain('Be brief.');
  }, stepTimeout);

  it("writes the project's sandbox count into its Project, where the operator's quota follows it, and nothing else of the computer", async () => {
    expect((await readProject()).spec.computer).toBeUndefined();
    const put = await api.call(`/api/projects/${projectId}/computer`, { method: 'PUT', token: session, body: JSON.stringify({ max_sandboxes: 3, memory_mib: 512, image: 'registry.example.com/tools:1' }) });
    expect(put.status, await put.clone().text()).toBe(200);
    await eventually(async () => (await readProject()).spec.computer?.maxSandboxes === 3, { what: 'the count in the Project', timeoutMs: backoffWait });
    expect((await readProject()).spec.computer).toEqual({ maxSandboxes: 3 });
    await eventually(async () => (await rt.runtime.configurations.load(tenantId))?.document.computer?.max_sandboxes === 3, { what: 'the settings at the runtime' });
    const off = await api.call(`/api/projects/${projectId}/computer`, { method: 'PUT', token: session, body: JSON.stringify({ max_sandboxes: 0 }) });
    expect(off.status).toBe(200);
    await eventually(async () => (await readProject()).spec.computer?.maxSandboxes === 0, { what: 'the computer off in the Project', timeoutMs: backoffWait });
  }, stepTimeout);

  it("deleting the project deletes its Project, and leaves the Tenant to the operator's finalizer", async () => {
    const adminKey = (await json<{ key: string }>(api.call(`/api/projects/${projectId}/keys`, { method: 'POST', token: session, body: JSON.stringify({ scope: 'admin' }) }))).key;
    expect((await api.call(`/api/projects/${projectId}`, { method: 'DELETE', key: adminKey })).status).toBe(403);
    expect((await readProject()).metadata.deletionTimestamp).toBeUndefined();

    expect((await api.call(`/api/projects/${projectId}`, { method: 'DELETE', token: session })).status).toBe(202);
    const deleting = await eventually(async () => {
      const project = await readProject();
      return project.metadata.deletionTimestamp !== undefined && project;
    }, { what: 'the Project marked for deletion' });
    expect(deleting.metadata.finalizers).toEqual([PROJECT_FINALIZER]);
    await eventually(async () => (await api.control.relay!.pending(projectId)) === 0, { what: 'the removal delivered' });
    expect((await readTenant()).metadata.deletionTimestamp).toBeUndefined();

    // The operator's finalizer has erased everything: the Project goes.
    await custom.patchClusterCustomObject(
      { group: GROUP, version: VERSION, plural: PROJECTS, name: projectId, body: [{ op: 'remove', path: '/metadata/finalizers' }] },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
    await eventually(() => gone(readProject), { what: 'the Project gone' });
  }, stepTimeout);

  it('a project deleted before the operator made its namespace leaves no Project behind', async () => {
    const early = await createProject('short-lived');
    await eventually(() => readProject(early.id), { what: `Project ${early.id}` });
    expect((await api.call(`/api/projects/${early.id}`, { method: 'DELETE', token: session })).status).toBe(202);
    // The registration still retrying is dropped and the removal follows it, so nothing writes the Project again.
    await eventually(async () => (await api.control.relay!.pending(early.id)) === 0, { what: 'the removal delivered', timeoutMs: backoffWait });
    expect(await gone(() => readProject(early.id))).toBe(true);
  }, stepTimeout);
});
