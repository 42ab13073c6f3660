// The local provisioner: one runtime reached over HTTP at its admin surface (`X-Admin-Key`), as the all-in-one
// and plain-process installs run it. The same calls the operator makes on Kubernetes.
import type { Provisioner, ProvisioningStatus, TenantCalls, TenantConfigurationDocument, TenantTarget } from './provisioner.js';
import { RuntimeAdminClient } from './runtime-admin.js';

export interface LocalProvisionerOptions {
  runtimeUrl: string;
  adminKey: string;
  timeoutMs?: number;
}

export class LocalProvisioner implements Provisioner {
  private readonly runtime: RuntimeAdminClient;
  /** Readiness is read on a person's request: it answers "unavailable" soon rather than waiting out a delivery's timeout. */
  private readonly probe: RuntimeAdminClient;

  constructor(private readonly options: LocalProvisionerOptions) {
    const timeoutMs = options.timeoutMs ?? 10_000;
    this.runtime = new RuntimeAdminClient({ url: options.runtimeUrl, adminKey: options.adminKey, timeoutMs });
    this.probe = new RuntimeAdminClient({ url: options.runtimeUrl, adminKey: options.adminKey, timeoutMs: Math.min(timeoutMs, 2000) });
  }

  registerTenant({ tenantId }: TenantTarget, name: string): Promise<void> {
    return this.runtime.registerTenant(tenantId, name);
  }

  pushConfiguration({ tenantId }: TenantTarget, document: TenantConfigurationDocument): Promise<void> {
    return this.runtime.pushConfiguration(tenantId, document);
  }

  /** Nothing but the tenant was provisioned for the project here: removing it is the tenant's ordered erase. */
  removeProject({ tenantId }: TenantTarget): Promise<void> {
    return this.runtime.eraseTenant(tenantId);
  }

  withRuntime<T>(_target: TenantTarget, call: (runtime: TenantCalls) => Promise<T>): Promise<T> {
    return call(this.runtime);
  }

  async status({ tenantId }: TenantTarget): Promise<ProvisioningStatus> {
    try {
      return (await this.probe.hasTenant(tenantId))
        ? { ready: true, reason: 'Registered', message: `the runtime at ${this.options.runtimeUrl} has the tenant` }
        : { ready: false, reason: 'NotRegistered', message: `the runtime at ${this.options.runtimeUrl} does not have the tenant yet; the outbox registers it` };
    } catch (error) {
      return { ready: false, reason: 'RuntimeUnavailable', message: (error as Error).message };
    }
  }
}
