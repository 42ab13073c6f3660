// Signs an end-user token. The caller (the control-api's mint, or narrowing) has already decided the grant:
// capabilities intersected with the ceiling, lifetime clamped to the project maximum. This only seals it.
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { invalidArgument } from '../errors.js';
import {
  ACCESS_TOKEN_TYPE,
  SIGNING_ALGORITHM,
  accessTokenGrantSchema,
  audienceFor,
  type AccessTokenClaims,
  type AccessTokenGrant,
} from './claims.js';
import type { SigningKey } from './keys.js';

export interface SignOptions {
  /** `issuerFor(projectId)`. */
  issuer: string;
  lifetimeSeconds: number;
  now?: Date;
  /** The project's configuration version at mint (`config_version`); only the control plane's mint sets it. */
  configVersion?: number;
}

export interface SignedAccessToken {
  token: string;
  /** Exactly the signed payload: `exp` and `jti` for the mint response and the audit trail. */
  claims: AccessTokenClaims;
}

export async function signAccessToken(
  grant: AccessTokenGrant,
  key: SigningKey,
  options: SignOptions,
): Promise<SignedAccessToken> {
  // Never sign what the runtime would refuse: the grant is checked by the same schema verify uses.
  const parsed = accessTokenGrantSchema.safeParse(grant);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'grant'}: ${issue.message}`);
    throw invalidArgument(`cannot sign token: ${problems.join('; ')}`);
  }
  if (!Number.isSafeInteger(options.lifetimeSeconds) || options.lifetimeSeconds < 1) {
    throw invalidArgument('token lifetime must be a whole number of seconds, at least 1');
  }
  const iat = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const claims: AccessTokenClaims = {
    ...parsed.data,
    iss: options.issuer,
    aud: audienceFor(parsed.data.tenant_id),
    iat,
    exp: iat + options.lifetimeSeconds,
    jti: randomUUID(),
    ...(options.configVersion === undefined ? {} : { config_version: options.configVersion }),
  };
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid: key.kid, typ: ACCESS_TOKEN_TYPE })
    .sign(key.privateKey);
  return { token, claims };
}
