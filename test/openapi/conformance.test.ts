// The OpenAPI documents tell the truth, as a schema-driven fuzzer (schemathesis, with every check it has) finds when
// it runs them against both planes: every status an operation answers is declared with its body schema, requests the
// schema accepts are not refused as invalid and those it refuses are, required credentials are required, SSE
// events and `Allow` headers match, and no answer is a 5xx. Clients and SDKs are generated from these documents.
// The settings and the few decided exceptions are in ./schemathesis.toml (decision 0031).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatWorld, type ChatWorld } from '../chat/fixture.js';
import { startTestControl, type TestControl } from '../harness/control.js';
import { requireBinary } from '../harness/process.js';

const st = requireBinary('st');
const config = join(fileURLToPath(new URL('.', import.meta.url)), 'schemathesis.toml');

/** Runs schemathesis against one document; resolves with its exit code and what it printed. */
function schemathesis(documentUrl: string, headers: Record<string, string>, filters: string[]): Promise<{ code: number | null; output: string }> {
  const args = ['--config-file', config, 'run', documentUrl, '--max-examples', '12', '--workers', '1', '--seed', '20261125', '--no-color', ...filters];
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  return new Promise((resolve, reject) => {
    const child = spawn(st!, args, { env: { ...process.env, SCHEMATHESIS_HOOKS: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe.skipIf(!st)('the OpenAPI documents against a schema-driven fuzzer', () => {
  let world: ChatWorld;
  let control: TestControl;
  let token: string;
  let projectKey: string;
  let session: string;

  beforeAll(async () => {
    world = await chatWorld();
    token = await world.token({ roles: ['admin'] });
    control = await startTestControl({ AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' });
    const signedIn = await control.control.accounts.signIn('owner@example.com', 'a long enough password', 'test');
    session = signedIn.token;
    const orgId = (await control.control.accounts.orgsOf(signedIn.account.id))[0]!.id;
    const project = await control.control.projects.create(orgId, signedIn.account.id, 'fuzzed');
    projectKey = (await control.control.keys.create({ kind: 'account', accountId: signedIn.account.id }, project.id, { scope: 'admin', name: 'fuzzer' })).key;
  }, 120_000);

  afterAll(async () => {
    await world?.stop();
    await control?.stop();
  });

  const cases: [string, () => Promise<{ code: number | null; output: string }>][] = [
    ['the data plane, as an end-user', () => schemathesis(`${world.rt.url}/openapi.json`, { Authorization: `Bearer ${token}` }, ['--exclude-path-regex', '^/tenants'])],
    ['the data plane, as its administrator', () => schemathesis(`${world.rt.url}/openapi.json`, { 'X-Admin-Key': world.rt.adminKey }, ['--include-path-regex', '^/tenants'])],
    ['the control plane, with a project key', () => schemathesis(`${control.url}/openapi.json`, { 'X-API-Key': projectKey }, ['--include-path-regex', '^/api/projects'])],
    ['the control plane, signed in', () => schemathesis(`${control.url}/openapi.json`, { Authorization: `Bearer ${session}` }, ['--exclude-path-regex', '^/api/projects|^/api/auth/logout'])],
  ];

  for (const [name, run] of cases) {
    it(`finds nothing on ${name}`, async () => {
      const { code, output } = await run();
      expect(output, output).toMatch(/\d+ generated/);
      expect(code, output).toBe(0);
    }, 600_000);
  }
});
