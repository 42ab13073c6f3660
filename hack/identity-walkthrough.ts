// Walks the identity path against a running agentplane, as a customer would, and shows each refusal with its
// status and detail: sign in, create a project, an admin and a mint key, register a provider, mint an end-user
// token, call the data plane with it.
//
//   AGENTPLANE_ALLOW_PRIVATE_URLS=true npm start            # (the walkthrough's provider listens on loopback)
//   node --conditions=@agentplane/source --import tsx hack/identity-walkthrough.ts   # in another terminal
//
// It reads the variables `npm start` reads: AGENTPLANE_DATA_DIR, CONTROL_PORT, DATA_PORT (and the owner's
// AGENTPLANE_OWNER_EMAIL and AGENTPLANE_OWNER_PASSWORD when those were set), so the same environment finds it.
//
// It starts a protocol-level OpenAI-compatible server itself to stand in for the customer's provider.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FakeOpenAIServer } from '@agentplane/test/fakes/openai-server';

export interface WalkthroughOptions {
  controlUrl: string;
  dataUrl: string;
  email: string;
  password: string;
  log?: (line: string) => void;
}

export interface Step {
  name: string;
  status: number;
  expected: number;
  detail?: unknown;
}

/** Runs every step; returns them with the status each got and expected, so a caller (or a test) can check. */
export async function walkThrough(options: WalkthroughOptions): Promise<Step[]> {
  const log = options.log ?? (() => {});
  const steps: Step[] = [];
  const provider = await FakeOpenAIServer.start({ apiKey: 'sk-walkthrough-provider-key', chatModels: ['gpt-walkthrough'], embeddingModels: { 'embed-walkthrough': 768 } });
  const call = async (name: string, expected: number, url: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) => {
    const res = await fetch(url, {
      method: init.method ?? 'GET',
      headers: { ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    const body = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    const step: Step = { name, status: res.status, expected, ...(res.status >= 400 ? { detail: body?.detail } : {}) };
    steps.push(step);
    log(`${res.status === expected ? 'ok  ' : 'FAIL'} ${String(res.status).padEnd(3)} ${name}${step.detail ? `: ${JSON.stringify(step.detail)}` : ''}`);
    return body ?? {};
  };
  const { controlUrl: c, dataUrl: d } = options;
  try {
    await call('sign in with a wrong password', 401, `${c}/api/auth/login`, { method: 'POST', body: { email: options.email, password: 'not it' } });
    const session = String((await call('sign in', 200, `${c}/api/auth/login`, { method: 'POST', body: { email: options.email, password: options.password } })).token);
    const bearer = { authorization: `Bearer ${session}` };
    const orgId = ((await call('who am I', 200, `${c}/api/me`, { headers: bearer })).orgs as { id: string }[])[0]!.id;
    const project = await call('create a project', 201, `${c}/api/orgs/${orgId}/projects`, { method: 'POST', headers: bearer, body: { name: 'walkthrough' } });
    const p = `${c}/api/projects/${String(project.id)}`;
    const admin = { 'x-api-key': String((await call('create an admin key', 201, `${p}/keys`, { method: 'POST', headers: bearer, body: { scope: 'admin' } })).key) };
    const mint = { 'x-api-key': String((await call('create a mint key (with the admin key)', 201, `${p}/keys`, { method: 'POST', headers: admin, body: {} })).key) };
    await call('a mint key on an admin route', 403, `${p}/keys`, { headers: mint });
    await call('a project key on an org route', 401, `${c}/api/orgs/${orgId}/projects`, { headers: admin });
    await call('register a provider at a metadata address', 400, `${p}/providers`, {
      method: 'POST',
      headers: admin,
      body: { provider: 'openai_compatible', models: ['x'], values: { api_key: 'sk-x', base_url: 'http://169.254.169.254/v1' } },
    });
    await call('register the provider (its embedding dimension measured)', 201, `${p}/providers`, {
      method: 'POST',
      headers: admin,
      body: { provider: 'openai_compatible', models: ['gpt-walkthrough'], values: { api_key: 'sk-walkthrough-provider-key', base_url: provider.url, embedding_model: 'embed-walkthrough' } },
    });
    await call('mint with an unregistered model', 400, `${p}/token`, { method: 'POST', headers: mint, body: { subject: 'acme:alice', models: ['gpt-unknown'] } });
    const token = await call('mint an end-user token', 200, `${p}/token`, {
      method: 'POST',
      headers: mint,
      body: { subject: 'acme:alice', scope: 'acme', capabilities: ['chat', 'documents:read', 'web-search'], roles: ['admin'], models: ['gpt-walkthrough'] },
    });
    log(`     warnings: ${JSON.stringify(token.warnings ?? [])}`);
    const user = { authorization: `Bearer ${String(token.access_token)}` };
    // The configuration reaches the runtime through the outbox: wait for it rather than race it.
    for (let i = 0; i < 100; i++) {
      if ((await fetch(`${d}/capabilities`, { headers: user })).status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await call('call the data plane with the token', 200, `${d}/capabilities`, { headers: user });
    await call('narrow the token on the data plane', 200, `${d}/auth/token`, { method: 'POST', headers: user, body: { capabilities: ['chat'], expires_in: 600 } });
    await call('call the data plane with a project key', 401, `${d}/capabilities`, { headers: { authorization: `Bearer ${mint['x-api-key']}` } });
    await call('call the data plane with a tampered token', 401, `${d}/capabilities`, { headers: { authorization: `${user.authorization.slice(0, -2)}xx` } });
    await call('call the data plane with no token', 401, `${d}/capabilities`);
  } finally {
    await provider.close();
  }
  return steps;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const dataDir = process.env.AGENTPLANE_DATA_DIR ?? './.agentplane';
  const steps = await walkThrough({
    controlUrl: `http://127.0.0.1:${process.env.CONTROL_PORT ?? 8080}`,
    dataUrl: `http://127.0.0.1:${process.env.DATA_PORT ?? 8081}`,
    email: process.env.AGENTPLANE_OWNER_EMAIL ?? 'owner@localhost',
    password: process.env.AGENTPLANE_OWNER_PASSWORD ?? readFileSync(join(dataDir, 'secrets', 'owner-password'), 'utf8').trim(),
    log: console.log,
  });
  const failed = steps.filter((s) => s.status !== s.expected);
  console.log(`\n${steps.length - failed.length} passed, ${failed.length} failed`);
  process.exit(failed.length === 0 ? 0 : 1);
}
