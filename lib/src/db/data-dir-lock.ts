// PGlite is one process's database: a second process opening the same directory would corrupt it. A lock file
// beside the directory, created exclusively and holding the owner's pid, refuses the second opener; a lock left
// by a process that no longer runs is taken over.
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';

export class DataDirLockedError extends Error {
  constructor(dir: string, pid: number) {
    super(`the database in ${dir} is in use by process ${pid}: stop it first, or use another AGENTPLANE_DATA_DIR`);
    this.name = 'DataDirLockedError';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock for `dir`; returns its release. Throws DataDirLockedError while a live process holds it. */
export function lockDataDir(dir: string): () => void {
  const path = `${dir}.lock`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx', mode: 0o600 });
      let released = false;
      return () => {
        if (released) return;
        released = true;
        try {
          unlinkSync(path);
        } catch {
          // already gone: nothing to release
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) throw new DataDirLockedError(dir, holder);
      unlinkSync(path); // stale: its process is gone
    }
  }
  throw new Error(`could not lock ${dir}`);
}
