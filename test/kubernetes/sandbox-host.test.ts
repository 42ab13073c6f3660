// The Kubernetes sandbox host (runtime/src/computers/kubernetes/host.ts; decision 0079) on a real kubelet with
// containerd and runc beside the test API server (decision 0078): a sandbox is a restricted Pod that runs and execs,
// its /workspace outlives a pause (the Pod deleted, the claim kept), a timeout ends what the command left behind, and
// removing it leaves neither Pod nor claim. Prints the time to Running and the exec round trip.
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@agentplane/lib/logging';
import { SandboxNotRunningError, type ExecSpec } from '@agentplane/runtime/computers/host';
import { KubernetesSandboxHost } from '@agentplane/runtime/computers/kubernetes/host';
import { eventually } from '../harness/eventually.js';
import { kubeletBinaries, localStorageClass, sandboxImage, startKubelet, type RunningKubelet } from '../harness/kubelet.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';

const binaries = kubernetesBinaries();
const nodeBinaries = binaries ? kubeletBinaries() : null;
const namespace = 'project-sandboxes';
const limits = { cpus: 0.5, memoryMiB: 256, processes: 256, diskMiB: 64 };

describe.skipIf(!binaries || !nodeBinaries)('the Kubernetes sandbox host on a real kubelet', () => {
  let cluster: KubernetesCluster;
  let node: RunningKubelet;
  let host: KubernetesSandboxHost;
  let core: k8s.CoreV1Api;

  const exec = (id: string, command: string, options: Partial<ExecSpec> = {}) =>
    host.exec(id, { argv: ['/bin/bash', '-c', command], cwd: '/workspace', env: {}, timeoutMs: 30_000, outputLimitBytes: 1 << 20, ...options });

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { kwok: false, kubelet: true });
    node = await startKubelet(cluster, nodeBinaries!);
    const kc = cluster.kubeConfig();
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({
      body: { metadata: { name: namespace, labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } } },
    });
    await eventually(() => core.readNamespacedServiceAccount({ name: 'default', namespace }), { what: 'ServiceAccount default' });
    host = new KubernetesSandboxHost({ kubeConfig: kc, namespace, defaultImage: sandboxImage, imagePullPolicy: 'Never', storageClass: localStorageClass, logger: createLogger({ level: 'warn' }) });
  }, 180_000);

  afterAll(async () => {
    await node?.stop();
    await cluster?.stop();
  });

  it('makes a restricted Pod that runs commands as the sandbox user, keeps /workspace through a pause, and removes everything', async () => {
    const sandbox = { id: 'k1', tenantId: 't1', limits };
    const started = performance.now();
    await host.start(sandbox);
    const toRunningMs = performance.now() - started;
    const first = await exec('k1', 'id -u; echo "$HOME"; echo kept > note; cat note; exit 4', { env: { GREETING: 'hi' } });
    expect(first).toMatchObject({ exitCode: 4, timedOut: false });
    expect(first.stdout.toString()).toBe('1000\n/workspace\nkept\n');
    expect((await exec('k1', 'echo "$GREETING"', { env: { GREETING: 'hi' } })).stdout.toString()).toBe('hi\n');
    const rounds: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      expect((await exec('k1', 'true')).exitCode).toBe(0);
      rounds.push(performance.now() - t0);
    }
    rounds.sort((a, b) => a - b);
    console.log(`kubernetes sandbox: to Running ${Math.round(toRunningMs)} ms; exec of true p50 ${Math.round(rounds[5]!)} ms`);

    // What the cluster was asked for: restricted, no token, limits, the deny-all policy.
    const pod = await core.readNamespacedPod({ name: 'sandbox-k1', namespace });
    expect(pod.spec).toMatchObject({ automountServiceAccountToken: false, securityContext: { runAsNonRoot: true, runAsUser: 1000 } });
    expect(pod.spec?.containers[0]?.resources?.limits).toEqual({ cpu: '500m', memory: '256Mi' });
    const policies = await cluster.kubeConfig().makeApiClient(k8s.NetworkingV1Api).listNamespacedNetworkPolicy({ namespace });
    // No rule in either direction: everything denied (an empty list comes back as none).
    expect(policies.items).toHaveLength(1);
    expect(policies.items[0]!.spec).toMatchObject({ podSelector: { matchLabels: { 'app.kubernetes.io/component': 'sandbox' } }, policyTypes: ['Ingress', 'Egress'] });
    expect([...(policies.items[0]!.spec?.ingress ?? []), ...(policies.items[0]!.spec?.egress ?? [])]).toEqual([]);

    await host.pause('k1');
    expect(await host.state('k1')).toBe('paused');
    await expect(exec('k1', 'true')).rejects.toBeInstanceOf(SandboxNotRunningError);
    await host.resume(sandbox);
    expect(await host.state('k1')).toBe('running');
    expect((await exec('k1', 'cat note')).stdout.toString()).toBe('kept\n');

    await host.remove('k1');
    expect(await host.state('k1')).toBe('absent');
    await expect(core.readNamespacedPersistentVolumeClaim({ name: 'sandbox-k1-workspace', namespace })).rejects.toMatchObject({ code: 404 });
  });

  it('a timeout ends the command and what it left in the background, and says so', async () => {
    const sandbox = { id: 'k2', tenantId: 't1', limits };
    await host.start(sandbox);
    const outcome = await exec('k2', 'setsid sleep 1001 & (sleep 1002 &); sleep 1003', { timeoutMs: 2_000 });
    expect(outcome).toMatchObject({ timedOut: true, exitCode: null });
    await eventually(async () => (await exec('k2', 'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\\0" " "; echo; done | grep -c "^sleep 100" || true')).stdout.toString().trim() === '0', {
      what: 'the timed-out processes gone',
    });
    await host.remove('k2');
  });
});
