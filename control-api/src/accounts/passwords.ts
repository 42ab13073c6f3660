// Password hashing with scrypt (memory-hard, in node:crypto). The stored form names its parameters, so they
// can be raised later without breaking existing hashes.
import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const scrypt = (password: string, salt: Buffer, length: number, options: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCallback(password, salt, length, options, (error, key) => (error ? reject(error) : resolve(key))),
  );

/** N = 2^15, r = 8, p = 1: about 32 MiB and tens of milliseconds per check (OWASP's scrypt floor is 2^17 with
 * r = 8 at 128 MiB; this service trades some of that for two-core hosts; raise `cost` when hosts allow). */
const defaults = { cost: 2 ** 15, blockSize: 8, parallelization: 1 };
const keyLength = 32;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const { cost, blockSize, parallelization } = defaults;
  const key = await scrypt(password, salt, keyLength, { cost, blockSize, parallelization, maxmem: 128 * cost * blockSize * 2 });
  return ['scrypt', cost, blockSize, parallelization, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Checks a password against a stored hash in time that does not depend on where they differ. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, cost, blockSize, parallelization, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64url');
  const options = { cost: Number(cost), blockSize: Number(blockSize), parallelization: Number(parallelization) };
  const actual = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, { ...options, maxmem: 128 * options.cost * options.blockSize * 2 });
  return timingSafeEqual(actual, expected);
}

let decoy: Promise<string> | undefined;

/** A hash of nothing anyone knows: checked for unknown emails so they take as long as wrong passwords. */
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(24).toString('base64url'));
  return decoy;
}
