// Between the two spellings of one token: the permission module's `TokenClaims` (what is granted, camelCase)
// and the JWT payload (`AccessTokenGrant`, snake_case as on the wire).
import type { Capability, TokenClaims } from '../permissions/index.js';
import type { AccessTokenClaims, AccessTokenGrant } from './claims.js';

/** `parentJti`: on a narrowed token, the `jti` of the token it was narrowed from. */
export function grantFromClaims(tenantId: string, claims: TokenClaims, options: { parentJti?: string } = {}): AccessTokenGrant {
  return {
    sub: claims.subject,
    tenant_id: tenantId,
    scope: claims.scope,
    ...(claims.dataScope === undefined ? {} : { data_scope: claims.dataScope }),
    capabilities: [...claims.capabilities],
    roles: [...claims.roles],
    groups: [...claims.groups],
    ...(claims.allowedModels === undefined ? {} : { allowed_models: [...claims.allowedModels] }),
    ...(claims.maxEffort === undefined ? {} : { max_effort: claims.maxEffort }),
    ...(claims.maxToolIterations === undefined ? {} : { max_tool_iterations: claims.maxToolIterations }),
    ...(claims.maxContextTokens === undefined ? {} : { max_context_tokens: claims.maxContextTokens }),
    ...(claims.allowedTools === undefined ? {} : { allowed_tools: [...claims.allowedTools] }),
    ...(options.parentJti === undefined ? {} : { parent_jti: options.parentJti }),
  } as AccessTokenGrant;
}

export function claimsFromToken(token: AccessTokenClaims): TokenClaims {
  return {
    subject: token.sub,
    scope: token.scope,
    ...(token.data_scope === undefined ? {} : { dataScope: token.data_scope }),
    capabilities: token.capabilities as Capability[],
    roles: token.roles,
    groups: token.groups,
    ...(token.allowed_models === undefined ? {} : { allowedModels: token.allowed_models }),
    ...(token.max_effort === undefined ? {} : { maxEffort: token.max_effort }),
    ...(token.max_tool_iterations === undefined ? {} : { maxToolIterations: token.max_tool_iterations }),
    ...(token.max_context_tokens === undefined ? {} : { maxContextTokens: token.max_context_tokens }),
    ...(token.allowed_tools === undefined ? {} : { allowedTools: token.allowed_tools }),
  };
}
