// NetworkPolicy enforced on the test kubelet's bridge (docs/decisions/0089-network-policy-enforced-in-tests.md):
// kube-router's network-policy controller alone (no router, no service proxy), built by hack/kube-router.sh, run
// beside one node with the cluster's kubeconfig. It writes the filter table's KUBE-ROUTER-INPUT/FORWARD/OUTPUT chains
// (each jumped to from the built-in chain), a KUBE-POD-FW-* chain per Pod of the node and a KUBE-NWPLCY-* chain per
// policy, and KUBE-SRC-*/KUBE-DST-* ipsets; bridged packets reach those chains through br_netfilter
// (net.bridge.bridge-nf-call-iptables=1, set here when it is not, and put back). stop() ends the controller and
// removes exactly that, so the host's iptables and ipsets are left as they were. Those names are global: one
// enforcing node at a time per machine.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, readlinkSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { requireBinary, servicesRequired, startProcess, type RunningProcess } from './process.js';

export interface NetworkPolicyBinaries {
  kubeRouter: string;
  iptables: string;
  ipset: string;
}

/** The sysctl that makes bridged IPv4 packets pass the iptables chains (br_netfilter). */
const bridgeNfCallIptables = '/proc/sys/net/bridge/bridge-nf-call-iptables';
/** kube-router's network-policy chains (filter table) and ipsets (the TMP- ones are its swap sets). */
const ownChain = /^KUBE-(ROUTER-(INPUT|FORWARD|OUTPUT)|POD-FW-|NWPLCY-)/;
const ownSet = /^(inet6:)?(KUBE-SRC-|KUBE-DST-|TMP-)/;

/**
 * kube-router from the cache's bin/ (hack/kube-router.sh, which hack/test-deps.sh calls) with iptables and ipset on
 * PATH. null when something is missing or this is not root (the suite skips); throws under AGENTPLANE_REQUIRE_SERVICES=1.
 */
export function networkPolicyBinaries(): NetworkPolicyBinaries | null {
  const missing = (what: string): null => {
    const line = `${what}: run 'bash hack/test-deps.sh' as root to install it`;
    if (servicesRequired) throw new Error(`${line} (AGENTPLANE_REQUIRE_SERVICES=1)`);
    console.warn(`skipping: ${line}`);
    return null;
  };
  if (process.getuid?.() !== 0) return missing('enforcing NetworkPolicy needs root (iptables, ipset)');
  const kubeRouter = requireBinary('kube-router');
  if (!kubeRouter) return null;
  const iptables = onPath('iptables');
  const ipset = onPath('ipset');
  if (!iptables || !ipset) return missing('iptables or ipset not found on PATH');
  if (!existsSync(bridgeNfCallIptables)) return missing(`${bridgeNfCallIptables} not found (the kernel has no br_netfilter)`);
  return { kubeRouter: realpathSync(kubeRouter), iptables, ipset };
}

export interface NetworkPolicyEnforcer {
  /** Milliseconds from the start until kube-router's first sync had made its chains. */
  readyMs: number;
  /** Last lines of kube-router's output. */
  output(): string;
  /** Whether the filter table has the Pod's own chain yet: kube-router has seen it Running and written its rules. */
  enforcing(namespace: string, pod: string): boolean;
  /** What is still on the machine from the enforcer: its process, chains, ipsets, a changed sysctl. */
  leftovers(): string[];
  /** Ends the controller and removes its chains and ipsets, and puts the sysctl back. Idempotent. */
  stop(): Promise<void>;
}

export interface EnforcerOptions {
  /** The node's name, as registered (kube-router enforces for the Pods whose hostIP is that Node's InternalIP). */
  nodeName: string;
  kubeconfigPath: string;
  /** The cluster's Service range (kube-router requires it; it lets traffic to Service addresses into the node). */
  serviceClusterIpRange: string;
  /** An empty directory of its own, removed on stop. */
  dir: string;
}

/**
 * Starts kube-router's network-policy controller for one node (already registered) and returns once its top-level
 * chains are in place. Refuses when another kube-router runs on the machine; clears what a killed one left.
 */
export async function startNetworkPolicyEnforcer(binaries: NetworkPolicyBinaries, options: EnforcerOptions): Promise<NetworkPolicyEnforcer> {
  const started = Date.now();
  const running = processesRunning(binaries.kubeRouter);
  if (running.length > 0) throw new Error(`kube-router already runs on this machine (pid ${running.join(', ')}): one enforcing node at a time`);
  removeKubeRouterState(binaries, new Set());
  // Sets that were there before (none should match, but a set this harness did not make is never destroyed).
  const setsBefore = new Set(listSets(binaries).filter((name) => ownSet.test(name)));
  const sysctlBefore = readFileSync(bridgeNfCallIptables, 'utf8').trim();
  if (sysctlBefore !== '1') writeFileSync(bridgeNfCallIptables, '1');

  let controller: RunningProcess | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await controller?.stop().catch(() => {});
      removeKubeRouterState(binaries, setsBefore);
      if (sysctlBefore !== '1') writeFileSync(bridgeNfCallIptables, sysctlBefore);
    })());
  const leftovers = (): string[] => {
    const found: string[] = [];
    for (const pid of processesRunning(binaries.kubeRouter)) found.push(`process ${pid}: kube-router`);
    for (const chain of listChains(binaries)) if (ownChain.test(chain)) found.push(`iptables chain ${chain}`);
    for (const set of listSets(binaries)) if (ownSet.test(set) && !setsBefore.has(set)) found.push(`ipset ${set}`);
    const sysctl = readFileSync(bridgeNfCallIptables, 'utf8').trim();
    if (sysctl !== sysctlBefore) found.push(`net.bridge.bridge-nf-call-iptables is ${sysctl}, was ${sysctlBefore}`);
    return found;
  };

  try {
    controller = await startProcess({
      name: 'kube-router',
      command: binaries.kubeRouter,
      args: [
        `--kubeconfig=${options.kubeconfigPath}`,
        `--hostname-override=${options.nodeName}`,
        // The network-policy controller only: the bridge CNI keeps the Pods' addresses and routes, nothing proxies.
        '--run-firewall=true',
        '--run-router=false',
        '--run-service-proxy=false',
        '--run-loadbalancer=false',
        '--enable-ipv4=true',
        '--enable-ipv6=false',
        `--service-cluster-ip-range=${options.serviceClusterIpRange}`,
        // No listener: readiness is read from the filter table.
        '--health-port=0',
        '--metrics-port=0',
        '--v=1',
      ],
      dir: options.dir,
      // Its first full sync has made the top-level chains and jumped to them.
      ready: () => Promise.resolve(filterTable(binaries).includes('-j KUBE-ROUTER-FORWARD') && listChains(binaries).includes('KUBE-NWPLCY-DEFAULT')),
      readyTimeoutMs: 60_000,
    });
  } catch (error) {
    await stop();
    throw error;
  }
  // kube-router's comment on the jump into a Pod's chain (pod.go, interceptPodInboundTraffic).
  const enforcing = (namespace: string, pod: string) => filterTable(binaries).includes(`rule to jump traffic destined to POD name:${pod} namespace: ${namespace} to chain`);
  return { readyMs: Date.now() - started, output: () => controller?.output() ?? '', enforcing, leftovers, stop };
}

/** Removes kube-router's jumps from the built-in chains, then its chains, then its ipsets (but those in `keep`). */
function removeKubeRouterState(binaries: NetworkPolicyBinaries, keep: Set<string>): void {
  const iptables = (args: string[]) => spawnSync(binaries.iptables, ['-w', '-t', 'filter', ...args], { encoding: 'utf8' });
  for (const line of filterTable(binaries).split('\n')) {
    const rule = splitRule(line);
    const target = rule[rule.indexOf('-j') + 1] ?? '';
    // Each rule removed by its own spec, one at a time: another program's rules in the same chains stay where they are.
    if (rule[0] === '-A' && ['INPUT', 'FORWARD', 'OUTPUT'].includes(rule[1] ?? '') && rule.includes('-j') && ownChain.test(target)) {
      iptables(['-D', ...rule.slice(1)]);
    }
  }
  const chains = listChains(binaries).filter((chain) => ownChain.test(chain));
  // Emptied first, all of them: they jump to each other.
  for (const chain of chains) iptables(['-F', chain]);
  for (const chain of chains) iptables(['-X', chain]);
  // Sets are destroyed once no rule names them.
  for (const set of listSets(binaries)) {
    if (ownSet.test(set) && !keep.has(set)) spawnSync(binaries.ipset, ['destroy', set], { stdio: 'ignore' });
  }
}

function filterTable(binaries: NetworkPolicyBinaries): string {
  const saved = spawnSync(`${binaries.iptables}-save`, ['-t', 'filter'], { encoding: 'utf8' });
  if (saved.status !== 0) throw new Error(`iptables-save failed: ${saved.stderr}`);
  return saved.stdout;
}

function listChains(binaries: NetworkPolicyBinaries): string[] {
  return filterTable(binaries)
    .split('\n')
    .filter((line) => line.startsWith(':'))
    .map((line) => line.slice(1).split(' ')[0]!);
}

function listSets(binaries: NetworkPolicyBinaries): string[] {
  const listed = spawnSync(binaries.ipset, ['list', '-n'], { encoding: 'utf8' });
  return listed.status === 0 ? listed.stdout.split('\n').filter(Boolean) : [];
}

/** An iptables-save rule line as arguments: words, and double-quoted strings (comments) as one argument. */
function splitRule(line: string): string[] {
  const words: string[] = [];
  for (const match of line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) words.push(match[1] !== undefined ? match[1].replace(/\\(.)/g, '$1') : match[2]!);
  return words;
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin'])) {
    const path = join(dir, name);
    if (dir && existsSync(path)) return path;
  }
  return undefined;
}

/** Processes whose executable is `binary`. */
function processesRunning(binary: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/exe`) === binary;
      } catch {
        return false;
      }
    });
}
