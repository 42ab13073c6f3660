// The claims of an end-user token: what the control-api signs and the runtime trusts after verifying. The
// schemas are the single definition of a well-formed token; the runtime refuses anything they refuse.
import { z } from 'zod';

/** The only signature algorithm we sign with and accept (Ed25519). Pinned on verify: no negotiation. */
export const SIGNING_ALGORITHM = 'EdDSA';

/**
 * The JWT `typ` header of an end-user token (RFC 8725 explicit typing). Not RFC 9068's `at+jwt`: our claim set
 * is not RFC 9068's (no `client_id`, and `scope` is a visibility path, not OAuth scopes), so a distinct type keeps
 * any other kind of JWT, ours or someone else's, from being taken for one of these.
 */
export const ACCESS_TOKEN_TYPE = 'agentplane-access+jwt';

/** Allowed skew between the control-api's clock and the runtime's when checking `exp` and `nbf`. */
export const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30;

/**
 * `iss`: the project whose signing key signed the token. A stable name rather than the control URL, so moving the
 * control plane to another host does not invalidate every token in flight.
 */
export const issuerFor = (projectId: string) => `agentplane:project:${projectId}`;

/** `aud`: the tenant data plane the token is for. A token for one tenant is refused by every other. */
export const audienceFor = (tenantId: string) => `agentplane:tenant:${tenantId}`;

/**
 * `iss` of a token the tenant's runtime narrowed (`POST /auth/token`) and signed with its own narrowing key ring.
 * A name of its own, outside the `agentplane:project:` space, so the verifier can tell by issuer alone which key
 * set applies: the project's pushed keys or the runtime's narrowing keys, never a mix (docs/decisions/0016).
 */
export const narrowingIssuerFor = (tenantId: string) => `agentplane:tenant:${tenantId}:narrowing`;

export const EFFORT_LEVELS = ['minimal', 'low', 'medium', 'high'] as const;
export type EffortLevel = (typeof EFFORT_LEVELS)[number];

/** A `:`-separated identity path (`acme:team-1:alice`): no empty segment, no control characters. */
export const identityPath = z
  .string()
  .max(512)
  .regex(/^[^:\p{Cc}]+(?::[^:\p{Cc}]+)*$/u, 'must be a `:`-separated path with no empty segment');

// Shapes only: whether a capability or model exists is the permission module's question, not the token's.
const capabilityName = z.string().regex(/^[a-z][a-z_]*(?::[a-z][a-z_]*)?$/, 'must be a capability name');
const name = z.string().min(1).max(256);
const names = z.array(name).max(256);
const count = z.int().min(0);
const numericDate = z.int().min(0);

/** The private claims: what the token allows. Names follow SPEC.md's mint response and narrow-token fields. */
const grantShape = {
  /** Subject: the identity path that owns what the token creates. */
  sub: identityPath,
  tenant_id: z.uuid(),
  /** Visibility prefix of `sub`; equal to `sub` when the token sees only its subject's own data. */
  scope: identityPath,
  /** Set by narrowing: a prefix that further limits which stored data the token reaches. */
  data_scope: identityPath.optional(),
  /** Granted capabilities, already intersected with the project ceiling at mint. */
  capabilities: z.array(capabilityName).max(128),
  roles: names,
  groups: names,
  /** Model allow-list; absent means every model the project registered. */
  allowed_models: names.optional(),
  max_effort: z.enum(EFFORT_LEVELS).optional(),
  /** Absent means no ceiling from the token (the project's still applies). */
  max_tool_iterations: count.optional(),
  max_context_tokens: count.optional(),
  /** Tool allow-list; absent means every tool the capabilities reach. */
  allowed_tools: names.optional(),
  /** `jti` of the token this one was narrowed from. */
  parent_jti: name.optional(),
};

/** The registered claims, set at signing. */
const registeredShape = {
  iss: name,
  aud: name,
  iat: numericDate,
  exp: numericDate,
  nbf: numericDate.optional(),
  jti: name,
  /**
   * The project's configuration version when the control plane minted the token: a runtime holding an older one
   * reads the stored configuration afresh before it trusts what it cached (read-your-writes, docs/decisions/0070).
   * Absent on tokens the runtime narrowed or made itself.
   */
  config_version: z.int().min(0).optional(),
};

const isWithin = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}:`);

function scopeCoversSubject(claims: { sub: string; scope: string }, ctx: z.RefinementCtx) {
  if (!isWithin(claims.sub, claims.scope)) {
    ctx.addIssue({ code: 'custom', path: ['scope'], message: 'scope must be a prefix of the subject' });
  }
}

// Strict objects: an unknown claim is refused rather than ignored, because a claim this version does not know
// could be a restriction it would silently drop. Consequence: a runtime must be upgraded before (or with) the
// control-api that starts signing a new claim.

/** What the signer decides; `signAccessToken` adds the registered claims. */
export const accessTokenGrantSchema = z.strictObject(grantShape).superRefine(scopeCoversSubject);
export type AccessTokenGrant = z.infer<typeof accessTokenGrantSchema>;

/** The whole payload of a verified token. */
export const accessTokenClaimsSchema = z
  .strictObject({ ...registeredShape, ...grantShape })
  .superRefine(scopeCoversSubject);
export type AccessTokenClaims = z.infer<typeof accessTokenClaimsSchema>;
