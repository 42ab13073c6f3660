// The sandbox host port (docs/decisions/0079): where a sandbox's processes run. Two adapters: local (bubblewrap on
// this machine, the default for npm start) and Kubernetes (a Pod in the project's namespace). The service above it
// keeps the rows, the states and the ownership; a host only knows sandbox ids, limits and processes. Files travel
// through exec (tar and cat inside the sandbox), so a symlink the sandbox made resolves in its own root, never in
// the host's, and both adapters share one implementation of them.
import type { Readable } from 'node:stream';

export type SandboxHostKind = 'local' | 'kubernetes';

/** What one sandbox may use. */
export interface SandboxLimits {
  /** CPU time per wall second (1 = one core). */
  cpus: number;
  memoryMiB: number;
  /** Processes and threads at once. */
  processes: number;
  /** The size of /workspace. */
  diskMiB: number;
}

export interface SandboxStart {
  id: string;
  /** The tenant whose sandbox it is (the Kubernetes adapter places it in that project's namespace). */
  tenantId: string;
  limits: SandboxLimits;
  /** The image (Kubernetes); the local host runs this machine's own programs read-only. */
  image?: string;
}

export type OutputStream = 'stdout' | 'stderr';

export interface ExecSpec {
  argv: string[];
  /** Absolute, inside the sandbox. */
  cwd: string;
  /** The whole environment the command sees, besides the sandbox's own PATH and HOME defaults. */
  env: Record<string, string>;
  stdin?: Buffer | Readable;
  timeoutMs: number;
  /** stdout and stderr are each kept up to this many bytes; more is read and dropped, and the outcome says so. */
  outputLimitBytes: number;
  /** false: the output is only handed to onOutput, never kept (a download); the limit still holds. */
  keep?: boolean;
  /**
   * Each chunk as it comes (within the limit), for a streamed exec or a download. A promise says the reader is
   * behind: the command's output is held back (the program blocks on its pipe) until it settles, so a slow reader
   * never makes the runtime hold what the program wrote.
   */
  onOutput?: (stream: OutputStream, chunk: Buffer) => void | Promise<void>;
  /** Aborting ends the command as a timeout does (its whole process tree). */
  signal?: AbortSignal;
}

export interface ExecOutcome {
  /** null when a signal ended it, or the timeout did. */
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  durationMs: number;
}

export interface SandboxUsage {
  memoryBytes: number | null;
  cpuSeconds: number | null;
  diskBytes: number | null;
  processes: number | null;
}

/** What the host holds of a sandbox right now. */
export type HeldState = 'running' | 'paused' | 'stopped' | 'absent';

/** What `GET /computers/host` shows of the host: which adapter, and how each limit is held. */
export interface HostDescription {
  kind: SandboxHostKind;
  isolation: string[];
  /** Each limit and what enforces it here (`cgroup v1`, `rlimit`, `ext4 image`, `Pod limits`...), or `not enforced`. */
  enforcement: Record<'cpu' | 'memory' | 'processes' | 'disk' | 'pause', string>;
  network: 'none';
}

export interface SandboxHost {
  readonly kind: SandboxHostKind;
  describe(): HostDescription;
  /** Makes the sandbox's processes (and its /workspace when it has none yet); a started one is left as it is. */
  start(sandbox: SandboxStart): Promise<void>;
  exec(id: string, spec: ExecSpec): Promise<ExecOutcome>;
  /** Freezes every process, memory kept (local); ends the Pod, volume kept (Kubernetes). */
  pause(id: string): Promise<void>;
  resume(sandbox: SandboxStart): Promise<void>;
  /** Ends the processes; /workspace is kept. */
  stop(id: string): Promise<void>;
  /** Ends the processes and removes /workspace. Removing what is already gone succeeds. */
  remove(id: string): Promise<void>;
  state(id: string): Promise<HeldState>;
  /** The sandboxes whose processes this host holds, where it knows (local); undefined where the cluster keeps them. */
  heldIds(): string[] | undefined;
  usage(id: string): Promise<SandboxUsage>;
  /** Ends every process this host started (their workspaces are kept). */
  close(): Promise<void>;
}

/** The host cannot run the sandbox as asked (it is paused, stopped or gone); the service words the answer. */
export class SandboxNotRunningError extends Error {
  constructor(
    readonly id: string,
    readonly held: HeldState,
  ) {
    super(`sandbox ${id} is ${held}`);
    this.name = 'SandboxNotRunningError';
  }
}

/**
 * The host has no room for another sandbox, whatever the project's own count said: on Kubernetes, the namespace's
 * quota refused its claim (docs/decisions/0081). The service answers as it does for its own count.
 */
export class SandboxCapacityError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'SandboxCapacityError';
  }
}
