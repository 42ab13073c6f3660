// A real kubelet beside the test control plane (test/harness/kubelet.ts): a Pod the `restricted` Pod Security
// profile admits really runs the sandbox image, `exec` through the API server really executes in it (through
// @kubernetes/client-node's Exec, exit status read from the status channel), a PersistentVolumeClaim's files outlive
// the Pod, a privileged Pod is refused, and the node leaves nothing behind when it stops. NetworkPolicy objects are
// accepted but the test bridge alone does not enforce them; a test records that (docs/decisions/0078-test-kubelet.md).
// Enforcement is opt-in (startKubelet's networkPolicy), proven in network-policy.test.ts (decision 0089).
import { PassThrough } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../harness/eventually.js';
import { kubeletBinaries, localStorageClass, sandboxImage, startKubelet, type RunningKubelet } from '../harness/kubelet.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';

const binaries = kubernetesBinaries();
const nodeBinaries = binaries ? kubeletBinaries() : null;
const namespace = 'sandboxes';

interface ExecResult {
  stdout: string;
  stderr: string;
  /** The command's exit code, read from the status channel. */
  exitCode: number;
  ms: number;
}

/** Runs `command` in the Pod's container through the API server and waits for the stream to close. */
async function exec(kc: k8s.KubeConfig, pod: string, command: string[]): Promise<ExecResult> {
  const started = performance.now();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  let status: k8s.V1Status | undefined;
  const socket = await new k8s.Exec(kc).exec(namespace, pod, 'sandbox', command, stdout, stderr, null, false, (s) => (status = s));
  await new Promise<void>((resolve, reject) => {
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
  const ms = performance.now() - started;
  if (!status) throw new Error(`exec ${command.join(' ')}: no status (stderr: ${err})`);
  // Success, or Failure with reason NonZeroExitCode and the code as the ExitCode cause's message.
  const exitCode =
    status.status === 'Success' ? 0 : Number(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message ?? Number.NaN);
  return { stdout: out, stderr: err, exitCode, ms };
}

/** A Pod the `restricted` Pod Security profile admits: the shape a sandbox Pod takes. */
function sandboxPod(name: string, claim: string): k8s.V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'sandbox' } },
    spec: {
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 1,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'sandbox',
          image: sandboxImage,
          imagePullPolicy: 'Never',
          command: ['sleep', 'infinity'],
          workingDir: '/workspace',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
          volumeMounts: [{ name: 'workspace', mountPath: '/workspace' }],
        },
      ],
      volumes: [{ name: 'workspace', persistentVolumeClaim: { claimName: claim } }],
    },
  };
}

describe.skipIf(!binaries || !nodeBinaries)('a real kubelet beside the test API server', () => {
  let cluster: KubernetesCluster;
  let node: RunningKubelet;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;

  /** Creates the Pod and waits until it runs; returns milliseconds from create to Running. */
  async function runPod(pod: k8s.V1Pod): Promise<number> {
    const started = performance.now();
    await core.createNamespacedPod({ namespace, body: pod });
    await eventually(
      async () => {
        const current = await core.readNamespacedPod({ name: pod.metadata!.name!, namespace });
        const waiting = current.status?.containerStatuses?.[0]?.state?.waiting;
        if (waiting && !['ContainerCreating', 'PodInitializing'].includes(waiting.reason ?? '')) {
          throw new Error(`container waiting: ${waiting.reason}: ${waiting.message}`);
        }
        return current.status?.phase === 'Running';
      },
      { what: `Pod ${pod.metadata!.name} Running`, timeoutMs: 60_000, intervalMs: 50 },
    );
    return performance.now() - started;
  }

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { kwok: false, kubelet: true });
    node = await startKubelet(cluster, nodeBinaries!);
    console.log(`kubelet: node ${node.nodeName} (${node.nodeIp}) Ready ${node.readyMs} ms after startKubelet`);
    kc = cluster.kubeConfig();
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({
      body: {
        metadata: {
          name: namespace,
          labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' },
        },
      },
    });
    // Pods need the namespace's default ServiceAccount, which the controller manager creates.
    await eventually(() => core.readNamespacedServiceAccount({ name: 'default', namespace }), { what: 'ServiceAccount default' });
  });

  afterAll(async () => {
    await node?.stop();
    await cluster?.stop();
  });

  it('runs a restricted Pod, execs in it, and keeps /workspace across Pods on the same claim', async () => {
    await core.createNamespacedPersistentVolumeClaim({
      namespace,
      body: {
        metadata: { name: 'workspace' },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    });
    const claim = await eventually(
      async () => {
        const pvc = await core.readNamespacedPersistentVolumeClaim({ name: 'workspace', namespace });
        return pvc.status?.phase === 'Bound' && pvc;
      },
      { what: 'claim workspace Bound', timeoutMs: 30_000 },
    );
    expect(claim.spec?.storageClassName).toBe(localStorageClass);

    const runningMs = await runPod(sandboxPod('sandbox-1', 'workspace'));
    const first = await exec(kc, 'sandbox-1', ['sh', '-c', 'echo hi > /workspace/f; id -u; cat /workspace/f']);
    expect(first).toMatchObject({ stdout: '1000\nhi\n', stderr: '', exitCode: 0 });

    const failing = await exec(kc, 'sandbox-1', ['sh', '-c', 'echo oops >&2; exit 3']);
    expect(failing).toMatchObject({ stdout: '', stderr: 'oops\n', exitCode: 3 });
    const tools = await exec(kc, 'sandbox-1', ['sh', '-c', 'python3 -c "print(6 * 7)" && tar --version | head -1 && bash -c "echo \\$BASH_VERSION" >/dev/null && echo ok']);
    expect(tools).toMatchObject({ stdout: expect.stringMatching(/^42\ntar \(GNU tar\) .*\nok\n$/), exitCode: 0 });

    const rounds: number[] = [];
    for (let i = 0; i < 10; i++) rounds.push((await exec(kc, 'sandbox-1', ['true'])).ms);
    rounds.sort((a, b) => a - b);
    console.log(
      `kubelet: sandbox-1 Running ${runningMs.toFixed(0)} ms after create; exec round trip (true): ` +
        `median ${rounds[5]!.toFixed(1)} ms, min ${rounds[0]!.toFixed(1)}, max ${rounds[9]!.toFixed(1)}; first exec ${first.ms.toFixed(1)} ms`,
    );

    // The Pod goes; the claim's files stay for the next Pod.
    await core.deleteNamespacedPod({ name: 'sandbox-1', namespace, gracePeriodSeconds: 1 });
    await eventually(
      async () => {
        const pods = await core.listNamespacedPod({ namespace });
        return pods.items.length === 0;
      },
      { what: 'Pod sandbox-1 gone', timeoutMs: 60_000 },
    );
    const secondMs = await runPod(sandboxPod('sandbox-2', 'workspace'));
    const second = await exec(kc, 'sandbox-2', ['cat', '/workspace/f']);
    expect(second).toMatchObject({ stdout: 'hi\n', exitCode: 0 });
    console.log(`kubelet: sandbox-2 (same claim) Running ${secondMs.toFixed(0)} ms after create`);
  }, 180_000);

  it('refuses a privileged Pod in a namespace that enforces restricted', async () => {
    const privileged: k8s.V1Pod = {
      metadata: { name: 'privileged' },
      spec: { containers: [{ name: 'sandbox', image: sandboxImage, command: ['sleep', 'infinity'], securityContext: { privileged: true } }] },
    };
    const refusal = await core.createNamespacedPod({ namespace, body: privileged }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(k8s.ApiException);
    const body = (refusal as k8s.ApiException<unknown>).body;
    expect((refusal as k8s.ApiException<unknown>).code, String(body)).toBe(403);
    // The body is the API server's Status, as JSON text.
    expect((JSON.parse(String(body)) as k8s.V1Status).message).toMatch(/violates PodSecurity "restricted:latest": privileged/);
    // Not only privileged: a root Pod that does not drop capabilities is refused as well.
    const root = await core
      .createNamespacedPod({ namespace, body: { metadata: { name: 'root' }, spec: { containers: [{ name: 'sandbox', image: sandboxImage }] } } })
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect((root as k8s.ApiException<unknown>).code).toBe(403);
  });

  it('accepts a NetworkPolicy, which the test bridge does not enforce', async () => {
    const networking = kc.makeApiClient(k8s.NetworkingV1Api);
    await networking.createNamespacedNetworkPolicy({
      namespace,
      body: {
        metadata: { name: 'deny-all' },
        spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'] },
      },
    });
    const stored = await networking.readNamespacedNetworkPolicy({ name: 'deny-all', namespace });
    expect(stored.spec?.policyTypes).toEqual(['Ingress', 'Egress']);

    // Two Pods under a deny-all policy still reach each other: the CNI bridge alone enforces no policy (this node was
    // started without `networkPolicy`; network-policy.test.ts starts one with it).
    const claim = { metadata: { name: 'scratch' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } };
    await core.createNamespacedPersistentVolumeClaim({ namespace, body: claim });
    const server = sandboxPod('server', 'scratch');
    server.spec!.containers[0]!.command = ['python3', '-m', 'http.server', '8080', '--bind', '0.0.0.0', '--directory', '/workspace'];
    await runPod(server);
    await runPod(sandboxPod('client', 'scratch'));
    const serverIp = (await core.readNamespacedPod({ name: 'server', namespace })).status?.podIP;
    expect(serverIp).toBeTruthy();
    const reached = await eventually(
      async () => {
        const result = await exec(kc, 'client', ['python3', '-c', `import urllib.request; print(urllib.request.urlopen("http://${serverIp}:8080/", timeout=2).status)`]);
        return result.exitCode === 0 && result.stdout;
      },
      { what: 'client reaches server', timeoutMs: 20_000 },
    );
    expect(reached).toBe('200\n');
  }, 120_000);

  it('leaves no container, mount, cgroup, network namespace or bridge behind when the node stops', async () => {
    // The check sees a running node (containerd, its shims, the kubelet, the Pods' cgroups), so an empty list means gone.
    expect(node.leftovers().join('\n')).toMatch(/process \d+: .*containerd-shim-runc-v2[\s\S]*cgroup /);
    const stopped = performance.now();
    await node.stop();
    console.log(`kubelet: node stopped in ${(performance.now() - stopped).toFixed(0)} ms`);
    expect(node.leftovers()).toEqual([]);
  }, 120_000);
});
