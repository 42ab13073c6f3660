// The test cluster behaves like a real one where the operator suites depend on it: RBAC is enforced, Pods of
// Deployments run on the fake node, namespace deletion and garbage collection complete, versions are stamped.
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './eventually.js';
import { fakeNodeName, kubernetesBinaries, startKubernetes, type KubernetesCluster } from './kubernetes.js';

const binaries = kubernetesBinaries();

describe.skipIf(!binaries)('test Kubernetes cluster', () => {
  let cluster: KubernetesCluster;
  let core: k8s.CoreV1Api;
  let apps: k8s.AppsV1Api;
  let rbac: k8s.RbacAuthorizationV1Api;

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!);
    const config = cluster.kubeConfig();
    core = config.makeApiClient(k8s.CoreV1Api);
    apps = config.makeApiClient(k8s.AppsV1Api);
    rbac = config.makeApiClient(k8s.RbacAuthorizationV1Api);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  const createNamespace = (name: string) => core.createNamespace({ body: { metadata: { name } } });

  async function gone(read: () => Promise<unknown>): Promise<boolean> {
    try {
      await read();
      return false;
    } catch (error) {
      if (error instanceof k8s.ApiException && error.code === 404) return true;
      throw error;
    }
  }

  function deployment(name: string): k8s.V1Deployment {
    const labels = { app: name };
    return {
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          // kwok never pulls images; the name only has to be valid.
          spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
        },
      },
    };
  }

  it('denies a service account without bindings and allows it once a RoleBinding grants access', async () => {
    const namespace = 'rbac-check';
    await createNamespace(namespace);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'reader' } } });
    const { status } = await core.createNamespacedServiceAccountToken({ namespace, name: 'reader', body: { spec: { audiences: [] } } });
    const kubeconfig = cluster.kubeconfigForToken(status!.token, 'reader');

    const denied = await cluster.kubectl(['get', 'configmaps', '-n', namespace], { kubeconfig });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/forbidden.*system:serviceaccount:rbac-check:reader/);

    await rbac.createNamespacedRole({
      namespace,
      body: { metadata: { name: 'read-configmaps' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }] },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'reader-reads-configmaps' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-configmaps' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace }],
      },
    });
    await eventually(
      async () => {
        const allowed = await cluster.kubectl(['get', 'configmaps', '-n', namespace, '-o', 'name'], { kubeconfig });
        if (allowed.code !== 0) throw new Error(allowed.stderr);
        // The root CA ConfigMap the controller manager publishes into every namespace.
        expect(allowed.stdout).toContain('configmap/kube-root-ca.crt');
        return true;
      },
      { what: 'the RoleBinding to take effect' },
    );
    // The binding grants reading only.
    const write = await cluster.kubectl(['create', 'configmap', 'nope', '-n', namespace], { kubeconfig });
    expect(write.stderr).toMatch(/forbidden/);
  });

  it("runs a Deployment's Pod on the fake node until the Deployment is Available", async () => {
    const namespace = 'workload';
    await createNamespace(namespace);
    await apps.createNamespacedDeployment({ namespace, body: deployment('web') });

    const pod = await eventually(
      async () => {
        const [first] = (await core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items;
        const ready = first?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
        return first?.status?.phase === 'Running' && ready && first;
      },
      { what: 'the Pod Running and Ready' },
    );
    expect(pod.spec?.nodeName).toBe(fakeNodeName);
    expect(pod.status?.podIP).toBeTruthy();

    await eventually(
      async () => {
        const { status } = await apps.readNamespacedDeployment({ namespace, name: 'web' });
        return status?.availableReplicas === 1 && status.conditions?.some((c) => c.type === 'Available' && c.status === 'True') === true;
      },
      { what: 'the Deployment Available' },
    );
  });

  it('deletes a namespace with everything in it, running Pods included', async () => {
    const namespace = 'doomed';
    await createNamespace(namespace);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'settings' }, data: { a: '1' } } });
    await apps.createNamespacedDeployment({ namespace, body: deployment('worker') });
    await eventually(
      async () => (await core.listNamespacedPod({ namespace })).items.some((p) => p.status?.phase === 'Running'),
      { what: 'a running Pod in the namespace' },
    );

    await core.deleteNamespace({ name: namespace });
    await eventually(() => gone(() => core.readNamespace({ name: namespace })), { what: 'the namespace gone', timeoutMs: 60_000 });
    // Recreated empty: nothing of the old contents survived in storage.
    await createNamespace(namespace);
    expect((await core.listNamespacedConfigMap({ namespace })).items.map((c) => c.metadata?.name)).not.toContain('settings');
    expect((await core.listNamespacedPod({ namespace })).items).toEqual([]);
    expect((await apps.listNamespacedDeployment({ namespace })).items).toEqual([]);
  });

  it('garbage-collects an object once its owner is deleted', async () => {
    const namespace = 'owners';
    await createNamespace(namespace);
    const owner = await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'owner' } } });
    await core.createNamespacedConfigMap({
      namespace,
      body: {
        metadata: {
          name: 'owned',
          ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid!, blockOwnerDeletion: true }],
        },
      },
    });

    await core.deleteNamespacedConfigMap({ namespace, name: 'owner' });
    await eventually(() => gone(() => core.readNamespacedConfigMap({ namespace, name: 'owned' })), {
      what: 'the owned ConfigMap collected',
      timeoutMs: 60_000,
    });
  });

  it('reports the stamped Kubernetes version to kubectl and answers helm', async () => {
    const version = await cluster.kubectl(['version', '-o', 'json']);
    expect(version.code).toBe(0);
    const parsed = JSON.parse(version.stdout) as { clientVersion: { gitVersion: string }; serverVersion: { gitVersion: string; minor: string } };
    expect(parsed.serverVersion.gitVersion).toBe('v1.34.4');
    expect(parsed.serverVersion.minor).toBe('34');
    expect(parsed.clientVersion.gitVersion).toBe('v1.34.4');

    const releases = await cluster.helm(['list', '--all-namespaces', '-o', 'json']);
    expect(releases.stderr).toBe('');
    expect(JSON.parse(releases.stdout)).toEqual([]);
  });
});
