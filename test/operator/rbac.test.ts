// The operator under exactly the RBAC the Helm chart grants it (its ServiceAccount's token, not cluster admin):
// a Project provisioned to Ready, a Tenant registered and erased, the Project erased, leader election on the
// chart's Lease.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Operator } from '@agentplane/operator/app';
import { chartServiceAccounts, installChart, serviceAccountKubeconfig } from '../chart/install.js';
import { eventually } from '../harness/eventually.js';
import { OPERATOR_NAMESPACE, operatorSuiteBinaries, startOperator, startOperatorEnvironment, waitForCondition, type OperatorEnvironment } from './fixture.js';

const binaries = operatorSuiteBinaries();
const release = 'agentplane';

describe.skipIf(!binaries)('the operator under the chart RBAC', () => {
  let env: OperatorEnvironment;
  let operator: Operator;

  beforeAll(async () => {
    env = await startOperatorEnvironment(binaries!, { chart: true });
    await installChart(env.cluster, { release, namespace: OPERATOR_NAMESPACE });
    const established = await env.cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/projects.agentplane.io', 'crd/tenants.agentplane.io']);
    if (established.code !== 0) throw new Error(established.stderr);
    const kubeconfig = await serviceAccountKubeconfig(env.cluster, OPERATOR_NAMESPACE, chartServiceAccounts(release).operator);
    operator = await startOperator(env.cluster, env.config({ KUBECONFIG: kubeconfig, LEADER_ELECTION_LEASE: `${release}-operator` }), { runtimeClient: env.runtimeClient });
  }, 15 * 60_000);

  afterAll(async () => {
    await operator?.stop();
    await env?.stop();
  });

  it('is refused what the chart does not grant', async () => {
    const kubeconfig = await serviceAccountKubeconfig(env.cluster, OPERATOR_NAMESPACE, chartServiceAccounts(release).operator);
    const denied = await env.cluster.kubectl(['auth', 'can-i', 'create', 'clusterroles'], { kubeconfig });
    expect(denied.stdout.trim()).toBe('no');
  });

  it('provisions a Project, registers and erases a Tenant, and erases the Project', async () => {
    expect(operator.isLeader()).toBe(true);
    await env.admin.seedRuntimeSecret('agentplane-guarded', env.runtime.adminKey);
    await env.admin.createProject('guarded');
    await waitForCondition(() => env.admin.project('guarded'), 'Ready', 'True', { timeoutMs: 90_000 });
    const binding = await env.admin.kube.get({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', name: 'agent-runtime', namespace: 'agentplane-guarded' });
    expect(binding).not.toBeNull();

    const tenant = await env.admin.createTenant('guarded', 'agentplane-guarded');
    await waitForCondition(() => env.admin.tenant('agentplane-guarded', tenant.metadata.name), 'Ready', 'True');
    await env.admin.kube.deleteCustom('Tenant', tenant.metadata.name, 'agentplane-guarded');
    await eventually(async () => (await env.admin.tenant('agentplane-guarded', tenant.metadata.name)) === null, { what: 'the tenant erased' });
    expect((await env.runtime.admin(`/tenants/${tenant.spec.tenantId}`)).status).toBe(404);

    await env.admin.kube.deleteCustom('Project', 'guarded');
    await eventually(async () => (await env.admin.project('guarded')) === null, { what: 'the project erased', timeoutMs: 90_000 });
    expect(await env.admin.namespaceExists('agentplane-guarded')).toBe(false);
    // No reconcile failed along the way (a missing permission would have).
    const failed = (await operator.metrics.reconciles.get()).values.filter((v) => v.labels.result === 'error');
    expect(failed.reduce((sum, v) => sum + v.value, 0)).toBe(0);
  });
});
