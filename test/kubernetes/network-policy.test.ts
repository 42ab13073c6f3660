// The sandbox fence proven by packets (docs/decisions/0089, 0081): on a real kubelet whose bridge has NetworkPolicy
// enforced (kube-router's policy controller, test/harness/network-policy.ts), the operator provisions a project
// namespace with its policies, the runtime's Kubernetes sandbox host makes a sandbox Pod there, and beside it runs an
// ordinary Pod of the same spec but for its labels (and an emptyDir for the claim). A stand-in for the cluster's DNS
// in kube-system listens on TCP 53 and 8080. The ordinary Pod reaches port 53 (allow-egress-dns selects it) and not
// 8080 (allow-egress-internet excludes private ranges); the sandbox Pod reaches neither. Then enforcement ends and
// the sandbox does reach port 53: what stopped it was the policy, not the probe. The browser Pod (decision 0092) is
// proven the same way: it reaches port 53 and nothing private, and the ordinary Pod cannot reach its port (only the
// runtime may), until enforcement ends.
import { PassThrough } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@agentplane/lib/logging';
import { KubernetesSandboxHost, sandboxPod } from '@agentplane/runtime/computers/kubernetes/host';
import { eventually } from '../harness/eventually.js';
import { kubeletBinaries, localStorageClass, sandboxImage, startKubelet, type RunningKubelet } from '../harness/kubelet.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { networkPolicyBinaries } from '../harness/network-policy.js';
import { browserBase, browserImage, buildBrowserImage } from '../harness/browser-image.js';
import { Admin, installCrds, operatorConfig, prepareCluster, startOperator } from '../operator/fixture.js';
import type { Operator } from '@agentplane/operator/app';

const binaries = kubernetesBinaries();
const nodeBinaries = binaries ? kubeletBinaries() : null;
const enforcerBinaries = nodeBinaries ? networkPolicyBinaries() : null;
const base = enforcerBinaries ? browserBase() : null;
const PROJECT = 'fenced';
const namespace = `agentplane-${PROJECT}`;
const dnsNamespace = 'kube-system';
const limits = { cpus: 0.5, memoryMiB: 128, processes: 128, diskMiB: 16 };

/** Connects to host:port with a 3 s timeout; prints `connected`, or the error's name and text. */
const probe = (ip: string, port: number) => [
  'python3',
  '-c',
  'import socket, sys\ntry:\n  socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close(); print("connected")\nexcept OSError as e:\n  print(type(e).__name__, e)',
  ip,
  String(port),
];

describe.skipIf(!binaries || !nodeBinaries || !enforcerBinaries || !base)('NetworkPolicy enforced on the test kubelet: the sandbox and browser fences by packets', () => {
  let cluster: KubernetesCluster;
  let node: RunningKubelet;
  let operator: Operator;
  let host: KubernetesSandboxHost;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;

  /** Runs argv in a Pod's container through the API server's exec; its stdout. */
  const execIn = async (ns: string, pod: string, argv: string[], container = 'sandbox'): Promise<string> => {
    const stdout = new PassThrough();
    let out = '';
    stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    const socket = await new k8s.Exec(kc).exec(ns, pod, container, argv, stdout, null, null, false);
    await new Promise<void>((resolve, reject) => {
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    return out.trim();
  };
  /** The sandbox's probe runs as every sandbox command does: through the host's exec. */
  const fromSandbox = async (ip: string, port: number) =>
    (await host.exec('fenced', { argv: probe(ip, port), cwd: '/workspace', env: {}, timeoutMs: 20_000, outputLimitBytes: 1 << 16 })).stdout.toString().trim();
  const fromOrdinary = (ip: string, port: number) => execIn(namespace, 'ordinary', probe(ip, port));
  /** The browser image has Node, not Python: the same probe in Node, from the browser server's own container. */
  const fromBrowser = (ip: string, port: number) =>
    execIn(
      namespace,
      browserPod,
      [
        'node',
        '-e',
        'const s = require("net").connect({ host: process.argv[1], port: Number(process.argv[2]), timeout: 3000 }); s.on("connect", () => { console.log("connected"); s.destroy() }); s.on("timeout", () => { console.log("timeout"); s.destroy() }); s.on("error", (e) => console.log(e.code))',
        ip,
        String(port),
      ],
      'browser',
    );
  let browserPod = '';
  const running = (ns: string, name: string) =>
    eventually(
      async () => {
        const pod = await core.readNamespacedPod({ name, namespace: ns });
        return pod.status?.phase === 'Running' && pod.status.podIP;
      },
      { what: `Pod ${ns}/${name} Running`, timeoutMs: 90_000 },
    );

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { kwok: false, kubelet: true });
    node = await startKubelet(cluster, nodeBinaries!, { networkPolicy: enforcerBinaries! });
    const built = await buildBrowserImage(base!);
    await node.importImage(built.archive, browserImage);
    built.remove();
    kc = cluster.kubeConfig();
    core = kc.makeApiClient(k8s.CoreV1Api);
    await installCrds(kc);
    await prepareCluster(kc);
    operator = await startOperator(
      cluster,
      operatorConfig({
        RUNTIME_SANDBOX_IMAGE: sandboxImage,
        RUNTIME_SANDBOX_IMAGE_PULL_POLICY: 'Never',
        RUNTIME_SANDBOX_STORAGE_CLASS: localStorageClass,
        RUNTIME_BROWSER_IMAGE: browserImage,
        RUNTIME_BROWSER_IMAGE_PULL_POLICY: 'Never',
        RUNTIME_BROWSER_MEMORY_LIMIT: '1Gi',
        RUNTIME_TASK_CRONJOBS: 'false',
        RUNTIME_IMAGE_PULL_POLICY: 'Never',
        RUNTIME_URL_TEMPLATE: 'http://127.0.0.1:9',
      }),
    );
    await new Admin(kc).createProject(PROJECT);
    await eventually(
      async () => {
        const names = (await kc.makeApiClient(k8s.NetworkingV1Api).listNamespacedNetworkPolicy({ namespace })).items.map((p) => p.metadata!.name);
        return ['default-deny', 'allow-egress-dns', 'allow-egress-internet', 'allow-browser-ingress'].every((name) => names.includes(name));
      },
      { what: "the operator's NetworkPolicies", timeoutMs: 60_000 },
    );
    for (const ns of [namespace, dnsNamespace]) await eventually(() => core.readNamespacedServiceAccount({ name: 'default', namespace: ns }), { what: `ServiceAccount ${ns}/default` });
    host = new KubernetesSandboxHost({
      kubeConfig: kc,
      namespace,
      defaultImage: sandboxImage,
      imagePullPolicy: 'Never',
      storageClass: localStorageClass,
      networkPolicy: 'operator',
      logger: createLogger({ level: 'warn' }),
    });
  }, 300_000);

  afterAll(async () => {
    await operator?.stop();
    await node?.stop();
    await cluster?.stop();
  });

  it("lets the ordinary Pod reach what the operator's allows name, and the sandbox Pod nothing; without enforcement the sandbox connects", async () => {
    // The cluster's DNS stand-in: root (port 53) in kube-system, where no policy applies.
    const resolver: k8s.V1Pod = {
      metadata: { name: 'resolver' },
      spec: {
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'sandbox',
            image: sandboxImage,
            imagePullPolicy: 'Never',
            securityContext: { runAsUser: 0 },
            command: ['sh', '-c', 'python3 -m http.server 53 & exec python3 -m http.server 8080'],
          },
        ],
      },
    };
    // The sandbox's own Pod spec, but not labelled a sandbox, an emptyDir where the sandbox has its claim, and a
    // listener on 8080.
    const ordinary = sandboxPod({ id: 'ordinary', tenantId: 't1', limits }, { defaultImage: sandboxImage, imagePullPolicy: 'Never' });
    ordinary.metadata = { name: 'ordinary', labels: { 'app.kubernetes.io/name': 'ordinary' } };
    ordinary.spec!.containers[0]!.command = ['python3', '-m', 'http.server', '8080'];
    ordinary.spec!.volumes = ordinary.spec!.volumes!.map((volume) => (volume.name === 'workspace' ? { name: 'workspace', emptyDir: {} } : volume));
    await Promise.all([
      core.createNamespacedPod({ namespace: dnsNamespace, body: resolver }),
      core.createNamespacedPod({ namespace, body: ordinary }),
      host.start({ id: 'fenced', tenantId: 't1', limits }),
    ]);
    const target = await running(dnsNamespace, 'resolver');
    await running(namespace, 'ordinary');
    const browser = await eventually(
      async () => (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=browser' })).items.find((pod) => pod.status?.phase === 'Running' && pod.status.podIP),
      { what: "the operator's browser Pod Running", timeoutMs: 120_000 },
    );
    browserPod = browser.metadata!.name!;
    const browserIp = browser.status!.podIP!;
    const sandbox = await core.readNamespacedPod({ name: 'sandbox-fenced', namespace });
    expect(sandbox.metadata!.labels).toMatchObject({ 'app.kubernetes.io/component': 'sandbox' });
    // kube-router has written each Pod's chain once it saw it Running with an address.
    const enforcer = node.networkPolicy!;
    const ran = performance.now();
    await eventually(
      () => enforcer.enforcing(namespace, 'ordinary') && enforcer.enforcing(namespace, 'sandbox-fenced') && enforcer.enforcing(dnsNamespace, 'resolver') && enforcer.enforcing(namespace, browserPod),
      { what: 'the enforcer writing the four Pods’ chains', timeoutMs: 60_000 },
    );
    console.log(`network policy: enforcer ready ${enforcer.readyMs} ms after its start; the Pods' chains written ${Math.round(performance.now() - ran)} ms after they ran`);

    // The ordinary Pod reaches the resolver's port 53 (it is in the allow's address sets once they catch up),
    // which shows the enforcer did not just drop everything; not its 8080: a private address outside the DNS rule.
    await eventually(async () => (await fromOrdinary(target, 53)) === 'connected', { what: 'the ordinary Pod reaching port 53', timeoutMs: 30_000 });
    expect(await fromOrdinary(target, 8080)).not.toBe('connected');
    // The sandbox, the same Pod but for its labels, reaches neither: no allow selects it.
    const refused = await fromSandbox(target, 53);
    expect(refused).not.toBe('connected');
    expect(refused).toMatch(/^(ConnectionRefusedError|TimeoutError|timeout)/);
    expect(await fromSandbox(target, 8080)).not.toBe('connected');
    // Nor the ordinary Pod beside it (default-deny closes its ingress too).
    const ordinaryIp = (await core.readNamespacedPod({ name: 'ordinary', namespace })).status!.podIP!;
    expect(await fromSandbox(ordinaryIp, 8080)).not.toBe('connected');
    // The browser Pod: names (port 53 here) but no private address, not the Pod beside it; and nobody but the
    // runtime reaches its port: not the ordinary Pod, not a sandbox.
    await eventually(async () => (await fromBrowser(target, 53)) === 'connected', { what: 'the browser Pod reaching port 53', timeoutMs: 30_000 });
    expect(await fromBrowser(target, 8080)).not.toBe('connected');
    expect(await fromBrowser(ordinaryIp, 8080)).not.toBe('connected');
    expect(await fromOrdinary(browserIp, 8083)).not.toBe('connected');
    expect(await fromSandbox(browserIp, 8083)).not.toBe('connected');

    // The control: enforcement ends, its rules go, and the very same probe from the sandbox connects.
    await enforcer.stop();
    expect(enforcer.leftovers()).toEqual([]);
    await eventually(async () => (await fromSandbox(target, 53)) === 'connected', { what: 'the sandbox reaching port 53 without enforcement', timeoutMs: 20_000 });
    expect(await fromOrdinary(target, 8080)).toBe('connected');
    expect(await fromSandbox(ordinaryIp, 8080)).toBe('connected');
    expect(await fromBrowser(target, 8080)).toBe('connected');
    expect(await fromOrdinary(browserIp, 8083)).toBe('connected');
    await host.remove('fenced');
  }, 180_000);

  it('leaves no chain, ipset, container, mount or cgroup behind when the node stops', async () => {
    // The runtime's Deployment cannot start its Pod here (no runtime image), and the browser's runs; their ReplicaSets
    // would make the Pods again while the node stops them. With the operator gone, both are scaled to none first.
    await operator.stop();
    for (const name of ['agent-runtime', 'browser']) {
      await kc
        .makeApiClient(k8s.AppsV1Api)
        .patchNamespacedDeployment({ name, namespace, body: { spec: { replicas: 0 } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    }
    await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component in (runtime,browser)' })).items.length === 0, {
      what: "the runtime's and the browser's Pods gone",
      timeoutMs: 60_000,
    });
    await node.stop();
    expect(node.leftovers()).toEqual([]);
  }, 120_000);
});
