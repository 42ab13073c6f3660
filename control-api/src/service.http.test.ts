// The control-api serves the same operational surface as the runtime, with its own OpenAPI document.
import { createServer, type Server } from 'node:http';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@agentplane/lib/logging';
import { rmSync } from 'node:fs';
import { freePort, makeTempDir } from '@agentplane/test/harness/process';
import { createControlApi } from './app.js';
import { loadControlApiConfig } from './config.js';

describe('control-api service routes', () => {
  let server: Server;
  let url: string;
  let runtimeAnswers = true;
  let dataDir: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const port = await freePort();
    dataDir = makeTempDir('control');
    const config = loadControlApiConfig({ CONTROL_PORT: String(port), AGENTPLANE_DATA_DIR: dataDir });
    const control = await createControlApi({
      config,
      logger: silentLogger(),
      readiness: {
        runtime: async () => {
          if (!runtimeAnswers) throw new Error('runtime does not answer');
        },
      },
    });
    close = () => control.close();
    server = createServer(control.app);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await close?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('serves /health, and /ready that follows its dependencies', async () => {
    expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'ok', draining: false, in_flight: 0 });
    expect((await fetch(`${url}/ready`)).status).toBe(200);
    runtimeAnswers = false;
    const down = await fetch(`${url}/ready`);
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({
      ready: false,
      dependencies: { database: { ok: true }, events: { ok: true }, runtime: { ok: false, error: 'runtime does not answer' } },
    });
    runtimeAnswers = true;
  });

  it('serves its own valid OpenAPI 3.1 document, metrics labelled control-api, and the explorer', async () => {
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as { openapi: string; info: { title: string; version: string }; components: { securitySchemes: object } };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: 'agentplane control plane', version: '0.1.0' });
    expect(doc.components.securitySchemes).toHaveProperty('apiKey');
    expect((await new Validator().validate(doc as never)).valid).toBe(true);
    await fetch(`${url}/health`);
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/http_requests_total\{[^}]*route="\/health"[^}]*program="control-api"\}/);
    expect((await fetch(`${url}/docs`)).status).toBe(200);
  });

  it('answers malformed JSON with 400 and unknown routes with 404, each with a string detail', async () => {
    const malformed = await fetch(`${url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ detail: 'request body is not valid JSON' });
    const unknown = await fetch(`${url}/api/nothing`);
    expect(unknown.status).toBe(404);
    expect(typeof ((await unknown.json()) as { detail: unknown }).detail).toBe('string');
  });
});
