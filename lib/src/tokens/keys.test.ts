import { calculateJwkThumbprint, exportJWK } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  createKeyRing,
  exportKeyRing,
  exportSigningKey,
  generateSigningKey,
  importKeyRing,
  importSigningKey,
  MAX_TRUSTED_KEYS,
  pruneKeyRing,
  ringHasRoom,
  rotateKeyRing,
  trustedKeysOf,
  trustedKeysSchema,
} from './keys.js';
import { issuerFor } from './claims.js';
import { signAccessToken } from './mint.js';
import { verifyAccessToken } from './verify.js';

const tenantId = '7b0c1a52-3f7e-4c1e-9d55-0c3f1f7a9e21';
const grant = { sub: 'u1', tenant_id: tenantId, scope: 'u1', capabilities: ['chat'], roles: [], groups: [] };

describe('signing keys', () => {
  it('names a key by its RFC 7638 thumbprint and publishes only the public half', async () => {
    const key = await generateSigningKey();
    const { kty, crv, x } = key.publicJwk;
    expect(key.kid).toBe(await calculateJwkThumbprint({ kty, crv, x }));
    expect(key.publicJwk).toEqual({ kty: 'OKP', crv: 'Ed25519', x, kid: key.kid, alg: 'EdDSA', use: 'sig' });
    expect(key.publicJwk).not.toHaveProperty('d');
  });

  it('survives export and import: a token signed by the imported key verifies under the original public key', async () => {
    const key = await generateSigningKey();
    const stored = JSON.parse(JSON.stringify(await exportSigningKey(key))) as unknown;
    const restored = await importSigningKey(stored);
    expect(restored.kid).toBe(key.kid);
    const { token } = await signAccessToken(grant, restored, { issuer: issuerFor('p'), lifetimeSeconds: 60 });
    const options = { trustedKeys: { keys: [key.publicJwk] }, issuer: issuerFor('p'), tenantId };
    await expect(verifyAccessToken(token, options)).resolves.toMatchObject({ sub: 'u1' });
  });

  it('refuses a stored key that is malformed or does not match its kid, without echoing it', async () => {
    const stored = await exportSigningKey(await generateSigningKey());
    const other = await exportSigningKey(await generateSigningKey());
    await expect(importSigningKey({ ...stored, kid: other.kid })).rejects.toThrow(/does not match/);
    await expect(importSigningKey({ ...stored, d: undefined })).rejects.toThrow(/not an Ed25519 private JWK/);
    const error = (await importSigningKey({ ...stored, crv: 'P-256' }).catch((caught: unknown) => caught)) as Error;
    expect(error.message).not.toContain(stored.d);
  });

  it('trusted key sets refuse private material and duplicate key ids', async () => {
    const key = await generateSigningKey();
    const { d } = await exportJWK(key.privateKey);
    expect(trustedKeysSchema.safeParse({ keys: [key.publicJwk] }).success).toBe(true);
    expect(trustedKeysSchema.safeParse({ keys: [{ ...key.publicJwk, d }] }).success).toBe(false);
    expect(trustedKeysSchema.safeParse({ keys: [key.publicJwk, key.publicJwk] }).success).toBe(false);
    expect(trustedKeysSchema.safeParse({ keys: [{ ...key.publicJwk, alg: 'HS256' }] }).success).toBe(false);
  });
});

describe('key ring', () => {
  it('rotates next into active, retires the old active key and keeps trusting it until pruned', async () => {
    const ring = await createKeyRing();
    const at = new Date('2030-01-01T00:00:00Z');
    const rotated = await rotateKeyRing(ring, at);
    expect(rotated.active).toBe(ring.next);
    expect(rotated.next.kid).not.toBe(ring.next.kid);
    expect(rotated.retired).toEqual([{ publicJwk: ring.active.publicJwk, retiredAt: at.getTime() / 1000 }]);
    expect(trustedKeysOf(rotated).keys.map((key) => key.kid)).toEqual([ring.next.kid, rotated.next.kid, ring.active.kid]);

    const day = 86_400_000;
    expect(pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 86_400, now: new Date(at.getTime() + day) }).retired).toHaveLength(1);
    expect(pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 86_400, now: new Date(at.getTime() + day + 60_000) }).retired).toHaveLength(0);
  });

  it('keeps a retired key for the lifetime allowed when it retired, though the project lowers its maximum since', async () => {
    const at = new Date('2030-01-01T00:00:00Z');
    const rotated = await rotateKeyRing(await createKeyRing(), at, { maxTokenLifetimeSeconds: 86_400 });
    const later = (seconds: number) => new Date(at.getTime() + seconds * 1000);
    // A token minted just before the rotation may live a day: the key stays although tokens now live ten minutes.
    expect(pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 600, now: later(3600) }).retired).toHaveLength(1);
    expect(pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 600, now: later(86_400 + 30) }).retired).toHaveLength(1);
    expect(pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 600, now: later(86_400 + 31) }).retired).toHaveLength(0);
  });

  it('has room for a rotation until the trusted set is full, and says when the oldest retired key leaves it', async () => {
    const ring = await createKeyRing();
    const retiredKey = (retiredAt: number) => ({ publicJwk: ring.active.publicJwk, retiredAt });
    const options = { maxTokenLifetimeSeconds: 3600, clockToleranceSeconds: 30 };
    expect(ringHasRoom({ ...ring, retired: Array.from({ length: MAX_TRUSTED_KEYS - 3 }, () => retiredKey(1000)) }, options)).toEqual({ ok: true });
    const full = { ...ring, retired: Array.from({ length: MAX_TRUSTED_KEYS - 2 }, (_, i) => retiredKey(2000 - i)) };
    expect(ringHasRoom(full, options)).toEqual({ ok: false, until: 2000 - (MAX_TRUSTED_KEYS - 3) + 3600 + 30 + 1 });
    // The bound is far above the 32 that once stalled every push after 30 rotations within a token lifetime.
    expect(MAX_TRUSTED_KEYS).toBeGreaterThanOrEqual(256);
  });

  it('round-trips through its stored JSON form', async () => {
    const ring = await rotateKeyRing(await createKeyRing());
    const restored = await importKeyRing(JSON.parse(JSON.stringify(await exportKeyRing(ring))));
    expect(trustedKeysOf(restored)).toEqual(trustedKeysOf(ring));
    await expect(importKeyRing({ active: 'x' })).rejects.toThrow(/malformed/);
  });
});
