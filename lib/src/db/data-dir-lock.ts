// PGlite is one process's database: a second process opening the same directory would corrupt it. A lock file
// beside the directory names its holder by pid and process start time, so a lock left by a process that is
// gone is recognised even when its pid has been reused (a container restarts with the same pid every time).
import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';

export class DataDirLockedError extends Error {
  constructor(dir: string, pid: number) {
    super(`the database in ${dir} is in use by process ${pid}: stop it first, or use another AGENTPLANE_DATA_DIR`);
    this.name = 'DataDirLockedError';
  }
}

/** Locks this process holds, so a second open from the same process is refused too. */
const heldHere = new Set<string>();

/** The kernel's start time of a process (Linux), or null where /proc does not say. */
function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime) counted after the command name, which is in parentheses and may hold spaces.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether the holder recorded in a lock file is still the process that wrote it. */
function holderAlive(content: string): { alive: boolean; pid: number } {
  const [pidText, started] = content.trim().split(':');
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return { alive: false, pid };
  if (pid === process.pid) return { alive: false, pid }; // not held here (checked before), so left by a former us
  if (!running(pid)) return { alive: false, pid };
  const now = startTimeOf(pid);
  return { alive: now === null || started === undefined || now === started, pid };
}

/** Takes the lock for `dir`; returns its release. Throws DataDirLockedError while a live process holds it. */
export function lockDataDir(dir: string): () => void {
  const path = `${dir}.lock`;
  if (heldHere.has(path)) throw new DataDirLockedError(dir, process.pid);
  const mine = `${process.pid}:${startTimeOf(process.pid) ?? ''}\n`;
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(temp, mine, { mode: 0o600 });
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        linkSync(temp, path); // atomic, and the file is complete the moment it appears
        heldHere.add(path);
        return () => {
          if (!heldHere.delete(path)) return;
          try {
            unlinkSync(path);
          } catch {
            // already gone: nothing to release
          }
        };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      let content: string;
      try {
        content = readFileSync(path, 'utf8');
      } catch {
        continue; // removed meanwhile: try again
      }
      const holder = holderAlive(content);
      if (holder.alive) throw new DataDirLockedError(dir, holder.pid);
      // Stale. Move it aside atomically: of several starters only one moves it. If what was moved is no longer
      // the stale lock read above (another starter took over in between), put it back.
      const aside = `${path}.${randomBytes(6).toString('hex')}.stale`;
      try {
        renameSync(path, aside);
      } catch {
        continue;
      }
      if (readFileSync(aside, 'utf8') !== content) {
        try {
          linkSync(aside, path);
        } catch {
          // someone else holds it now; the next attempt reads theirs
        }
      }
      unlinkSync(aside);
    }
    throw new Error(`could not lock ${dir}: too many concurrent openers`);
  } finally {
    unlinkSync(temp);
  }
}
