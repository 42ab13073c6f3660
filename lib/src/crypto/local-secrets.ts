// Secrets the all-in-one and a bare runtime keep in their data dir when none is configured: generated once on
// first start, written with mode 0600, read back on every later start so a restart keeps them.
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export interface StoredSecret {
  value: string;
  /** True when this start generated it: the caller prints it once. */
  created: boolean;
}

export function loadOrCreateSecret(path: string, generate: () => string): StoredSecret {
  if (existsSync(path)) return { value: readFileSync(path, 'utf8').trim(), created: false };
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const value = generate();
  // Written whole to a temp file, then linked into place: a process starting at the same moment either sees
  // no file or the complete one, never an empty file, and a second writer loses the race cleanly (EEXIST).
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(temp, `${value}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(temp, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { value: readFileSync(path, 'utf8').trim(), created: false };
    throw error;
  } finally {
    unlinkSync(temp);
  }
  return { value, created: true };
}

export const generateMasterKey = () => randomBytes(32).toString('base64');

/** Parses a base64 master key; throws a message naming what is wrong. */
export function parseMasterKey(value: string): Buffer {
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error(`expected 32 bytes of base64, got ${key.length} bytes`);
  return key;
}

/**
 * The master key: the configured one, or the one generated into `<secretsDir>/master-key` on first start. In the
 * all-in-one both programs read the same file, so each opens what the other sealed.
 */
export function loadMasterKey(configured: string | undefined, secretsDir: string): Buffer {
  const file = `${secretsDir}/master-key`;
  const text = configured ?? loadOrCreateSecret(file, generateMasterKey).value;
  try {
    return parseMasterKey(text);
  } catch (error) {
    throw new Error(`the master key ${configured ? 'in AGENTPLANE_MASTER_KEY' : `in ${file}`} is not valid: ${(error as Error).message}`);
  }
}
