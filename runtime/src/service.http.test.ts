// The runtime's operational surface: health, readiness, metrics, the OpenAPI document and the explorer,
// unknown routes. The same shell serves the control-api (control-api/src/service.http.test.ts).
import { request, type IncomingHttpHeaders } from 'node:http';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRuntime, type TestRuntime } from '@agentplane/test/harness/runtime';

describe('runtime service routes', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    rt = await startTestRuntime();
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('GET /health reports liveness, work in flight and draining', async () => {
    const res = await fetch(`${rt.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok', draining: false, in_flight: 0, runs_in_flight: 0 });

    const finishRun = rt.runtime.lifecycle.beginWork();
    expect(await (await fetch(`${rt.url}/health`)).json()).toMatchObject({ in_flight: 1, runs_in_flight: 1 });
    finishRun();
    expect(await (await fetch(`${rt.url}/health`)).json()).toMatchObject({ in_flight: 0 });
  });

  it('GET /ready answers 200 with a report for each dependency', async () => {
    const res = await fetch(`${rt.url}/ready`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { ready: boolean; dependencies: Record<string, { ok: boolean; latency_ms: number }> };
    expect(body.ready).toBe(true);
    expect(Object.keys(body.dependencies).sort()).toEqual(['blobs', 'database', 'events']);
    for (const report of Object.values(body.dependencies)) expect(report.ok).toBe(true);
  });

  it('GET /metrics counts requests by route template (not raw id) and status, with process metrics', async () => {
    const id = crypto.randomUUID();
    await rt.admin(`/tenants/${id}`);
    await rt.admin(`/tenants/${id}`);
    const text = await (await fetch(`${rt.url}/metrics`)).text();
    expect(text).toMatch(/http_requests_total\{method="GET",route="\/tenants\/:tenant_id",status="404",program="runtime"\} 2/);
    expect(text).toMatch(/http_request_duration_seconds_count\{[^}]*route="\/tenants\/:tenant_id",status="404"\} 2/);
    expect(text).not.toContain(id);
    expect(text).toContain('http_requests_in_flight');
    expect(text).toContain('process_resident_memory_bytes');
  });

  it('GET /openapi.json is a valid OpenAPI 3.1 document listing every route with its schemas and security', async () => {
    const doc = (await (await fetch(`${rt.url}/openapi.json`)).json()) as {
      openapi: string;
      info: { version: string };
      paths: Record<string, Record<string, { security: object[]; requestBody?: unknown; responses: Record<string, unknown> }>>;
      components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('0.1.0');
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);

    const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
    expect(operations.sort()).toEqual(
      [
        'GET /health',
        'GET /ready',
        'GET /metrics',
        'GET /openapi.json',
        'GET /docs',
        'POST /tenants',
        'GET /tenants',
        'GET /tenants/{tenant_id}',
        'PATCH /tenants/{tenant_id}',
        'DELETE /tenants/{tenant_id}',
        'GET /tenants/{tenant_id}/webhook-secret',
        'POST /tenants/{tenant_id}/webhook-secret/rotate',
        'PUT /tenants/{tenant_id}/configuration',
        'GET /tenants/{tenant_id}/configuration',
        'GET /tenants/{tenant_id}/documents',
        'POST /tenants/{tenant_id}/documents',
        'GET /tenants/{tenant_id}/documents/{document_id}',
        'POST /tenants/{tenant_id}/documents/{document_id}',
        'DELETE /tenants/{tenant_id}/documents/{document_id}',
        'GET /tenants/{tenant_id}/wiki',
        'GET /tenants/{tenant_id}/wiki/{item_id}',
        'DELETE /tenants/{tenant_id}/wiki/{item_id}',
        'GET /tenants/{tenant_id}/tools/deliveries',
        'GET /capabilities',
        'POST /auth/token',
        'POST /chat',
        'POST /chat/stream',
        'GET /chat/stream/{run_id}',
        'POST /chat/stream/{run_id}/steer',
        'POST /chat/stream/{run_id}/cancel',
        'POST /chat/sessions/{session_id}/followups',
        'POST /chat/sessions/{session_id}/recap',
        'GET /chat/sessions',
        'GET /chat/sessions/models',
        'GET /chat/sessions/{session_id}/messages',
        'GET /chat/sessions/{session_id}/todos',
        'POST /chat/sessions/{id}/fork',
        'PATCH /chat/sessions/{id}',
        'DELETE /chat/sessions/{id}',
        'DELETE /computers/sessions/{id}',
        'GET /computers/host',
        'GET /computers/sessions',
        'GET /computers/sessions/{id}',
        'GET /computers/sessions/{id}/files',
        'GET /tenants/{tenant_id}/sandbox-host',
        'GET /tenants/{tenant_id}/sandboxes',
        'POST /computers/sessions',
        'POST /computers/sessions/{id}/exec',
        'POST /computers/sessions/{id}/files',
        'POST /computers/sessions/{id}/pause',
        'POST /computers/sessions/{id}/resume',
        'POST /tenants/{tenant_id}/sandboxes/{sandbox_id}/{action}',
        'POST /chat/sessions/{session_id}/browser/frame',
        'GET /chat/sessions/{session_id}/browser/stream',
        'POST /chat/sessions/{session_id}/browser/stream/ack',
        'POST /chat/sessions/{session_id}/browser/input',
        'POST /chat/sessions/{session_id}/browser/check',
        'PUT /chat/sessions/{id}/messages/{message_id}/feedback',
        'DELETE /chat/sessions/{id}/messages/{message_id}/feedback',
        'GET /chat/sessions/{session_id}/events',
        'GET /chat/feedback',
        'GET /documents',
        'POST /documents',
        'POST /documents/presign-upload',
        'POST /documents/{id}/presign-parts',
        'POST /documents/{id}/complete-upload',
        'POST /documents/{id}/abort-upload',
        'GET /documents/{id}',
        'PATCH /documents/{id}',
        'DELETE /documents/{id}',
        'GET /documents/{id}/download-url',
        'POST /documents/{id}/reingest',
        'GET /documents/{id}/chunks',
        'POST /documents/retrieve',
        'GET /memory',
        'DELETE /memory/{item_id}',
        'GET /tools/deliveries',
        'GET /plugins',
        'POST /plugins',
        'DELETE /plugins/{plugin_id}',
        'GET /tenants/{tenant_id}/plugins',
        'POST /tenants/{tenant_id}/plugins',
        'DELETE /tenants/{tenant_id}/plugins/{plugin_id}',
        'GET /tools',
        'GET /tools/mcp',
        'POST /tools/mcp',
        'DELETE /tools/mcp/{server_id}',
        'POST /tools/mcp/probe',
        'POST /tasks',
        'GET /tasks',
        'GET /tasks/{task_id}',
        'POST /tasks/{task_id}/cancel',
        'GET /tenants/{tenant_id}/tasks',
        'POST /internal/tasks/{task_id}/fires',
        'GET /tenants/{tenant_id}/events',
        'POST /tenants/{tenant_id}/events/{delivery_id}/redeliver',
        'POST /triggers',
        'GET /triggers',
        'POST /triggers/{trigger_id}/rotate',
        'DELETE /triggers/{trigger}',
        'POST /triggers/{trigger}',
        'GET /tenants/{tenant_id}/turns',
        'GET /tenants/{tenant_id}/readiness',
        'GET /tenants/{tenant_id}/context',
        'GET /tenants/{tenant_id}/usage',
        'GET /tenants/{tenant_id}/observability',
        'GET /audit',
        'POST /audit/forget',
        'GET /tenants/{tenant_id}/forgotten-subjects',
        'GET /tenants/{tenant_id}/sessions',
        'GET /tenants/{tenant_id}/sessions/{session_id}/messages',
      ].sort(),
    );
    expect(doc.paths['/tenants']!.post!.security).toEqual([{ adminKey: [] }]);
    expect(doc.paths['/tenants']!.post!.requestBody).toBeDefined();
    // A route that takes a small file inline documents both its JSON body and its form.
    expect(Object.keys((doc.paths['/documents']!.post!.requestBody as { content: Record<string, unknown> }).content).sort()).toEqual(['application/json', 'multipart/form-data']);
    expect(doc.components.securitySchemes.adminKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Admin-Key' });
    expect(doc.components.securitySchemes.fireKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Fire-Key' });
    expect(doc.paths['/internal/tasks/{task_id}/fires']!.post!.security).toEqual([{ fireKey: [] }]);
    const schemas = ['TenantCreate', 'TenantCreated', 'TenantOut', 'TenantDeleted', 'TenantSettingsUpdate', 'WebhookSecret', 'Error', 'ValidationError', 'JsonValue'];
    for (const name of [...schemas, 'TenantConfiguration', 'TenantConfigurationOut', 'CapabilityCeiling', 'Capabilities', 'TokenRequest', 'TokenResponse']) {
      expect(doc.components.schemas).toHaveProperty(name);
    }
    expect(Object.keys(doc.components.schemas).filter((name) => name.startsWith('__'))).toEqual([]);
    // Every route lists the answers it can give besides its own: a body route its body errors, a guarded one 401.
    const create = doc.paths['/tenants']!.post!.responses as Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
    expect(Object.keys(create).sort()).toEqual(['201', '400', '401', '409', '413', '415', '422', '500']);
    expect(create['422']!.content!['application/json']!.schema.$ref).toBe('#/components/schemas/ValidationError');
    expect(create['409']!.content!['application/json']!.schema.$ref).toBe('#/components/schemas/Error');
  });

  it('GET /docs serves an explorer whose every asset comes from this server', async () => {
    const res = await fetch(`${rt.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).not.toMatch(/https?:\/\//);
    const assets = [...html.matchAll(/(?:src|href)="\.\/([^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(expect.arrayContaining(['docs/swagger-ui-bundle.js', 'docs/swagger-ui.css', 'docs/initializer.js']));
    for (const asset of assets) {
      const asset_res = await fetch(`${rt.url}/${asset}`);
      expect(asset_res.status, asset).toBe(200);
      expect((await asset_res.arrayBuffer()).byteLength, asset).toBeGreaterThan(0);
    }
    const initializer = await (await fetch(`${rt.url}/docs/initializer.js`)).text();
    expect(initializer).toContain('openapi.json');
    expect(initializer).toContain('validatorUrl: null');
    const slash = await fetch(`${rt.url}/docs/`, { redirect: 'manual' });
    expect(slash.status).toBe(301);
    expect(new URL(slash.headers.get('location')!, `${rt.url}/docs/`).pathname).toBe('/docs');
  });

  it('answers an unknown route with 404 and a detail', async () => {
    const res = await fetch(`${rt.url}/no/such/route`, { method: 'POST' });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ detail: 'no route for POST /no/such/route', code: 'no_route', request_id: res.headers.get('x-request-id') });
  });

  it('answers a known path with a method it does not serve with 405 and Allow', async () => {
    const res = await fetch(`${rt.url}/health`, { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(await res.json()).toMatchObject({ code: 'method_not_allowed' });
    const templated = await fetch(`${rt.url}/tenants/${crypto.randomUUID()}`, { method: 'PUT' });
    expect(templated.status).toBe(405);
    expect(templated.headers.get('allow')).toBe('DELETE, GET, HEAD, PATCH');
  });

  it('gives every error one shape: detail, code and request_id, validation and unparsable bodies included', async () => {
    const headers = { 'x-admin-key': rt.adminKey, 'content-type': 'application/json' };
    const invalid = await fetch(`${rt.url}/tenants`, { method: 'POST', headers, body: JSON.stringify({ name: 42 }) });
    expect(invalid.status).toBe(422);
    expect(await invalid.json()).toMatchObject({ detail: [{ loc: ['body', 'name'] }], code: 'validation_failed', request_id: invalid.headers.get('x-request-id') });
    const unparsable = await fetch(`${rt.url}/tenants`, { method: 'POST', headers, body: '{' });
    expect(unparsable.status).toBe(400);
    expect(await unparsable.json()).toMatchObject({ detail: 'request body is not valid JSON', code: 'invalid_json', request_id: unparsable.headers.get('x-request-id') });
  });

  it('refuses text no store can hold (NUL, a lone surrogate) and undecodable paths with a 4xx naming where', async () => {
    const headers = { 'x-admin-key': rt.adminKey, 'content-type': 'application/json' };
    const before = await (await fetch(`${rt.url}/tenants`, { headers })).json();
    for (const name of ['a\u0000b', 'a\ud800b']) {
      const res = await fetch(`${rt.url}/tenants`, { method: 'POST', headers, body: JSON.stringify({ name }) });
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ detail: [{ loc: ['body', 'name'] }] });
    }
    for (const path of ['/tenants/%zz', '/tenants/%E0%A4%A', '/chat/sessions/%zz/messages']) {
      const res = await fetch(`${rt.url}${path}`, { headers });
      expect(res.status, path).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'invalid_path' });
    }
    expect(await (await fetch(`${rt.url}/tenants`, { headers })).json()).toEqual(before);
  });

  it('echoes a caller request id, and makes one otherwise', async () => {
    const given = await fetch(`${rt.url}/health`, { headers: { 'x-request-id': 'trace-abc.123' } });
    expect(given.headers.get('x-request-id')).toBe('trace-abc.123');
    const made = await fetch(`${rt.url}/health`, { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

/** One GET on a connection of its own, as a probe makes it. */
function onNewConnection(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; connection: string | undefined; body: unknown }>((resolve, reject) => {
    const req = request(url, { headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, connection: res.headers.connection, body: text.startsWith('{') ? JSON.parse(text) : text }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('runtime while draining', () => {
  it('answers probes on new connections, refuses new work with 503, closes each connection after its answer, and reports not ready', async () => {
    const rt = await startTestRuntime();
    try {
      const run = rt.runtime.lifecycle.beginWork();
      const drained = rt.runtime.lifecycle.drain([rt.server], 10_000);
      const health = await onNewConnection(`${rt.url}/health`);
      expect(health.status).toBe(200);
      expect(health.connection).toBe('close');
      expect(health.body).toMatchObject({ draining: true, runs_in_flight: 1 });
      const ready = await onNewConnection(`${rt.url}/ready`);
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ ready: false, draining: true });
      expect((await onNewConnection(`${rt.url}/metrics`)).status).toBe(200);
      const refused = await onNewConnection(`${rt.url}/tenants`, { 'x-admin-key': rt.adminKey });
      expect(refused.status).toBe(503);
      expect(refused.connection).toBe('close');
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.body).toMatchObject({ code: 'draining', detail: expect.any(String), request_id: expect.any(String) });
      run();
      expect(await drained).toBe('idle');
    } finally {
      await rt.stop();
    }
  });

  it('reports a drain cut off by the grace period as a timeout, after the cut-off work had its moment', async () => {
    const rt = await startTestRuntime();
    try {
      const run = rt.runtime.lifecycle.beginWork();
      let cutOff = false;
      rt.runtime.lifecycle.cutOffSignal.addEventListener('abort', () => (cutOff = true));
      expect(await rt.runtime.lifecycle.drain([], 50, 50)).toBe('timeout');
      expect(cutOff).toBe(true);
      run();
    } finally {
      await rt.stop();
    }
  });
});

describe('runtime readiness with a dependency down', () => {
  it('answers 503 naming the dependency that does not answer', async () => {
    const rt = await startTestRuntime({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
    try {
      const res = await fetch(`${rt.url}/ready`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { ready: boolean; dependencies: Record<string, { ok: boolean; error?: string }> };
      expect(body.ready).toBe(false);
      expect(body.dependencies.events!.ok).toBe(false);
      expect(body.dependencies.events!.error).toBeTruthy();
      expect(body.dependencies.database!.ok).toBe(true);
      // Liveness does not depend on dependencies.
      expect((await fetch(`${rt.url}/health`)).status).toBe(200);
    } finally {
      await rt.stop();
    }
  });
});
