// `POST /auth/token`: the caller's end-user token narrowed into a child token. Every claim is intersected or
// clamped by `lib/src/permissions`' `narrowClaims` against the caller's claims and the tenant's current ceiling;
// the child is signed with the tenant's narrowing key ring. docs/decisions/0016-token-narrowing.md.
import { z } from 'zod';
import { unauthenticated } from '@agentplane/lib/errors';
import { EFFORTS, narrowClaims, requireRegisteredModels, type CapabilityCeiling, type NarrowRequest } from '@agentplane/lib/permissions';
import { narrowingIssuerFor } from '@agentplane/lib/tokens/claims';
import { signAccessToken } from '@agentplane/lib/tokens/mint';
import { claimsFromToken, grantFromClaims } from '@agentplane/lib/tokens/permission-claims';
import type { Principal } from './authenticate.js';
import type { NarrowingKeyRings } from './narrowing-keys.js';

// Bounds as the token's claim schema has them (lib/src/tokens/claims.ts), so whatever passes here can be signed.
const path = z.string().min(1).max(512);
const names = z.array(z.string().min(1).max(256)).max(256);

/**
 * SPEC.md "Narrow-token fields". Everything is optional: an omitted field keeps the calling token's value. Each
 * description is the rule `narrowClaims` applies (docs/decisions/0016, 0030); the HTTP test holds them to it.
 */
export const TokenRequest = z
  .strictObject({
    user_ref: path.optional().meta({
      description:
        "The child's subject: only the calling token's own; any other, a path under it included, is 403 (a narrowed token narrows what the subject may do, not who it is). Omitted: the caller's",
    }),
    capabilities: z
      .array(z.string().min(1).max(128))
      .max(256)
      .optional()
      .meta({
        description:
          "Kept where the calling token holds them within the project's current ceiling; any other (unknown, not held, or documents:write on a read-only project) is dropped with a warning (200). Omitted: the caller's",
      }),
    scope: path.optional().meta({ description: "Within the calling token's scope (403 otherwise), and the subject or a prefix of it (400 otherwise). Omitted: the caller's" }),
    data_scope: path.optional().meta({ description: "Within the calling token's data scope, its scope when it has none (403 otherwise). Omitted: the caller's" }),
    allowed_models: names.optional().meta({
      description:
        "Intersected with the caller's list (a model it may not use is dropped with a warning); each must be registered by the project (400 otherwise). Omitted: the caller's",
    }),
    allowed_tools: names.optional().meta({ description: 'Intersected with the caller\'s list' }),
    roles: names.optional().meta({ description: 'Intersected with the caller\'s roles: narrowing never adds one. Omitted: the caller\'s' }),
    groups: names.optional().meta({ description: 'Intersected with the caller\'s groups. Omitted: the caller\'s' }),
    max_effort: z.enum(EFFORTS).optional().meta({ description: "The lower of this and the caller's. Omitted: the caller's" }),
    max_tool_iterations: z
      .int()
      .min(0)
      .optional()
      .meta({ description: "The lowest of this, the caller's and the project's; a whole number, 0 or more. Omitted: the caller's" }),
    max_context_tokens: z
      .int()
      .min(1)
      .optional()
      .meta({ description: "The lowest of this, the caller's and the project's; a whole number, 1 or more. Omitted: the caller's" }),
    expires_in: z
      .int()
      .min(1)
      .optional()
      .meta({ description: "Seconds, 1 or more; default 3600; clamped to the project's maximum token lifetime, not to the calling token's remaining life" }),
  })
  .meta({ id: 'TokenRequest' });

export const TokenResponse = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.int().meta({ description: 'Seconds, after clamping' }),
    tenant_id: z.uuid(),
    capabilities: z.array(z.string()).meta({ description: 'What the child was actually granted, sorted' }),
    scope: z.string(),
    data_scope: z.string().nullable().meta({ description: 'null: the child reaches the data under `scope`' }),
    allowed_models: z.array(z.string()).nullable().meta({ description: 'null: every model the project registers' }),
    max_effort: z.enum(EFFORTS).nullable(),
    max_context_tokens: z.int().nullable().meta({ description: 'null: unlimited' }),
    max_tool_iterations: z.int().nullable().meta({ description: 'null: unlimited' }),
    warnings: z
      .array(z.string())
      .optional()
      .meta({ description: 'Present when a requested capability or model was not put on the child, or the child carries a privileged role' }),
  })
  .meta({ id: 'TokenResponse' });

export type TokenRequestInput = z.infer<typeof TokenRequest>;
export type TokenResponseOutput = z.infer<typeof TokenResponse>;

export class TokenNarrowingService {
  constructor(private readonly keys: NarrowingKeyRings) {}

  /** A child of the caller's token. Refusals are the permission module's: 403 to widen subject or scope, 400 when malformed. */
  async narrow(caller: Principal, request: TokenRequestInput): Promise<TokenResponseOutput> {
    const { ceiling } = caller.configuration.document;
    requireRegistered(request.allowed_models, ceiling);
    const issued = narrowClaims(claimsFromToken(caller.claims), narrowRequestOf(request), ceiling);
    const keys = await this.keys.currentOrCreate(caller.tenantId);
    // The tenant was erased between checking the caller's token and now: its next request would hear the same.
    if (!keys) throw unauthenticated('invalid token', { code: 'invalid_token' });
    const { token } = await signAccessToken(
      grantFromClaims(caller.tenantId, issued.claims, { parentJti: caller.claims.jti }),
      keys.ring.active,
      { issuer: narrowingIssuerFor(caller.tenantId), lifetimeSeconds: issued.expiresIn },
    );
    const { claims } = issued;
    return {
      access_token: token,
      token_type: 'Bearer',
      expires_in: issued.expiresIn,
      tenant_id: caller.tenantId,
      capabilities: [...claims.capabilities],
      scope: claims.scope,
      data_scope: claims.dataScope ?? null,
      allowed_models: claims.allowedModels ? [...claims.allowedModels] : null,
      max_effort: claims.maxEffort ?? null,
      max_context_tokens: claims.maxContextTokens ?? null,
      max_tool_iterations: claims.maxToolIterations ?? null,
      ...(issued.warnings.length > 0 ? { warnings: issued.warnings } : {}),
    };
  }
}

/** Wire names (snake_case, SPEC.md) to the permission module's. */
function narrowRequestOf(request: TokenRequestInput): NarrowRequest {
  return {
    subject: request.user_ref,
    capabilities: request.capabilities,
    scope: request.scope,
    dataScope: request.data_scope,
    allowedModels: request.allowed_models,
    allowedTools: request.allowed_tools,
    roles: request.roles,
    groups: request.groups,
    maxEffort: request.max_effort,
    maxToolIterations: request.max_tool_iterations,
    maxContextTokens: request.max_context_tokens,
    expiresIn: request.expires_in,
  };
}

/**
 * SPEC.md Errors rule 1 holds for narrowing as for the mint: naming a model the project does not register is 400,
 * with the mint's wording, rather than a child token listing a model nothing will serve.
 */
function requireRegistered(models: readonly string[] | undefined, ceiling: CapabilityCeiling): void {
  requireRegisteredModels(models, ceiling.registeredModels);
}
