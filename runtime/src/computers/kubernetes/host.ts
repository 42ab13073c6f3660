// The Kubernetes sandbox host (docs/decisions/0079): each sandbox a Pod in the runtime's own namespace (the project's,
// where the operator provisions runtimes), admitted by the `restricted` Pod Security profile, with no ServiceAccount
// token, its requests and limits, and its /workspace on a PersistentVolumeClaim that outlives the Pod. No sandbox Pod
// has any network: where the operator provisions the runtime its NetworkPolicies leave sandboxes out of every allow
// (docs/decisions/0081); elsewhere this host writes a deny-all of its own. Exec and files go through the API server's exec with
// @kubernetes/client-node. Pause deletes the Pod and keeps the claim; resume makes the Pod again. Sandboxes outlive
// the runtime: a restart finds them as they were.
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable, Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { LABELS, SANDBOX_COMPONENT, SANDBOX_ID_LABEL } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import {
  SandboxCapacityError,
  SandboxNotRunningError,
  type ExecOutcome,
  type ExecSpec,
  type HeldState,
  type HostDescription,
  type SandboxHost,
  type SandboxStart,
  type SandboxUsage,
} from '../host.js';
import { Capture } from '../capture.js';
import { baseEnvironment, SANDBOX_GID, SANDBOX_UID } from '../local/bwrap.js';

export interface KubernetesHostOptions {
  kubeConfig: k8s.KubeConfig;
  /** Where sandbox Pods go: the runtime's own namespace. */
  namespace: string;
  /** The image when the project names none. */
  defaultImage: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** The claims' storage class; unset: the cluster's default. */
  storageClass?: string;
  logger: Logger;
  /** How long a Pod may take to run. */
  startTimeoutMs?: number;
  /**
   * Who fences the sandboxes' network: `operator`, whose policies leave sandbox Pods out of every allow (the runtime
   * then needs no verb on NetworkPolicies), or `runtime`, this host writing a deny-all of its own in a namespace
   * no other policy opens. Default `runtime`.
   */
  networkPolicy?: 'operator' | 'runtime';
}

const PAUSED_ANNOTATION = 'agentplane.io/paused';
const NETWORK_POLICY = 'agentplane-sandboxes-deny-all';

const podName = (id: string) => `sandbox-${id}`;
const claimName = (id: string) => `sandbox-${id}-workspace`;
const isNotFound = (error: unknown) => (error as { code?: number }).code === 404;
const isConflict = (error: unknown) => (error as { code?: number }).code === 409;

/** The API server's words when a ResourceQuota refused a create (403 `exceeded quota: ...`), else undefined. */
function quotaRefusal(error: unknown): string | undefined {
  if ((error as { code?: number }).code !== 403) return undefined;
  const body = (error as { body?: unknown }).body;
  const text = typeof body === 'string' ? body : JSON.stringify(body ?? '');
  return /exceeded quota: [^"\\]*/.exec(text)?.[0];
}

/**
 * Prints `<memory bytes> <cpu ns> <processes> <workspace KiB>` from inside a sandbox, `-` for what it cannot read.
 * Shell builtins where it can: the count must not see its own helpers.
 */
const USAGE_SCRIPT = [
  'm=-; read m < /sys/fs/cgroup/memory.current 2>/dev/null || read m < /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null',
  'c=-; if [ -r /sys/fs/cgroup/cpu.stat ]; then while read k v; do [ "$k" = usage_usec ] && c=$((v * 1000)); done < /sys/fs/cgroup/cpu.stat; else read c < /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null; fi',
  'n=0; for p in /proc/[0-9]*; do case "${p#/proc/}" in 1|"$$") ;; *) n=$((n + 1)) ;; esac; done',
  'd=$(du -sk /workspace 2>/dev/null); d=${d%%[!0-9]*}',
  'echo "$m $c $n ${d:--}"',
].join('\n');

const sandboxLabels = (id: string) => ({ [LABELS.component]: SANDBOX_COMPONENT, [SANDBOX_ID_LABEL]: id, [LABELS.managedBy]: 'agentplane-runtime' });

/** A sandbox's Pod: pure, so what the cluster is asked for can be read and tested without one. */
export function sandboxPod(sandbox: SandboxStart, options: Pick<KubernetesHostOptions, 'defaultImage' | 'imagePullPolicy'>): k8s.V1Pod {
  const { limits } = sandbox;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName(sandbox.id), labels: sandboxLabels(sandbox.id) },
    spec: {
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      // The sandbox's /etc/hosts names nothing of the cluster; its DNS is off with its network.
      dnsPolicy: 'None',
      dnsConfig: { nameservers: ['127.0.0.1'] },
      restartPolicy: 'Never',
      // The Pod's pause process becomes PID 1 and reaps what a command orphaned; `sleep` as PID 1 would not, and a
      // long-lived sandbox would fill with zombies that count against its process limit.
      shareProcessNamespace: true,
      terminationGracePeriodSeconds: 1,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: SANDBOX_UID,
        runAsGroup: SANDBOX_GID,
        fsGroup: SANDBOX_GID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'sandbox',
          image: sandbox.image ?? options.defaultImage,
          imagePullPolicy: options.imagePullPolicy ?? 'IfNotPresent',
          command: ['sleep', 'infinity'],
          workingDir: '/workspace',
          env: Object.entries(baseEnvironment()).map(([name, value]) => ({ name, value })),
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
          resources: {
            requests: { cpu: `${Math.max(10, Math.round(limits.cpus * 100))}m`, memory: `${Math.min(limits.memoryMiB, 64)}Mi` },
            limits: { cpu: `${Math.round(limits.cpus * 1000)}m`, memory: `${limits.memoryMiB}Mi` },
          },
          volumeMounts: [
            { name: 'workspace', mountPath: '/workspace' },
            { name: 'tmp', mountPath: '/tmp' },
          ],
        },
      ],
      volumes: [
        { name: 'workspace', persistentVolumeClaim: { claimName: claimName(sandbox.id) } },
        { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '256Mi' } },
      ],
    },
  };
}

/** Every sandbox Pod of the namespace denied all traffic, in and out: the cluster, the node and metadata included. */
export function denyAllPolicy(): k8s.V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: NETWORK_POLICY, labels: { [LABELS.managedBy]: 'agentplane-runtime' } },
    spec: { podSelector: { matchLabels: { [LABELS.component]: SANDBOX_COMPONENT } }, policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] },
  };
}

export class KubernetesSandboxHost implements SandboxHost {
  readonly kind = 'kubernetes' as const;
  private readonly core: k8s.CoreV1Api;
  private readonly network: k8s.NetworkingV1Api;
  private readonly execs: k8s.Exec;
  private policy: Promise<void> | undefined;

  constructor(private readonly options: KubernetesHostOptions) {
    this.core = options.kubeConfig.makeApiClient(k8s.CoreV1Api);
    this.network = options.kubeConfig.makeApiClient(k8s.NetworkingV1Api);
    this.execs = new k8s.Exec(options.kubeConfig);
  }

  describe(): HostDescription {
    return {
      kind: 'kubernetes',
      isolation: ['a Pod per sandbox', 'Pod Security `restricted`', 'no ServiceAccount token', 'read-only root file system'],
      enforcement: {
        cpu: 'Pod limits',
        memory: 'Pod limits',
        processes: "the node's Pod PID limit (kubelet podPidsLimit)",
        disk: "the claim's storage class",
        pause: 'the Pod deleted, its volume kept',
      },
      network: 'none',
    };
  }

  private ensurePolicy(): Promise<void> {
    if (this.options.networkPolicy === 'operator') return Promise.resolve();
    this.policy ??= this.network
      .createNamespacedNetworkPolicy({ namespace: this.options.namespace, body: denyAllPolicy() })
      .then(
        () => undefined,
        (error: unknown) => {
          if (!isConflict(error)) {
            this.policy = undefined;
            throw error;
          }
        },
      );
    return this.policy;
  }

  async start(sandbox: SandboxStart): Promise<void> {
    const { namespace } = this.options;
    await this.ensurePolicy();
    // A claim that exists is not asked for again: the quota's admission counts a create before it learns the name is
    // taken, so a resume at the project's count would be refused.
    const claim = await this.core.readNamespacedPersistentVolumeClaim({ name: claimName(sandbox.id), namespace }).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
    if (!claim) await this.createClaim(sandbox);
    await this.setPaused(sandbox.id, false);
    await this.core.createNamespacedPod({ namespace, body: sandboxPod(sandbox, this.options) }).catch((error: unknown) => {
      if (!isConflict(error)) throw error;
    });
    await this.untilRunning(sandbox.id);
  }

  private async createClaim(sandbox: SandboxStart): Promise<void> {
    const { namespace } = this.options;
    await this.core
      .createNamespacedPersistentVolumeClaim({
        namespace,
        body: {
          metadata: { name: claimName(sandbox.id), labels: sandboxLabels(sandbox.id) },
          spec: {
            accessModes: ['ReadWriteOnce'],
            resources: { requests: { storage: `${sandbox.limits.diskMiB}Mi` } },
            ...(this.options.storageClass ? { storageClassName: this.options.storageClass } : {}),
          },
        },
      })
      .catch((error: unknown) => {
        if (isConflict(error)) return;
        const refusal = quotaRefusal(error);
        if (refusal) throw new SandboxCapacityError(refusal);
        throw error;
      });
  }

  private async untilRunning(id: string): Promise<void> {
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 120_000);
    for (;;) {
      const pod = await this.core.readNamespacedPod({ name: podName(id), namespace: this.options.namespace });
      if (pod.status?.phase === 'Running') return;
      const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
      if (pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded' || (waiting && /ErrImage|ImagePull|CrashLoop|CreateContainer/.test(waiting.reason ?? ''))) {
        throw new Error(`the sandbox's Pod did not start: ${waiting?.reason ?? pod.status?.phase}${waiting?.message ? `: ${waiting.message}` : ''}`);
      }
      if (Date.now() > deadline) throw new Error(`the sandbox's Pod was not running after ${(this.options.startTimeoutMs ?? 120_000) / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async exec(id: string, spec: ExecSpec): Promise<ExecOutcome> {
    const started = performance.now();
    // Every process of this exec carries its mark in its environment: what a timeout finds and kills, whatever it
    // forked or setsid'd (a Pod has no cgroup per exec).
    const mark = randomBytes(8).toString('hex');
    const env = Object.entries({ ...baseEnvironment(), ...spec.env, AP_EXEC: mark }).map(([name, value]) => `${name}=${value}`);
    const command = ['/usr/bin/env', '-i', ...env, '/usr/bin/env', '--chdir', spec.cwd, '--', ...spec.argv];
    const keep = spec.keep !== false;
    const captures = { stdout: new Capture(spec.outputLimitBytes, keep), stderr: new Capture(spec.outputLimitBytes, keep) };
    const sink = (stream: 'stdout' | 'stderr') =>
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          const kept = captures[stream].add(chunk);
          const behind = kept && spec.onOutput ? spec.onOutput(stream, kept) : undefined;
          // A reader behind holds this stream's next chunk back until it catches up.
          if (behind) behind.then(() => done(), done);
          else done();
        },
      });
    const stdin = spec.stdin === undefined ? null : Buffer.isBuffer(spec.stdin) ? Readable.from([spec.stdin]) : spec.stdin;
    let status: k8s.V1Status | undefined;
    let timedOut = false;
    // The Pod's state is asked only when the exec is refused: a read first cost every command a round trip (~11 ms).
    const socket = await this.execs
      .exec(this.options.namespace, podName(id), 'sandbox', command, sink('stdout'), sink('stderr'), stdin ?? new PassThrough().end(), false, (s) => (status = s))
      .catch(async (error: unknown) => {
        const held = await this.state(id);
        throw held === 'running' ? error : new SandboxNotRunningError(id, held);
      });
    const kill = () => {
      timedOut = true;
      void this.killMarked(id, mark).finally(() => socket.close());
    };
    const timer = setTimeout(kill, spec.timeoutMs);
    spec.signal?.addEventListener('abort', kill, { once: true });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.on('close', () => resolve());
        socket.on('error', reject);
      });
    } finally {
      clearTimeout(timer);
      spec.signal?.removeEventListener('abort', kill);
    }
    const exitCode = timedOut ? null : status?.status === 'Success' ? 0 : Number(status?.details?.causes?.find((cause) => cause.reason === 'ExitCode')?.message ?? Number.NaN);
    return {
      exitCode: exitCode !== null && Number.isNaN(exitCode) ? null : exitCode,
      signal: timedOut ? 'SIGKILL' : null,
      timedOut,
      stdout: captures.stdout.bytes(),
      stderr: captures.stderr.bytes(),
      stdoutTruncated: captures.stdout.truncated,
      stderrTruncated: captures.stderr.truncated,
      durationMs: performance.now() - started,
    };
  }

  /** Kills every process of the sandbox whose environment carries the exec's mark, twice (what was forking meanwhile). */
  private async killMarked(id: string, mark: string): Promise<void> {
    // A process still being set up (by the runtime's exec) cannot have its environment read yet: five rounds apart.
    const script = `for round in 1 2 3 4 5; do for p in /proc/[0-9]*; do if tr '\\0' '\\n' < "$p/environ" 2>/dev/null | grep -qx "AP_EXEC=${mark}"; then kill -9 "\${p#/proc/}" 2>/dev/null; fi; done; sleep 0.2; done`;
    const stderr = new PassThrough();
    let said = '';
    stderr.on('data', (chunk: Buffer) => (said += chunk.toString()));
    const socket = await this.execs.exec(this.options.namespace, podName(id), 'sandbox', ['/bin/sh', '-c', script], new PassThrough().resume(), stderr, null, false);
    await new Promise<void>((resolve) => {
      socket.on('close', () => resolve());
      socket.on('error', () => resolve());
    });
    if (said.trim()) this.options.logger.debug({ sandbox_id: id, stderr: said.trim().slice(0, 500) }, "ending a timed-out exec's processes said something");
  }

  async pause(id: string): Promise<void> {
    await this.setPaused(id, true);
    await this.deletePod(id);
  }

  async resume(sandbox: SandboxStart): Promise<void> {
    if ((await this.state(sandbox.id)) === 'running') return;
    await this.start(sandbox);
  }

  async stop(id: string): Promise<void> {
    await this.setPaused(id, false).catch(() => undefined);
    await this.deletePod(id);
  }

  async remove(id: string): Promise<void> {
    await this.deletePod(id);
    await this.core.deleteNamespacedPersistentVolumeClaim({ name: claimName(id), namespace: this.options.namespace }).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
  }

  heldIds(): undefined {
    return undefined;
  }

  async state(id: string): Promise<HeldState> {
    const { namespace } = this.options;
    const pod = await this.core.readNamespacedPod({ name: podName(id), namespace }).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
    if (pod && !pod.metadata?.deletionTimestamp && pod.status?.phase === 'Running') return 'running';
    const claim = await this.core.readNamespacedPersistentVolumeClaim({ name: claimName(id), namespace }).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
    if (!claim) return 'absent';
    return claim.metadata?.annotations?.[PAUSED_ANNOTATION] === 'true' ? 'paused' : 'stopped';
  }

  /**
   * What a running sandbox uses, read inside its container in one exec (no metrics API is assumed): its cgroup's
   * memory and CPU (v2, or v1 as runc mounts it), its processes but the Pod's pause and the reading shell, and
   * /workspace's size. A paused sandbox has no Pod to read: only what a claim would say, which is its size asked.
   */
  async usage(id: string): Promise<SandboxUsage> {
    const none = { memoryBytes: null, cpuSeconds: null, diskBytes: null, processes: null };
    // An exec a sandbox without its Pod refuses says so itself: no state read first.
    const read = await this.exec(id, { argv: ['/bin/sh', '-c', USAGE_SCRIPT], cwd: '/workspace', env: {}, timeoutMs: 5_000, outputLimitBytes: 4096 }).catch((error: unknown) => {
      if (error instanceof SandboxNotRunningError) return undefined;
      throw error;
    });
    if (!read || read.exitCode !== 0) return none;
    const [memory, cpuNanos, processes, diskKiB] = read.stdout.toString().trim().split(' ').map((field) => (/^\d+$/.test(field) ? Number(field) : null));
    return {
      memoryBytes: memory ?? null,
      cpuSeconds: cpuNanos == null ? null : cpuNanos / 1e9,
      processes: processes ?? null,
      diskBytes: diskKiB == null ? null : diskKiB * 1024,
    };
  }

  async close(): Promise<void> {
    // Sandbox Pods outlive the runtime: a restart finds them as they were.
  }

  private async setPaused(id: string, paused: boolean): Promise<void> {
    await this.core
      .patchNamespacedPersistentVolumeClaim(
        { name: claimName(id), namespace: this.options.namespace, body: { metadata: { annotations: { [PAUSED_ANNOTATION]: paused ? 'true' : 'false' } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      )
      .catch((error: unknown) => {
        if (!isNotFound(error)) throw error;
      });
  }

  private async deletePod(id: string): Promise<void> {
    const { namespace } = this.options;
    await this.core.deleteNamespacedPod({ name: podName(id), namespace, gracePeriodSeconds: 0 }).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
    // Gone before the call returns: a resume right after makes a Pod of the same name.
    for (let attempt = 0; attempt < 600; attempt++) {
      const pod = await this.core.readNamespacedPod({ name: podName(id), namespace }).catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      });
      if (!pod) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`the sandbox's Pod ${podName(id)} was still there after 60 s`);
  }
}
