// Which model a turn runs on and where its calls go (SPEC.md What the service does 8, Errors rules 1 and 3):
// the request's model, else the tenant's `default_model` setting, else the project's default; checked against the
// models the project registered and the token's allow-list before anything is sent; served by the one provider
// credential that registered it, with the tenant's `litellm_key` (when set) in place of the project's key.
import { conflict, permissionDenied } from '@agentplane/lib/errors';
import { modelNotAvailable, type EffectivePermission } from '@agentplane/lib/permissions';
import type { ProviderTarget } from '../models/port.js';
import { providerFor, type ModelPrice, type StoredConfiguration, type UsageLimits } from '../tenants/configuration.js';
import type { TenantRouting } from '../tenants/service.js';

export type ModelChoice =
  | { kind: 'none' }
  | { kind: 'model'; model: string; target: ProviderTarget; price: ModelPrice | undefined };

export function limitsOf(configuration: StoredConfiguration): UsageLimits | undefined {
  return configuration.document.limits;
}

/**
 * The model of a turn, or `none` when nothing names one (the turn then ends `no_model` and costs nothing). Throws 400
 * for an unregistered model, 403 for one outside the token's allow-list, 409 `no_provider` when no credential serves it.
 */
export function chooseModel(
  configuration: StoredConfiguration,
  permission: EffectivePermission,
  routing: TenantRouting,
  requested: string | undefined,
): ModelChoice {
  const { document } = configuration;
  const model = requested ?? routing.defaultModel ?? document.default_model ?? undefined;
  if (model === undefined) return { kind: 'none' };
  // The project's own default is checked against its providers, not its registered models: once its provider is
  // removed it is registered no more, and the turn must say the provider is gone, not that no model was ever set.
  const projectDefault = requested === undefined && routing.defaultModel === undefined;
  const registered = document.ceiling.registeredModels;
  if (!projectDefault && registered !== undefined && !registered.includes(model)) throw modelNotAvailable(model, registered);
  if (!permission.modelAllowed(model)) throw permissionDenied(`model '${model}' is not allowed for this token`, { code: 'model_not_allowed' });
  const provider = providerFor(document, model);
  if (!provider) throw noProvider(model);
  return {
    kind: 'model',
    model,
    target: { baseUrl: provider.baseUrl, apiKey: routing.litellmKey ?? provider.apiKey },
    price: provider.price,
  };
}

/** SPEC.md Errors rule 3: the cause (no credential serves the model) and the fix, never retried. */
function noProvider(model: string) {
  return conflict(
    `no provider serves model '${model}': its credential was removed or rotated out. Register a provider for it (POST /api/projects/{id}/providers) or choose another model (POST /api/projects/{id}/default-model for the default)`,
    { code: 'no_provider' },
  );
}

/** Cost of one call in USD, or null when the project set no price for the model. */
export function costOf(price: ModelPrice | undefined, usage: { inputTokens: number; outputTokens: number }): number | null {
  if (!price) return null;
  return (usage.inputTokens * price.input_per_million_usd + usage.outputTokens * price.output_per_million_usd) / 1_000_000;
}
