// The calls the control-api makes on a runtime's admin surface (`X-Admin-Key`, runtime/src/tenants/routes.ts) and
// what counts as success for each. Shared by both provisioners: local knows the runtime's URL and key from its
// config; kubernetes reads them from the project's resources.
import { AppError } from '@agentplane/lib/errors';
import type { TenantConfigurationDocument } from './provisioner.js';

/** The code of the error thrown when the runtime refuses the admin key: the key is stale, read it again. */
export const adminKeyRefused = 'admin_key_refused';

export interface RuntimeAdminOptions {
  url: string;
  adminKey: string;
  timeoutMs?: number;
}

export class RuntimeAdminClient {
  constructor(private readonly options: RuntimeAdminOptions) {}

  /** `POST /tenants`; 409 means an earlier attempt registered it: success. */
  async registerTenant(tenantId: string, name: string): Promise<void> {
    const res = await this.call('POST', '/tenants', { tenant_id: tenantId, name });
    if (res.status === 201 || res.status === 409) return;
    throw await refusal('register tenant', res);
  }

  /** `PUT /tenants/{id}/configuration`; a version the runtime already has, or has a newer one of, is success. */
  async pushConfiguration(tenantId: string, document: TenantConfigurationDocument): Promise<void> {
    const res = await this.call('PUT', `/tenants/${tenantId}/configuration`, document);
    if (res.ok) return;
    // The runtime has this version or a newer one: a newer push got there first, nothing is lost.
    if (res.status === 409 && ((await res.clone().json().catch(() => ({}))) as { code?: string }).code === 'configuration_outdated') return;
    throw await refusal('push configuration', res);
  }

  /**
   * `DELETE /tenants/{id}`: the ordered erase (DESIGN.md flow 5). Success only once the report is complete; an
   * unknown tenant (never registered, or erased and forgotten) is success too.
   */
  async eraseTenant(tenantId: string): Promise<void> {
    const res = await this.call('DELETE', `/tenants/${tenantId}`);
    if (res.status === 404) return;
    if (res.ok) {
      const report = (await res.json()) as { complete: boolean; steps: { step: string; outcome: string; error?: string }[] };
      if (report.complete) return;
      const failed = report.steps.filter((s) => s.outcome === 'failed').map((s) => `${s.step}${s.error ? ` (${s.error})` : ''}`);
      throw new AppError('unavailable', `the runtime erased tenant ${tenantId}'s rows but not everything outside its database: ${failed.join(', ')}; retrying`);
    }
    throw await refusal('erase tenant', res);
  }

  /** `GET /tenants/{id}`: whether the runtime has the tenant. */
  async hasTenant(tenantId: string): Promise<boolean> {
    const res = await this.call('GET', `/tenants/${tenantId}`);
    if (res.ok) return true;
    if (res.status === 404) return false;
    throw await refusal('read tenant', res);
  }

  private async call(method: string, path: string, body?: unknown): Promise<Response> {
    try {
      return await fetch(`${this.options.url}${path}`, {
        method,
        headers: { 'x-admin-key': this.options.adminKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      });
    } catch (error) {
      throw new AppError('unavailable', `the runtime at ${this.options.url} did not answer (${(error as Error).name})`, { cause: error });
    }
  }
}

async function refusal(what: string, res: Response): Promise<AppError> {
  const detail = ((await res.json().catch(() => ({}))) as { detail?: unknown }).detail;
  return new AppError('unavailable', `the runtime refused to ${what}: ${res.status} ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`, {
    ...(res.status === 401 ? { code: adminKeyRefused } : {}),
  });
}
