// A project's capability ceiling and maxima: the wire schema, the default for a new project, and the form the
// permission module computes with.
import { z } from 'zod';
import { CAPABILITIES, DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, didYouMean, isCapability, type CapabilityCeiling } from '@agentplane/lib/permissions';
import type { StoredCeiling } from '../store/schema.js';

const roleNames = z.array(z.string().min(1).max(100)).max(50);

export const CeilingPatch = z
  .strictObject({
    capabilities: z
      .array(z.string())
      .max(200)
      .superRefine((names, ctx) => {
        names.forEach((name, index) => {
          if (isCapability(name)) return;
          const hint = didYouMean(name);
          ctx.addIssue({ code: 'custom', path: [index], message: `unknown capability '${name}'${hint ? `; did you mean '${hint}'?` : ''}` });
        });
      })
      .optional()
      .meta({ description: 'The capabilities tokens of this project may hold (replaces the list)' }),
    read_only: z.boolean().optional().meta({ description: 'A read-only project never mints `documents:write`' }),
    max_token_lifetime_seconds: z.number().int().min(60).max(30 * 24 * 3600).optional(),
    max_tool_iterations: z.number().int().min(0).max(10_000).nullable().optional().meta({ description: 'null: unlimited' }),
    max_context_tokens: z.number().int().min(1).max(10_000_000).nullable().optional().meta({ description: 'null: unlimited' }),
    default_roles: roleNames.optional().meta({ description: 'Added to every minted token' }),
    default_groups: roleNames.optional().meta({ description: 'Added to every minted token' }),
  })
  .meta({ id: 'CeilingPatch' });

export const CeilingOut = z
  .object({
    capabilities: z.array(z.string()),
    read_only: z.boolean(),
    max_token_lifetime_seconds: z.number().int(),
    max_tool_iterations: z.number().int().nullable(),
    max_context_tokens: z.number().int().nullable(),
    default_roles: z.array(z.string()),
    default_groups: z.array(z.string()),
  })
  .meta({ id: 'Ceiling' });

export type CeilingView = z.infer<typeof CeilingOut>;

/**
 * A new project allows every capability (the customer's server narrows per token at mint) with no limits, tokens
 * living at most a day. Stored as the values chosen, so a later change of defaults does not move old projects.
 */
export function defaultCeiling(): Required<StoredCeiling> {
  return {
    capabilities: [...CAPABILITIES],
    read_only: false,
    max_token_lifetime_seconds: DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
    max_tool_iterations: null,
    max_context_tokens: null,
    default_roles: [],
    default_groups: [],
  };
}

export function ceilingView(stored: StoredCeiling): CeilingView {
  const merged = { ...defaultCeiling(), ...stored };
  return { ...merged, capabilities: [...merged.capabilities].filter(isCapability).sort() };
}

export function mergeCeiling(stored: StoredCeiling, patch: z.infer<typeof CeilingPatch>): StoredCeiling {
  const merged: StoredCeiling = { ...ceilingView(stored) };
  for (const [key, value] of Object.entries(patch)) if (value !== undefined) (merged as Record<string, unknown>)[key] = value;
  return merged;
}

/** The ceiling as the permission module computes with it. */
export function permissionCeiling(stored: StoredCeiling, registeredModels?: readonly string[]): CapabilityCeiling {
  const view = ceilingView(stored);
  return {
    capabilities: view.capabilities.filter(isCapability),
    readOnly: view.read_only,
    maxTokenLifetimeSeconds: view.max_token_lifetime_seconds,
    ...(view.max_tool_iterations === null ? {} : { maxToolIterations: view.max_tool_iterations }),
    ...(view.max_context_tokens === null ? {} : { maxContextTokens: view.max_context_tokens }),
    defaultRoles: view.default_roles,
    defaultGroups: view.default_groups,
    ...(registeredModels ? { registeredModels } : {}),
  };
}
