// A runtime process stopped mid-turn, as a deploy or a crash stops it (docs/decisions/0028): on SIGTERM it keeps
// answering /health (draining) over new connections, refuses new work, lets a stream run to its terminal frame, and
// cuts off a run the grace period cannot wait for with a retryable `error` frame; after `kill -9` and a restart on
// the same data dir the dead life's run is failed at once. Either way the conversation is free right after the
// restart, a resume ends with a terminal frame, and the assistant text streamed so far is in the session.
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { freePort, makeTempDir, typeScriptNodeArgs } from '../harness/process.js';
import { configuredTenant, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { allEvents, sseEvents, type SseEvent } from '../harness/sse.js';
import { CHAT_CAPABILITIES, eventually, MODEL, OTHER_MODEL, providerSection } from './fixture.js';

const root = join(import.meta.dirname, '..', '..');
const adminKey = `test-admin-key-${Math.random().toString(36).slice(2)}-padding`;
const words = (count: number) => Array.from({ length: count }, (_, i) => `w${i}`).join(' ');

interface RuntimeProcess {
  child: ChildProcess;
  url: string;
  exited: Promise<number | null>;
  output: () => string;
}

const running = new Set<ChildProcess>();

/** `npm run start:runtime` on an embedded store in `dataDir`, as its own process, answering on `port`. */
async function startRuntime(dataDir: string, port: number, env: Record<string, string> = {}): Promise<RuntimeProcess> {
  const child = spawn(process.execPath, [...typeScriptNodeArgs, join(root, 'runtime', 'src', 'main.ts')], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      LOG_FORMAT: 'json',
      AGENTPLANE_DATA_DIR: dataDir,
      DATA_PORT: String(port),
      AGENTPLANE_ADMIN_KEY: adminKey,
      AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
      PROVIDER_TIMEOUT_MS: '120000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const keep = (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-6000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  running.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => {
    if (child.exitCode !== null) throw new Error(`the runtime exited ${child.exitCode}:\n${tail}`);
    return (await fetch(`${url}/health`).catch(() => undefined))?.status === 200;
  }, 'the runtime to answer /health', 60_000);
  return { child, url, exited, output: () => tail };
}

/** The calls the tests make against a runtime process: admin ones for the tenant, end-user ones with a token. */
function client(url: string) {
  const call = (path: string, init: RequestInit = {}, headers: Record<string, string> = {}) => {
    const all = new Headers(init.headers);
    for (const [name, value] of Object.entries(headers)) all.set(name, value);
    if (init.body !== undefined && !all.has('content-type')) all.set('content-type', 'application/json');
    return fetch(`${url}${path}`, { ...init, headers: all });
  };
  return {
    admin: (path: string, init: RequestInit = {}) => call(path, init, { 'x-admin-key': adminKey }),
    endUser: (path: string, token: string, init: RequestInit = {}) => call(path, init, { authorization: `Bearer ${token}` }),
  };
}

/**
 * One request on a connection of its own, as a Kubernetes probe makes it (a pooled keep-alive socket may be the one
 * the drain is closing at that moment).
 */
function onNewConnection(url: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  return new Promise<{ status: number; body: Record<string, unknown>; connection: string | undefined }>((resolve, reject) => {
    const req = request(`${url}${path}`, { method: init.method ?? 'GET', headers: init.headers ?? {}, agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown>, connection: res.headers.connection }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** Reads a stream up to its `start` frame and `tokens` token frames; returns them and the rest. */
async function streamUntilTokens(response: Response, tokens: number) {
  expect(response.status).toBe(200);
  const events = sseEvents(response);
  const seen: SseEvent[] = [];
  while (seen.filter((e) => e.event === 'token').length < tokens) {
    const next = await events.next();
    if (next.done) throw new Error(`the stream ended early: ${JSON.stringify(seen)}`);
    seen.push(next.value);
  }
  const start = seen[0]!.data as { run_id: string; session_id: string };
  return { start, seen, events };
}

async function rest(events: AsyncGenerator<SseEvent>): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

interface MessageOut {
  role: string;
  content: string;
  metadata?: Record<string, unknown> | null;
}

describe('a runtime process stopped mid-turn', () => {
  let fake: FakeOpenAIServer;
  const dirs: string[] = [];

  beforeAll(async () => {
    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL] });
  });
  afterEach(async () => {
    fake.clearScripts();
    await Promise.all([...running].map((child) => new Promise((resolve) => { child.once('exit', resolve); child.kill('SIGKILL'); })));
  });
  afterAll(async () => {
    await fake?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** A runtime process with one tenant whose project registered the fake provider, and a token of it. */
  async function world(env: Record<string, string> = {}) {
    const dataDir = makeTempDir('drain-recovery');
    dirs.push(dataDir);
    const port = await freePort();
    const rt = await startRuntime(dataDir, port, env);
    const calls = client(rt.url);
    // configuredTenant plays the control plane; it only needs the admin surface.
    const tenant: TestTenant = await configuredTenant({ admin: calls.admin } as unknown as TestRuntime, {
      ceiling: { capabilities: CHAT_CAPABILITIES, registeredModels: [MODEL, OTHER_MODEL] },
    });
    const pushed = await tenant.reconfigure({ providers: providerSection(fake), default_model: MODEL });
    expect(pushed.status).toBe(200);
    const token = await tenant.mint({ capabilities: CHAT_CAPABILITIES });
    return { rt, dataDir, port, token, calls, tenant, restart: () => startRuntime(dataDir, port, env) };
  }

  it('on SIGTERM answers /health (draining) on new connections, refuses new work, and streams a turn to its done frame', async () => {
    const { rt, token, calls } = await world({ SHUTDOWN_GRACE_SECONDS: '120' });
    fake.script({ text: words(30), dripMs: 100 });
    const { start, events } = await streamUntilTokens(await calls.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'deploy now' }) }), 2);
    rt.child.kill('SIGTERM');
    const draining = await eventually(async () => {
      const answer = await onNewConnection(rt.url, '/health');
      return answer.body.draining === true ? answer : undefined;
    }, '/health to say draining');
    expect(draining.status).toBe(200);
    expect(draining.connection).toBe('close');
    const ready = await onNewConnection(rt.url, '/ready');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ ready: false, draining: true });
    // New work goes elsewhere: answered 503 (retry), the connection closed after it.
    const refused = await onNewConnection(rt.url, '/chat', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'too late' }),
    });
    expect(refused.status).toBe(503);
    expect(refused.connection).toBe('close');
    expect(refused.body).toMatchObject({ code: 'draining', detail: expect.any(String) });

    const frames = await rest(events);
    expect(frames.at(-1)).toMatchObject({ event: 'done', data: { run_id: start.run_id, content: words(30) } });
    expect(await rt.exited).toBe(0);
  });

  it('cuts off a run the grace period cannot wait for: a retryable error frame, its text kept, its conversation free after a restart', async () => {
    const { rt, token, calls, restart } = await world({ SHUTDOWN_GRACE_SECONDS: '1' });
    fake.script({ text: words(600), dripMs: 100 });
    const { start, seen, events } = await streamUntilTokens(await calls.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'a long one' }) }), 3);
    rt.child.kill('SIGTERM');
    const frames = [...seen, ...(await rest(events).catch((error: unknown) => {
      throw new Error(`the stream broke off before its terminal frame; the runtime said:\n${rt.output()}`, { cause: error });
    }))];
    const last = frames.at(-1)!;
    expect(last).toMatchObject({ event: 'error', data: { status: 500, code: 'run_interrupted', retryable: true, run_id: start.run_id, session_id: start.session_id } });
    expect(frames.filter((e) => e.event === 'done' || e.event === 'error')).toHaveLength(1);
    const streamed = frames.filter((e) => e.event === 'token').map((e) => (e.data as { text: string }).text).join('');
    // Work was cut off: the exit says so.
    expect(await rt.exited).toBe(1);

    const again = await restart();
    const after = client(again.url);
    const resumed = await allEvents(await after.endUser(`/chat/stream/${start.run_id}`, token, { headers: { 'Last-Event-ID': String(last.id) } }));
    expect(resumed).toHaveLength(1);
    expect(resumed[0]).toMatchObject({ event: 'error', data: { status: 500, code: 'run_interrupted', retryable: true, session_id: start.session_id } });
    const messages = (await (await after.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as MessageOut[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.content).toBe(streamed);
    fake.script('Back again.');
    const next = await after.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'go on', session_id: start.session_id }) });
    expect(next.status).toBe(200);
    expect(await next.json()).toMatchObject({ content: 'Back again.' });
  });

  it('after kill -9 and a restart, fails the dead run at once: the conversation is free, resume ends with a retryable error, the streamed text is kept', async () => {
    const { rt, token, calls, restart } = await world();
    fake.script({ text: words(600), dripMs: 100 });
    const { start, seen } = await streamUntilTokens(await calls.endUser('/chat/stream', token, { method: 'POST', body: JSON.stringify({ message: 'crash during this' }) }), 2);
    // The text is saved as the turn goes (not per token): wait until some of it is in the session.
    const saved = await eventually(async () => {
      const messages = (await (await calls.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as MessageOut[];
      const assistant = messages.find((m) => m.role === 'assistant');
      return assistant && assistant.content !== '' ? assistant : undefined;
    }, 'the streamed text to be saved', 20_000);
    expect(words(600).startsWith(saved.content)).toBe(true);
    rt.child.kill('SIGKILL');
    await rt.exited;

    const again = await restart();
    const after = client(again.url);
    // At once, not when the dead process's lease would have lapsed.
    fake.script('Recovered.');
    const next = await after.endUser('/chat', token, { method: 'POST', body: JSON.stringify({ message: 'are you there?', session_id: start.session_id }) });
    expect(next.status).toBe(200);
    expect(await next.json()).toMatchObject({ content: 'Recovered.' });
    const resumed = await allEvents(await after.endUser(`/chat/stream/${start.run_id}`, token, { headers: { 'Last-Event-ID': String(seen.at(-1)!.id) } }));
    expect(resumed).toHaveLength(1);
    expect(resumed[0]).toMatchObject({ event: 'error', data: { status: 500, code: 'run_lost', retryable: true, session_id: start.session_id } });
    const messages = (await (await after.endUser(`/chat/sessions/${start.session_id}/messages`, token)).json()) as MessageOut[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(messages[1]!.content.length).toBeGreaterThanOrEqual(saved.content.length);
    expect(words(600).startsWith(messages[1]!.content)).toBe(true);
  });

  it('after kill -9, writes at its next start the audit entries of writes it had answered and not yet written', async () => {
    // A batch that would not be written for a minute: the process is killed long before.
    const { rt, calls, tenant, restart } = await world({ AUDIT_FLUSH_MS: '60000' });
    const tenantId = tenant.tenantId;
    for (const name of ['renamed before the kill', 'renamed again']) {
      expect((await calls.admin(`/tenants/${tenantId}`, { method: 'PATCH', body: JSON.stringify({ name }) })).status).toBe(200);
    }
    rt.child.kill('SIGKILL');
    await rt.exited;

    const again = await restart();
    const after = client(again.url);
    const reader = await tenant.mint({ capabilities: CHAT_CAPABILITIES, sub: 'ops:auditor', scope: 'ops:auditor', roles: ['admin'] });
    const { entries } = (await (await after.endUser('/audit?actor=admin', reader)).json()) as { entries: { action: string; status: number; at: string }[] };
    const renames = entries.filter((entry) => entry.action === 'PATCH /tenants/{tenant_id}');
    expect(renames).toHaveLength(2);
    expect(renames.every((entry) => entry.status === 200 && Date.parse(entry.at) < Date.now())).toBe(true);
    // Written once: a second start finds nothing more to write.
    again.child.kill('SIGKILL');
    await again.exited;
    const third = await restart();
    const later = (await (await client(third.url).endUser('/audit?actor=admin', reader)).json()) as { entries: { action: string }[] };
    expect(later.entries.filter((entry) => entry.action === 'PATCH /tenants/{tenant_id}')).toHaveLength(2);
  });

  /**
   * A document whose ingest is stopped mid-document by `signal` (the embedding call never answers, so the process
   * holds the job when it stops), then a restart: the document is read once, every chunk in place.
   */
  async function stopMidDocumentAndRestart(signal: 'SIGTERM' | 'SIGKILL', env: Record<string, string>): Promise<void> {
    const embeddings = await FakeOpenAIServer.start({ apiKey: 'sk-test-embeddings-0009', chatModels: [MODEL], embeddingModels: { 'embed-small': 8 } });
    try {
      const dataDir = makeTempDir('ingest-recovery');
      dirs.push(dataDir);
      const port = await freePort();
      const rt = await startRuntime(dataDir, port, env);
      const calls = client(rt.url);
      const capabilities = ['chat', 'documents:read', 'documents:write'];
      const tenant: TestTenant = await configuredTenant({ admin: calls.admin } as unknown as TestRuntime, { ceiling: { capabilities } });
      const pushed = await tenant.reconfigure({
        providers: providerSection(embeddings, [MODEL]),
        retrieval: { embedding: { provider: 'cred-1', model: 'embed-small', dimensions: 8 } },
      } as never);
      expect(pushed.status).toBe(200);
      const token = await tenant.mint({ capabilities });
      embeddings.hang({ path: '/embeddings' });
      const text = Array.from({ length: 12 }, (_, i) => `# Part ${i}\nFact ${i} stands on its own.`).join('\n');
      const created = await calls.endUser('/documents', token, { method: 'POST', body: JSON.stringify({ title: 'facts', text, content_type: 'text/markdown' }) });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      await eventually(async () => embeddings.requestsTo('/embeddings').length > 0, 'the job to reach the embedding call', 20_000);
      rt.child.kill(signal);
      await rt.exited;

      embeddings.clearFaults();
      const again = await startRuntime(dataDir, port, env);
      const after = client(again.url);
      const ready = await eventually(async () => {
        const doc = (await (await after.endUser(`/documents/${id}`, token)).json()) as { status: string; chunk_count: number };
        return doc.status === 'ready' ? doc : undefined;
      }, 'the document read after the restart', 30_000);
      expect(ready.chunk_count).toBe(12);
      const chunks = (await (await after.endUser(`/documents/${id}/chunks`, token)).json()) as { chunks: { ordinal: number }[] };
      expect(chunks.chunks.map((c) => c.ordinal)).toEqual(Array.from({ length: 12 }, (_, i) => i));
    } finally {
      await embeddings.stop();
    }
  }

  it('on SIGTERM mid-document, lets the ingest job go within the grace period, and a restart writes the document once', async () => {
    // A long lease: the restart must not be waiting for it to lapse, the drain lets the job go.
    await stopMidDocumentAndRestart('SIGTERM', { INGEST_LEASE_SECONDS: '600', SHUTDOWN_GRACE_SECONDS: '2' });
  });

  it('after kill -9 mid-document and a restart, takes the ingest job up again once its lease lapses, and writes the document once', async () => {
    await stopMidDocumentAndRestart('SIGKILL', { INGEST_LEASE_SECONDS: '3' });
  });
});
