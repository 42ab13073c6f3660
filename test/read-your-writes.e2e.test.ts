// Read-your-writes across the two planes (docs/decisions/0070), tried as a customer's onboarding script, CI job or
// integration test does it: every step sent the moment the one before answered, over HTTP, with nothing waited
// for in between. A write that changes what the data plane does is seen by the next data-plane request, on one
// process and on two runtime replicas sharing PostgreSQL and Redis (the control plane pushes to one, the script's
// chats reach the other).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { FakeOpenAIServer } from './fakes/openai-server.js';
import { startTestControl, type TestControl } from './harness/control.js';
import { postgresBinaries, startPostgres, type PostgresServer } from './harness/postgres.js';
import { redisServerBinary, startRedis, type RedisServer } from './harness/redis.js';
import { startTestRuntime, type TestRuntime } from './harness/runtime.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };
const SETUPS = Number(process.env.RYW_SETUPS ?? 200);
/** Changes of each kind tried after the setups, each followed at once by the request that must see it. */
const CHANGES = Number(process.env.RYW_CHANGES ?? 50);

interface Planes {
  api: TestControl;
  /** Where the control plane pushes. */
  pushed: TestRuntime;
  /** Where the script's data-plane requests go: the same runtime, or another replica of the same store. */
  served: TestRuntime;
  stop(): Promise<void>;
}

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

async function send(url: string, init: RequestInit & { key?: string; bearer?: string; json?: unknown } = {}): Promise<Answer> {
  const headers = new Headers(init.headers);
  if (init.key) headers.set('x-api-key', init.key);
  if (init.bearer) headers.set('authorization', `Bearer ${init.bearer}`);
  if (init.json !== undefined) headers.set('content-type', 'application/json');
  const res = await fetch(url, { ...init, headers, ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

function onePlane(fake: FakeOpenAIServer) {
  return async (): Promise<Planes> => {
    const rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' } });
    const api = await startTestControl(
      { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' },
      { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey }) },
    );
    return { api, pushed: rt, served: rt, stop: async () => (await api.stop(), await rt.stop()) };
  };
}

function twoReplicas(services: () => { postgres: PostgresServer; redis: RedisServer }) {
  return async (): Promise<Planes> => {
    const { postgres, redis } = services();
    const env = {
      AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
      DATABASE_URL: await postgres.createDatabase(),
      AGENTPLANE_MASTER_KEY: randomBytes(32).toString('base64'),
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `ryw-${Math.random().toString(36).slice(2)}:`,
    };
    const first = await startTestRuntime({ env });
    const second = await startTestRuntime({ env, adminKey: first.adminKey });
    const api = await startTestControl(
      { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' },
      { provisioner: new LocalProvisioner({ runtimeUrl: first.url, adminKey: first.adminKey }) },
    );
    return { api, pushed: first, served: second, stop: async () => (await api.stop(), await first.stop(), await second.stop()) };
  };
}

const withServices = postgresBinaries() !== null && redisServerBinary() !== null;
let postgres: PostgresServer | undefined;
let redis: RedisServer | undefined;
let fake: FakeOpenAIServer;

beforeAll(async () => {
  fake = await FakeOpenAIServer.start({ apiKey: 'sk-fake-read-your-writes-0123', chatModels: ['fake-chat', 'fake-chat-2'] });
  if (withServices) [postgres, redis] = await Promise.all([startPostgres(), startRedis(redisServerBinary()!)]);
}, 120_000);
afterAll(async () => {
  await fake?.stop();
  await Promise.all([postgres?.stop(), redis?.stop()]);
});

describe.each([
  { setup: 'one process', start: () => onePlane(fake)(), skip: false },
  { setup: 'two runtime replicas on PostgreSQL and Redis', start: () => twoReplicas(() => ({ postgres: postgres!, redis: redis! }))(), skip: !withServices },
])('read-your-writes: $setup', ({ start, skip }) => {
  let planes: Planes;
  let session: string;
  let orgId: string;
  /** Projects the setups made, with their admin key and a token minted before the later changes. */
  const made: { id: string; key: string; token: string; providers: number }[] = [];

  beforeAll(async () => {
    if (skip) return;
    planes = await start();
    const login = await send(`${planes.api.url}/api/auth/login`, { method: 'POST', json: { email: owner.AGENTPLANE_OWNER_EMAIL, password: owner.AGENTPLANE_OWNER_PASSWORD } });
    session = login.body.token;
    orgId = (await send(`${planes.api.url}/api/me`, { bearer: session })).body.orgs[0].id;
  }, 120_000);
  afterAll(async () => {
    await planes?.stop();
  });

  const control = (path: string, init: Parameters<typeof send>[1] = {}) => send(`${planes.api.url}${path}`, init);
  const data = (path: string, init: Parameters<typeof send>[1] = {}) => send(`${planes.served.url}${path}`, init);
  const chat = (token: string, model: string) => data('/chat', { method: 'POST', bearer: token, json: { message: 'Hello there.', model } });
  const mint = async (project: { id: string; key: string }, capabilities = ['chat']) => {
    const minted = await control(`/api/projects/${project.id}/token`, { method: 'POST', key: project.key, json: { subject: 'acme:alice', capabilities } });
    expect(minted.status).toBe(200);
    return minted.body.access_token as string;
  };
  /** What went wrong with each request that did not answer as it must, for the failure message. */
  const tally = (failures: string[], step: string, answer: Answer, expected = 200) => {
    if (answer.status !== expected) failures.push(`${step}: ${answer.status} ${JSON.stringify(answer.body)}`);
  };

  it.skipIf(skip)(`${SETUPS} scripted setups (project, key, provider, mint, chat): every first chat answers 200`, async () => {
    const failures: string[] = [];
    for (let i = 0; i < SETUPS; i++) {
      const project = await control(`/api/orgs/${orgId}/projects`, { method: 'POST', bearer: session, json: { name: `script-${i}` } });
      expect(project.status).toBe(201);
      const key = await control(`/api/projects/${project.body.id}/keys`, { method: 'POST', bearer: session, json: { scope: 'admin', name: 'script' } });
      expect(key.status).toBe(201);
      const provider = await control(`/api/projects/${project.body.id}/providers`, {
        method: 'POST',
        key: key.body.key,
        json: { provider: 'openai_compatible', models: ['fake-chat'], values: { api_key: fake.apiKey, base_url: fake.url } },
      });
      expect(provider.status).toBe(201);
      expect(Number(provider.headers.get('x-configuration-version'))).toBeGreaterThan(0);
      // The write says the runtime holds what it changed.
      if (provider.headers.get('x-configuration-state') !== 'applied') failures.push(`setup ${i}: the provider's write answered ${provider.headers.get('x-configuration-state')}`);
      const token = await mint({ id: project.body.id, key: key.body.key });
      tally(failures, `setup ${i}: first chat`, await chat(token, 'fake-chat'));
      made.push({ id: project.body.id, key: key.body.key, token, providers: 1 });
    }
    expect(failures).toEqual([]);
  }, 600_000);

  it.skipIf(skip)(`${CHANGES} models added to a project: the next chat on the new model, with a token minted before, answers 200`, async () => {
    const failures: string[] = [];
    expect(made.length).toBeGreaterThanOrEqual(CHANGES);
    for (const [i, project] of made.slice(0, CHANGES).entries()) {
      const added = await control(`/api/projects/${project.id}/providers`, {
        method: 'POST',
        key: project.key,
        json: { provider: 'openai_compatible', models: ['fake-chat-2'], values: { api_key: fake.apiKey, base_url: fake.url } },
      });
      expect(added.status).toBe(201);
      tally(failures, `project ${i}: chat on the added model`, await chat(project.token, 'fake-chat-2'));
    }
    expect(failures).toEqual([]);
  }, 300_000);

  it.skipIf(skip)(`${CHANGES} double signing-key rotations: a token minted right after each is accepted at once`, async () => {
    const failures: string[] = [];
    expect(made.length).toBeGreaterThanOrEqual(CHANGES);
    for (const [i, project] of made.slice(0, CHANGES).entries()) {
      // Twice: the first rotation signs with the key published as `next` the push before, which the runtime
      // already trusts; the second signs with one that only this rotation's push carries.
      for (let turn = 0; turn < 2; turn++) expect((await control(`/api/projects/${project.id}/signing-keys/rotate`, { method: 'POST', key: project.key })).status).toBe(200);
      const token = await mint(project);
      tally(failures, `project ${i}: chat with a token signed by the new key`, await chat(token, 'fake-chat'));
    }
    expect(failures).toEqual([]);
  }, 300_000);

  it.skipIf(skip)(`${CHANGES} ceiling changes: a token minted right after each one holds what the ceiling now allows`, async () => {
    const failures: string[] = [];
    expect(made.length).toBeGreaterThanOrEqual(CHANGES);
    for (const [i, project] of made.slice(0, CHANGES).entries()) {
      const widened = await control(`/api/projects/${project.id}`, { method: 'PATCH', key: project.key, json: { ceiling: { capabilities: ['chat', 'memory'] } } });
      expect(widened.status).toBe(200);
      const token = await mint(project, ['chat', 'memory']);
      tally(failures, `project ${i}: GET /memory under the widened ceiling`, await data('/memory', { bearer: token }));
      // And narrowed again: the next request, with the same token, is refused what the ceiling took away.
      const narrowed = await control(`/api/projects/${project.id}`, { method: 'PATCH', key: project.key, json: { ceiling: { capabilities: ['chat'] } } });
      expect(narrowed.status).toBe(200);
      tally(failures, `project ${i}: GET /memory under the narrowed ceiling`, await data('/memory', { bearer: token }), 403);
    }
    expect(failures).toEqual([]);
  }, 300_000);

  it.skipIf(skip)('a system prompt changed between two chats with the same token reaches the second one', async () => {
    const project = made[0]!;
    expect(project).toBeDefined();
    for (let i = 0; i < 20; i++) {
      const prompt = `You are assistant number ${i}.`;
      const set = await control(`/api/projects/${project.id}/system-prompt`, { method: 'PUT', key: project.key, json: { system_prompt: prompt } });
      expect(set.status).toBe(200);
      const before = fake.chatRequests().length;
      expect((await chat(project.token, 'fake-chat')).status).toBe(200);
      const sent = fake.chatRequests().slice(before).at(-1)!;
      expect(JSON.stringify(sent.messages[0])).toContain(prompt);
      expect(set.headers.get('x-configuration-state')).toBe('applied');
    }
  }, 120_000);
});

describe('read-your-writes: a runtime that cannot be reached', () => {
  it('a write answers within its bounded wait and says the change is still pending', async () => {
    const rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' } });
    const api = await startTestControl(
      { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', CONFIGURATION_WAIT_MS: '300' },
      { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey }) },
    );
    try {
      const login = await send(`${api.url}/api/auth/login`, { method: 'POST', json: { email: owner.AGENTPLANE_OWNER_EMAIL, password: owner.AGENTPLANE_OWNER_PASSWORD } });
      const orgId = (await send(`${api.url}/api/me`, { bearer: login.body.token })).body.orgs[0].id;
      const project = await send(`${api.url}/api/orgs/${orgId}/projects`, { method: 'POST', bearer: login.body.token, json: { name: 'unreached' } });
      expect(project.status).toBe(201);
      expect(project.headers.get('x-configuration-state')).toBe('applied');
      const key = await send(`${api.url}/api/projects/${project.body.id}/keys`, { method: 'POST', bearer: login.body.token, json: { scope: 'admin', name: 'k' } });
      // The runtime stops answering: the change is stored and queued, and the answer says so.
      rt.server.closeAllConnections();
      await new Promise((resolve) => rt.server.close(resolve));
      const set = await send(`${api.url}/api/projects/${project.body.id}/system-prompt`, { method: 'PUT', key: key.body.key, json: { system_prompt: 'Be brief.' } });
      expect(set.status).toBe(200);
      expect(set.body.system_prompt).toBe('Be brief.');
      expect(set.headers.get('x-configuration-state')).toBe('pending');
      expect(Number(set.headers.get('x-configuration-version'))).toBeGreaterThan(Number(project.headers.get('x-configuration-version')));
    } finally {
      await api.stop();
      await rt.stop();
    }
  }, 60_000);
});
