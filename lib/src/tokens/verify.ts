// Verifies an end-user token on the data plane. Keys come only from the tenant's configuration (a pushed JWKS),
// never from the token (`jku`, `jwk`, `x5u`, `x5c`); the algorithm is pinned; `typ`, `iss`, `aud`, `exp`, `nbf`
// and the claim shapes are checked. Every refusal is `unauthenticated` (401) with a short message that never
// echoes the token.
import { createLocalJWKSet, decodeProtectedHeader, errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { unauthenticated, type AppError } from '../errors.js';
import {
  ACCESS_TOKEN_TYPE,
  DEFAULT_CLOCK_TOLERANCE_SECONDS,
  SIGNING_ALGORITHM,
  accessTokenClaimsSchema,
  audienceFor,
  type AccessTokenClaims,
} from './claims.js';
import { trustedKeysSchema, type TrustedKeys } from './keys.js';

/** Anything longer is refused before it is decoded; real tokens are a few hundred bytes to a few KiB. */
export const MAX_TOKEN_LENGTH = 16 * 1024;

export const PROJECT_KEY_ON_DATA_PLANE =
  'a project key (pk_...) is a control-plane credential; call the data plane with an end-user token minted by your server';

/** Project API keys start with `pk_`; a JWT never does (its first segment is base64url of `{"`, i.e. `ey`). */
export const looksLikeProjectKey = (credential: string) => credential.trim().startsWith('pk_');

export interface VerifyOptions {
  /** The tenant's trusted public keys, from configuration. */
  trustedKeys: TrustedKeys;
  /** `issuerFor(projectId)` of the tenant's project. */
  issuer: string;
  /** The tenant this data plane is serving; sets the expected `aud` and `tenant_id`. */
  tenantId: string;
  clockToleranceSeconds?: number;
  now?: Date;
}

export type AccessTokenVerifier = (token: string) => Promise<AccessTokenClaims>;

/**
 * Builds a verifier for one tenant's configuration. Build it once per configuration version: it keeps the imported
 * keys. Throws (a configuration error, not a 401) when the trusted keys are malformed.
 */
export function accessTokenVerifier(options: VerifyOptions): AccessTokenVerifier {
  const trustedKeys = trustedKeysSchema.parse(options.trustedKeys);
  const keySet: JWTVerifyGetKey = createLocalJWKSet(trustedKeys);
  const audience = audienceFor(options.tenantId);
  const clockTolerance = options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS;

  return async (token) => {
    if (token.length === 0) throw invalidToken('missing bearer token');
    if (token.length > MAX_TOKEN_LENGTH) throw invalidToken('token is too large');
    if (looksLikeProjectKey(token)) throw invalidToken(PROJECT_KEY_ON_DATA_PLANE);
    refuseUnusableHeader(token);

    let payload: unknown;
    try {
      ({ payload } = await jwtVerify(token, keySet, {
        algorithms: [SIGNING_ALGORITHM],
        typ: ACCESS_TOKEN_TYPE,
        issuer: options.issuer,
        audience,
        requiredClaims: ['sub', 'iat', 'exp', 'jti'],
        clockTolerance,
        ...(options.now ? { currentDate: options.now } : {}),
      }));
    } catch (error) {
      throw refusal(error);
    }
    // Past this point the signature is ours, so the claims were written by our signer; still, shapes are checked
    // so that a signer bug or a mismatched version is refused rather than half-understood.
    const claims = accessTokenClaimsSchema.safeParse(payload);
    if (!claims.success) throw invalidToken();
    if (claims.data.tenant_id !== options.tenantId) throw invalidToken();
    // jose checks `iat` only against a maximum age; a token dated ahead of this clock by more than the skew was not
    // minted by a signer whose clock can be trusted (or was minted to outlive its lifetime): refuse it.
    const nowSeconds = Math.floor((options.now ?? new Date()).getTime() / 1000);
    if (claims.data.iat > nowSeconds + clockTolerance) throw invalidToken('token is not yet valid');
    return claims.data;
  };
}

/** One-shot form of `accessTokenVerifier`; prefer a long-lived verifier on a request path. */
export function verifyAccessToken(token: string, options: VerifyOptions): Promise<AccessTokenClaims> {
  return accessTokenVerifier(options)(token);
}

// jose would ignore key-carrying headers when given a local key set; refusing them outright makes the rule
// visible and keeps a future change of key lookup from quietly honouring them. A `kid` is required so key
// selection never falls back to "whichever key fits".
function refuseUnusableHeader(token: string) {
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw invalidToken();
  }
  if (typeof header.kid !== 'string' || ['jku', 'jwk', 'x5u', 'x5c'].some((name) => name in header)) {
    throw invalidToken();
  }
}

// jose checks the signature before any claim, so "expired" and "not yet valid" are only ever said about tokens we
// signed: a forger learns nothing from them. Clients need the difference (SPEC.md: on 401 obtain a new token).
function refusal(error: unknown): AppError {
  if (error instanceof errors.JWTExpired) return unauthenticated('token has expired', { code: 'token_expired' });
  if (error instanceof errors.JWTClaimValidationFailed && error.claim === 'nbf') {
    return invalidToken('token is not yet valid');
  }
  return invalidToken();
}

const invalidToken = (message = 'invalid token') => unauthenticated(message, { code: 'invalid_token' });
