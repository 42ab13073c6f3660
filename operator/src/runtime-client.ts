// The operator's calls to a project runtime's admin surface (runtime/src/tenants/routes.ts): readiness, register a
// tenant, merge its settings, erase it. Each call has a timeout and carries the project's admin key; every call and
// its outcome can be observed (the tests watch the erase order through `onCall`).
import { AppError, errorMessage } from '@agentplane/lib/errors';
import type { EraseStepOutcome, TenantEraseReport } from '@agentplane/lib/kubernetes/resources';

export interface RuntimeCall {
  method: string;
  url: string;
  /** The HTTP status, or absent when the runtime could not be reached. */
  status?: number;
  error?: string;
}

export interface RuntimeClientOptions {
  timeoutMs?: number;
  onCall?: (call: RuntimeCall) => void;
  /**
   * Called before every call that changes the runtime (register, update, erase); throws when this replica may not
   * make it. A deposed leader must not send a stale settings update or erase after its successor has moved on.
   */
  mayWrite?: () => void;
}

/** The runtime did not answer (refused, reset, timed out). */
export class RuntimeUnreachableError extends AppError {
  constructor(url: string, cause: unknown) {
    super('upstream_failed', `the runtime at ${url} could not be reached: ${errorMessage(cause)}`, { code: 'runtime_unreachable', cause });
    this.name = 'RuntimeUnreachableError';
  }
}

/** The runtime answered with a status the call does not expect. */
export class RuntimeRefusedError extends AppError {
  constructor(
    readonly status: number,
    readonly detail: string,
    what: string,
  ) {
    super(status === 401 ? 'unauthenticated' : 'upstream_failed', `${what}: the runtime answered ${status}: ${detail}`, { code: status === 401 ? 'admin_key_rejected' : 'runtime_refused' });
    this.name = 'RuntimeRefusedError';
  }
}

export type EraseOutcome =
  | { kind: 'erased'; report: TenantEraseReport }
  | { kind: 'unknown_tenant' }
  | { kind: 'incomplete'; report: TenantEraseReport; detail: string };

/** The runtime's snake_case erase report, as the Tenant's status records it. */
function toEraseReport(wire: Record<string, unknown>): TenantEraseReport {
  const steps = Array.isArray(wire.steps) ? (wire.steps as EraseStepOutcome[]) : [];
  const rows = wire.rows_deleted && typeof wire.rows_deleted === 'object' ? (wire.rows_deleted as Record<string, number>) : undefined;
  return {
    complete: wire.complete === true,
    erasedAt: typeof wire.erased_at === 'string' ? wire.erased_at : new Date().toISOString(),
    ...(rows && Object.keys(rows).length > 0 ? { rowsDeleted: rows } : {}),
    steps: steps.map((s) => ({
      step: s.step,
      phase: s.phase,
      outcome: s.outcome,
      ...(s.items === undefined ? {} : { items: s.items }),
      ...(s.error === undefined ? {} : { error: s.error }),
    })),
  };
}

export class RuntimeClient {
  private readonly timeoutMs: number;

  constructor(private readonly options: RuntimeClientOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  /** A client with these options over this one's (the composition root adds the leadership guard). */
  withOptions(options: RuntimeClientOptions): RuntimeClient {
    return new RuntimeClient({ ...this.options, ...options });
  }

  /** Whether the runtime answers `GET /ready` with 200, and what it said otherwise. */
  async ready(baseUrl: string): Promise<{ ready: boolean; detail: string }> {
    try {
      const response = await this.call('GET', `${baseUrl}/ready`, { timeoutMs: Math.min(this.timeoutMs, 5_000) });
      if (response.status === 200) return { ready: true, detail: 'ready' };
      const text = await response.text();
      return { ready: false, detail: `answered ${response.status}: ${readinessDetail(parseJson(text)) ?? (text.slice(0, 300) || response.statusText)}` };
    } catch (error) {
      return { ready: false, detail: errorMessage(error) };
    }
  }

  /** `POST /tenants`: 201 created, 409 it already has the tenant; both mean registered. */
  async registerTenant(baseUrl: string, adminKey: string, body: { tenant_id: string; name: string; settings_json: Record<string, unknown> }): Promise<'created' | 'exists'> {
    const response = await this.call('POST', `${baseUrl}/tenants`, { adminKey, body });
    if (response.status === 201) return 'created';
    if (response.status === 409) return 'exists';
    throw new RuntimeRefusedError(response.status, await detailOf(response), `registering tenant ${body.tenant_id}`);
  }

  /** `PATCH /tenants/{id}`: merges the settings; `unknown_tenant` when the runtime does not have it. */
  async updateTenant(baseUrl: string, adminKey: string, tenantId: string, body: { name: string; settings_json: Record<string, unknown> }): Promise<'updated' | 'unknown_tenant'> {
    const response = await this.call('PATCH', `${baseUrl}/tenants/${encodeURIComponent(tenantId)}`, { adminKey, body });
    if (response.status === 200) return 'updated';
    if (response.status === 404) return 'unknown_tenant';
    throw new RuntimeRefusedError(response.status, await detailOf(response), `updating the settings of tenant ${tenantId}`);
  }

  /** `DELETE /tenants/{id}`: the ordered erase (DESIGN.md flow 5). */
  async eraseTenant(baseUrl: string, adminKey: string, tenantId: string): Promise<EraseOutcome> {
    const response = await this.call('DELETE', `${baseUrl}/tenants/${encodeURIComponent(tenantId)}`, { adminKey });
    const text = await response.text();
    const body = parseJson(text);
    // Only the runtime's own answer (JSON with a detail) says the tenant is unknown; a 404 page from an ingress or
    // a default backend says nothing about the tenant, and must not let its finalizer go.
    if (response.status === 404 && typeof body?.detail === 'string') return { kind: 'unknown_tenant' };
    if (response.status === 200 && body) {
      const report = toEraseReport(body);
      return report.complete ? { kind: 'erased', report } : { kind: 'incomplete', report, detail: failedSteps(report) };
    }
    if (response.status >= 500 && body?.report && typeof body.report === 'object') {
      const report = toEraseReport(body.report as Record<string, unknown>);
      return { kind: 'incomplete', report, detail: typeof body.detail === 'string' ? body.detail : failedSteps(report) };
    }
    throw new RuntimeRefusedError(response.status, typeof body?.detail === 'string' ? body.detail : text.slice(0, 500), `erasing tenant ${tenantId}`);
  }

  private async call(method: string, url: string, options: { adminKey?: string; body?: unknown; timeoutMs?: number }): Promise<Response> {
    if (method !== 'GET') this.options.mayWrite?.();
    const headers: Record<string, string> = {};
    if (options.adminKey !== undefined) headers['x-admin-key'] = options.adminKey;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    try {
      const response = await fetch(url, {
        method,
        headers,
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
        signal: AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs),
      });
      this.options.onCall?.({ method, url, status: response.status });
      return response;
    } catch (error) {
      const unreachable = new RuntimeUnreachableError(url, error instanceof Error && error.cause instanceof Error ? error.cause : error);
      this.options.onCall?.({ method, url, error: unreachable.message });
      throw unreachable;
    }
  }
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * What a runtime's /ready body says is wrong, as stable text: the failing dependencies and their errors, without
 * the latencies that change on every probe (a condition message that changes every pass is a status write every
 * pass, and every write wakes the object again).
 */
export function readinessDetail(body: Record<string, unknown> | null): string | undefined {
  if (!body || typeof body.dependencies !== 'object' || body.dependencies === null) return undefined;
  if (body.draining === true) return 'the runtime is draining';
  const failing = Object.entries(body.dependencies as Record<string, { ok?: unknown; error?: unknown }>)
    .filter(([, report]) => report?.ok !== true)
    .map(([name, report]) => `${name}: ${typeof report?.error === 'string' ? report.error : 'not ok'}`)
    .sort();
  return failing.length > 0 ? `dependencies failing: ${failing.join('; ')}` : 'not ready';
}

async function detailOf(response: Response): Promise<string> {
  const text = await response.text();
  const body = parseJson(text);
  return typeof body?.detail === 'string' ? body.detail : text.slice(0, 500) || response.statusText;
}

function failedSteps(report: TenantEraseReport): string {
  const failed = report.steps.filter((s) => s.outcome === 'failed');
  return failed.length === 0 ? 'the runtime reported the erase incomplete' : failed.map((s) => `step ${s.step} failed${s.error ? `: ${s.error}` : ''}`).join('; ');
}
