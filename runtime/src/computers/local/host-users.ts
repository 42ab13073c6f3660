// The host users local sandboxes run as when the runtime is root (decision 0079): each running sandbox has one of
// its own, taken from a range, because the kernel counts some things per user and never per namespace: inotify
// instances and watches, keys (and /proc/keys shows a user's key names), and, without cgroups, processes. Two
// sandboxes sharing a user could use these up for each other or read each other's key names.
//
// A sandbox keeps the user its /workspace belongs to when that user is free, so its files need no change; only
// when another running sandbox holds that user is the workspace given to a free one (chownTree).
import { lchown, opendir } from 'node:fs/promises';
import { join } from 'node:path';

export class HostUsersExhaustedError extends Error {
  constructor(count: number) {
    super(`every host user for sandboxes already runs one (${count}, COMPUTER_LOCAL_UIDS): stop or pause a sandbox, or widen the range`);
  }
}

export class HostUsers {
  /** Sandbox name to its user, while it runs (or is being started). */
  private readonly byName = new Map<string, number>();
  private readonly taken = new Set<number>();

  constructor(
    readonly first: number,
    readonly count: number,
  ) {}

  /** A user for `name`: `preferred` (the owner of its workspace) when it is in the range and free, else the lowest free. */
  claim(name: string, preferred?: number): number {
    const held = this.byName.get(name);
    if (held !== undefined) return held;
    let uid = preferred !== undefined && this.inRange(preferred) && !this.taken.has(preferred) ? preferred : undefined;
    for (let candidate = this.first; uid === undefined && candidate < this.first + this.count; candidate++) {
      if (!this.taken.has(candidate)) uid = candidate;
    }
    if (uid === undefined) throw new HostUsersExhaustedError(this.count);
    this.byName.set(name, uid);
    this.taken.add(uid);
    return uid;
  }

  /** A sandbox started ahead becomes a sandbox: its user goes with it. */
  rename(from: string, to: string): void {
    const uid = this.byName.get(from);
    if (uid === undefined) return;
    this.byName.delete(from);
    this.byName.set(to, uid);
  }

  /** Frees `name`'s user, only if it still holds `uid` (a later start of the same name may hold another). */
  release(name: string, uid?: number): void {
    const held = this.byName.get(name);
    if (held === undefined || (uid !== undefined && held !== uid)) return;
    this.byName.delete(name);
    this.taken.delete(held);
  }

  running(): number {
    return this.taken.size;
  }

  private inRange(uid: number): boolean {
    return uid >= this.first && uid < this.first + this.count;
  }
}

/**
 * Gives everything under `dir` (itself included) to `uid`:`uid`, never following a link: a link is changed itself,
 * not what it points at. Run only while no process of the sandbox runs, so nothing can swap a directory for a link
 * under the walk.
 */
export async function chownTree(dir: string, uid: number): Promise<void> {
  await lchown(dir, uid, uid);
  for await (const entry of await opendir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(path, uid);
    else await lchown(path, uid, uid);
  }
}
