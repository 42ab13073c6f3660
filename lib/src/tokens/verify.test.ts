import { createHmac, randomUUID } from 'node:crypto';
import { CompactSign, decodeProtectedHeader, exportJWK, exportSPKI, generateKeyPair, importJWK, type CryptoKey } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { describeError } from '../http/errors.js';
import { ACCESS_TOKEN_TYPE, issuerFor, audienceFor, type AccessTokenGrant } from './claims.js';
import {
  createKeyRing,
  generateSigningKey,
  pruneKeyRing,
  rotateKeyRing,
  trustedKeysOf,
  type KeyRing,
  type SigningKey,
} from './keys.js';
import { signAccessToken } from './mint.js';
import {
  MAX_TOKEN_LENGTH,
  PROJECT_KEY_ON_DATA_PLANE,
  accessTokenVerifier,
  looksLikeProjectKey,
  verifyAccessToken,
  type AccessTokenVerifier,
} from './verify.js';

const PROJECT = 'proj-1';
const TENANT = randomUUID();
const OTHER_TENANT = randomUUID();

const grant: AccessTokenGrant = {
  sub: 'acme:alice',
  tenant_id: TENANT,
  scope: 'acme',
  capabilities: ['chat', 'documents:read'],
  roles: ['member'],
  groups: ['sales'],
  allowed_models: ['gpt-4o-mini'],
  max_effort: 'medium',
  max_tool_iterations: 8,
  max_context_tokens: 32_000,
};

let ring: KeyRing;
let otherProjectRing: KeyRing;
let verify: AccessTokenVerifier;

beforeAll(async () => {
  ring = await createKeyRing();
  otherProjectRing = await createKeyRing();
  verify = accessTokenVerifier({ trustedKeys: trustedKeysOf(ring), issuer: issuerFor(PROJECT), tenantId: TENANT });
});

const mint = async (
  overrides: Partial<AccessTokenGrant> = {},
  options: { key?: SigningKey; issuer?: string; now?: Date; lifetimeSeconds?: number } = {},
) =>
  (
    await signAccessToken({ ...grant, ...overrides }, options.key ?? ring.active, {
      issuer: options.issuer ?? issuerFor(PROJECT),
      lifetimeSeconds: options.lifetimeSeconds ?? 3600,
      ...(options.now ? { now: options.now } : {}),
    })
  ).token;

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const nowSeconds = () => Math.floor(Date.now() / 1000);
const parts = (token: string) => token.split('.') as [string, string, string];
const decodePart = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>;

/** Well-formed claims as our signer would write them, for forgeries to start from. */
const validClaims = () => ({
  ...grant,
  iss: issuerFor(PROJECT),
  aud: audienceFor(TENANT),
  iat: nowSeconds(),
  exp: nowSeconds() + 3600,
  jti: randomUUID(),
});

/** Signs any header and payload, with our real key unless told otherwise. */
const signRaw = async (
  payload: Record<string, unknown>,
  header: Record<string, unknown> = {},
  key: CryptoKey | Uint8Array = ring.active.privateKey,
) =>
  new CompactSign(Buffer.from(JSON.stringify(payload)))
    .setProtectedHeader({ alg: 'EdDSA', kid: ring.active.kid, typ: ACCESS_TOKEN_TYPE, ...header } as { alg: string })
    .sign(key);

/** HS256 by hand, so no library stands between the forgery and the verifier. */
const hs256 = (header: Record<string, unknown>, payload: Record<string, unknown>, secret: Uint8Array | string) => {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
};

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => {
      throw new Error('the token was accepted');
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(AppError);
  const appError = error as AppError;
  expect(appError.kind).toBe('unauthenticated');
  expect(describeError(appError).status).toBe(401);
  return appError;
}

interface HostileCase {
  name: string;
  token: () => Promise<string> | string;
  message?: string;
}

const hostile: HostileCase[] = [
  // Unsigned and algorithm confusion
  { name: 'alg none, no signature', token: () => `${b64({ alg: 'none', typ: ACCESS_TOKEN_TYPE, kid: ring.active.kid })}.${b64(validClaims())}.` },
  {
    name: 'alg none carrying a real signature',
    token: async () => {
      const [, , signature] = parts(await mint());
      return `${b64({ alg: 'none', typ: ACCESS_TOKEN_TYPE, kid: ring.active.kid })}.${b64(validClaims())}.${signature}`;
    },
  },
  {
    name: 'HS256 keyed with the public key bytes',
    token: () =>
      hs256({ alg: 'HS256', typ: ACCESS_TOKEN_TYPE, kid: ring.active.kid }, validClaims(), Buffer.from(ring.active.publicJwk.x, 'base64url')),
  },
  {
    name: 'HS256 keyed with the public JWK text',
    token: () => hs256({ alg: 'HS256', typ: ACCESS_TOKEN_TYPE, kid: ring.active.kid }, validClaims(), JSON.stringify(ring.active.publicJwk)),
  },
  {
    name: 'HS256 keyed with the public key PEM',
    token: async () => {
      const publicKey = (await importJWK(ring.active.publicJwk, 'EdDSA')) as CryptoKey;
      return hs256({ alg: 'HS256', typ: ACCESS_TOKEN_TYPE, kid: ring.active.kid }, validClaims(), await exportSPKI(publicKey));
    },
  },
  {
    name: 'RS256 signed by an attacker key under our kid',
    token: async () => signRaw(validClaims(), { alg: 'RS256' }, (await generateKeyPair('RS256')).privateKey),
  },
  {
    name: 'ES256 signed by an attacker key under our kid',
    token: async () => signRaw(validClaims(), { alg: 'ES256' }, (await generateKeyPair('ES256')).privateKey),
  },
  // Keys and key ids
  {
    name: 'EdDSA signed by an attacker key under our kid',
    token: async () => signRaw(validClaims(), {}, (await generateSigningKey()).privateKey),
  },
  {
    name: 'signed by one trusted key, naming another trusted key (wrong kid)',
    token: () => signRaw(validClaims(), { kid: ring.next.kid }, ring.active.privateKey),
  },
  {
    name: 'unknown kid',
    token: async () => {
      const attacker = await generateSigningKey();
      return signRaw(validClaims(), { kid: attacker.kid }, attacker.privateKey);
    },
  },
  {
    name: 'no kid, signed by our real key',
    token: async () => {
      const [header, payload, signature] = parts(await mint());
      const { kid: _kid, ...rest } = decodePart(header);
      return `${b64(rest)}.${payload}.${signature}`;
    },
  },
  {
    name: 'embedded jwk header with the attacker key',
    token: async () => {
      const attacker = await generateSigningKey();
      return signRaw(validClaims(), { kid: attacker.kid, jwk: attacker.publicJwk }, attacker.privateKey);
    },
  },
  {
    name: 'embedded jwk header under our kid',
    token: async () => {
      const attacker = await generateSigningKey();
      return signRaw(validClaims(), { jwk: attacker.publicJwk }, attacker.privateKey);
    },
  },
  {
    name: 'jku header pointing to the attacker',
    token: async () => {
      const attacker = await generateSigningKey();
      return signRaw(validClaims(), { kid: attacker.kid, jku: 'https://attacker.example/jwks.json' }, attacker.privateKey);
    },
  },
  { name: 'x5u header, even when signed by our key', token: () => signRaw(validClaims(), { x5u: 'https://attacker.example/cert.pem' }) },
  // Tampering
  {
    name: 'payload tampered (a capability and a role added), signature kept',
    token: async () => {
      const [header, payload, signature] = parts(await mint());
      const claims = decodePart(payload);
      const widened = { ...claims, capabilities: [...(claims.capabilities as string[]), 'computer'], roles: ['admin'] };
      return `${header}.${b64(widened)}.${signature}`;
    },
  },
  {
    name: 'payload tampered (expiry extended), signature kept',
    token: async () => {
      const [header, payload, signature] = parts(await mint());
      return `${header}.${b64({ ...decodePart(payload), exp: nowSeconds() + 10 * 365 * 86_400 })}.${signature}`;
    },
  },
  {
    name: 'header tampered, signature kept',
    token: async () => {
      const [header, payload, signature] = parts(await mint());
      return `${b64({ ...decodePart(header), cty: 'JWT' })}.${payload}.${signature}`;
    },
  },
  {
    name: 'signature altered',
    token: async () => {
      const [header, payload, signature] = parts(await mint());
      return `${header}.${payload}.${signature.startsWith('A') ? 'B' : 'A'}${signature.slice(1)}`;
    },
  },
  // Claims, signed by our real key
  { name: 'wrong iss', token: () => mint({}, { issuer: issuerFor('another-project') }) },
  { name: 'wrong aud', token: () => signRaw({ ...validClaims(), aud: audienceFor(OTHER_TENANT) }) },
  { name: 'aud as a list', token: () => signRaw({ ...validClaims(), aud: [audienceFor(TENANT), audienceFor(OTHER_TENANT)] }) },
  { name: 'tenant_id of another tenant under our aud', token: () => signRaw({ ...validClaims(), tenant_id: OTHER_TENANT }) },
  { name: 'typ JWT', token: () => signRaw(validClaims(), { typ: 'JWT' }) },
  { name: 'typ at+jwt', token: () => signRaw(validClaims(), { typ: 'at+jwt' }) },
  { name: 'typ missing', token: () => signRaw(validClaims(), { typ: undefined }) },
  {
    name: 'expired',
    token: () => mint({}, { now: new Date(Date.now() - 2 * 3600_000) }),
    message: 'token has expired',
  },
  { name: 'not yet valid', token: () => signRaw({ ...validClaims(), nbf: nowSeconds() + 600 }), message: 'token is not yet valid' },
  // A token dated ahead of the clock, beyond the skew, was not minted by a signer with a sane clock: refused, though
  // jose alone would accept it (it checks iat only against a maximum age).
  { name: 'issued in the future', token: () => signRaw({ ...validClaims(), iat: nowSeconds() + 600, exp: nowSeconds() + 4200 }), message: 'token is not yet valid' },
  { name: 'exp missing', token: () => signRaw({ ...validClaims(), exp: undefined }) },
  { name: 'jti missing', token: () => signRaw({ ...validClaims(), jti: undefined }) },
  { name: 'an unknown claim', token: () => signRaw({ ...validClaims(), is_admin: true }) },
  { name: 'capabilities not a list', token: () => signRaw({ ...validClaims(), capabilities: 'chat computer' }) },
  { name: 'capabilities holding a non-string', token: () => signRaw({ ...validClaims(), capabilities: ['chat', { all: true }] }) },
  { name: 'max_effort outside its enum', token: () => signRaw({ ...validClaims(), max_effort: 'extreme' }) },
  { name: 'negative max_tool_iterations', token: () => signRaw({ ...validClaims(), max_tool_iterations: -1 }) },
  { name: 'scope not a prefix of the subject', token: () => signRaw({ ...validClaims(), scope: 'globex' }) },
  { name: 'scope a string prefix but not a path prefix', token: () => signRaw({ ...validClaims(), sub: 'acme2:alice', scope: 'acme' }) },
  // Other tenants
  {
    name: 'token for another tenant, signed by that project\'s real key',
    token: () => mint({ tenant_id: OTHER_TENANT }, { key: otherProjectRing.active, issuer: issuerFor('another-project') }),
  },
  { name: 'token for another tenant of the same project', token: () => mint({ tenant_id: OTHER_TENANT }) },
  // Not tokens at all
  { name: 'a pk_ project key', token: () => `pk_${'a'.repeat(43)}`, message: PROJECT_KEY_ON_DATA_PLANE },
  { name: 'a pk_ project key with whitespace', token: () => ` pk_live_${'b'.repeat(40)}`, message: PROJECT_KEY_ON_DATA_PLANE },
  { name: 'empty string', token: () => '', message: 'missing bearer token' },
  { name: 'garbage word', token: () => 'garbage' },
  { name: 'three dots of nothing', token: () => '..' },
  { name: 'a.b.c', token: () => 'a.b.c' },
  { name: 'the Bearer prefix left on', token: async () => `Bearer ${await mint()}` },
  { name: 'two segments', token: async () => parts(await mint()).slice(0, 2).join('.') },
  { name: 'five segments (JWE shape)', token: () => `${b64({ alg: 'dir', enc: 'A256GCM' })}....` },
  { name: 'header that is not JSON', token: async () => `${Buffer.from('not json').toString('base64url')}.${parts(await mint())[1]}.sig` },
  { name: 'non-ASCII text', token: () => 'ʕ•ᴥ•ʔ.ʕ•ᴥ•ʔ.ʕ•ᴥ•ʔ' },
  {
    name: 'a huge token',
    token: () => signRaw({ ...validClaims(), padding: 'x'.repeat(MAX_TOKEN_LENGTH) }),
    message: 'token is too large',
  },
];

describe('verifyAccessToken refuses hostile tokens with 401', () => {
  it.each(hostile)('$name', async ({ token, message }) => {
    const presented = await token();
    const error = await refusal(verify(presented));
    expect(error.message).toBe(message ?? 'invalid token');
    if (presented.length > 8) expect(error.message).not.toContain(presented);
  });

  it('tells an expired token apart with a code, so a client knows to mint a new one', async () => {
    const error = await refusal(verify(await mint({}, { now: new Date(Date.now() - 2 * 3600_000) })));
    expect(error.code).toBe('token_expired');
    expect((await refusal(verify('garbage'))).code).toBe('invalid_token');
  });
});

describe('verifyAccessToken accepts what our signer minted', () => {
  it('returns the typed claims of a correctly minted token', async () => {
    const signed = await signAccessToken(grant, ring.active, { issuer: issuerFor(PROJECT), lifetimeSeconds: 600 });
    const header = decodeProtectedHeader(signed.token);
    expect(header).toEqual({ alg: 'EdDSA', kid: ring.active.kid, typ: ACCESS_TOKEN_TYPE });

    const claims = await verify(signed.token);
    expect(claims).toEqual(signed.claims);
    expect(claims).toMatchObject({ ...grant, iss: issuerFor(PROJECT), aud: audienceFor(TENANT) });
    expect(claims.exp - claims.iat).toBe(600);
    const effort: 'minimal' | 'low' | 'medium' | 'high' | undefined = claims.max_effort;
    expect(effort).toBe('medium');
  });

  it('accepts a narrowed token with its optional claims', async () => {
    const parent = await verify(await mint());
    const child = await verify(
      await mint({
        scope: 'acme:alice',
        data_scope: 'acme:alice:notes',
        capabilities: ['chat'],
        allowed_tools: ['search_documents'],
        parent_jti: parent.jti,
      }),
    );
    expect(child).toMatchObject({ parent_jti: parent.jti, data_scope: 'acme:alice:notes', allowed_tools: ['search_documents'] });
  });

  it('accepts a token that omits every optional claim', async () => {
    const minimal: AccessTokenGrant = { sub: 'bob', tenant_id: TENANT, scope: 'bob', capabilities: [], roles: [], groups: [] };
    const { token } = await signAccessToken(minimal, ring.active, { issuer: issuerFor(PROJECT), lifetimeSeconds: 60 });
    const claims = await verify(token);
    expect(claims.allowed_models).toBeUndefined();
    expect(claims.max_tool_iterations).toBeUndefined();
  });

  it('allows clock skew within the tolerance, and no further', async () => {
    const justExpired = await mint({}, { now: new Date(Date.now() - 3610_000) });
    await expect(verify(justExpired)).resolves.toMatchObject({ sub: 'acme:alice' });
    const strict = accessTokenVerifier({
      trustedKeys: trustedKeysOf(ring),
      issuer: issuerFor(PROJECT),
      tenantId: TENANT,
      clockToleranceSeconds: 0,
    });
    expect((await refusal(strict(justExpired))).message).toBe('token has expired');
  });

  it('accepts the forging helpers\' output when nothing is wrong, so each hostile case fails for its own reason', async () => {
    await expect(verify(await signRaw(validClaims()))).resolves.toMatchObject({ sub: 'acme:alice' });
  });

  it('verifies in one call too', async () => {
    const options = { trustedKeys: trustedKeysOf(ring), issuer: issuerFor(PROJECT), tenantId: TENANT };
    await expect(verifyAccessToken(await mint(), options)).resolves.toMatchObject({ tenant_id: TENANT });
  });

  it('refuses to be built on private key material', async () => {
    const { d } = await exportJWK(ring.active.privateKey);
    const leaked = { keys: [{ ...ring.active.publicJwk, d }] };
    expect(() =>
      accessTokenVerifier({ trustedKeys: leaked as never, issuer: issuerFor(PROJECT), tenantId: TENANT }),
    ).toThrow();
  });
});

describe('key rotation', () => {
  it('keeps old tokens valid while the old key is trusted, and refuses them once it is dropped', async () => {
    const mintedAt = new Date();
    const oldToken = await mint({}, { now: mintedAt });
    const rotated = await rotateKeyRing(ring, mintedAt);
    const options = { issuer: issuerFor(PROJECT), tenantId: TENANT, now: mintedAt };

    const afterRotation = accessTokenVerifier({ ...options, trustedKeys: trustedKeysOf(rotated) });
    await expect(afterRotation(oldToken)).resolves.toMatchObject({ sub: 'acme:alice' });
    await expect(afterRotation(await mint({}, { key: rotated.active, now: mintedAt }))).resolves.toBeDefined();

    const stillInWindow = pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 3600, now: new Date(mintedAt.getTime() + 3600_000) });
    expect(stillInWindow.retired).toHaveLength(1);

    const pruned = pruneKeyRing(rotated, { maxTokenLifetimeSeconds: 3600, now: new Date(mintedAt.getTime() + 3700_000) });
    expect(pruned.retired).toHaveLength(0);
    // Checked at mint time so only the dropped key, not expiry, can be the reason.
    const afterDrop = accessTokenVerifier({ ...options, trustedKeys: trustedKeysOf(pruned) });
    expect((await refusal(afterDrop(oldToken))).message).toBe('invalid token');
  });

  it('publishes the next key before it signs, so a runtime on the previous configuration accepts it', async () => {
    const rotated = await rotateKeyRing(ring);
    expect(rotated.active.kid).toBe(ring.next.kid);
    await expect(verify(await mint({}, { key: rotated.active }))).resolves.toBeDefined();
  });
});

describe('looksLikeProjectKey', () => {
  it('recognises pk_ keys and nothing else', async () => {
    expect(looksLikeProjectKey('pk_abc')).toBe(true);
    expect(looksLikeProjectKey(await mint())).toBe(false);
    expect(looksLikeProjectKey('')).toBe(false);
  });
});

describe('signAccessToken', () => {
  it('refuses to sign a grant the runtime would refuse', async () => {
    const error = await signAccessToken({ ...grant, scope: 'globex' }, ring.active, { issuer: issuerFor(PROJECT), lifetimeSeconds: 60 }).catch(
      (caught: unknown) => caught,
    );
    expect(error).toMatchObject({ kind: 'invalid_argument' });
    expect((error as Error).message).toMatch(/scope/);
  });

  it('refuses a lifetime that is not a positive whole number of seconds', async () => {
    for (const lifetimeSeconds of [0, -5, 1.5, Number.NaN]) {
      await expect(signAccessToken(grant, ring.active, { issuer: issuerFor(PROJECT), lifetimeSeconds })).rejects.toMatchObject({
        kind: 'invalid_argument',
      });
    }
  });

  it('gives every token its own jti', async () => {
    const a = await signAccessToken(grant, ring.active, { issuer: issuerFor(PROJECT), lifetimeSeconds: 60 });
    const b = await signAccessToken(grant, ring.active, { issuer: issuerFor(PROJECT), lifetimeSeconds: 60 });
    expect(a.claims.jti).not.toBe(b.claims.jti);
  });
});
