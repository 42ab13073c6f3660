// The provisioner port: how the control plane makes a project's tenant exist on a runtime and gives it its
// configuration. `local` (the all-in-one and plain processes) talks to one runtime's admin surface over HTTP;
// the Kubernetes provisioner (issue 5) writes Project and Tenant resources instead.

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
}

export interface Provisioner {
  /** Makes sure the tenant exists. Idempotent: an existing tenant is success. */
  registerTenant(tenantId: string, name: string): Promise<void>;
  /** Delivers a configuration. One the runtime already has, or has a newer version of, is success. */
  pushConfiguration(tenantId: string, document: TenantConfigurationDocument): Promise<void>;
}
