// The provisioner port: how the control plane makes a project's tenant exist on a runtime and gives it its
// configuration. `local` (the all-in-one and plain processes) talks to one runtime's admin surface over HTTP;
// the Kubernetes provisioner (issue 5) writes Project and Tenant resources instead.
import type { BudgetWindow, ProviderKind, StoredPrice } from '../store/schema.js';

/**
 * A provider credential as pushed: the key in clear, so only over the runtime's admin channel (the runtime seals
 * it at rest). A provisioner that writes resources must put it in a Secret, never in a resource's spec.
 */
export interface PushedProvider {
  id: string;
  kind: ProviderKind;
  base_url: string;
  api_key: string;
  models: string[];
  prices?: Record<string, StoredPrice>;
}

/** The project's usage caps, each present only when set (docs/decisions/0018). */
export interface PushedLimits {
  rpm_limit?: number;
  tpm_limit?: number;
  budget?: { amount_usd: number; window: BudgetWindow };
}

/** What the runtime stores for a tenant (runtime `PUT /tenants/{id}/configuration`). */
export interface TenantConfigurationDocument {
  version: number;
  issuer: string;
  trusted_keys: { keys: object[] };
  ceiling: {
    capabilities: string[];
    readOnly: boolean;
    maxTokenLifetimeSeconds?: number;
    maxToolIterations?: number;
    maxContextTokens?: number;
    defaultRoles: string[];
    defaultGroups: string[];
    registeredModels?: string[];
  };
  system_prompt: string | null;
  origins: string[];
  /** Present when the project has a provider; then `default_model` is present too (null: none). */
  providers?: PushedProvider[];
  default_model?: string | null;
  /** Present when the project has any cap. */
  limits?: PushedLimits;
}

export interface Provisioner {
  /** Makes sure the tenant exists. Idempotent: an existing tenant is success. */
  registerTenant(tenantId: string, name: string): Promise<void>;
  /** Delivers a configuration. One the runtime already has, or has a newer version of, is success. */
  pushConfiguration(tenantId: string, document: TenantConfigurationDocument): Promise<void>;
}
