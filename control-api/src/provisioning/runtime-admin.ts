// The calls the control-api makes on a runtime's admin surface (`X-Admin-Key`, runtime/src/tenants/routes.ts) and
// what counts as success for each. Shared by both provisioners: local knows the runtime's URL and key from its
// config; kubernetes reads them from the project's resources.
import { AppError, ValidationError, type ErrorKind, type FieldProblem } from '@agentplane/lib/errors';
import type { TenantCalls, TenantConfigurationDocument } from './provisioner.js';

/** The code of the error thrown when the runtime refuses the admin key: the key is stale, read it again. */
export const adminKeyRefused = 'admin_key_refused';

export interface RuntimeAdminOptions {
  url: string;
  adminKey: string;
  timeoutMs?: number;
}

export class RuntimeAdminClient implements TenantCalls {
  constructor(private readonly options: RuntimeAdminOptions) {}

  /** `POST /tenants`; 409 means an earlier attempt registered it: success. */
  async registerTenant(tenantId: string, name: string): Promise<void> {
    const res = await this.call('POST', '/tenants', { tenant_id: tenantId, name });
    if (res.status === 201 || res.status === 409) return;
    throw await refusal('register tenant', res);
  }

  /**
   * `PUT /tenants/{id}/configuration`, and the runtime then holds exactly this document. The control plane is the
   * source of truth (docs/decisions/0025): when the runtime refuses because it holds a newer version (restored from
   * another control plane's push, or a control-plane database restored to an older state) or other content at this
   * version, the document replaces what it holds, conditionally on the digest the refusal named, so a replacement
   * never overwrites a configuration this call has not seen. A push is the relay's latest reading of the project,
   * and a project's pushes go out one at a time, so replacing a newer version never rolls back a later change.
   */
  async pushConfiguration(tenantId: string, document: TenantConfigurationDocument): Promise<void> {
    const path = `/tenants/${tenantId}/configuration`;
    const res = await this.call('PUT', path, document);
    if (res.ok) return;
    const refusal409 = res.status === 409 ? ((await res.clone().json().catch(() => ({}))) as { code?: string; stored_digest?: unknown }) : {};
    if (
      (refusal409.code === 'configuration_outdated' || refusal409.code === 'configuration_version_conflict') &&
      typeof refusal409.stored_digest === 'string' &&
      /^[0-9a-f]{64}$/.test(refusal409.stored_digest)
    ) {
      const replaced = await this.call('PUT', `${path}?replace_digest=${refusal409.stored_digest}`, document);
      if (replaced.ok) return;
      throw await refusal('replace the configuration it holds', replaced);
    }
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

  /**
   * A call on one of the tenant's own admin routes (`/tenants/{id}{path}`) made for a person on the control plane
   * (the project's corpus, its wiki): the runtime's answer, its refusals (4xx) relayed as the same error, so the
   * person reads what the runtime said. A refused admin key is the stale-key error; an unknown tenant (the outbox has
   * not registered it yet) and 5xx answers are "unavailable".
   */
  async tenantCall<T>(tenantId: string, method: 'GET' | 'POST' | 'DELETE', path: string, options: { query?: Record<string, string>; body?: unknown } = {}): Promise<T> {
    const query = options.query && Object.keys(options.query).length > 0 ? `?${new URLSearchParams(options.query)}` : '';
    const res = await this.call(method, `/tenants/${tenantId}${path}${query}`, options.body);
    if (res.ok) return (await res.json()) as T;
    const body = (await res.json().catch(() => ({}))) as { detail?: unknown; code?: unknown };
    if (res.status === 401) throw new AppError('unavailable', `the runtime refused the admin key on ${method} ${path}`, { code: adminKeyRefused });
    if (res.status === 404 && body.code === 'tenant_not_found') {
      throw new AppError('unavailable', `the project's runtime has not registered its tenant yet (the outbox does; see GET /api/projects/:id): try again shortly`);
    }
    throw relayedError(res.status, body);
  }

  private async call(method: string, path: string, body?: unknown): Promise<Response> {
    try {
      // A form (a skill package relayed as it came) goes as multipart; anything else as JSON.
      const form = body instanceof FormData;
      return await fetch(`${this.options.url}${path}`, {
        method,
        headers: { 'x-admin-key': this.options.adminKey, ...(body === undefined || form ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: form ? body : JSON.stringify(body) }),
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

const kindByStatus: Record<number, ErrorKind> = {
  400: 'invalid_argument',
  403: 'permission_denied',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable',
  429: 'rate_limited',
};

/** The runtime's refusal as the same error here: same status, `detail` and `code`; anything else is "unavailable". */
function relayedError(status: number, body: { detail?: unknown; code?: unknown }): AppError {
  const code = typeof body.code === 'string' ? body.code : undefined;
  if (status === 422 && Array.isArray(body.detail)) {
    const problems = body.detail.filter((p): p is FieldProblem => typeof p === 'object' && p !== null && Array.isArray((p as FieldProblem).loc) && typeof (p as FieldProblem).msg === 'string');
    if (code === 'validation_failed' && problems.length > 0) return new ValidationError(problems.map(({ loc, msg }) => ({ loc, msg })));
    const msg = problems.map((p) => p.msg).join('; ') || 'the runtime refused the request';
    return new AppError('unprocessable', msg, code ? { code } : {});
  }
  const kind = kindByStatus[status];
  const detail = typeof body.detail === 'string' ? body.detail : JSON.stringify(body.detail ?? null);
  if (!kind) return new AppError('unavailable', `the runtime answered ${status}: ${detail}`);
  return new AppError(kind, detail, code ? { code } : {});
}
