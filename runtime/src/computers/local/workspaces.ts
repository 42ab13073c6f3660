// A local sandbox's /workspace (docs/decisions/0079). Where the runtime may mount (root, with mkfs.ext4), each is an
// ext4 image of the sandbox's disk size, mounted nosuid and nodev: the disk limit is the file system's size, held by
// the kernel, and it outlives the processes and a restart of the runtime (mounted again when the sandbox starts).
// Elsewhere it is a plain directory and the disk limit is only a per-file one (RLIMIT_FSIZE); the host says so.
//
// A sandbox started by a root runtime runs as another host user, which bubblewrap must be able to reach its
// /workspace as: the data dir may sit under a home only root can enter, so there each workspace is mounted (the
// image, or the directory bound) under a directory in /run that any user may pass through but not list.
import { existsSync } from 'node:fs';
import { createHash, randomUUID } from 'node:crypto';
import { chmod, chown, mkdir, readdir, rename, rm, rmdir, stat, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Spawner } from './spawner.js';

/** Empty workspaces kept ready per size. */
const READY_IMAGES = 2;

export interface Workspaces {
  readonly kind: 'ext4 image' | 'directory';
  /** The host directory bound at /workspace (reachable by the sandbox's host user), made (and mounted) when missing. */
  ensure(id: string, diskMiB: number): Promise<string>;
  /** Whether the sandbox has a workspace (its processes may be gone). */
  exists(id: string): boolean;
  /** Where the sandbox's own files (its passwd, group, hosts) are kept: root's alone. */
  home(id: string): string;
  /** Bytes used, or null when unknown. */
  used(id: string): Promise<number | null>;
  remove(id: string): Promise<void>;
  /** Unmounts it while its sandbox is stopped (kept; mounted again at the next start). */
  release(id: string): Promise<void>;
  /** Removes the mount directory once no workspace is mounted in it (they are mounted again at the next start). */
  close(): Promise<void>;
  /**
   * The workspace made for `from` (a sandbox started ahead, decision 0079) becomes `to`'s: its files and its mount,
   * moved, while the sandbox holding it runs on. Only where workspaces are images; undefined elsewhere.
   */
  adopt?(from: string, to: string): Promise<void>;
  /** The ids of workspaces whose names start with `prefix` (sandboxes started ahead by an earlier life). */
  named(prefix: string): Promise<string[]>;
}

/** Runs a program to its end (through the host's spawner); its stdout. */
type Run = (command: string, args: string[]) => Promise<string>;

/** The owner the sandbox's user is on the host: what /workspace belongs to. */
export interface HostOwner {
  uid: number;
  gid: number;
}

async function mounted(dir: string): Promise<boolean> {
  try {
    const [inner, outer] = await Promise.all([stat(dir), stat(dirname(dir))]);
    return inner.dev !== outer.dev;
  } catch {
    return false;
  }
}

/** Where a root runtime mounts the workspaces of the sandboxes kept under `root`: one directory per data dir. */
export function mountRootFor(root: string): string {
  return join('/run/agentplane-sandboxes', createHash('sha256').update(root).digest('hex').slice(0, 12));
}

export async function detectWorkspaces(root: string, owner: HostOwner, spawner: Spawner): Promise<Workspaces> {
  const run = (command: string, args: string[]) => spawner.run(command, args);
  await mkdir(root, { recursive: true, mode: 0o700 });
  const asRoot = process.getuid?.() === 0;
  const mountRoot = asRoot ? mountRootFor(root) : undefined;
  if (mountRoot) {
    await mkdir(mountRoot, { recursive: true, mode: 0o711 });
    await chmod(mountRoot, 0o711);
    await chmod(dirname(mountRoot), 0o711);
  }
  // Nothing is mounted until a sandbox is made: a start of the runtime costs no loop device.
  if (mountRoot && existsSync('/usr/sbin/mkfs.ext4') && existsSync('/dev/loop-control')) {
    // Copies an earlier life made ahead are not trusted to be whole.
    await rm(join(root, '.ready'), { recursive: true, force: true });
    return new ImageWorkspaces(root, mountRoot, owner, run);
  }
  return new DirectoryWorkspaces(root, mountRoot, owner, run);
}

class ImageWorkspaces implements Workspaces {
  readonly kind = 'ext4 image' as const;
  /** Empty file systems of each size made once, copied (sparse) for each new sandbox: a copy is ~4 ms, mkfs ~25. */
  private readonly templates = new Map<number, Promise<string>>();

  constructor(
    private readonly root: string,
    private readonly mountRoot: string,
    private readonly owner: HostOwner,
    private readonly run: Run,
  ) {}

  private template(diskMiB: number): Promise<string> {
    let made = this.templates.get(diskMiB);
    if (!made) {
      made = (async () => {
        const path = join(this.root, '.templates', `${diskMiB}MiB.ext4`);
        if (!existsSync(path)) {
          await mkdir(dirname(path), { recursive: true });
          const partial = `${path}.partial`;
          await this.run('truncate', ['-s', `${diskMiB}M`, partial]);
          // No reserved blocks (the sandbox gets all of it), a small journal, the root owned by the sandbox's user.
          await this.run('mkfs.ext4', ['-q', '-F', '-m', '0', '-J', 'size=4', '-E', `root_owner=${this.owner.uid}:${this.owner.gid}`, partial]);
          await rename(partial, path);
        }
        return path;
      })();
      made.catch(() => this.templates.delete(diskMiB));
      this.templates.set(diskMiB, made);
    }
    return made;
  }

  /** Copies of the empty file system made ahead, per size: a new sandbox takes one (a rename) instead of copying. */
  private readonly ready = new Map<number, string[]>();
  private readonly refills = new Map<number, Promise<void>>();

  private refill(diskMiB: number): void {
    if (this.refills.has(diskMiB)) return;
    const pool = this.ready.get(diskMiB) ?? [];
    this.ready.set(diskMiB, pool);
    const filling = (async () => {
      await mkdir(join(this.root, '.ready'), { recursive: true });
      while (pool.length < READY_IMAGES) {
        const path = join(this.root, '.ready', `${diskMiB}MiB-${randomUUID()}.ext4`);
        await this.run('cp', ['--sparse=always', await this.template(diskMiB), path]);
        pool.push(path);
      }
    })()
      .catch(() => undefined)
      .finally(() => this.refills.delete(diskMiB));
    this.refills.set(diskMiB, filling);
  }

  async ensure(id: string, diskMiB: number): Promise<string> {
    const home = join(this.root, id);
    const image = join(home, 'workspace.ext4');
    const dir = join(this.mountRoot, id);
    await mkdir(home, { recursive: true, mode: 0o700 });
    await mkdir(dir, { recursive: true, mode: 0o755 });
    if (!existsSync(image)) {
      const taken = this.ready.get(diskMiB)?.shift();
      if (taken) await rename(taken, image);
      else {
        const partial = `${image}.partial`;
        await this.run('cp', ['--sparse=always', await this.template(diskMiB), partial]);
        await rename(partial, image);
      }
      this.refill(diskMiB);
    }
    if (!(await mounted(dir))) await this.run('mount', ['-o', 'loop,nosuid,nodev', image, dir]);
    // lost+found is root's, in the sandbox's way: nothing in it matters to a workspace.
    await rm(join(dir, 'lost+found'), { recursive: true, force: true });
    return dir;
  }

  async used(id: string): Promise<number | null> {
    const dir = join(this.mountRoot, id);
    if (!(await mounted(dir))) return null;
    const fs = await statfs(dir);
    return (fs.blocks - fs.bfree) * fs.bsize;
  }

  async remove(id: string): Promise<void> {
    const dir = join(this.mountRoot, id);
    // Lazily: a process still holding a file there (being killed) would keep a plain umount busy.
    if (await mounted(dir)) await this.run('umount', ['-l', dir]);
    await rm(dir, { recursive: true, force: true });
    await rm(join(this.root, id), { recursive: true, force: true });
  }

  exists(id: string): boolean {
    return existsSync(join(this.root, id, 'workspace.ext4'));
  }

  async release(id: string): Promise<void> {
    const dir = join(this.mountRoot, id);
    if (await mounted(dir)) await this.run('umount', ['-l', dir]);
    await rmdir(dir).catch(() => undefined);
  }

  async adopt(from: string, to: string): Promise<void> {
    const target = join(this.mountRoot, to);
    await mkdir(target, { mode: 0o755 });
    // The mount moves on the host side; the sandbox's own /workspace (a bind in its mount namespace) is untouched.
    await this.run('mount', ['--move', join(this.mountRoot, from), target]);
    await rmdir(join(this.mountRoot, from)).catch(() => undefined);
    await rename(join(this.root, from), join(this.root, to));
  }

  async named(prefix: string): Promise<string[]> {
    return (await readdir(this.root).catch(() => [] as string[])).filter((name) => name.startsWith(prefix));
  }

  async close(): Promise<void> {
    await Promise.all(this.refills.values());
    await rm(join(this.root, '.ready'), { recursive: true, force: true });
    this.ready.clear();
    await rmdir(this.mountRoot).catch(() => undefined);
  }

  home(id: string): string {
    return join(this.root, id);
  }
}

class DirectoryWorkspaces implements Workspaces {
  readonly kind = 'directory' as const;

  constructor(
    private readonly root: string,
    private readonly mountRoot: string | undefined,
    private readonly owner: HostOwner,
    private readonly run: Run,
  ) {}

  async ensure(id: string): Promise<string> {
    const dir = join(this.root, id, 'workspace');
    if (!existsSync(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o755 });
      if (this.mountRoot) await chown(dir, this.owner.uid, this.owner.gid);
    }
    if (!this.mountRoot) return dir;
    const bound = join(this.mountRoot, id);
    await mkdir(bound, { recursive: true, mode: 0o755 });
    if (!(await mounted(bound))) await this.run('mount', ['--bind', dir, bound]);
    return bound;
  }

  exists(id: string): boolean {
    return existsSync(join(this.root, id, 'workspace'));
  }

  async release(id: string): Promise<void> {
    if (!this.mountRoot) return;
    const bound = join(this.mountRoot, id);
    if (await mounted(bound)) await this.run('umount', ['-l', bound]);
    await rmdir(bound).catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.mountRoot) await rmdir(this.mountRoot).catch(() => undefined);
  }

  async named(prefix: string): Promise<string[]> {
    return (await readdir(this.root).catch(() => [] as string[])).filter((name) => name.startsWith(prefix));
  }

  home(id: string): string {
    return join(this.root, id);
  }

  async used(id: string): Promise<number | null> {
    try {
      const stdout = await this.run('du', ['-sb', join(this.root, id, 'workspace')]);
      return Number(stdout.split('\t')[0]);
    } catch {
      return null;
    }
  }

  async remove(id: string): Promise<void> {
    if (this.mountRoot) {
      const bound = join(this.mountRoot, id);
      if (await mounted(bound)) await this.run('umount', ['-l', bound]);
      await rm(bound, { recursive: true, force: true });
    }
    await rm(join(this.root, id), { recursive: true, force: true });
  }
}
