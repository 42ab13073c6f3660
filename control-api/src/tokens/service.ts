// Minting end-user tokens (POST /api/projects/:id/token): the request clamped against the project's ceiling by
// the permission module, signed with the project's active key.
import { clampMint, EFFORTS, unimplementedWarnings } from '@agentplane/lib/permissions';
import { issuerFor } from '@agentplane/lib/tokens/claims';
import { signAccessToken } from '@agentplane/lib/tokens/mint';
import { grantFromClaims } from '@agentplane/lib/tokens/permission-claims';
import { z } from 'zod';
import type { ProjectCaller, ProjectKeyService } from '../keys/service.js';
import { permissionCeiling } from '../projects/ceiling.js';
import type { ProjectService } from '../projects/service.js';

const names = z.array(z.string().min(1).max(200)).max(200);

/** SPEC.md "End-user token request". */
export const TokenRequest = z
  .strictObject({
    subject: z.string().min(1).max(500).meta({ description: 'Identity path, `:` separated; owns what it creates' }),
    scope: z.string().min(1).max(500).optional().meta({ description: 'Visibility prefix of subject; omitted: only the subject\'s own data' }),
    capabilities: names.optional().meta({ description: 'Intersected with the project ceiling; omitted: the whole ceiling' }),
    roles: names.optional().meta({ description: 'Added to the project defaults; `admin`, `owner`, `service` are privileged' }),
    groups: names.optional(),
    models: names.optional().meta({ description: 'Model allow-list; each must be registered by the project' }),
    maxEffort: z.enum(EFFORTS).optional(),
    maxToolIterations: z.number().int().min(0).optional().meta({ description: 'Clamped to the project\'s; unset: the project\'s (none: unlimited)' }),
    maxContextTokens: z.number().int().min(1).optional().meta({ description: 'Clamped to the project\'s' }),
    expiresIn: z.number().int().min(1).optional().meta({ description: 'Seconds; default 3600; clamped to the project maximum' }),
  })
  .meta({ id: 'TokenRequest' });

export const TokenResponse = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int(),
    tenant_id: z.uuid(),
    capabilities: z.array(z.string()).meta({ description: 'What was actually granted' }),
    scope: z.string(),
    allowed_models: z.array(z.string()).nullable().meta({ description: 'null: every registered model' }),
    max_effort: z.enum(EFFORTS).nullable(),
    max_context_tokens: z.number().int().nullable(),
    max_tool_iterations: z.number().int().nullable(),
    warnings: z
      .array(z.string())
      .optional()
      .meta({ description: 'Present when a privileged role was granted, a requested capability was not put on the token, or a granted capability has nothing behind it yet in this build' }),
  })
  .meta({ id: 'TokenResponse' });

export class TokenMintService {
  constructor(
    private readonly projects: ProjectService,
    private readonly keys: ProjectKeyService,
  ) {}

  async mint(caller: ProjectCaller, projectId: string, request: z.infer<typeof TokenRequest>): Promise<z.infer<typeof TokenResponse>> {
    await this.keys.authorize(caller, projectId, 'mint');
    const { tenantId, ceiling, registeredModels, configVersion } = await this.projects.ceilingOf(projectId);
    // The same registered list the runtime is pushed: a model no provider registered is refused (SPEC: 400, listed).
    const issued = clampMint(request, permissionCeiling(ceiling, registeredModels));
    const ring = await this.projects.signingKeys(projectId);
    const { token } = await signAccessToken(grantFromClaims(tenantId, issued.claims), ring.active, {
      issuer: issuerFor(projectId),
      lifetimeSeconds: issued.expiresIn,
      configVersion,
    });
    const { claims } = issued;
    // Granted all the same: the ceiling may name what a later build serves, and the token then already carries it.
    const warnings = [...issued.warnings, ...unimplementedWarnings(claims.capabilities)];
    return {
      access_token: token,
      token_type: 'Bearer',
      expires_in: issued.expiresIn,
      tenant_id: tenantId,
      capabilities: [...claims.capabilities],
      scope: claims.scope,
      allowed_models: claims.allowedModels ? [...claims.allowedModels] : null,
      max_effort: claims.maxEffort ?? null,
      max_context_tokens: claims.maxContextTokens ?? null,
      max_tool_iterations: claims.maxToolIterations ?? null,
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  }
}
