// End-user authentication on the data plane (DESIGN.md flow 1): picks the tenant a bearer token names, verifies
// the token with ONE of that tenant's two key sets (the project's pushed keys under the pushed issuer, or the
// runtime's narrowing keys under the narrowing issuer, chosen by the token's issuer and never mixed), and works out
// what it may do under the tenant's current ceiling. Knows nothing of HTTP: the guard hands it the two headers.
import { decodeJwt } from 'jose';
import { unauthenticated } from '@agentplane/lib/errors';
import { effectivePermission, type EffectivePermission } from '@agentplane/lib/permissions';
import { accessTokenGrantSchema, audienceFor, narrowingIssuerFor, type AccessTokenClaims, type AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { trustedKeysOf } from '@agentplane/lib/tokens/keys';
import { claimsFromToken } from '@agentplane/lib/tokens/permission-claims';
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS } from '@agentplane/lib/permissions';
import {
  MAX_TOKEN_LENGTH,
  PROJECT_KEY_ON_DATA_PLANE,
  accessTokenVerifier,
  looksLikeProjectKey,
  type AccessTokenVerifier,
} from '@agentplane/lib/tokens/verify';
import type { StoredConfiguration, TenantConfigurationService, TenantStamp } from '../tenants/configuration.js';
import type { TenantRouting } from '../tenants/service.js';
import { issuedBeforeForget, type ForgottenSubjects } from '../governance/forgotten.js';
import type { NarrowingKeyRings } from './narrowing-keys.js';

/** The credential headers of a data-plane request, as sent. */
export interface Credentials {
  authorization: string | undefined;
  apiKey: string | undefined;
}

/** Who is calling and what they may do; routes read it, services take it as plain input. */
export interface Principal {
  tenantId: string;
  claims: AccessTokenClaims;
  /** Ceiling ∩ token, before any per-request flag. */
  permission: EffectivePermission;
  /** The configuration the token was checked against: a request's own flags apply to its ceiling. */
  configuration: StoredConfiguration;
  /** The tenant's model routing settings as of this request (cached with its configuration). */
  routing: TenantRouting;
}

/** A tenant's key set and issuer, made into a verifier once per configuration, and its routing settings. */
interface TenantIdentity {
  stamp: TenantStamp;
  configuration: StoredConfiguration;
  routing: TenantRouting;
  /** The subjects the tenant forgot: their tokens issued before the forget are refused (docs/decisions/0074). */
  forgotten: ForgottenSubjects;
  verify: AccessTokenVerifier;
}

/** Tenant ids are lower-case UUIDs everywhere (docs/decisions/0003); a token naming one otherwise is not ours. */
const canonicalUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The tenant's narrowing keys, made into a verifier once per ring. */
interface NarrowingIdentity {
  keyIds: string;
  verify: AccessTokenVerifier;
}

/** Verified project tokens held, across tenants; the oldest goes first when full. */
const VERIFIED_TOKENS_HELD = 8_192;

/** A project token already verified: the principal it made, under the identity (configuration) that checked it. */
interface VerifiedToken {
  identity: TenantIdentity;
  principal: Principal;
}

export class EndUserAuthenticator {
  /**
   * Project tokens verified under the current identity of their tenant, by token text: a client sends the same
   * token on every request of a conversation, and verifying its signature again (and working out its permission)
   * is most of what authenticating costs. A hit still needs the tenant's stamp to be current (identityOf) and the
   * token to be unexpired by this clock; anything else verifies in full.
   */
  private readonly verified = new Map<string, VerifiedToken>();
  /** By tenant: the verifier of the configuration last seen, replaced when the stored version or digest moves. */
  private readonly identities = new Map<string, TenantIdentity>();
  /** By tenant: the verifier of the narrowing ring last seen, replaced when its key ids move. */
  private readonly narrowingIdentities = new Map<string, NarrowingIdentity>();

  constructor(
    private readonly configurations: TenantConfigurationService,
    private readonly narrowingKeys: NarrowingKeyRings,
    private readonly routingOf: (tenantId: string) => Promise<TenantRouting>,
    private readonly forgottenOf: (tenantId: string) => Promise<ForgottenSubjects>,
  ) {}

  /** Resolves to the caller's principal, or throws `unauthenticated` (401) saying briefly why. */
  async authenticate(credentials: Credentials): Promise<Principal> {
    const token = bearerTokenOf(credentials);
    const claimed = claimedOrigin(token);
    // The tenant must be configured whichever key signed: its ceiling bounds narrowed tokens too, and an erased
    // tenant's narrowed tokens die with it.
    const identity = await this.identityOf(claimed.tenantId, claimed.configVersion);
    const narrowed = claimed.issuer === narrowingIssuerFor(claimed.tenantId);
    if (!narrowed) {
      const held = this.verified.get(token);
      if (held && held.identity === identity && Date.now() / 1000 < held.principal.claims.exp) return held.principal;
      if (held) this.verified.delete(token);
    }
    // The claimed issuer only picks the key set; each verifier then accepts exactly one issuer and its own keys, so
    // a token naming the project but signed by the narrowing key (or the reverse) fails its signature check.
    const verify = narrowed ? await this.narrowingVerifierOf(claimed.tenantId) : identity.verify;
    const claims = await verify(token);
    // A forgotten subject's token from before the forget reaches nothing of theirs any more, and would only name them
    // again in what it writes: refused like any invalid token. A held token was checked under this same identity, so
    // the set it was checked against is the current one.
    if (issuedBeforeForget(identity.forgotten, claimed.tenantId, claims.sub, claims.iat)) throw invalidToken();
    const { configuration } = identity;
    // No legitimate token lives longer than the project allows (mint and narrowing both clamp to it), so one that
    // does was signed by someone holding a key, not by us: refuse it, however far off its `exp`.
    const maxLifetime = configuration.document.ceiling.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
    if (claims.exp - claims.iat > maxLifetime) throw invalidToken();
    const principal: Principal = {
      tenantId: configuration.tenantId,
      claims,
      permission: effectivePermission({ ceiling: configuration.document.ceiling, token: claimsFromToken(claims) }),
      configuration,
      routing: identity.routing,
    };
    if (!narrowed) this.holdVerified(token, { identity, principal });
    return principal;
  }

  /**
   * The principal an unattended run acts as (a scheduled task's fire): the grant its creator's token held, checked
   * against the tenant's current configuration, so a ceiling narrowed since then applies to the run. The claims are
   * made here, not verified: the grant was taken from a verified token. Throws `unauthenticated` when the tenant is
   * gone or no longer configured.
   */
  async actingAs(tenantId: string, grant: AccessTokenGrant, runId: string): Promise<Principal> {
    const identity = await this.identityOf(tenantId);
    const iat = Math.floor(Date.now() / 1000);
    const claims: AccessTokenClaims = {
      ...accessTokenGrantSchema.parse(grant),
      iss: `${narrowingIssuerFor(tenantId)}:unattended`,
      aud: audienceFor(tenantId),
      iat,
      exp: iat + DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
      jti: runId,
    };
    const { configuration } = identity;
    return {
      tenantId: configuration.tenantId,
      claims,
      permission: effectivePermission({ ceiling: configuration.document.ceiling, token: claimsFromToken(claims) }),
      configuration,
      routing: identity.routing,
    };
  }

  /**
   * The principal the admin surface reads a tenant's conversations as, for the control plane: a service principal
   * (privileged, so it sees every conversation) that may read conversations whatever the project's ceiling, and
   * owns none, so it can change none.
   */
  async administrator(tenantId: string): Promise<Principal> {
    const identity = await this.identityOf(tenantId);
    const iat = Math.floor(Date.now() / 1000);
    const claims: AccessTokenClaims = {
      sub: 'agentplane:control-plane',
      tenant_id: tenantId,
      scope: 'agentplane:control-plane',
      capabilities: ['chat'],
      roles: ['service'],
      groups: [],
      iss: `${narrowingIssuerFor(tenantId)}:admin`,
      aud: audienceFor(tenantId),
      iat,
      exp: iat + 60,
      jti: `admin-${iat}`,
    };
    const { configuration } = identity;
    return {
      tenantId: configuration.tenantId,
      claims,
      permission: effectivePermission({ ceiling: { ...configuration.document.ceiling, capabilities: ['chat'] }, token: claimsFromToken(claims) }),
      configuration,
      routing: identity.routing,
    };
  }

  private holdVerified(token: string, verified: VerifiedToken): void {
    if (this.verified.size >= VERIFIED_TOKENS_HELD) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, verified);
  }

  /**
   * The verifier of the tenant's current configuration, checked against the stored stamp (version and digest; read
   * or trusted as TenantConfigurationService.stamp says), so a push to any replica, or an erase, takes effect on the
   * next request. The digest is part of the key because an erased tenant registered again starts over at version 1.
   * A token minted against a newer configuration version than the stamp held here has the stamp read afresh.
   */
  private async identityOf(tenantId: string, atLeastVersion?: number): Promise<TenantIdentity> {
    const stamp = await this.configurations.stamp(tenantId, atLeastVersion);
    const cached = this.identities.get(tenantId);
    if (!stamp) {
      this.identities.delete(tenantId);
      // Unknown, erased and not yet configured tenants answer alike: a token does not learn which tenants exist.
      throw invalidToken();
    }
    if (cached && sameStamp(cached.stamp, stamp)) return cached;
    const configuration = await this.configurations.load(tenantId);
    if (!configuration) throw invalidToken();
    const identity: TenantIdentity = {
      stamp,
      configuration,
      routing: await this.routingOf(tenantId),
      forgotten: await this.forgottenOf(tenantId),
      verify: accessTokenVerifier({
        trustedKeys: configuration.document.trusted_keys,
        issuer: configuration.document.issuer,
        tenantId: configuration.tenantId,
      }),
    };
    this.identities.set(tenantId, identity);
    return identity;
  }

  /** The verifier of the tenant's narrowing keys; a tenant that never narrowed a token has none, and no token verifies. */
  private async narrowingVerifierOf(tenantId: string): Promise<AccessTokenVerifier> {
    const current = await this.narrowingKeys.current(tenantId);
    if (!current) {
      this.narrowingIdentities.delete(tenantId);
      throw invalidToken();
    }
    const cached = this.narrowingIdentities.get(tenantId);
    if (cached?.keyIds === current.keyIds) return cached.verify;
    const verify = accessTokenVerifier({ trustedKeys: trustedKeysOf(current.ring), issuer: narrowingIssuerFor(tenantId), tenantId });
    this.narrowingIdentities.set(tenantId, { keyIds: current.keyIds, verify });
    return verify;
  }
}

const sameStamp = (a: TenantStamp, b: TenantStamp) =>
  a.version === b.version && a.digest === b.digest && a.settingsUpdatedAt === b.settingsUpdatedAt && a.forgottenAt === b.forgottenAt;

/**
 * The bearer token of a request. A project key is refused wherever it appears, in either header and even beside
 * a valid token: it is a server credential that should never travel to the data plane, and saying so helps the
 * developer who sent it. `X-API-Key` otherwise carries nothing the data plane uses.
 */
function bearerTokenOf({ authorization, apiKey }: Credentials): string {
  const token = authorization === undefined ? undefined : bearer.exec(authorization.trim())?.[1];
  // `Authorization: pk_...` without the scheme is the same mistake as `Bearer pk_...`.
  if ([apiKey, token ?? authorization].some((sent) => sent !== undefined && looksLikeProjectKey(sent))) {
    throw invalidToken(PROJECT_KEY_ON_DATA_PLANE);
  }
  if (token === undefined) throw invalidToken('missing bearer token');
  if (token.length > MAX_TOKEN_LENGTH) throw invalidToken('token is too large');
  return token;
}

/**
 * The tenant and issuer the token claims, read WITHOUT verifying: they only choose which keys to verify with. A
 * token that lies here is then checked against the keys it named and fails there. Its configuration version only
 * decides whether the tenant's stamp is read afresh: a lie costs one small read, as every request did before stamps
 * were trusted (docs/decisions/0049), and grants nothing.
 */
function claimedOrigin(token: string): { tenantId: string; issuer: unknown; configVersion: number | undefined } {
  let payload: Record<string, unknown>;
  try {
    payload = decodeJwt(token);
  } catch {
    throw invalidToken();
  }
  const tenantId = payload.tenant_id;
  if (typeof tenantId !== 'string' || !canonicalUuid.test(tenantId)) throw invalidToken();
  const version = payload.config_version;
  return { tenantId, issuer: payload.iss, configVersion: Number.isSafeInteger(version) ? (version as number) : undefined };
}

// The same wording and code as the verifier's refusals (lib/src/tokens/verify.ts), so a client cannot tell which
// of the two said no.
const invalidToken = (message = 'invalid token') => unauthenticated(message, { code: 'invalid_token' });

/** What a verified token grants, without its registered claims: what an unattended run made from it acts with. */
export function grantOf(claims: AccessTokenClaims): AccessTokenGrant {
  const { iss: _iss, aud: _aud, iat: _iat, exp: _exp, nbf: _nbf, jti: _jti, parent_jti: _parent, config_version: _version, ...grant } = claims;
  return grant;
}
