// What a project's runtime is told about a Tenant (runtime/src/tenants/schemas.ts: TenantCreate, and the settings
// of TenantSettingsUpdate). Settings are copied, so a caller that changes the body never changes the Tenant.
import type { Tenant } from '@agentplane/lib/kubernetes/resources';

export function tenantRegistration(tenant: Tenant): { tenant_id: string; name: string; settings_json: Record<string, unknown> } {
  return {
    tenant_id: tenant.spec.tenantId,
    name: tenant.spec.displayName ?? '',
    settings_json: structuredClone(tenant.spec.settings ?? {}),
  };
}
