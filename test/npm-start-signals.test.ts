// `npm start` stopped the way a terminal and systemd stop it: the signal goes to the whole process group (Ctrl-C
// sends SIGINT to every process in the foreground group; systemd's KillMode=control-group sends SIGTERM to every
// process of the unit), so the server gets it once directly and once more from npm, which forwards it to its child.
// That double delivery is one request to stop: a stream in flight still ends with its terminal frame, /health says
// draining, and npm exits 0 (docs/decisions/0071).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { eventually } from './harness/eventually.js';
import { freePort, makeTempDir, outputLines } from './harness/process.js';
import { sseEvents, type SseEvent } from './harness/sse.js';

const root = join(import.meta.dirname, '..');
const MODEL = 'slow-model';
const words = (count: number) => Array.from({ length: count }, (_, i) => `w${i}`).join(' ');

interface NpmStart {
  npm: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

const groups = new Set<number>();

/** `npm start` as the leader of a process group of its own, as a terminal or a systemd unit starts it. */
function npmStart(env: Record<string, string>): NpmStart {
  const npm = spawn('npm', ['start', '--silent'], {
    cwd: root,
    detached: true,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  groups.add(npm.pid!);
  const lines = outputLines(npm);
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  return { npm, lines, exited };
}

async function waitForLine(started: NpmStart, pattern: RegExp, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = started.lines.find((l) => pattern.test(l));
    if (line) return line;
    if (started.npm.exitCode !== null) throw new Error(`npm start exited ${started.npm.exitCode}:\n${started.lines.join('\n')}`);
    if (Date.now() > deadline) throw new Error(`no line matching ${pattern}:\n${started.lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** One GET on a connection of its own, as a probe makes it. */
function onNewConnection(port: number, path: string) {
  return new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The README's first steps through the control plane: a project whose provider is `fake`, and an end-user token. */
async function chatToken(controlUrl: string, dataUrl: string, password: string, fake: FakeOpenAIServer): Promise<string> {
  const call = async (path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) => {
    const res = await fetch(`${controlUrl}${path}`, {
      method: init.method ?? 'GET',
      headers: { 'content-type': 'application/json', ...init.headers },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    const body = (await res.json()) as Record<string, unknown>;
    if (res.status >= 300) throw new Error(`${init.method ?? 'GET'} ${path} answered ${res.status}: ${JSON.stringify(body)}`);
    return body;
  };
  const session = { authorization: `Bearer ${String((await call('/api/auth/login', { method: 'POST', body: { email: 'owner@localhost', password } })).token)}` };
  const org = ((await call('/api/me', { headers: session })).orgs as { id: string }[])[0]!.id;
  const project = String((await call(`/api/orgs/${org}/projects`, { method: 'POST', headers: session, body: { name: 'signals' } })).id);
  const admin = { 'x-api-key': String((await call(`/api/projects/${project}/keys`, { method: 'POST', headers: session, body: { scope: 'admin' } })).key) };
  await call(`/api/projects/${project}/providers`, {
    method: 'POST',
    headers: admin,
    body: { provider: 'openai_compatible', models: [MODEL], values: { api_key: fake.apiKey, base_url: fake.url } },
  });
  const token = String((await call(`/api/projects/${project}/token`, { method: 'POST', headers: admin, body: { subject: 'acme:alice', capabilities: ['chat'] } })).access_token);
  // The configuration reaches the data plane through the outbox a moment later.
  await eventually(async () => (await fetch(`${dataUrl}/capabilities`, { headers: { authorization: `Bearer ${token}` } })).status === 200, {
    what: 'the project to reach the data plane',
  });
  return token;
}

describe('npm start stopped through its process group', () => {
  let fake: FakeOpenAIServer;
  const dirs: string[] = [];

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-signals-provider-key', chatModels: [MODEL] });
    // npm start builds first; built here once, its own build is a quick no-op and each test has its time for itself.
    const build = spawn('npm', ['run', '--silent', 'build'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    build.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    build.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => build.once('exit', resolve));
    if (code !== 0) throw new Error(`npm run build exited ${code}:\n${output}`);
  }, 900_000);
  // A failed assertion must not leave the group running.
  afterEach(() => {
    fake.clearScripts();
    for (const group of groups) {
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        // the group has already gone
      }
    }
    groups.clear();
  });
  afterAll(async () => {
    await fake?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('drains a stream in flight to its done frame on %s to the group, and npm exits 0', async (signal) => {
    const dataDir = makeTempDir('npm-start-signals');
    dirs.push(dataDir);
    const [controlPort, dataPort] = [await freePort(), await freePort()];
    const started = npmStart({
      AGENTPLANE_DATA_DIR: dataDir,
      CONTROL_PORT: String(controlPort),
      DATA_PORT: String(dataPort),
      AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
    });
    await waitForLine(started, /agentplane is up/, 300_000);
    const controlUrl = `http://127.0.0.1:${controlPort}`;
    const dataUrl = `http://127.0.0.1:${dataPort}`;
    const token = await chatToken(controlUrl, dataUrl, readFileSync(join(dataDir, 'secrets', 'owner-password'), 'utf8').trim(), fake);

    // A model that answers slowly keeps the stream in flight well after the signal.
    fake.script({ text: words(30), dripMs: 100 });
    const response = await fetch(`${dataUrl}/chat/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'stop me gently', model: MODEL }),
    });
    expect(response.status).toBe(200);
    const events = sseEvents(response);
    const frames: SseEvent[] = [];
    while (frames.filter((frame) => frame.event === 'token').length < 2) {
      const next = await events.next();
      if (next.done) throw new Error(`the stream ended before the signal: ${JSON.stringify(frames)}`);
      frames.push(next.value);
    }

    process.kill(-started.npm.pid!, signal);
    const health = await eventually(async () => {
      if (started.npm.exitCode !== null) return 'exited';
      const answer = await onNewConnection(dataPort, '/health');
      return answer.body.draining === true ? answer : undefined;
    }, { what: '/health to say draining', timeoutMs: 20_000, intervalMs: 50 });
    expect(health, started.lines.join('\n')).toMatchObject({ status: 200 });

    try {
      for await (const frame of { [Symbol.asyncIterator]: () => events }) frames.push(frame);
    } catch (error) {
      throw new Error(`the stream broke off before its terminal frame; npm start said:\n${started.lines.join('\n')}`, { cause: error });
    }
    expect(frames.at(-1)).toMatchObject({ event: 'done', data: { content: words(30) } });
    expect(await started.exited, started.lines.join('\n')).toBe(0);
    const log = started.lines.join('\n');
    expect(log).toContain('"msg":"stopped"');
    expect(log).not.toContain('exiting now');
  }, 360_000);
});
