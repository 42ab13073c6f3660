// A real node beside the test control plane (test/harness/kubernetes.ts): containerd with runc and a CNI bridge, and a
// kubelet registered to the test API server, so Pods really run and `exec` through the Kubernetes API really
// executes. Images come from OCI archives hack/sandbox-image.sh builds (no registry). Everything lives under the
// cluster's temp dir (containerd's root, state, socket and config, the kubelet's root dir, CNI state) and in a
// cgroup of its own; stop() kills every container and removes what it made. docs/decisions/0078-test-kubelet.md
// says how and what it proves. With `networkPolicy`, kube-router's policy controller enforces NetworkPolicy on the
// node's bridge (test/harness/network-policy.ts, docs/decisions/0089-network-policy-enforced-in-tests.md).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { eventually } from './eventually.js';
import { serviceClusterIpRange, type KubernetesCluster } from './kubernetes.js';
import { startNetworkPolicyEnforcer, type NetworkPolicyBinaries, type NetworkPolicyEnforcer } from './network-policy.js';
import { cacheDir, freePort, requireBinary, servicesRequired, startProcess, type RunningProcess } from './process.js';

/** The sandbox image: Debian bookworm minbase with bash, coreutils, python3 and tar; user 1000, /workspace. */
export const sandboxImage = 'agentplane.local/sandbox:bookworm-1';
/** The Pod sandbox (pause) image containerd runs for every Pod. */
export const pauseImage = 'agentplane.local/pause:1';
/** The StorageClass startKubelet creates: provisioner kubernetes.io/host-path, the cluster's default. */
export const localStorageClass = 'agentplane-local';

const imageArchives = {
  [sandboxImage]: join(cacheDir, 'images', 'agentplane-sandbox-bookworm-1.oci.tar'),
  [pauseImage]: join(cacheDir, 'images', 'agentplane-pause-1.oci.tar'),
};
const cniBinDir = '/usr/lib/cni';
/** Where kube-controller-manager's host-path provisioner makes each volume's directory (hard-coded there). */
const hostPathVolumeRoot = '/tmp/hostpath_pv/';

export interface KubeletBinaries {
  kubelet: string;
  containerd: string;
  ctr: string;
  runc: string;
}

/**
 * The kubelet, containerd, ctr and runc from the cache's bin/ (hack/test-deps.sh links them), once the image archives
 * and the CNI plugins are there too. null when something is missing or this is not root (the suite skips); throws
 * under AGENTPLANE_REQUIRE_SERVICES=1.
 */
export function kubeletBinaries(): KubeletBinaries | null {
  const missing = (what: string): null => {
    const line = `${what}: run 'bash hack/test-deps.sh' as root to install it`;
    if (servicesRequired) throw new Error(`${line} (AGENTPLANE_REQUIRE_SERVICES=1)`);
    console.warn(`skipping: ${line}`);
    return null;
  };
  if (process.getuid?.() !== 0) return missing('a real kubelet needs root (mounts, cgroups, network namespaces)');
  const found: Partial<KubeletBinaries> = {};
  // containerd finds its shim (containerd-shim-runc-v2) on PATH; test-deps links it beside the others.
  for (const [key, name] of [['kubelet', 'kubelet'], ['containerd', 'containerd'], ['ctr', 'ctr'], ['runc', 'runc']] as const) {
    const path = requireBinary(name);
    if (!path) return null;
    found[key] = realpathSync(path);
  }
  if (!existsSync(join(cniBinDir, 'bridge'))) return missing(`CNI plugins not found in ${cniBinDir}`);
  for (const [image, archive] of Object.entries(imageArchives)) {
    if (!existsSync(archive)) return missing(`image ${image} not found at ${archive}`);
  }
  return found as KubeletBinaries;
}

export interface KubeletOptions {
  /** The Node's name. Default `agentplane-node-0`. */
  nodeName?: string;
  /**
   * Owner given to each host-path volume's directory as soon as its PersistentVolume appears (the provisioner makes
   * them root's, mode 0750, and host-path volumes ignore fsGroup, so a non-root Pod could not write its own volume).
   * null leaves them root's. Default uid and gid 1000, the sandbox image's user.
   */
  volumeOwner?: { uid: number; gid: number } | null;
  /**
   * Enforce NetworkPolicy on this node's bridge with kube-router's policy controller (networkPolicyBinaries() from
   * ./network-policy.js). Off by default: the bridge alone enforces none. One enforcing node at a time per machine.
   */
  networkPolicy?: NetworkPolicyBinaries;
  /**
   * Give this machine an address on the Pods' bridge (the subnet's .254), so the host and the Pods reach each other
   * directly, on the link: a suite's server for Pods to call, a Pod's server for the suite to call. No gateway, no
   * forwarding and no iptables change. Off by default: Pods then reach each other only.
   */
  hostOnBridge?: boolean;
}

export interface RunningKubelet {
  nodeName: string;
  /** The Node's InternalIP: this machine's first non-loopback IPv4 address. */
  nodeIp: string;
  /** Milliseconds from startKubelet's call until the Node was Ready and untainted. */
  readyMs: number;
  /** Where the kubelet finds `Localhost` seccomp profiles (a Pod's `localhostProfile` is a path under it). */
  seccompProfileDir: string;
  /** This machine's address on the Pods' bridge, with `hostOnBridge`. */
  bridgeAddress?: string;
  /** The policy enforcer, when asked for: its stop() ends enforcement (and removes its rules) while the node runs. */
  networkPolicy?: NetworkPolicyEnforcer;
  /**
   * What is still on the machine from this node: processes, mounts, cgroups, network namespaces, its bridge, and the
   * enforcer's chains, ipsets and sysctl.
   */
  leftovers(): string[];
  /** Loads an OCI archive into the node's containerd, as the images above are at start: for images a suite builds. */
  importImage(archive: string, image: string): Promise<void>;
  /** Kills every container, stops the kubelet and containerd, and removes what they made. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts containerd and a kubelet registered to `cluster` (started with `kubelet: true`), imports the sandbox and
 * pause images, creates the StorageClass `agentplane-local` (host-path, default), and returns once the Node is Ready
 * and untainted. The cluster's stop() stops the node first.
 */
export async function startKubelet(cluster: KubernetesCluster, binaries: KubeletBinaries, options: KubeletOptions = {}): Promise<RunningKubelet> {
  const started = Date.now();
  const nodeName = options.nodeName ?? 'agentplane-node-0';
  const volumeOwner = options.volumeOwner === undefined ? { uid: 1000, gid: 1000 } : options.volumeOwner;
  const nodeIp = machineIp();
  const id = randomBytes(4).toString('hex');
  const base = join(cluster.dir, `node-${nodeName}`);
  const paths = {
    containerdRoot: join(base, 'containerd', 'root'),
    containerdState: join(base, 'containerd', 'state'),
    socket: join(base, 'containerd', 'containerd.sock'),
    cniConf: join(base, 'cni', 'net.d'),
    cniIpam: join(base, 'cni', 'ipam'),
    kubeletRoot: join(base, 'kubelet'),
    podLogs: join(base, 'pod-logs'),
    volumePlugins: join(base, 'volume-plugins'),
    pki: join(base, 'pki'),
  };
  for (const dir of Object.values(paths)) if (dir !== paths.socket) mkdirSync(dir, { recursive: true });
  // One cgroup per node in every v1 hierarchy (the kubelet's cgroupRoot), and one bridge: two nodes never share.
  const cgroupName = `agentplane-node-${id}`;
  const bridge = `apnode${id.slice(0, 6)}`;
  const kc = cluster.kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);

  let containerd: RunningProcess | undefined;
  let kubelet: RunningProcess | undefined;
  let enforcer: NetworkPolicyEnforcer | undefined;
  // The Pods' network namespaces, noted as stop() begins: they live in a directory every containerd shares.
  let podNetworkNamespaces: string[] = [];
  const ownedVolumes = new Set<string>();
  let stopWatch = () => {};
  const ctr = (args: string[], timeoutMs = 60_000) => run(binaries.ctr, ['--address', paths.socket, '--namespace', 'k8s.io', ...args], timeoutMs);

  const leftovers = (): string[] => {
    const found: string[] = [];
    for (const pid of processesMentioning(base)) found.push(`process ${pid}: ${commandLine(pid)}`);
    for (const mount of mountsUnder(base)) found.push(`mount ${mount}`);
    for (const dir of cgroupDirs(cgroupName)) if (existsSync(dir)) found.push(`cgroup ${dir}`);
    if (existsSync(`/sys/class/net/${bridge}`)) found.push(`bridge ${bridge}`);
    for (const netns of podNetworkNamespaces) if (existsSync(netns)) found.push(`network namespace ${netns}`);
    if (enforcer) found.push(...enforcer.leftovers());
    return found;
  };

  const importImage = async (archive: string, image: string) => {
    const imported = await ctr(['images', 'import', archive], 300_000);
    if (imported.code !== 0) throw new Error(`ctr images import ${archive} failed:\n${imported.stderr}`);
    const listed = await ctr(['images', 'list', '--quiet']);
    if (!listed.stdout.split('\n').includes(image)) throw new Error(`${archive} did not import as ${image}:\n${listed.stdout}`);
  };

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      stopWatch();
      // Enforcement ends first (its rules and ipsets removed), before the Pods it names go.
      await enforcer?.stop();
      podNetworkNamespaces = await networkNamespacesOf(ctr).catch(() => []);
      // Pods first, through the API while the kubelet runs: it stops each sandbox as a kubelet does (CNI DEL, the
      // network namespace removed). Then whatever is left is killed through containerd, then by cgroup (all of it,
      // without the wait, when the API server is gone).
      const deleted = await deletePodsOnNode(core, nodeName).then(
        () => true,
        () => false,
      );
      if (deleted) {
        await eventually(async () => (await ctr(['tasks', 'list', '--quiet'], 5_000)).stdout.trim() === '', {
          what: 'every container stopped',
          timeoutMs: 30_000,
          intervalMs: 250,
        }).catch(() => {});
      }
      await kubelet?.stop().catch(() => {});
      await removeContainers(ctr).catch(() => {});
      await containerd?.stop().catch(() => {});
      await killAndRemoveCgroups(cgroupName);
      killProcessesMentioning(base);
      unmountUnder(base);
      spawnSync('ip', ['link', 'delete', bridge], { stdio: 'ignore' });
      removeLogLinks(paths.podLogs);
      // The provisioner deletes a volume's directory only when its claim is deleted while it runs.
      for (const path of ownedVolumes) rmSync(path, { recursive: true, force: true });
      try {
        rmdirSync(hostPathVolumeRoot); // only when empty: another cluster's volumes may be there
      } catch {
        // not empty, or gone
      }
      if (mountsUnder(base).length === 0) rmSync(base, { recursive: true, force: true });
    })());
  cluster.onStop(stop);

  try {
    const serving = writeServingCertificate(paths.pki, cluster.ca, nodeName, nodeIp);
    makeCgroups(cgroupName);

    // --- containerd -------------------------------------------------------------------------------------------
    const subnet = `10.${options.networkPolicy ? 90 : 89}.${randomBytes(1)[0]}`;
    // The bridge plugin takes a bridge that exists as it is; this one has the host's address on it.
    const bridgeAddress = options.hostOnBridge ? `${subnet}.254` : undefined;
    if (bridgeAddress) {
      for (const args of [['link', 'add', 'name', bridge, 'type', 'bridge'], ['addr', 'add', `${bridgeAddress}/24`, 'dev', bridge], ['link', 'set', bridge, 'up']]) {
        const made = spawnSync('ip', args, { encoding: 'utf8' });
        if (made.status !== 0) throw new Error(`ip ${args.join(' ')} failed: ${made.stderr}`);
      }
    }
    writeFileSync(
      join(paths.cniConf, '10-agentplane.conflist'),
      JSON.stringify({
        cniVersion: '0.4.0',
        name: 'agentplane-test',
        plugins: [
          {
            // A bridge without a gateway: Pods reach each other, not the host, and the host's forwarding and
            // iptables stay as they are. It enforces no NetworkPolicy (the enforcer below does, when asked for).
            // An enforcing node takes its addresses from 10.90/16, the others from 10.89/16: the enforcer's rules
            // name Pod addresses, and must never match another node's Pods on the same machine.
            type: 'bridge',
            bridge,
            isGateway: false,
            ipMasq: false,
            ipam: { type: 'host-local', ranges: [[{ subnet: `${subnet}.0/24`, rangeEnd: `${subnet}.250` }]], dataDir: paths.cniIpam },
          },
        ],
      }),
    );
    const containerdConfig = join(base, 'containerd', 'config.toml');
    writeFileSync(containerdConfig, containerdToml(paths, binaries.runc));
    // Each process runs in an empty dir of its own, which startProcess removes on stop; the node's state is
    // removed by stop() above, once nothing is mounted in it.
    containerd = await startProcess({
      name: 'containerd',
      command: binaries.containerd,
      args: ['--config', containerdConfig],
      dir: mkdirIn(base, 'run-containerd'),
      ready: async () => existsSync(paths.socket) && (await ctr(['version'], 5_000)).code === 0,
      readyTimeoutMs: 30_000,
    });
    for (const [image, archive] of Object.entries(imageArchives)) await importImage(archive, image);

    // --- kubelet ----------------------------------------------------------------------------------------------
    const kubeletPort = await freePort();
    const healthzPort = await freePort();
    const kubeletConfig = join(base, 'kubelet-config.yaml');
    writeFileSync(
      kubeletConfig,
      stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        // Served on the node's address (the API server reaches kubelets by InternalIP), with a certificate from the
        // cluster's CA; only the API server's client certificate (same CA) gets in.
        address: nodeIp,
        port: kubeletPort,
        readOnlyPort: 0,
        healthzBindAddress: '127.0.0.1',
        healthzPort,
        tlsCertFile: serving.cert,
        tlsPrivateKeyFile: serving.key,
        authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: { clientCAFile: cluster.ca.certPath } },
        authorization: { mode: 'AlwaysAllow' },
        containerRuntimeEndpoint: `unix://${paths.socket}`,
        // This machine: cgroup v1 (the kubelet refuses it unless told), no systemd, swap allowed.
        cgroupDriver: 'cgroupfs',
        cgroupRoot: `/${cgroupName}`,
        failCgroupV1: false,
        failSwapOn: false,
        podLogsDir: paths.podLogs,
        volumePluginDir: paths.volumePlugins,
        resolvConf: '/etc/resolv.conf',
        // The imported images cannot be pulled again: never collect them, and never evict for a full-ish disk.
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'nodefs.inodesFree': '1%', 'imagefs.available': '1%' },
        // Status changes (a Pod Running) reach the API server promptly.
        nodeStatusUpdateFrequency: '5s',
        syncFrequency: '10s',
      }),
    );
    kubelet = await startProcess({
      name: 'kubelet',
      command: binaries.kubelet,
      args: [
        `--config=${kubeletConfig}`,
        // The admin kubeconfig (system:masters): the test API server has no client CA for node certificates.
        `--kubeconfig=${cluster.kubeconfigPath}`,
        `--hostname-override=${nodeName}`,
        `--node-ip=${nodeIp}`,
        `--root-dir=${paths.kubeletRoot}`,
        `--cert-dir=${paths.pki}`,
        '--v=1',
      ],
      dir: mkdirIn(base, 'run-kubelet'),
      ready: async () => (await fetch(`http://127.0.0.1:${healthzPort}/healthz`, { signal: AbortSignal.timeout(1000) })).ok,
      readyTimeoutMs: 60_000,
    });
    const kubeletOutput = kubelet.output;
    await eventually(
      async () => {
        const node = await core.readNode({ name: nodeName });
        const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
        return Boolean(ready) && (node.spec?.taints ?? []).length === 0;
      },
      { what: `node ${nodeName} Ready and untainted`, timeoutMs: 90_000, intervalMs: 100 },
    ).catch((error: unknown) => {
      throw new Error(`${error instanceof Error ? error.message : String(error)}\nkubelet output:\n${kubeletOutput()}`);
    });
    const readyMs = Date.now() - started;

    // --- NetworkPolicy, when asked for (kube-router reads the registered Node's address) -----------------------
    if (options.networkPolicy) {
      enforcer = await startNetworkPolicyEnforcer(options.networkPolicy, {
        nodeName,
        kubeconfigPath: cluster.kubeconfigPath,
        serviceClusterIpRange,
        dir: mkdirIn(base, 'run-kube-router'),
      });
    }

    // --- storage ----------------------------------------------------------------------------------------------
    await kc
      .makeApiClient(k8s.StorageV1Api)
      .createStorageClass({
        body: {
          metadata: { name: localStorageClass, annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
          provisioner: 'kubernetes.io/host-path',
          reclaimPolicy: 'Delete',
          volumeBindingMode: 'Immediate',
        },
      })
      .catch((error: unknown) => {
        if (!(error instanceof k8s.ApiException && error.code === 409)) throw error;
      });
    if (volumeOwner) stopWatch = await ownHostPathVolumes(kc, volumeOwner, ownedVolumes);

    const seccompProfileDir = join(paths.kubeletRoot, 'seccomp');
    mkdirSync(seccompProfileDir, { recursive: true });
    return { nodeName, nodeIp, readyMs, seccompProfileDir, bridgeAddress, networkPolicy: enforcer, leftovers, importImage, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function containerdToml(paths: { containerdRoot: string; containerdState: string; socket: string; cniConf: string }, runc: string): string {
  return `version = 2
root = ${JSON.stringify(paths.containerdRoot)}
state = ${JSON.stringify(paths.containerdState)}
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = ${JSON.stringify(paths.socket)}

[ttrpc]
  address = ${JSON.stringify(`${paths.socket}.ttrpc`)}

[debug]
  level = "warn"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = ${JSON.stringify(join(paths.containerdRoot, 'opt'))}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${JSON.stringify(pauseImage)}
  # root here lacks CAP_SYS_RESOURCE: never ask for an oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = ${JSON.stringify(runc)}
        Root = ${JSON.stringify(join(paths.containerdState, 'runc'))}
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${JSON.stringify(cniBinDir)}
    conf_dir = ${JSON.stringify(paths.cniConf)}
    max_conf_num = 1
`;
}

/** This machine's address other hosts would reach: eth0's IPv4 address, else the first non-loopback one. */
function machineIp(): string {
  const interfaces = networkInterfaces();
  const candidates = [...(interfaces.eth0 ?? []), ...Object.values(interfaces).flat()];
  const address = candidates.find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  if (!address) throw new Error('no non-loopback IPv4 address for the node');
  return address;
}

/** The kubelet's serving certificate for its name and address, from the cluster's CA (openssl, as the cluster's). */
function writeServingCertificate(dir: string, ca: KubernetesCluster['ca'], nodeName: string, nodeIp: string): { cert: string; key: string } {
  const file = (name: string) => join(dir, name);
  writeFileSync(
    file('openssl.cnf'),
    [
      '[req]',
      'distinguished_name = dn',
      '[dn]',
      '[serving]',
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage = serverAuth',
      `subjectAltName = IP:${nodeIp},DNS:${nodeName}`,
      '',
    ].join('\n'),
  );
  const openssl = (args: string[]) => {
    const result = spawnSync('openssl', args, { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`openssl ${args[0]} failed:\n${result.stderr ?? result.error?.message}`);
  };
  openssl(['req', '-new', '-config', file('openssl.cnf'), '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', file('kubelet.key'), '-out', file('kubelet.csr'), '-subj', `/CN=system:node:${nodeName}`]);
  openssl(['x509', '-req', '-in', file('kubelet.csr'), '-CA', ca.certPath, '-CAkey', ca.keyPath, '-set_serial', `0x${randomBytes(8).toString('hex')}`, '-days', '7', '-extfile', file('openssl.cnf'), '-extensions', 'serving', '-out', file('kubelet.crt')]);
  return { cert: file('kubelet.crt'), key: file('kubelet.key') };
}

// --- cgroups ------------------------------------------------------------------------------------------------------

/**
 * The mount points of the cgroup hierarchies: the v1 ones (cpu, memory, pids, ..., name=systemd) and, on a hybrid
 * machine, the v2 one beside them (runc makes a container's cgroup there too).
 */
function cgroupMounts(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => ['cgroup', 'cgroup2'].includes(fields[fields.indexOf('-') + 1] ?? ''))
    .map((fields) => unescapeMount(fields[4]!));
}

function cgroupDirs(name: string): string[] {
  return cgroupMounts().map((mount) => join(mount, name));
}

/** The kubelet's cgroupRoot must exist in every hierarchy; cpuset's starts empty and is given its parent's sets. */
function makeCgroups(name: string): void {
  for (const mount of cgroupMounts()) {
    const dir = join(mount, name);
    mkdirSync(dir, { recursive: true });
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(mount, file))) writeFileSync(join(dir, file), readFileSync(join(mount, file)));
    }
  }
}

/** SIGKILLs every process left in the node's cgroups, then removes them, deepest first. */
async function killAndRemoveCgroups(name: string): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    let remaining = 0;
    for (const root of cgroupDirs(name)) {
      if (!existsSync(root)) continue;
      for (const dir of subdirectoriesDeepestFirst(root)) {
        for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // gone already
          }
        }
        try {
          rmdirSync(dir);
        } catch {
          remaining++;
        }
      }
    }
    if (remaining === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function subdirectoriesDeepestFirst(root: string): string[] {
  const dirs: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) walk(join(dir, entry.name));
    dirs.push(dir);
  };
  walk(root);
  return dirs;
}

// --- processes, mounts, links -------------------------------------------------------------------------------------

function mkdirIn(root: string, name: string): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Processes whose command line names `text` (a containerd-shim names its containerd's socket, under the node dir). */
function processesMentioning(text: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => pid !== process.pid && commandLine(pid).includes(text));
}

function killProcessesMentioning(text: string): void {
  for (const pid of processesMentioning(text)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

function unescapeMount(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => unescapeMount(line.split(' ')[4] ?? ''))
    .filter((mount) => mount === dir || mount.startsWith(`${dir}/`));
}

/** Unmounts everything under `dir` (the kubelet makes its root dir a shared bind mount; tmpfs volumes), deepest first. */
function unmountUnder(dir: string): void {
  for (let attempt = 0; attempt < 5; attempt++) {
    const mounts = [...new Set(mountsUnder(dir))].sort((a, b) => b.length - a.length);
    if (mounts.length === 0) return;
    for (const mount of mounts) spawnSync('umount', ['-l', mount], { stdio: 'ignore' });
  }
}

/** The kubelet links each container's log into /var/log/containers (a fixed path); links into this node go. */
function removeLogLinks(podLogs: string): void {
  const dir = '/var/log/containers';
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    try {
      if (lstatSync(path).isSymbolicLink() && readlinkSync(path).startsWith(podLogs)) unlinkSync(path);
    } catch {
      // gone already
    }
  }
}

// --- containers through containerd and the API --------------------------------------------------------------------

/** Force-deletes every Pod bound to the node, so its kubelet stops their sandboxes. */
async function deletePodsOnNode(core: k8s.CoreV1Api, nodeName: string): Promise<void> {
  const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` });
  await Promise.all(
    pods.items.map((pod) =>
      core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, gracePeriodSeconds: 0 }).catch(() => {}),
    ),
  );
}

type Ctr = (args: string[], timeoutMs?: number) => Promise<CommandOutput>;

/**
 * The network namespace a container's spec names when it is one containerd's CRI plugin made for a Pod sandbox
 * (/var/run/netns/cni-<uuid>, a directory every containerd shares); a Pod's other containers name their sandbox's
 * process instead.
 */
async function networkNamespaceOf(ctr: Ctr, id: string): Promise<string | undefined> {
  const info = await ctr(['containers', 'info', id], 10_000);
  try {
    const namespaces = (JSON.parse(info.stdout) as { Spec?: { linux?: { namespaces?: { type: string; path?: string }[] } } }).Spec?.linux?.namespaces ?? [];
    return namespaces.find((n) => n.type === 'network' && n.path?.startsWith('/var/run/netns/'))?.path;
  } catch {
    return undefined; // no readable spec
  }
}

async function containerIds(ctr: Ctr): Promise<string[]> {
  return (await ctr(['containers', 'list', '--quiet'], 10_000)).stdout.split('\n').filter(Boolean);
}

/** The network namespaces of every Pod sandbox containerd has. */
async function networkNamespacesOf(ctr: Ctr): Promise<string[]> {
  const found: string[] = [];
  for (const id of await containerIds(ctr)) {
    const netns = await networkNamespaceOf(ctr, id);
    if (netns) found.push(netns);
  }
  return found;
}

/** Kills and deletes whatever containers containerd still has, and removes their network namespaces. */
async function removeContainers(ctr: Ctr): Promise<void> {
  for (const id of await containerIds(ctr)) {
    const netns = await networkNamespaceOf(ctr, id);
    await ctr(['tasks', 'kill', '--signal', 'SIGKILL', '--all', id], 10_000);
    await ctr(['tasks', 'delete', '--force', id], 10_000);
    await ctr(['containers', 'delete', id], 10_000);
    if (netns && existsSync(netns)) {
      spawnSync('umount', ['-l', netns], { stdio: 'ignore' });
      rmSync(netns, { force: true });
    }
  }
}

/**
 * Watches PersistentVolumes and gives each host-path volume's directory to `owner` as it appears. Returns a function
 * that ends the watch.
 */
async function ownHostPathVolumes(kc: k8s.KubeConfig, owner: { uid: number; gid: number }, owned: Set<string>): Promise<() => void> {
  let stopped = false;
  let controller: AbortController | undefined;
  const own = (pv: k8s.V1PersistentVolume) => {
    const path = pv.spec?.hostPath?.path;
    if (!path || !path.startsWith(hostPathVolumeRoot) || path.includes('..') || owned.has(path)) return;
    if (pv.metadata?.annotations?.['kubernetes.io/createdby'] !== 'hostpath-dynamic-provisioner') return;
    try {
      chownSync(path, owner.uid, owner.gid);
      owned.add(path);
    } catch {
      // not made yet, or deleted: the next event retries
    }
  };
  const watch = new k8s.Watch(kc);
  const start = async (): Promise<void> => {
    if (stopped) return;
    controller = await watch.watch(
      '/api/v1/persistentvolumes',
      {},
      (phase, pv: k8s.V1PersistentVolume) => {
        if (phase === 'ADDED' || phase === 'MODIFIED') own(pv);
      },
      () => {
        if (!stopped) setTimeout(() => void start().catch(() => {}), 500);
      },
    );
  };
  await start();
  return () => {
    stopped = true;
    controller?.abort();
  };
}

interface CommandOutput {
  stdout: string;
  stderr: string;
  code: number;
}

function run(command: string, args: string[], timeoutMs: number): Promise<CommandOutput> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', (error) => resolve({ stdout, stderr: `${stderr}${error.message}`, code: 1 }));
    child.once('close', (code) => resolve({ stdout, stderr, code: code ?? 1 }));
  });
}
