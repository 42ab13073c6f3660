// Token signing keys: Ed25519 pairs named by their RFC 7638 thumbprint, and the ring that rotates them. The
// control-api keeps each project's ring (stored sealed under the master key); the runtime receives only its public
// set, pushed to it as configuration. The runtime's one ring of its own is each tenant's narrowing ring, which
// signs only narrowed tokens under their own issuer (docs/decisions/0016). No key is ever taken from a token.
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey } from 'jose';
import { z } from 'zod';
import { DEFAULT_CLOCK_TOLERANCE_SECONDS, SIGNING_ALGORITHM } from './claims.js';

const keyBytes = z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'must be 32 bytes in base64url');

export const publicJwkSchema = z.strictObject({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: keyBytes,
  kid: z.string().min(1).max(128),
  alg: z.literal(SIGNING_ALGORITHM),
  use: z.literal('sig'),
});
export type PublicJwk = z.infer<typeof publicJwkSchema>;

export const privateJwkSchema = publicJwkSchema.extend({ d: keyBytes });
export type PrivateJwk = z.infer<typeof privateJwkSchema>;

/**
 * The most keys a trusted set holds: active, next, and retired keys whose tokens may still live. A guard against a
 * hostile or broken document, far above what rotation produces; the control-api refuses a rotation that would pass
 * it (`ringHasRoom`), so a configuration push never carries more and is never refused for it.
 */
export const MAX_TRUSTED_KEYS = 256;

/**
 * The public keys a tenant's runtime trusts (a JWKS). Strict, so a private key pushed here by mistake (`d`) is
 * refused instead of being stored in the data plane.
 */
export const trustedKeysSchema = z.strictObject({
  keys: z
    .array(publicJwkSchema)
    .max(MAX_TRUSTED_KEYS)
    .refine((keys) => new Set(keys.map((key) => key.kid)).size === keys.length, 'key ids must be unique'),
});
export type TrustedKeys = z.infer<typeof trustedKeysSchema>;

export interface SigningKey {
  kid: string;
  /** Extractable, so the key can be exported for sealed storage. */
  privateKey: CryptoKey;
  publicJwk: PublicJwk;
}

export async function generateSigningKey(): Promise<SigningKey> {
  // jose 6 makes private keys non-extractable unless asked; we must be able to store this one.
  const { privateKey } = await generateKeyPair(SIGNING_ALGORITHM, { crv: 'Ed25519', extractable: true });
  return signingKeyFrom(privateKey);
}

async function signingKeyFrom(privateKey: CryptoKey): Promise<SigningKey> {
  const { kty, crv, x } = await exportJWK(privateKey);
  const publicPart = { kty, crv, x };
  const kid = await calculateJwkThumbprint(publicPart);
  const publicJwk = publicJwkSchema.parse({ ...publicPart, kid, alg: SIGNING_ALGORITHM, use: 'sig' });
  return { kid, privateKey, publicJwk };
}

/** The private JWK, for storage only: the caller seals it (SecretBox) before it is written anywhere. */
export async function exportSigningKey(key: SigningKey): Promise<PrivateJwk> {
  const { d } = await exportJWK(key.privateKey);
  return privateJwkSchema.parse({ ...key.publicJwk, d });
}

/** Reads back what `exportSigningKey` wrote. Throws (without echoing key material) when it is not such a key. */
export async function importSigningKey(value: unknown): Promise<SigningKey> {
  const parsed = privateJwkSchema.safeParse(value);
  if (!parsed.success) throw new Error('stored signing key is not an Ed25519 private JWK');
  const privateKey = await importJWK(parsed.data, SIGNING_ALGORITHM, { extractable: true });
  if (privateKey instanceof Uint8Array) throw new Error('stored signing key is not an Ed25519 private JWK');
  const key = await signingKeyFrom(privateKey);
  if (key.kid !== parsed.data.kid) throw new Error('stored signing key does not match its key id');
  return key;
}

/** A rotated-out key's public half, trusted until every token it signed has expired. */
export interface RetiredKey {
  publicJwk: PublicJwk;
  /** Epoch seconds. */
  retiredAt: number;
  /**
   * The longest token lifetime allowed when it retired: a token it signed may live that long even after the
   * project lowers its maximum. Absent on keys retired before it was recorded.
   */
  maxTokenLifetimeSeconds?: number;
}

/**
 * A project's signing keys. `active` signs. `next` is published to the runtime before it signs anything, so a
 * rotation never outruns the configuration push (a token signed by a key the runtime has not yet received would
 * be refused). `retired` keys keep verifying the tokens they signed until those expire.
 */
export interface KeyRing {
  active: SigningKey;
  next: SigningKey;
  retired: RetiredKey[];
}

export async function createKeyRing(): Promise<KeyRing> {
  return { active: await generateSigningKey(), next: await generateSigningKey(), retired: [] };
}

/**
 * `next` becomes active and a fresh `next` is made; the old active key retires. Rotate only once the runtime has
 * received the ring's current public set (which holds `next`).
 */
export async function rotateKeyRing(ring: KeyRing, now = new Date(), options: { maxTokenLifetimeSeconds?: number } = {}): Promise<KeyRing> {
  const lifetime = options.maxTokenLifetimeSeconds === undefined ? {} : { maxTokenLifetimeSeconds: options.maxTokenLifetimeSeconds };
  return {
    active: ring.next,
    next: await generateSigningKey(),
    retired: [{ publicJwk: ring.active.publicJwk, retiredAt: epochSeconds(now), ...lifetime }, ...ring.retired],
  };
}

/**
 * When no token a retired key signed can still be live (epoch seconds): its retirement plus the longest token
 * lifetime (the one allowed when it retired or now, whichever is longer) plus the clock skew verifiers allow.
 */
function trustedUntil(key: RetiredKey, options: { maxTokenLifetimeSeconds: number; clockToleranceSeconds?: number }): number {
  const lifetime = Math.max(key.maxTokenLifetimeSeconds ?? 0, options.maxTokenLifetimeSeconds);
  return key.retiredAt + lifetime + (options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS);
}

/** Drops retired keys whose tokens have all expired (`trustedUntil` has passed). */
export function pruneKeyRing(
  ring: KeyRing,
  options: { maxTokenLifetimeSeconds: number; now?: Date; clockToleranceSeconds?: number },
): KeyRing {
  const now = epochSeconds(options.now ?? new Date());
  return { ...ring, retired: ring.retired.filter((key) => trustedUntil(key, options) >= now) };
}

/**
 * Whether one more rotation keeps the trusted set within `MAX_TRUSTED_KEYS`; when not, `until` is when the
 * oldest retired key's tokens have all expired (epoch seconds), so a rotation fits again. Call on a pruned ring.
 */
export function ringHasRoom(
  ring: KeyRing,
  options: { maxTokenLifetimeSeconds: number; clockToleranceSeconds?: number },
): { ok: true } | { ok: false; until: number } {
  if (trustedKeysOf(ring).keys.length < MAX_TRUSTED_KEYS) return { ok: true };
  return { ok: false, until: Math.min(...ring.retired.map((key) => trustedUntil(key, options))) + 1 };
}

/** The public set the control-api pushes to the tenant's runtime. */
export function trustedKeysOf(ring: KeyRing): TrustedKeys {
  return { keys: [ring.active.publicJwk, ring.next.publicJwk, ...ring.retired.map((key) => key.publicJwk)] };
}

export const storedKeyRingSchema = z.strictObject({
  active: privateJwkSchema,
  next: privateJwkSchema,
  retired: z.array(z.strictObject({ publicJwk: publicJwkSchema, retiredAt: z.int().min(0), maxTokenLifetimeSeconds: z.int().min(0).optional() })),
});
/** The ring as JSON, for sealed storage (it holds private keys). */
export type StoredKeyRing = z.infer<typeof storedKeyRingSchema>;

export async function exportKeyRing(ring: KeyRing): Promise<StoredKeyRing> {
  const [active, next] = await Promise.all([exportSigningKey(ring.active), exportSigningKey(ring.next)]);
  return { active, next, retired: ring.retired };
}

export async function importKeyRing(value: unknown): Promise<KeyRing> {
  const parsed = storedKeyRingSchema.safeParse(value);
  if (!parsed.success) throw new Error('stored key ring is malformed');
  const { active, next, retired } = parsed.data;
  return { active: await importSigningKey(active), next: await importSigningKey(next), retired };
}

const epochSeconds = (date: Date) => Math.floor(date.getTime() / 1000);
