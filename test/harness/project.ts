// A project on a control plane with a runtime behind it, as the cross-plane tests start from: the owner signed in,
// one project with an admin key, its ceiling set and a provider registered (the fake), both planes on loopback with
// private URLs allowed, and a way to wait until the runtime holds the project's current configuration.
import { expect } from 'vitest';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import type { FakeOpenAIServer } from '../fakes/openai-server.js';
import { startTestControl, type TestControl } from './control.js';
import { eventually } from './eventually.js';
import { startTestRuntime, type TestRuntime } from './runtime.js';

const owner = { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password' };

export interface TestProject {
  rt: TestRuntime;
  api: TestControl;
  projectId: string;
  tenantId: string;
  adminKey: string;
  /** A call to `/api/projects/<id><path>` with the admin key. */
  send(method: string, path: string, body?: unknown): Promise<Response>;
  /** Waits until the runtime holds the project's configuration at the control plane's current version. */
  pushed(): Promise<void>;
  /** An end-user token the project mints for `subject` with `capabilities`. */
  token(subject: string, capabilities: string[]): Promise<string>;
  stop(): Promise<void>;
}

/** The answer's JSON, once its status is `status` (the body shown when it is not). */
export async function json<T>(response: Response, status: number): Promise<T> {
  const text = await response.text();
  expect(response.status, text).toBe(status);
  return JSON.parse(text) as T;
}

export async function startTestProject(options: { capabilities: string[]; provider: Pick<FakeOpenAIServer, 'url' | 'apiKey'>; model: string }): Promise<TestProject> {
  const rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' } });
  const api = await startTestControl(
    { ...owner, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' },
    { provisioner: new LocalProvisioner({ runtimeUrl: rt.url, adminKey: rt.adminKey, timeoutMs: 5000 }) },
  );
  const { account } = await api.control.accounts.signIn(owner.AGENTPLANE_OWNER_EMAIL, owner.AGENTPLANE_OWNER_PASSWORD, 'test');
  const orgId = (await api.control.accounts.orgsOf(account.id))[0]!.id;
  const project = await api.control.projects.create(orgId, account.id, 'support');
  const adminKey = (await api.control.keys.create({ kind: 'account', accountId: account.id }, project.id, { scope: 'admin', name: 'admin' })).key;
  const send = (method: string, path: string, body?: unknown) =>
    api.call(`/api/projects/${project.id}${path}`, { method, key: adminKey, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  await json(await send('PATCH', '', { ceiling: { capabilities: options.capabilities } }), 200);
  await json(await send('POST', '/providers', { provider: 'openai_compatible', models: [options.model], values: { api_key: options.provider.apiKey, base_url: options.provider.url } }), 201);
  return {
    rt,
    api,
    projectId: project.id,
    tenantId: project.tenant_id,
    adminKey,
    send,
    async pushed() {
      const version = (await api.control.projects.configurationDocument(project.id))!.version;
      await eventually(async () => (await rt.runtime.configurations.load(project.tenant_id))?.version === version, { what: `configuration version ${version} on the runtime` });
    },
    async token(subject, capabilities) {
      return (await json<{ access_token: string }>(await send('POST', '/token', { subject, capabilities }), 200)).access_token;
    },
    async stop() {
      await api.stop();
      await rt.stop();
    },
  };
}
