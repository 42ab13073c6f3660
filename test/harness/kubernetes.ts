// A real Kubernetes control plane for tests: etcd, kube-apiserver (its own CA, service-account tokens, RBAC),
// kube-controller-manager, kube-scheduler and kwok with one fake node, so Pods of Deployments reach Running
// without a kubelet. All are local child processes on free loopback ports in one temp dir, built from source
// by hack/k8s-binaries.sh (docs/decisions/0020-kubernetes-test-cluster.md says why and how). With `kubelet: true` the
// control plane is ready for a real kubelet beside it (test/harness/kubelet.ts, decision 0078).
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { eventually } from './eventually.js';
import { freePort, makeTempDir, requireBinary, startProcess, type RunningProcess } from './process.js';

export interface KubernetesBinaries {
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kwok: string;
  kubectl: string;
  helm: string;
}

/** null when a binary is missing (the suite skips); throws under AGENTPLANE_REQUIRE_SERVICES=1. */
export function kubernetesBinaries(): KubernetesBinaries | null {
  const names: Record<keyof KubernetesBinaries, string> = {
    etcd: 'etcd',
    kubeApiserver: 'kube-apiserver',
    kubeControllerManager: 'kube-controller-manager',
    kubeScheduler: 'kube-scheduler',
    kwok: 'kwok',
    kubectl: 'kubectl',
    helm: 'helm',
  };
  const found: Partial<KubernetesBinaries> = {};
  for (const [key, name] of Object.entries(names) as [keyof KubernetesBinaries, string][]) {
    const path = requireBinary(name);
    if (!path) return null;
    found[key] = realpathSync(path);
  }
  return found as KubernetesBinaries;
}

export interface CommandResult {
  stdout: string;
  stderr: string;
  code: number;
}

export interface KubernetesCluster {
  /** https://127.0.0.1:<port> */
  server: string;
  /** A cluster-admin kubeconfig (a static token in group system:masters). */
  kubeconfigPath: string;
  /** PEM of the CA that signed the API server's serving certificate. */
  caData: string;
  /** A client for the admin kubeconfig. */
  kubeConfig(): k8s.KubeConfig;
  /** The cluster's temp dir, removed by stop(); a kubelet started beside the cluster keeps its state here. */
  dir: string;
  /** The CA (certificate and key) the cluster trusts, for certificates of components started beside it. */
  ca: { certPath: string; keyPath: string };
  /** Runs `stop` first when the cluster stops (something started beside it, such as a kubelet). */
  onStop(stop: () => Promise<void>): void;
  /** Writes a kubeconfig that authenticates with `token` (say, a ServiceAccount's) and returns its path. */
  kubeconfigForToken(token: string, name: string): string;
  kubectl(args: string[], options?: { input?: string; kubeconfig?: string }): Promise<CommandResult>;
  helm(args: string[], options?: { kubeconfig?: string }): Promise<CommandResult>;
  stop(): Promise<void>;
}

export interface KubernetesOptions {
  /** Garbage collection, namespace deletion, Deployments, Jobs, CronJobs, ServiceAccounts... Default true. */
  controllerManager?: boolean;
  /** kube-scheduler plus kwok with the fake node `kwok-node-0`, so Pods run. Default true. */
  kwok?: boolean;
  /**
   * Ready for a real kubelet (test/harness/kubelet.ts): kube-apiserver reaches kubelets by InternalIP with client
   * credentials, checks their serving certificates against the cluster's CA and allows privileged Pods (Pod
   * Security admission refuses them per namespace), kube-controller-manager provisions
   * host-path volumes (`--enable-hostpath-provisioner`), and kube-scheduler runs even without kwok. Default false.
   */
  kubelet?: boolean;
}

/** The fake node Pods are scheduled on; kwok plays its kubelet. */
export const fakeNodeName = 'kwok-node-0';

// Room for a Service per Project of a 1,000-Project benchmark (a /24 ran out at 254).
export const serviceClusterIpRange = '10.96.0.0/16';
const podCidr = '10.244.0.1/16';
const fakeNodeIp = '10.240.0.10';
const adminUser = 'agentplane-test-admin';
const clusterName = 'agentplane-test';

export async function startKubernetes(binaries: KubernetesBinaries, options: KubernetesOptions = {}): Promise<KubernetesCluster> {
  const root = makeTempDir('kubernetes');
  // Every process that was started, stopped in reverse order by stop() or when a later one fails to start.
  const running: Pick<RunningProcess, 'stop'>[] = [];
  const stopAll = async () => {
    for (const component of running.reverse()) await component.stop();
    running.length = 0;
    rmSync(root, { recursive: true, force: true });
  };
  try {
    const pki = writePki(join(root, 'pki'), options.kubelet === true);
    const adminToken = randomBytes(24).toString('hex');
    writeFileSync(join(root, 'pki', 'tokens.csv'), `${adminToken},${adminUser},${adminUser},"system:masters"\n`);

    const etcdPort = await freePort();
    const etcdPeerPort = await freePort();
    running.push(await startEtcd(binaries.etcd, join(root, 'etcd'), etcdPort, etcdPeerPort));

    const port = await freePort();
    const server = `https://127.0.0.1:${port}`;
    const kubeconfigPath = writeKubeconfig(join(root, 'admin.kubeconfig'), server, pki.caPem, adminUser, adminToken);
    const core = adminClient(kubeconfigPath).makeApiClient(k8s.CoreV1Api);
    running.push(
      await startProcess({
        name: 'kube-apiserver',
        command: binaries.kubeApiserver,
        args: [
          `--etcd-servers=http://127.0.0.1:${etcdPort}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--secure-port=${port}`,
          `--tls-cert-file=${pki.servingCert}`,
          `--tls-private-key-file=${pki.servingKey}`,
          `--token-auth-file=${join(root, 'pki', 'tokens.csv')}`,
          `--service-account-key-file=${pki.serviceAccountPublicKey}`,
          `--service-account-signing-key-file=${pki.serviceAccountKey}`,
          '--service-account-issuer=https://kubernetes.default.svc',
          '--authorization-mode=Node,RBAC',
          `--service-cluster-ip-range=${serviceClusterIpRange}`,
          // The `kubernetes` Service's endpoints would name a loopback address, which Endpoints reject.
          '--endpoint-reconciler-type=none',
          '--enable-priority-and-fairness=false',
          '--profiling=false',
          ...(pki.kubeletClient
            ? [
                `--kubelet-client-certificate=${pki.kubeletClient.cert}`,
                `--kubelet-client-key=${pki.kubeletClient.key}`,
                `--kubelet-certificate-authority=${pki.caCert}`,
                '--kubelet-preferred-address-types=InternalIP',
                // As a real cluster: privileged Pods are for Pod Security admission to refuse per namespace.
                '--allow-privileged=true',
              ]
            : []),
        ],
        dir: mkdirIn(root, 'kube-apiserver'),
        ready: async () => (await httpsGet(`${server}/readyz`, pki.caPem, adminToken)) === 200,
        readyTimeoutMs: 90_000,
      }),
    );
    // Namespaces the API server's bootstrap creates; objects in them may be created as soon as we return.
    await eventually(() => Promise.all([core.readNamespace({ name: 'default' }), core.readNamespace({ name: 'kube-system' })]), {
      what: 'namespaces default and kube-system',
    });

    if (options.controllerManager !== false) {
      const healthPort = await freePort();
      running.push(
        await startProcess({
          name: 'kube-controller-manager',
          command: binaries.kubeControllerManager,
          args: [
            `--kubeconfig=${kubeconfigPath}`,
            `--authentication-kubeconfig=${kubeconfigPath}`,
            `--authorization-kubeconfig=${kubeconfigPath}`,
            '--leader-elect=false',
            '--controllers=*',
            // The fake node's heartbeats come from kwok, one process among many on a busy two-core machine. A late
            // one would mark the node NotReady and every Pod on it NotReady with it, and kwok never sets a Pod Ready
            // again (a kubelet would, on its next probe), so Deployments would stay unavailable for good. No suite
            // tests node failure; a generous grace period keeps a late heartbeat from looking like one.
            '--node-monitor-grace-period=10m',
            '--use-service-account-credentials=false',
            `--service-account-private-key-file=${pki.serviceAccountKey}`,
            `--root-ca-file=${pki.caCert}`,
            `--service-cluster-ip-range=${serviceClusterIpRange}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${healthPort}`,
            `--cert-dir=${join(root, 'kube-controller-manager')}`,
            '--profiling=false',
            // PersistentVolumes for a real kubelet: directories under /tmp/hostpath_pv on this machine.
            ...(options.kubelet ? ['--enable-hostpath-provisioner'] : []),
          ],
          dir: mkdirIn(root, 'kube-controller-manager'),
          // The ServiceAccount controller creating `default` shows the controllers run; Pods need that account.
          ready: async () => Boolean(await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' })),
          readyTimeoutMs: 60_000,
        }),
      );
    }

    if (options.kwok !== false || options.kubelet) {
      const schedulerPort = await freePort();
      running.push(
        await startProcess({
          name: 'kube-scheduler',
          command: binaries.kubeScheduler,
          args: [
            `--kubeconfig=${kubeconfigPath}`,
            `--authentication-kubeconfig=${kubeconfigPath}`,
            `--authorization-kubeconfig=${kubeconfigPath}`,
            '--leader-elect=false',
            '--bind-address=127.0.0.1',
            `--secure-port=${schedulerPort}`,
            `--cert-dir=${join(root, 'kube-scheduler')}`,
            '--profiling=false',
          ],
          dir: mkdirIn(root, 'kube-scheduler'),
          ready: async () => (await httpsGet(`https://127.0.0.1:${schedulerPort}/healthz`, null, null)) === 200,
          readyTimeoutMs: 60_000,
        }),
      );
    }

    if (options.kwok !== false) {
      const kwokDir = mkdirIn(root, 'kwok');
      const kwok = await startProcess({
        name: 'kwok',
        command: binaries.kwok,
        args: [
          `--kubeconfig=${kubeconfigPath}`,
          '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
          `--cidr=${podCidr}`,
          `--node-ip=${fakeNodeIp}`,
          // Heartbeats as a kubelet sends them: a node Lease renewed every quarter of its duration, a small write
          // instead of the whole node status.
          '--node-lease-duration-seconds=40',
        ],
        dir: kwokDir,
        // kwok reads ~/.kwok/kwok.yaml; an empty home keeps a developer's own configuration out. With no stages
        // configured it uses its built-in ones: nodes become Ready, Pods become Running and Ready, deletes complete.
        env: { HOME: kwokDir },
        // kwok has no health endpoint of its own; the fake node turning Ready below is its readiness.
        ready: async () => true,
      });
      running.push(kwok);
      await core.createNode({ body: fakeNode() });
      // Ready, and (with the controller manager) the not-ready taint lifted, so the scheduler places Pods here.
      await eventually(
        async () => {
          const node = await core.readNode({ name: fakeNodeName });
          const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
          return Boolean(ready) && (node.spec?.taints ?? []).length === 0;
        },
        { what: `node ${fakeNodeName} Ready and untainted`, timeoutMs: 60_000 },
      ).catch((error: unknown) => {
        throw new Error(`${error instanceof Error ? error.message : String(error)}\nkwok output:\n${kwok.output()}`);
      });
    }

    const toolHome = mkdirIn(root, 'home');
    const tool = (command: string, args: string[], kubeconfig: string, input?: string) =>
      runCommand(command, args, input, {
        KUBECONFIG: kubeconfig,
        HOME: toolHome,
        HELM_CACHE_HOME: join(toolHome, '.cache', 'helm'),
        HELM_CONFIG_HOME: join(toolHome, '.config', 'helm'),
        HELM_DATA_HOME: join(toolHome, '.local', 'share', 'helm'),
      });
    return {
      server,
      kubeconfigPath,
      caData: pki.caPem,
      dir: root,
      ca: { certPath: pki.caCert, keyPath: pki.caKey },
      onStop: (stop) => running.push({ stop }),
      kubeConfig: () => adminClient(kubeconfigPath),
      kubeconfigForToken(token, name) {
        const safeName = name.replace(/[^a-zA-Z0-9_.-]/g, '-');
        return writeKubeconfig(join(root, `${safeName}.kubeconfig`), server, pki.caPem, safeName, token);
      },
      kubectl: (args, opts = {}) => tool(binaries.kubectl, args, opts.kubeconfig ?? kubeconfigPath, opts.input),
      helm: (args, opts = {}) => tool(binaries.helm, args, opts.kubeconfig ?? kubeconfigPath),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

function adminClient(kubeconfigPath: string): k8s.KubeConfig {
  const config = new k8s.KubeConfig();
  config.loadFromFile(kubeconfigPath);
  return config;
}

function mkdirIn(root: string, name: string): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function startEtcd(binary: string, dir: string, clientPort: number, peerPort: number): Promise<RunningProcess> {
  mkdirSync(dir, { recursive: true });
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  return startProcess({
    name: 'etcd',
    command: binary,
    args: [
      '--name=test',
      `--data-dir=${join(dir, 'data')}`,
      `--listen-client-urls=${client}`,
      `--advertise-client-urls=${client}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=test=${peer}`,
      // Durability buys nothing in a throwaway test store.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
    dir,
    ready: async () => {
      const response = await fetch(`${client}/health`, { signal: AbortSignal.timeout(1000) });
      return response.ok && ((await response.json()) as { health?: string }).health === 'true';
    },
    readyTimeoutMs: 30_000,
  });
}

interface Pki {
  caCert: string;
  caKey: string;
  caPem: string;
  servingCert: string;
  servingKey: string;
  serviceAccountKey: string;
  serviceAccountPublicKey: string;
  /** kube-apiserver's client certificate for kubelets (exec, logs), when a kubelet is wanted. */
  kubeletClient?: { cert: string; key: string };
}

/**
 * A CA and the API server's serving certificate for 127.0.0.1 and the in-cluster names (openssl: node:crypto
 * cannot issue certificates), and the key that signs service-account tokens.
 */
function writePki(dir: string, kubeletClient: boolean): Pki {
  mkdirSync(dir, { recursive: true });
  const file = (name: string) => join(dir, name);
  writeFileSync(
    file('openssl.cnf'),
    [
      '[req]',
      'distinguished_name = dn',
      '[dn]',
      '[ca]',
      'basicConstraints = critical,CA:TRUE',
      'keyUsage = critical,keyCertSign,cRLSign,digitalSignature',
      'subjectKeyIdentifier = hash',
      '[serving]',
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage = serverAuth',
      'subjectAltName = IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1',
      'authorityKeyIdentifier = keyid',
      '[client]',
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage = clientAuth',
      'authorityKeyIdentifier = keyid',
      '',
    ].join('\n'),
  );
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', '-config', file('openssl.cnf'), '-extensions', 'ca', ...ec, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '7', '-subj', '/CN=agentplane-test-ca']);
  openssl(['req', '-new', '-config', file('openssl.cnf'), ...ec, '-keyout', file('serving.key'), '-out', file('serving.csr'), '-subj', '/CN=kube-apiserver']);
  openssl(['x509', '-req', '-in', file('serving.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-set_serial', '2', '-days', '7', '-extfile', file('openssl.cnf'), '-extensions', 'serving', '-out', file('serving.crt')]);
  if (kubeletClient) {
    // In system:masters, so a kubelet that asks the API server whether a caller may exec lets it.
    openssl(['req', '-new', '-config', file('openssl.cnf'), ...ec, '-keyout', file('kubelet-client.key'), '-out', file('kubelet-client.csr'), '-subj', '/O=system:masters/CN=kube-apiserver-kubelet-client']);
    openssl(['x509', '-req', '-in', file('kubelet-client.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-set_serial', '3', '-days', '7', '-extfile', file('openssl.cnf'), '-extensions', 'client', '-out', file('kubelet-client.crt')]);
  }
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  writeFileSync(file('service-account.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(file('service-account.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  return {
    caCert: file('ca.crt'),
    caKey: file('ca.key'),
    caPem: readFileSync(file('ca.crt'), 'utf8'),
    servingCert: file('serving.crt'),
    servingKey: file('serving.key'),
    serviceAccountKey: file('service-account.key'),
    serviceAccountPublicKey: file('service-account.pub'),
    ...(kubeletClient ? { kubeletClient: { cert: file('kubelet-client.crt'), key: file('kubelet-client.key') } } : {}),
  };
}

function openssl(args: string[]): void {
  const result = spawnSync('openssl', args, { encoding: 'utf8' });
  if (result.error) throw new Error(`openssl could not run: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`openssl ${args[0]} failed:\n${result.stderr}`);
}

function writeKubeconfig(path: string, server: string, caPem: string, user: string, token: string): string {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: clusterName, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: clusterName, user } }],
    'current-context': user,
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
  return path;
}

/**
 * The status of one GET over TLS, for health endpoints the client library does not cover. With `ca` null the
 * certificate is not checked (the scheduler's health port serves a self-signed one).
 */
function httpsGet(url: string, ca: string | null, token: string | null): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { ...(ca ? { ca } : { rejectUnauthorized: false }), headers: token ? { authorization: `Bearer ${token}` } : {}, timeout: 2000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The fake node kwok manages (it selects on the annotation); the API server accepts a Node's status on create. */
function fakeNode(): k8s.V1Node {
  // Room for the Pods of a 1,000-Project benchmark beside the 1,000 Deployments of its baseline: each runtime Pod
  // requests 250m of CPU and 256Mi (the chart's defaults), so 64 cores held only 256 of them.
  const resources = { cpu: '1000', memory: '1Ti', pods: '4000' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: fakeNodeName,
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: { type: 'kwok', 'kubernetes.io/hostname': fakeNodeName, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' },
    },
    spec: {},
    status: { allocatable: resources, capacity: resources },
  };
}

function runCommand(command: string, args: string[], input: string | undefined, env: NodeJS.ProcessEnv): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ stdout, stderr, code: code ?? 1 }));
    child.stdin.end(input ?? '');
  });
}
