// The local sandbox host (docs/decisions/0079): bubblewrap process trees on this machine, limited by cgroups where
// the runtime may write them (rlimits and signals where it may not), each /workspace an ext4 image where it may
// mount (a directory where not). The default for npm start. A sandbox's processes end with the runtime
// (--die-with-parent); its /workspace stays, and starting it again mounts it again.
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger } from '@agentplane/lib/logging';
import {
  SandboxNotRunningError,
  type ExecOutcome,
  type ExecSpec,
  type HeldState,
  type HostDescription,
  type SandboxHost,
  type SandboxStart,
  type SandboxUsage,
} from '../host.js';
import { baseEnvironment, execArgs, FD, HOST_ETC, LAUNCHER, launcherEnvironment, sandboxArgs, sandboxFiles, type SandboxLayout } from './bwrap.js';
import { Spawner, type SpawnedProgram } from './spawner.js';
import { Capture } from '../capture.js';
import { detectCgroups, type SandboxCgroups } from './cgroups.js';
import { detectWorkspaces, type Workspaces } from './workspaces.js';
import { chownTree, HostUsers } from './host-users.js';

export interface LocalHostOptions {
  /** Where sandboxes' workspaces live (inside the data dir). */
  root: string;
  logger: Logger;
  /** The first host user sandboxes run as when the runtime is root (one each while it runs); never root. */
  hostUid?: number;
  /** How many host users from `hostUid` on: at most that many sandboxes run at once. */
  hostUidCount?: number;
  /** /tmp inside each sandbox (memory, held apart from the memory limit). */
  tmpMiB?: number;
  /** Set by tests to run without cgroups (the rlimit path) on a machine that has them. */
  cgroups?: false;
  /**
   * Sandboxes kept started ahead, per disk size asked for before: a new sandbox takes one (its group and workspace
   * renamed, its limits set) instead of waiting for bubblewrap. Only with cgroups and image workspaces. Default 0.
   */
  pool?: number;
}

/** The names sandboxes started ahead go by until one is taken (sandbox ids are UUIDs: never these). */
const POOL_PREFIX = 'pool-';
/** Disk sizes sandboxes are started ahead for at most (the latest asked for): each holds a loop device and a mount. */
const POOLED_SIZES = 4;

interface Held {
  /** The sandbox it is: a pooled one's name until it is taken, then the sandbox's id. */
  id: string;
  /** The launcher's PID, which became bubblewrap's (the sandbox's outermost process). */
  treePid: number;
  /** bubblewrap's PID 1 in the sandbox, as the host sees it: what each exec joins. */
  initPid: number;
  pidNamespace: number;
  /** The host user its processes run as (the runtime's own when it is not root). */
  uid: number;
  paused: boolean;
  exited: Promise<void>;
}

const DEFAULT_HOST_UID = 61000;
/** 61000-61183: below systemd's dynamic users (61184-65519), which a sandbox must never share. */
const DEFAULT_HOST_UID_COUNT = 184;

export class LocalSandboxHost implements SandboxHost {
  readonly kind = 'local' as const;
  private readonly held = new Map<string, Held>();
  private readonly starting = new Map<string, Promise<void>>();
  /** Sandboxes started ahead, per disk size, and the fills under way. */
  private readonly pooled = new Map<number, Held[]>();
  private readonly filling = new Map<number, Promise<void>>();
  private closing = false;
  private readonly layout: SandboxLayout;
  private readonly asRoot = process.getuid?.() === 0;
  /** Where the runtime is root: the range of host users sandboxes take one each of. */
  private readonly users: HostUsers | undefined;

  private constructor(
    private readonly options: LocalHostOptions,
    private readonly cgroups: SandboxCgroups | undefined,
    private readonly workspaces: Workspaces,
    private readonly spawner: Spawner,
  ) {
    this.users = this.asRoot ? new HostUsers(options.hostUid ?? DEFAULT_HOST_UID, options.hostUidCount ?? DEFAULT_HOST_UID_COUNT) : undefined;
    this.layout = {
      hostname: 'sandbox',
      tmpMiB: options.tmpMiB ?? 256,
      etc: HOST_ETC.filter((entry) => existsSync(join('/etc', entry))),
      usrLinks: ['bin', 'lib', 'lib64', 'sbin', 'lib32', 'libx32'].flatMap((name) => {
        try {
          const path = join('/', name);
          return lstatSync(path).isSymbolicLink() ? [{ name, target: readlinkSync(path) }] : [];
        } catch {
          return [];
        }
      }),
    };
  }

  /** Finds what this machine offers (bubblewrap is required; cgroups and loop mounts are used when allowed). */
  static async create(options: LocalHostOptions): Promise<LocalSandboxHost> {
    if (!existsSync('/usr/bin/bwrap')) throw new Error('the local sandbox host needs bubblewrap (/usr/bin/bwrap): apt-get install bubblewrap');
    if (!existsSync('/usr/bin/setpriv')) throw new Error('the local sandbox host needs setpriv (/usr/bin/setpriv): apt-get install util-linux');
    const asRoot = process.getuid?.() === 0;
    const hostUid = asRoot ? (options.hostUid ?? DEFAULT_HOST_UID) : (process.getuid?.() ?? 0);
    if (asRoot && hostUid === 0) throw new Error('a sandbox never runs as root on the host: choose another host uid');
    if (asRoot && hostUid + (options.hostUidCount ?? DEFAULT_HOST_UID_COUNT) - 1 > 4_294_967_294) throw new Error('the host users for sandboxes end past the largest uid (4294967294): lower COMPUTER_LOCAL_UID or COMPUTER_LOCAL_UIDS');
    const cgroups = options.cgroups === false || !asRoot ? undefined : await detectCgroups();
    // Every program the host runs is started by a small process of its own: a fork from the runtime costs what it holds.
    const spawner = new Spawner();
    const workspaces = await detectWorkspaces(options.root, { uid: hostUid, gid: hostUid }, spawner);
    // Sandboxes an earlier life started ahead died with it: their groups and workspaces go.
    for (const slot of await workspaces.named(POOL_PREFIX)) {
      await cgroups?.remove(slot).catch(() => undefined);
      await workspaces.remove(slot).catch(() => undefined);
    }
    return new LocalSandboxHost(options, cgroups, workspaces, spawner);
  }

  describe(): HostDescription {
    const cgroup = this.cgroups ? `cgroup ${this.cgroups.version}` : undefined;
    return {
      kind: 'local',
      isolation: ['bubblewrap', 'user, mount, PID, IPC, UTS, network and cgroup namespaces', 'host programs read-only', 'no new privileges'],
      enforcement: {
        cpu: cgroup ?? 'not enforced (no writable cgroup hierarchy)',
        memory: cgroup ?? 'rlimit (address space)',
        processes: cgroup ?? (this.users ? 'rlimit (per host user: one per running sandbox)' : 'rlimit (per host user, shared by all sandboxes)'),
        disk: this.workspaces.kind === 'ext4 image' ? 'ext4 image of the sandbox\'s size' : 'rlimit (largest file)',
        pause: cgroup ? `${cgroup} freezer` : 'SIGSTOP of every process',
      },
      network: 'none',
    };
  }

  async start(sandbox: SandboxStart): Promise<void> {
    if (this.held.has(sandbox.id)) return;
    let starting = this.starting.get(sandbox.id);
    if (!starting) {
      starting = this.launch(sandbox).finally(() => this.starting.delete(sandbox.id));
      this.starting.set(sandbox.id, starting);
    }
    await starting;
  }

  private async launch(sandbox: SandboxStart): Promise<void> {
    const ahead = this.workspaces.exists(sandbox.id) ? undefined : this.pooled.get(sandbox.limits.diskMiB)?.shift();
    if (ahead) {
      try {
        await this.adopt(ahead, sandbox);
        this.fillPool(sandbox.limits);
        return;
      } catch (error) {
        this.options.logger.warn({ err: error, sandbox_id: sandbox.id }, 'a sandbox started ahead could not be taken; starting one');
        await this.discard(ahead, sandbox.id);
      }
    }
    this.held.set(sandbox.id, await this.startTree(sandbox.id, sandbox.limits));
    this.fillPool(sandbox.limits);
  }

  /** A sandbox started ahead becomes this one: its group and workspace take the sandbox's id, and its limits. */
  private async adopt(ahead: Held, sandbox: SandboxStart): Promise<void> {
    await this.cgroups!.adopt(ahead.id, sandbox.id, sandbox.limits);
    await this.workspaces.adopt!(ahead.id, sandbox.id);
    this.users?.rename(ahead.id, sandbox.id);
    ahead.id = sandbox.id;
    this.held.set(sandbox.id, ahead);
  }

  /** Ends a sandbox started ahead that could not be taken, under either name, leaving nothing. */
  private async discard(ahead: Held, id: string): Promise<void> {
    signal(ahead.treePid, 'SIGKILL');
    await ahead.exited;
    for (const name of new Set([ahead.id, id])) {
      await this.cgroups?.remove(name).catch(() => undefined);
      await this.workspaces.remove(name).catch(() => undefined);
    }
  }

  /** Starts sandboxes ahead for this disk size, up to the pool's size, one after another, in the background. */
  private fillPool(limits: SandboxStart['limits']): void {
    const size = this.options.pool ?? 0;
    if (size === 0 || !this.cgroups || !this.workspaces.adopt || this.closing || this.filling.has(limits.diskMiB)) return;
    const pool = this.pooled.get(limits.diskMiB) ?? [];
    // The latest size asked for goes last; past the bound, the size asked for longest ago is no longer kept ahead.
    this.pooled.delete(limits.diskMiB);
    this.pooled.set(limits.diskMiB, pool);
    for (const [size, stale] of this.pooled) {
      if (this.pooled.size <= POOLED_SIZES) break;
      if (this.filling.has(size)) continue;
      this.pooled.delete(size);
      for (const held of stale.splice(0)) void this.discard(held, held.id);
    }
    const fill = (async () => {
      while (pool.length < size && !this.closing) {
        const held = await this.startTree(`${POOL_PREFIX}${randomBytes(6).toString('hex')}`, limits);
        if (this.closing) {
          await this.discard(held, held.id);
          return;
        }
        pool.push(held);
        // One that ends while it waits is no longer offered.
        void held.exited.then(() => {
          const at = pool.indexOf(held);
          if (at >= 0) pool.splice(at, 1);
        });
      }
    })()
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'could not start a sandbox ahead'))
      .finally(() => this.filling.delete(limits.diskMiB));
    this.filling.set(limits.diskMiB, fill);
  }

  /** Starts a sandbox's process tree (and mounts its workspace): what it holds once its one program runs. */
  private async startTree(id: string, limits: SandboxStart['limits']): Promise<Held> {
    const workspace = await this.workspaces.ensure(id, limits.diskMiB);
    const uid = await this.userFor(id, workspace);
    try {
      return await this.startTreeAs(id, limits, workspace, uid);
    } catch (error) {
      this.users?.release(id, uid);
      throw error;
    }
  }

  /**
   * The host user sandbox `id` runs as: the one its workspace belongs to when that one is free, else a free one,
   * given the workspace first (nothing of the sandbox runs yet). The runtime's own user when it is not root.
   */
  private async userFor(id: string, workspace: string): Promise<number> {
    if (!this.users) return process.getuid?.() ?? 0;
    const owner = (await stat(workspace)).uid;
    const uid = this.users.claim(id, owner);
    if (uid !== owner) {
      try {
        await chownTree(workspace, uid);
      } catch (error) {
        this.users.release(id, uid);
        throw error;
      }
    }
    return uid;
  }

  private async startTreeAs(id: string, limits: SandboxStart['limits'], workspace: string, uid: number): Promise<Held> {
    const home = this.workspaces.home(id);
    const files = sandboxFiles(this.layout.hostname);
    await mkdir(join(home, 'etc'), { recursive: true, mode: 0o700 });
    await Promise.all(Object.entries(files).map(([name, text]) => writeFile(join(home, 'etc', name), text)));
    if (this.cgroups) {
      // A group left by an earlier life of the runtime (its processes died with it) is made afresh.
      await this.cgroups.remove(id).catch(() => undefined);
      await this.cgroups.create(id, limits);
    }
    const command = ['/usr/bin/bwrap', ...sandboxArgs(this.layout, workspace)];
    // Without cgroups the kernel's per-process limits are what there is (decision 0079 says what they hold).
    const wrapped = this.cgroups
      ? command
      : ['/usr/bin/prlimit', `--as=${limits.memoryMiB * 1024 * 1024}`, `--nproc=${limits.processes}`, `--fsize=${limits.diskMiB * 1024 * 1024}`, '--', ...command];
    let stderr = '';
    let report = '';
    let reported: (info: { 'child-pid': number; 'pid-namespace': number }) => void;
    const info = new Promise<{ 'child-pid': number; 'pid-namespace': number }>((resolve) => (reported = resolve));
    const tree = this.spawner.spawn('/bin/sh', ['-c', LAUNCHER, 'launcher', ...wrapped], {
      env: {
        ...baseEnvironment(),
        AP_HOME: home,
        AP_PROCS: this.cgroups ? this.cgroups.procsFiles(id).join('\n') : '',
        ...(this.users ? { AP_AS: String(uid) } : {}),
      },
      // fds 6 to 8 are the launcher's to open; 9 is bubblewrap's report of the sandbox's PID 1.
      extraPipes: [FD.info],
      onData: (stream: string, chunk: Buffer) => {
        if (stream === 'stderr' && stderr.length < 4096) stderr += chunk.toString();
        if (stream === `fd${FD.info}`) {
          report += chunk.toString();
          try {
            reported(JSON.parse(report));
          } catch {
            // not whole yet
          }
        }
      },
    });
    tree.end();
    const exited = tree.exited.then(
      () => undefined,
      () => undefined,
    );
    const early = exited.then(() => {
      throw new Error(`the sandbox did not start (bubblewrap ended): ${stderr.trim()}`);
    });
    const started = await Promise.race([info, early]);
    const treePid = await tree.pid;
    // bubblewrap reports its PID 1 before it has finished the sandbox (user and group maps, mounts): the sandbox is
    // ready once its one program runs.
    await programRunning(started['child-pid'], exited);
    const held: Held = { id, treePid, initPid: started['child-pid'], pidNamespace: started['pid-namespace'], uid, paused: false, exited };
    void exited.then(() => {
      // Its processes are gone: its user is free for another (the name read now: a sandbox started ahead is renamed).
      this.users?.release(held.id, uid);
      if (this.held.get(held.id) === held) {
        this.held.delete(held.id);
        if (stderr.trim()) this.options.logger.warn({ sandbox_id: held.id, stderr: stderr.trim() }, 'a sandbox ended on its own');
      }
    });
    return held;
  }

  private heldRunning(id: string): Held {
    const held = this.held.get(id);
    if (!held) throw new SandboxNotRunningError(id, 'stopped');
    if (held.paused) throw new SandboxNotRunningError(id, 'paused');
    return held;
  }

  async exec(id: string, spec: ExecSpec): Promise<ExecOutcome> {
    const held = this.heldRunning(id);
    const started = performance.now();
    const group = `exec-${randomBytes(6).toString('hex')}`;
    if (this.cgroups) await this.cgroups.prepareExec(id, group);
    const keep = spec.keep !== false;
    const output = { stdout: new Capture(spec.outputLimitBytes, keep), stderr: new Capture(spec.outputLimitBytes, keep) };
    let waiting = 0;
    const child = this.spawner.spawn('/bin/sh', ['-c', LAUNCHER, 'launcher', '/usr/bin/nsenter', ...execArgs(held.initPid, spec.cwd, spec.argv, { ...baseEnvironment(), ...spec.env })], {
      env: launcherEnvironment(this.cgroups ? this.cgroups.procsFiles(id, group) : []),
      outputLimit: spec.outputLimitBytes,
      // Its own process group: without cgroups, what a timeout kills.
      detached: !this.cgroups,
      onData: (stream: string, chunk: Buffer) => {
        if (stream !== 'stdout' && stream !== 'stderr') return;
        const kept = output[stream].add(chunk);
        const behind = kept && spec.onOutput ? spec.onOutput(stream, kept) : undefined;
        if (behind) {
          // Held while any chunk's reader is behind; chunks already on their way still arrive meanwhile.
          if (waiting++ === 0) child.flow(true);
          void behind.finally(() => {
            if (--waiting === 0) child.flow(false);
          });
        }
      },
    });
    feed(child, spec.stdin);
    let timedOut = false;
    const killTree = async () => {
      if (this.cgroups) await this.cgroups.kill(id, group).catch((error: unknown) => this.options.logger.warn({ err: error, sandbox_id: id }, 'could not end an exec\'s processes'));
      else {
        const pid = await child.pid.catch(() => undefined);
        if (pid) signal(-pid, 'SIGKILL');
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      void killTree();
    }, spec.timeoutMs);
    const onAbort = () => {
      timedOut = true;
      void killTree();
    };
    spec.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const { code, signal: endedBy } = await child.exited;
      // What the command wrote before it ended is read; a process it left running in the background may hold the
      // pipes open for good, so the wait is short.
      await Promise.race([child.closed, new Promise((resolve) => setTimeout(resolve, 100))]);
      child.release();
      if (timedOut) await killTree();
      // The exec's group goes once its processes have; one it left running in the background keeps it until the
      // sandbox stops.
      else if (this.cgroups) void this.cgroups.release(id, group).catch(() => undefined);
      return {
        exitCode: timedOut ? null : code,
        signal: timedOut ? 'SIGKILL' : endedBy,
        timedOut,
        stdout: output.stdout.bytes(),
        stderr: output.stderr.bytes(),
        stdoutTruncated: output.stdout.truncated,
        stderrTruncated: output.stderr.truncated,
        durationMs: performance.now() - started,
      };
    } finally {
      clearTimeout(timer);
      spec.signal?.removeEventListener('abort', onAbort);
    }
  }

  async pause(id: string): Promise<void> {
    const held = this.held.get(id);
    if (!held) throw new SandboxNotRunningError(id, 'stopped');
    if (held.paused) return;
    if (this.cgroups) await this.cgroups.freeze(id);
    else for (const pid of await this.processesOf(held)) signal(pid, 'SIGSTOP');
    held.paused = true;
  }

  async resume(sandbox: SandboxStart): Promise<void> {
    const held = this.held.get(sandbox.id);
    if (!held) return this.start(sandbox);
    if (!held.paused) return;
    if (this.cgroups) await this.cgroups.thaw(sandbox.id);
    else for (const pid of await this.processesOf(held)) signal(pid, 'SIGCONT');
    held.paused = false;
  }

  async stop(id: string): Promise<void> {
    await this.starting.get(id)?.catch(() => undefined);
    const held = this.held.get(id);
    this.held.delete(id);
    if (this.cgroups) await this.cgroups.remove(id);
    if (held) {
      // PID 1 of the sandbox ends, and the kernel ends everything else in its PID namespace with it.
      if (!this.cgroups) for (const pid of await this.processesOf(held)) signal(pid, 'SIGKILL');
      signal(held.treePid, 'SIGKILL');
      await held.exited;
    }
    await this.workspaces.release(id);
  }

  async remove(id: string): Promise<void> {
    await this.stop(id);
    await this.workspaces.remove(id);
  }

  /** How many sandboxes are started ahead and ready to be taken, of every size. */
  startedAhead(): number {
    return [...this.pooled.values()].reduce((sum, pool) => sum + pool.length, 0);
  }

  heldIds(): string[] {
    return [...this.held.keys()];
  }

  async state(id: string): Promise<HeldState> {
    const held = this.held.get(id);
    if (held) return held.paused ? 'paused' : 'running';
    return this.workspaces.exists(id) ? 'stopped' : 'absent';
  }

  async usage(id: string): Promise<SandboxUsage> {
    const diskBytes = await this.workspaces.used(id);
    if (this.cgroups && this.held.has(id)) return { ...(await this.cgroups.usage(id)), diskBytes };
    const held = this.held.get(id);
    return { memoryBytes: null, cpuSeconds: null, processes: held ? (await this.processesOf(held)).length : null, diskBytes };
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.filling.values());
    const ahead = [...this.pooled.values()].flat();
    this.pooled.clear();
    // Those started ahead are nobody's: they go whole, workspace included.
    await Promise.all(ahead.map((held) => this.discard(held, held.id)));
    await Promise.all([...this.held.keys()].map((id) => this.stop(id).catch(() => undefined)));
    await this.workspaces.close();
    this.spawner.close();
  }

  /** Every process in the sandbox's PID namespace, as the host numbers them (the path without cgroups). */
  private async processesOf(held: Held): Promise<number[]> {
    const found: number[] = [];
    for (const entry of await readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const link = await readlink(`/proc/${entry}/ns/pid`);
        if (link === `pid:[${held.pidNamespace}]`) found.push(Number(entry));
      } catch {
        // ended, or not ours to read
      }
    }
    return found;
  }
}

/** Resolves once the process `initPid` has a child (the sandbox's program); throws when the tree ends first. */
async function programRunning(initPid: number, exited: Promise<void>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  for (let attempt = 0; attempt < 5_000; attempt++) {
    try {
      if ((await readFile(`/proc/${initPid}/task/${initPid}/children`, 'utf8')).trim() !== '') return;
    } catch {
      // not there yet, or gone (below)
    }
    if (gone) throw new Error('the sandbox ended while it was being made');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  throw new Error('the sandbox did not start its program within 5 s');
}

function signal(pid: number | undefined, name: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(pid, name);
  } catch {
    // ended already
  }
}

function feed(program: SpawnedProgram, input: Buffer | Readable | undefined): void {
  if (input === undefined) program.end();
  else if (Buffer.isBuffer(input)) {
    if (input.length > 0) program.write(input);
    program.end();
  } else {
    input.on('data', (chunk: Buffer) => program.write(chunk));
    input.once('end', () => program.end());
    input.once('error', () => program.end());
  }
}
