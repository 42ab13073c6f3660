// `npm start` as a user runs it: one process, no configuration but a data dir and ports, both URLs logged; a
// restart keeps everything; SIGTERM drains accepted work before exiting (probes still answered, new work refused),
// a copy of the signal changes nothing, and one sent again later exits at once.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import * as nodeModule from 'node:module';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { REPEATED_SIGNAL_SECONDS } from '@agentplane/lib/http/lifecycle';
import { walkThrough } from '../hack/identity-walkthrough.js';
import { freePort, makeTempDir, outputLines, typeScriptNodeArgs } from './harness/process.js';

const root = join(import.meta.dirname, '..');

interface Started {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

const running = new Set<ChildProcess>();

async function startAllInOne(env: Record<string, string>, nodeArgs: string[] = []): Promise<Started> {
  // One node process (tsx as a loader, not its launcher, which would fork a child a kill could miss).
  const child = spawn(process.execPath, [...typeScriptNodeArgs, ...nodeArgs, join(root, 'all-in-one', 'src', 'main.ts')], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = outputLines(child);
  running.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  return { child, lines, exited };
}

async function waitForLine(started: Started, pattern: RegExp, timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = started.lines.find((l) => pattern.test(l));
    if (line) return line;
    if (started.child.exitCode !== null) throw new Error(`process exited ${started.child.exitCode}:\n${started.lines.join('\n')}`);
    if (Date.now() > deadline) throw new Error(`no line matching ${pattern}:\n${started.lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the process reports at least one request in flight (its control plane shares the lifecycle). */
async function waitForInFlight(controlPort: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const health = (await (await fetch(`http://127.0.0.1:${controlPort}/health`)).json()) as { in_flight: number };
    if (health.in_flight >= 1) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the request never showed as in flight');
}

/** One GET on a connection of its own, as a Kubernetes probe makes it. */
function onNewConnection(port: number, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Opens a POST whose body is only partly sent: an accepted request the server is still working on. */
function halfSentRequest(port: number, path: string, headers: Record<string, string>, body: string) {
  const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } });
  const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
  });
  const half = Math.floor(body.length / 2);
  req.write(body.slice(0, half));
  return { answered, finish: () => req.end(body.slice(half)) };
}

describe('npm start (all-in-one)', () => {
  const dataDir = makeTempDir('all-in-one');
  // A failed assertion must not leave a server running (it would hold the data dir for the next test).
  afterEach(async () => {
    await Promise.all([...running].map((child) => new Promise((resolve) => { child.once('exit', resolve); child.kill('SIGKILL'); })));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('serves both planes on embedded defaults, logs both URLs, and keeps everything across a restart', async () => {
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const env = { AGENTPLANE_DATA_DIR: dataDir, CONTROL_PORT: String(controlPort), DATA_PORT: String(dataPort) };

    const first = await startAllInOne(env);
    const up = JSON.parse(await waitForLine(first, /agentplane is up/)) as { control_url: string; data_url: string };
    expect(up.control_url).toBe(`http://127.0.0.1:${controlPort}`);
    expect(up.data_url).toBe(`http://127.0.0.1:${dataPort}`);
    const keyLine = JSON.parse(await waitForLine(first, /generated a runtime admin key/)) as { file: string };
    const adminKey = readFileSync(keyLine.file, 'utf8').trim();
    expect(adminKey).toMatch(/^ak_[A-Za-z0-9_-]{43}$/);
    // Not a terminal here (a pipe, as in a container): the value is never written, only where it is kept.
    expect(first.lines.join('\n')).not.toContain(adminKey);

    expect((await fetch(`${up.control_url}/health`)).status).toBe(200);
    // The first owner signs in on the control plane, whose tables share the embedded database.
    const ownerPassword = readFileSync(join(dataDir, 'secrets', 'owner-password'), 'utf8').trim();
    expect(first.lines.join('\n')).not.toContain(ownerPassword);
    const signIn = await fetch(`${up.control_url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'owner@localhost', password: ownerPassword }),
    });
    expect(signIn.status).toBe(200);
    expect((await fetch(`${up.control_url}/ready`)).status).toBe(200);
    expect((await fetch(`${up.data_url}/ready`)).status).toBe(200);
    const created = await fetch(`${up.data_url}/tenants`, {
      method: 'POST',
      headers: { 'x-admin-key': adminKey, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'kept', settings_json: { litellm_key: 'sk-kept-across-restarts' } }),
    });
    expect(created.status).toBe(201);
    const tenant = (await created.json()) as { tenant_id: string; webhook_secret: string };

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const second = await startAllInOne(env);
    await waitForLine(second, /agentplane is up/);
    expect(second.lines.some((l) => l.includes('generated a runtime admin key'))).toBe(false);
    expect(second.lines.join('\n')).not.toContain(adminKey);
    const secret = await fetch(`${up.data_url}/tenants/${tenant.tenant_id}/webhook-secret`, { headers: { 'x-admin-key': adminKey } });
    expect(secret.status).toBe(200);
    expect(((await secret.json()) as { webhook_secret: string }).webhook_secret).toBe(tenant.webhook_secret);

    // Drain: an accepted request finishes after SIGTERM; meanwhile probes on new connections are answered (draining)
    // and new work is refused with 503, on both planes.
    const pending = halfSentRequest(dataPort, '/tenants', { 'x-admin-key': adminKey }, JSON.stringify({ name: 'accepted before the drain' }));
    await waitForInFlight(controlPort);
    second.child.kill('SIGTERM');
    await waitForLine(second, /draining/);
    for (const port of [dataPort, controlPort]) {
      const health = await onNewConnection(port, '/health');
      expect(health.status).toBe(200);
      expect(JSON.parse(health.body)).toMatchObject({ status: 'ok', draining: true });
      expect((await onNewConnection(port, '/ready')).status).toBe(503);
    }
    const refused = await onNewConnection(dataPort, '/tenants', { 'x-admin-key': adminKey });
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'draining' });
    expect(second.child.exitCode).toBeNull();
    pending.finish();
    expect((await pending.answered).status).toBe(201);
    expect(await second.exited).toBe(0);
  });

  it('takes a repeated SIGTERM as the same stop, and exits at once on one sent again later, while work is still in flight', async () => {
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const started = await startAllInOne({ AGENTPLANE_DATA_DIR: dataDir, CONTROL_PORT: String(controlPort), DATA_PORT: String(dataPort) });
    await waitForLine(started, /agentplane is up/);
    const pending = halfSentRequest(dataPort, '/tenants', { 'x-admin-key': 'any' }, JSON.stringify({ name: 'never finished' }));
    pending.answered.catch(() => {});
    await waitForInFlight(controlPort);
    // The signal and a copy right behind it, as a process group's stop delivers them (docs/decisions/0071).
    started.child.kill('SIGTERM');
    started.child.kill('SIGTERM');
    await waitForLine(started, /draining/);
    expect(JSON.parse((await onNewConnection(dataPort, '/health')).body)).toMatchObject({ draining: true });
    expect(started.child.exitCode).toBeNull();
    // Sent again once the first is older than the window (the process noted it before logging "draining").
    await new Promise((resolve) => setTimeout(resolve, REPEATED_SIGNAL_SECONDS * 1000));
    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(1);
    expect(started.lines.join('\n')).toContain('signalled again: exiting now');
  });

  it('walks the identity path on a fresh npm start: every step and every refusal with its status', async () => {
    const dir = makeTempDir('walkthrough');
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const started = await startAllInOne({ AGENTPLANE_DATA_DIR: dir, CONTROL_PORT: String(controlPort), DATA_PORT: String(dataPort), AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' });
    try {
      await waitForLine(started, /agentplane is up/);
      const steps = await walkThrough({
        controlUrl: `http://127.0.0.1:${controlPort}`,
        dataUrl: `http://127.0.0.1:${dataPort}`,
        email: 'owner@localhost',
        password: readFileSync(join(dir, 'secrets', 'owner-password'), 'utf8').trim(),
      });
      expect(steps.filter((step) => step.status !== step.expected)).toEqual([]);
      expect(steps.map((step) => step.name)).toEqual(expect.arrayContaining(['sign in', 'register the provider (its embedding dimension measured)', 'mint an end-user token', 'call the data plane with the token', 'narrow the token on the data plane']));
      expect(steps).toHaveLength(17);
    } finally {
      started.child.kill('SIGTERM');
      await started.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // The adapters of other configurations and what only a turn needs are imported when used (docs/decisions/0033).
  it.skipIf(!('registerHooks' in nodeModule))('loads none of the modules its configuration leaves unused', async () => {
    const dir = makeTempDir('modules');
    const record = join(dir, 'modules.txt');
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const started = await startAllInOne(
      { AGENTPLANE_DATA_DIR: join(dir, 'data'), CONTROL_PORT: String(controlPort), DATA_PORT: String(dataPort), MODULE_RECORD: record },
      ['--import', join(root, 'test', 'harness', 'module-recorder.ts')],
    );
    try {
      await waitForLine(started, /agentplane is up/);
      expect((await fetch(`http://127.0.0.1:${dataPort}/ready`)).status).toBe(200);
      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
      const packages = new Set(
        readFileSync(record, 'utf8')
          .split('\n')
          .map((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1])
          .filter((name) => name !== undefined),
      );
      expect(packages).toContain('express'); // the record saw the packages it did load (PGlite loads on its own thread)
      for (const unused of ['redis', '@redis/client', '@aws-sdk/client-s3', '@kubernetes/client-node', 'pg', 'gpt-tokenizer', '@modelcontextprotocol/sdk']) {
        expect(packages, `${unused} was loaded`).not.toContain(unused);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a second process on the same data dir, naming the one that holds it', async () => {
    const ports = () => ({ CONTROL_PORT: '0', DATA_PORT: '0' });
    const first = await startAllInOne({ AGENTPLANE_DATA_DIR: dataDir, ...ports() });
    await waitForLine(first, /agentplane is up/);
    const second = await startAllInOne({ AGENTPLANE_DATA_DIR: dataDir, ...ports() });
    expect(await second.exited).not.toBe(0);
    expect(second.lines.join('\n')).toMatch(new RegExp(`the runtime failed to start: the database in .* is in use by process ${first.child.pid}: stop it first`));
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  });

  it('refuses bad configuration with exit code 2, naming each variable, what was wrong and what is allowed', async () => {
    const started = await startAllInOne({ AGENTPLANE_DATA_DIR: dataDir, DATA_PORT: '99999', REDIS_URL: 'http://nope', LOG_LEVEL: 'loud' });
    expect(await started.exited).toBe(2);
    const output = started.lines.join('\n');
    expect(output).toContain('DATA_PORT="99999" is not valid: expected an integer from 0 to 65535');
    expect(output).toContain('REDIS_URL="http://nope" is not valid: expected a URL with scheme redis:// or rediss://');
    expect(output).toContain('LOG_LEVEL="loud" is not valid: expected one of trace, debug, info, warn, error, fatal, silent');
  });

  it('reports the bad variables of both programs at once, a shared one once', async () => {
    const started = await startAllInOne({ AGENTPLANE_DATA_DIR: dataDir, DATA_PORT: 'abc', CONTROL_PORT: '99999', LOG_FORMAT: 'loud' });
    expect(await started.exited).toBe(2);
    const output = started.lines.join('\n');
    expect(output).toContain('DATA_PORT="abc" is not valid');
    expect(output).toContain('CONTROL_PORT="99999" is not valid');
    expect(output.match(/LOG_FORMAT="loud" is not valid/g)).toHaveLength(1);
  });

  it('hands out the data-plane URL it serves in the connect snippet', async () => {
    const dir = makeTempDir('connect');
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const started = await startAllInOne({ AGENTPLANE_DATA_DIR: dir, CONTROL_PORT: String(controlPort), DATA_PORT: String(dataPort) });
    try {
      await waitForLine(started, /agentplane is up/);
      const controlUrl = `http://127.0.0.1:${controlPort}`;
      const password = readFileSync(join(dir, 'secrets', 'owner-password'), 'utf8').trim();
      const login = (await (await fetch(`${controlUrl}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'owner@localhost', password }) })).json()) as { token: string };
      const auth = { authorization: `Bearer ${login.token}`, 'content-type': 'application/json' };
      const me = (await (await fetch(`${controlUrl}/api/me`, { headers: auth })).json()) as { orgs: { id: string }[] };
      const project = (await (await fetch(`${controlUrl}/api/orgs/${me.orgs[0]!.id}/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'connect' }) })).json()) as { id: string };
      const connect = (await (await fetch(`${controlUrl}/api/projects/${project.id}/connect`, { headers: auth })).json()) as { data_url: string; snippet: string };
      expect(connect.data_url).toBe(`http://127.0.0.1:${dataPort}`);
      expect(connect.snippet).toContain(`http://127.0.0.1:${dataPort}`);
    } finally {
      started.child.kill('SIGTERM');
      await started.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops when whatever started `npm start` signals npm itself', async () => {
    const dir = makeTempDir('npm-start');
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_FORMAT: 'json', AGENTPLANE_DATA_DIR: dir, CONTROL_PORT: String(controlPort), DATA_PORT: String(dataPort) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(npm);
    const started: Started = { child: npm, lines: [], exited: new Promise((resolve) => npm.once('exit', (code) => { running.delete(npm); resolve(code); })) };
    let buffer = '';
    const collect = (chunk: Buffer) => {
      buffer += chunk.toString();
      const parts = buffer.split('\n');
      buffer = parts.pop() ?? '';
      started.lines.push(...parts);
    };
    npm.stdout!.on('data', collect);
    npm.stderr!.on('data', collect);
    try {
      const up = JSON.parse(await waitForLine(started, /agentplane is up/)) as { pid: number };
      expect(up.pid).not.toBe(npm.pid); // npm's own process is not the server's
      npm.kill('SIGTERM');
      await started.exited;
      await waitForLine(started, /"msg":"stopped"/);
      await expect(fetch(`http://127.0.0.1:${dataPort}/health`)).rejects.toThrow();
      expect(() => process.kill(up.pid, 0)).toThrow(); // the server is gone, not re-parented and still answering
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
