// Control groups for local sandboxes (docs/decisions/0079): one group per sandbox holds its memory, CPU and process
// limits and freezes it for a pause; one group per exec, inside it, names the exec's process tree so a timeout ends
// all of it, whatever the command forked, setsid'd or double-forked. cgroup v1 (this machine: a hierarchy per
// controller) and v2 (one hierarchy, what current hosts have) take the same calls; without a writable hierarchy the
// host falls back to rlimits and signals, and says so.
import { existsSync, readFileSync } from 'node:fs';
import { access, mkdir, readdir, readFile, rename, rmdir, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { join } from 'node:path';
import type { SandboxLimits } from '../host.js';

export interface SandboxCgroups {
  readonly version: 'v1' | 'v2';
  /** Makes the sandbox's group with its limits; the exec groups go inside it. */
  create(id: string, limits: SandboxLimits): Promise<void>;
  /** The group made for `from` (a sandbox started ahead) becomes `to`'s, with `to`'s limits; its processes stay in it. */
  adopt(from: string, to: string, limits: SandboxLimits): Promise<void>;
  /** Makes an exec's own group inside the sandbox's: what names its process tree. */
  prepareExec(id: string, exec: string): Promise<void>;
  /** The `cgroup.procs` files a process writes its pid into to join the sandbox's group (or an exec's in it). */
  procsFiles(id: string, exec?: string): string[];
  freeze(id: string): Promise<void>;
  thaw(id: string): Promise<void>;
  frozen(id: string): Promise<boolean>;
  /** Every process in the group (the sandbox's, or one exec's) killed, and the exec's group removed. */
  kill(id: string, exec?: string): Promise<void>;
  /** Removes an exec's group when nothing runs in it any more (what it left in the background keeps it). */
  release(id: string, exec: string): Promise<void>;
  /** Processes in the group right now. */
  pids(id: string, exec?: string): Promise<number[]>;
  usage(id: string): Promise<{ memoryBytes: number | null; cpuSeconds: number | null; processes: number | null }>;
  /** Kills what is left and removes the groups. */
  remove(id: string): Promise<void>;
}

const PARENT = 'agentplane-sandboxes';

async function writable(path: string): Promise<boolean> {
  try {
    await access(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The cgroup driver this machine allows, or undefined (then rlimits and signals). */
export async function detectCgroups(root = '/sys/fs/cgroup'): Promise<SandboxCgroups | undefined> {
  const v2 = join(root, 'cgroup.controllers');
  if (existsSync(v2)) {
    const controllers = readFileSync(v2, 'utf8').split(/\s+/);
    if (['memory', 'pids', 'cpu'].every((name) => controllers.includes(name)) && (await writable(root))) {
      const driver = new CgroupV2(root);
      if (await driver.prepare()) return driver;
    }
  }
  const needed = ['memory', 'pids', 'freezer', 'cpu', 'cpuacct'];
  if (needed.every((name) => existsSync(join(root, name, 'cgroup.procs')))) {
    const driver = new CgroupV1(root);
    if (await driver.prepare()) return driver;
  }
  return undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const numberIn = async (path: string): Promise<number | null> => {
  try {
    const value = Number((await readFile(path, 'utf8')).trim().split(/\s+/)[0]);
    return Number.isFinite(value) ? value : null;
  } catch {
    return null;
  }
};
const pidsIn = async (path: string): Promise<number[]> => {
  try {
    return (await readFile(path, 'utf8')).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
const killAll = (pids: number[]) => {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
};
/** Removes a group once its processes are gone (a killed process leaves the group a moment after the signal). */
async function removeGroup(path: string): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      await rmdir(path);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code !== 'EBUSY') throw error;
      await sleep(20);
    }
  }
  throw new Error(`cgroup ${path} still has processes`);
}

class CgroupV1 implements SandboxCgroups {
  readonly version = 'v1' as const;
  constructor(private readonly root: string) {}

  private dir(controller: string, id: string, exec?: string): string {
    return join(this.root, controller, PARENT, id, ...(exec ? [exec] : []));
  }

  async prepare(): Promise<boolean> {
    try {
      for (const controller of ['memory', 'pids', 'freezer', 'cpu', 'cpuacct']) await mkdir(join(this.root, controller, PARENT), { recursive: true });
      return true;
    } catch {
      return false;
    }
  }

  async create(id: string, limits: SandboxLimits): Promise<void> {
    for (const controller of ['memory', 'pids', 'freezer', 'cpu', 'cpuacct']) await mkdir(this.dir(controller, id), { recursive: true });
    await this.limit(id, limits);
  }

  async adopt(from: string, to: string, limits: SandboxLimits): Promise<void> {
    for (const controller of ['memory', 'pids', 'freezer', 'cpu', 'cpuacct']) {
      // Where two controllers share a hierarchy (cpu,cpuacct), the first rename moved both.
      if (existsSync(this.dir(controller, from))) await rename(this.dir(controller, from), this.dir(controller, to));
    }
    await this.limit(to, limits);
  }

  private async limit(id: string, limits: SandboxLimits): Promise<void> {
    const memory = String(limits.memoryMiB * 1024 * 1024);
    await writeFile(join(this.dir('memory', id), 'memory.limit_in_bytes'), memory);
    // Swap counts too where the kernel accounts it (memsw), so the limit cannot be dodged by swapping out.
    const memsw = join(this.dir('memory', id), 'memory.memsw.limit_in_bytes');
    if (existsSync(memsw)) await writeFile(memsw, memory).catch(() => undefined);
    await writeFile(join(this.dir('pids', id), 'pids.max'), String(limits.processes));
    const period = 100_000;
    await writeFile(join(this.dir('cpu', id), 'cpu.cfs_period_us'), String(period));
    await writeFile(join(this.dir('cpu', id), 'cpu.cfs_quota_us'), String(Math.max(1_000, Math.round(limits.cpus * period))));
  }

  procsFiles(id: string, exec?: string): string[] {
    // The exec's own group is made in the hierarchies that find and stop its tree (pids, freezer); the limits are the
    // sandbox's, which v1 applies to its children too (memory.use_hierarchy is 1 on current kernels).
    return [
      join(this.dir('memory', id), 'cgroup.procs'),
      join(this.dir('cpu', id), 'cgroup.procs'),
      join(this.dir('cpuacct', id), 'cgroup.procs'),
      join(this.dir('pids', id, exec), 'cgroup.procs'),
      join(this.dir('freezer', id, exec), 'cgroup.procs'),
    ];
  }

  async prepareExec(id: string, exec: string): Promise<void> {
    await Promise.all([mkdir(this.dir('pids', id, exec)), mkdir(this.dir('freezer', id, exec))]);
  }

  private async setFreezer(path: string, state: 'FROZEN' | 'THAWED'): Promise<void> {
    await writeFile(join(path, 'freezer.state'), state);
    // FREEZING until every task stopped; a task in an uninterruptible sleep takes a moment.
    for (let attempt = 0; attempt < 200; attempt++) {
      if ((await readFile(join(path, 'freezer.state'), 'utf8')).trim() === state) return;
      await sleep(5);
      if (state === 'FROZEN') await writeFile(join(path, 'freezer.state'), state);
    }
    throw new Error(`the freezer of ${path} did not reach ${state}`);
  }

  freeze(id: string): Promise<void> {
    return this.setFreezer(this.dir('freezer', id), 'FROZEN');
  }

  thaw(id: string): Promise<void> {
    return this.setFreezer(this.dir('freezer', id), 'THAWED');
  }

  async frozen(id: string): Promise<boolean> {
    try {
      return (await readFile(join(this.dir('freezer', id), 'freezer.state'), 'utf8')).trim() !== 'THAWED';
    } catch {
      return false;
    }
  }

  async pids(id: string, exec?: string): Promise<number[]> {
    // `tasks` of the pids group lists threads; cgroup.procs lists processes. Children groups are read one by one.
    return pidsIn(join(this.dir('pids', id, exec), 'cgroup.procs'));
  }

  async kill(id: string, exec?: string): Promise<void> {
    const freezer = this.dir('freezer', id, exec);
    const pidsGroup = this.dir('pids', id, exec);
    if (!existsSync(pidsGroup)) return;
    // Frozen first, so nothing forks between reading the list and the signals; killed while frozen, then thawed so
    // the kills land.
    const frozenBefore = exec ? false : await this.frozen(id);
    await this.setFreezer(freezer, 'FROZEN').catch(() => undefined);
    for (let round = 0; round < 20; round++) {
      const pids = [...(await pidsIn(join(pidsGroup, 'cgroup.procs'))), ...(exec ? [] : await this.childPids(id))];
      if (pids.length === 0) break;
      killAll(pids);
      await this.setFreezer(freezer, 'THAWED').catch(() => undefined);
      await sleep(10);
    }
    if (!exec && frozenBefore) await this.setFreezer(freezer, 'THAWED').catch(() => undefined);
    if (exec) {
      await removeGroup(pidsGroup);
      await removeGroup(freezer);
    }
  }

  async release(id: string, exec: string): Promise<void> {
    for (const controller of ['pids', 'freezer']) {
      try {
        await rmdir(this.dir(controller, id, exec));
      } catch {
        // still has processes (left in the background), or gone
      }
    }
  }

  private async childPids(id: string): Promise<number[]> {
    const group = this.dir('pids', id);
    const children = (await readdir(group, { withFileTypes: true }).catch(() => [])).filter((entry) => entry.isDirectory());
    return (await Promise.all(children.map((child) => pidsIn(join(group, child.name, 'cgroup.procs'))))).flat();
  }

  async usage(id: string): Promise<{ memoryBytes: number | null; cpuSeconds: number | null; processes: number | null }> {
    const cpu = await numberIn(join(this.dir('cpuacct', id), 'cpuacct.usage'));
    return {
      memoryBytes: await numberIn(join(this.dir('memory', id), 'memory.usage_in_bytes')),
      cpuSeconds: cpu === null ? null : cpu / 1e9,
      processes: await numberIn(join(this.dir('pids', id), 'pids.current')),
    };
  }

  async remove(id: string): Promise<void> {
    await this.kill(id);
    for (const controller of ['pids', 'freezer', 'memory', 'cpu', 'cpuacct']) {
      const group = this.dir(controller, id);
      for (const child of await readdir(group, { withFileTypes: true }).catch(() => [])) if (child.isDirectory()) await removeGroup(join(group, child.name));
      await removeGroup(group);
    }
  }
}

class CgroupV2 implements SandboxCgroups {
  readonly version = 'v2' as const;
  constructor(private readonly root: string) {}

  private dir(id: string, exec?: string): string {
    // A v2 group holding processes cannot have children with controllers: the sandbox's processes live in `main`,
    // each exec in a sibling group, and the limits sit on the sandbox's group above them.
    return join(this.root, PARENT, id, exec ?? 'main');
  }

  async prepare(): Promise<boolean> {
    try {
      await mkdir(join(this.root, PARENT), { recursive: true });
      await writeFile(join(this.root, 'cgroup.subtree_control'), '+memory +pids +cpu').catch(() => undefined);
      await writeFile(join(this.root, PARENT, 'cgroup.subtree_control'), '+memory +pids +cpu');
      return true;
    } catch {
      return false;
    }
  }

  async create(id: string, limits: SandboxLimits): Promise<void> {
    await mkdir(join(this.root, PARENT, id), { recursive: true });
    await this.limit(id, limits);
    await mkdir(this.dir(id), { recursive: true });
  }

  async adopt(from: string, to: string, limits: SandboxLimits): Promise<void> {
    await rename(join(this.root, PARENT, from), join(this.root, PARENT, to));
    await this.limit(to, limits);
  }

  private async limit(id: string, limits: SandboxLimits): Promise<void> {
    const group = join(this.root, PARENT, id);
    await writeFile(join(group, 'memory.max'), String(limits.memoryMiB * 1024 * 1024));
    await writeFile(join(group, 'memory.swap.max'), '0').catch(() => undefined);
    await writeFile(join(group, 'pids.max'), String(limits.processes));
    await writeFile(join(group, 'cpu.max'), `${Math.max(1_000, Math.round(limits.cpus * 100_000))} 100000`);
  }

  async prepareExec(id: string, exec: string): Promise<void> {
    await mkdir(this.dir(id, exec), { recursive: true });
  }

  procsFiles(id: string, exec?: string): string[] {
    return [join(this.dir(id, exec), 'cgroup.procs')];
  }

  private async setFrozen(group: string, frozen: boolean): Promise<void> {
    await writeFile(join(group, 'cgroup.freeze'), frozen ? '1' : '0');
    for (let attempt = 0; attempt < 200; attempt++) {
      const events = await readFile(join(group, 'cgroup.events'), 'utf8');
      if (events.includes(`frozen ${frozen ? 1 : 0}`)) return;
      await sleep(5);
    }
    throw new Error(`${group} did not ${frozen ? 'freeze' : 'thaw'}`);
  }

  freeze(id: string): Promise<void> {
    return this.setFrozen(join(this.root, PARENT, id), true);
  }

  thaw(id: string): Promise<void> {
    return this.setFrozen(join(this.root, PARENT, id), false);
  }

  async frozen(id: string): Promise<boolean> {
    try {
      return (await readFile(join(this.root, PARENT, id, 'cgroup.freeze'), 'utf8')).trim() === '1';
    } catch {
      return false;
    }
  }

  pids(id: string, exec?: string): Promise<number[]> {
    return pidsIn(join(this.dir(id, exec), 'cgroup.procs'));
  }

  async kill(id: string, exec?: string): Promise<void> {
    const group = exec ? this.dir(id, exec) : join(this.root, PARENT, id);
    if (!existsSync(group)) return;
    await writeFile(join(group, 'cgroup.kill'), '1');
    if (exec) await removeGroup(group);
  }

  async release(id: string, exec: string): Promise<void> {
    await rmdir(this.dir(id, exec)).catch(() => undefined);
  }

  async usage(id: string): Promise<{ memoryBytes: number | null; cpuSeconds: number | null; processes: number | null }> {
    const group = join(this.root, PARENT, id);
    let cpuSeconds: number | null = null;
    try {
      const line = (await readFile(join(group, 'cpu.stat'), 'utf8')).split('\n').find((row) => row.startsWith('usage_usec '));
      if (line) cpuSeconds = Number(line.split(' ')[1]) / 1e6;
    } catch {
      // not accounted
    }
    return { memoryBytes: await numberIn(join(group, 'memory.current')), cpuSeconds, processes: await numberIn(join(group, 'pids.current')) };
  }

  async remove(id: string): Promise<void> {
    const group = join(this.root, PARENT, id);
    if (!existsSync(group)) return;
    await this.kill(id);
    for (const child of await readdir(group, { withFileTypes: true })) if (child.isDirectory()) await removeGroup(join(group, child.name));
    await removeGroup(group);
  }
}
