// The local provisioner: one runtime reached over HTTP at its admin surface (`X-Admin-Key`), as the all-in-one
// and plain-process installs run it. The same calls the operator makes on Kubernetes.
import { AppError } from '../../../lib/src/errors.js';
import type { Provisioner, TenantConfigurationDocument } from './provisioner.js';

export interface LocalProvisionerOptions {
  runtimeUrl: string;
  adminKey: string;
  timeoutMs?: number;
}

export class LocalProvisioner implements Provisioner {
  constructor(private readonly options: LocalProvisionerOptions) {}

  async registerTenant(tenantId: string, name: string): Promise<void> {
    const res = await this.call('POST', '/tenants', { tenant_id: tenantId, name });
    if (res.status === 201 || res.status === 409) return; // 409: already registered by an earlier attempt
    throw await refusal('register tenant', res);
  }

  async pushConfiguration(tenantId: string, document: TenantConfigurationDocument): Promise<void> {
    const res = await this.call('PUT', `/tenants/${tenantId}/configuration`, document);
    if (res.ok) return;
    // The runtime has this version or a newer one: a newer push got there first, nothing is lost.
    if (res.status === 409 && ((await res.clone().json().catch(() => ({}))) as { code?: string }).code === 'configuration_outdated') return;
    throw await refusal('push configuration', res);
  }

  private async call(method: string, path: string, body: unknown): Promise<Response> {
    try {
      return await fetch(`${this.options.runtimeUrl}${path}`, {
        method,
        headers: { 'x-admin-key': this.options.adminKey, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      });
    } catch (error) {
      throw new AppError('unavailable', `the runtime at ${this.options.runtimeUrl} did not answer (${(error as Error).name})`, { cause: error });
    }
  }
}

async function refusal(what: string, res: Response): Promise<AppError> {
  const detail = ((await res.json().catch(() => ({}))) as { detail?: unknown }).detail;
  return new AppError('unavailable', `the runtime refused to ${what}: ${res.status} ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`);
}
