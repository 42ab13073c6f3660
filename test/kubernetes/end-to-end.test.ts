// The whole Kubernetes path as a customer and a platform engineer see it, with nothing played by hand: the
// control-api (PROVISIONER=kubernetes) writes the Project and Tenant, the operator provisions the namespace, the
// project's own database and role on a PostgreSQL server that demands passwords, and the runtime's Secret and
// Deployment; the runtime Pod (which kwok only pretends to run) is stood in for by a real runtime process started
// with that Deployment's own environment, resolved from the Secret as the kubelet would. The configuration then
// flows from the control-api to that runtime, an end-user chats, and the chat lands in the project's database.
// Deleting the project erases its tenant through the runtime, drops the database and role, and deletes the namespace.
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { startTestControl, type TestControl } from '../harness/control.js';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { startMinio, type MinioServer } from '../harness/minio.js';
import { postgresBinaries, startPostgres, type PostgresServer } from '../harness/postgres.js';
import { requireBinary } from '../harness/process.js';
import { redisServerBinary, startRedis, type RedisServer } from '../harness/redis.js';
import { startTestRuntime, type TestRuntime } from '../harness/runtime.js';
import type { Operator } from '@agentplane/operator/app';
import { RuntimeClient, type RuntimeCall } from '@agentplane/operator/runtime-client';
import { Admin, installCrds, operatorConfig, prepareCluster, startOperator, startTcpLink, type TcpLink } from '../operator/fixture.js';

const kubernetes = kubernetesBinaries();
const postgresReady = postgresBinaries() !== null;
const redis = redisServerBinary();
const minio = requireBinary('minio');
const binaries = kubernetes && postgresReady && redis && minio ? { kubernetes, redis, minio } : null;

const owner = { email: 'owner@example.com', password: 'a long enough password' };
const PROVIDER_KEY = 'sk-customer-own-key-0001';

/** The Pod's variables that describe the Pod itself (its port, its volume), not the project: the stand-in has its own. */
const POD_ONLY = new Set(['HOST', 'DATA_PORT', 'AGENTPLANE_DATA_DIR']);

/** The runtime container's environment as the kubelet gives it: literal values, and keys of the Secrets named. */
async function podEnvironment(core: k8s.CoreV1Api, deployment: k8s.V1Deployment): Promise<Record<string, string>> {
  const namespace = deployment.metadata!.namespace!;
  const container = deployment.spec!.template.spec!.containers[0]!;
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) {
    if (POD_ONLY.has(variable.name)) continue;
    const ref = variable.valueFrom?.secretKeyRef;
    if (ref) {
      const secret = await core.readNamespacedSecret({ name: ref.name!, namespace });
      const encoded = secret.data?.[ref.key];
      if (encoded === undefined) throw new Error(`Secret ${namespace}/${ref.name} has no key ${ref.key} for ${variable.name}`);
      env[variable.name] = Buffer.from(encoded, 'base64').toString('utf8');
    } else {
      env[variable.name] = variable.value ?? '';
    }
  }
  return env;
}

describe.skipIf(!binaries)('agentplane on Kubernetes, end to end', () => {
  let cluster: KubernetesCluster;
  let postgres: PostgresServer;
  let redisServer: RedisServer;
  let minioServer: MinioServer;
  let provider: FakeOpenAIServer;
  let operator: Operator;
  let api: TestControl;
  /** Where the operator and the control-api reach the project's runtime: the Service's stand-in. */
  let runtimeLink: TcpLink;
  let runtime: TestRuntime | undefined;
  const calls: RuntimeCall[] = [];

  beforeAll(async () => {
    [cluster, postgres, redisServer, minioServer, provider] = await Promise.all([
      startKubernetes(binaries!.kubernetes),
      startPostgres({ passwordAuth: true }),
      startRedis(binaries!.redis),
      startMinio(binaries!.minio),
      FakeOpenAIServer.start({ apiKey: PROVIDER_KEY, chatModels: ['gpt-test'] }),
    ]);
    await installCrds(cluster.kubeConfig());
    await prepareCluster(cluster.kubeConfig());
    runtimeLink = await startTcpLink();
    operator = await startOperator(
      cluster,
      operatorConfig({
        RUNTIME_URL_TEMPLATE: runtimeLink.url,
        PROJECT_DATABASE_ADMIN_URL: postgres.adminUrl,
        RUNTIME_REDIS_URL: redisServer.url,
        RUNTIME_S3_BUCKET: minioServer.bucket,
        RUNTIME_S3_ENDPOINT: minioServer.endpoint,
        RUNTIME_S3_REGION: minioServer.region,
        RUNTIME_S3_ACCESS_KEY_ID: minioServer.accessKeyId,
        RUNTIME_S3_SECRET_ACCESS_KEY: minioServer.secretAccessKey,
        RUNTIME_S3_FORCE_PATH_STYLE: 'true',
      }),
      { runtimeClient: new RuntimeClient({ timeoutMs: 5_000, onCall: (call) => calls.push(call) }) },
    );
    api = await startTestControl({
      AGENTPLANE_OWNER_EMAIL: owner.email,
      AGENTPLANE_OWNER_PASSWORD: owner.password,
      PROVISIONER: 'kubernetes',
      KUBECONFIG: cluster.kubeconfigPath,
      // The fake provider listens on loopback.
      AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
    });
  }, 10 * 60_000);

  afterAll(async () => {
    await api?.stop();
    await operator?.stop();
    await runtime?.stop();
    await runtimeLink?.stop();
    await Promise.allSettled([cluster?.stop(), postgres?.stop(), redisServer?.stop(), minioServer?.stop(), provider?.close()]);
  });

  const json = async <T>(res: Response | Promise<Response>) => (await (await res).json()) as T;

  it('provisions a project created through the control-api, serves its end-users from its own database, and erases it all on delete', async () => {
    const { token: session } = await json<{ token: string }>(api.call('/api/auth/login', { method: 'POST', body: JSON.stringify(owner) }));
    const orgId = (await json<{ orgs: { id: string }[] }>(api.call('/api/me', { token: session }))).orgs[0]!.id;
    const created = await api.call(`/api/orgs/${orgId}/projects`, { method: 'POST', token: session, body: JSON.stringify({ name: 'helpdesk' }) });
    expect(created.status).toBe(201);
    const project = (await created.json()) as { id: string; tenant_id: string };
    const namespace = `agentplane-${project.id}`;
    const databaseName = `agentplane_${project.id.replaceAll('-', '_')}`;

    // The operator's Deployment, run as its Pod would run: the Secret's keys, its own database, Redis and S3 prefixes.
    const core = cluster.kubeConfig().makeApiClient(k8s.CoreV1Api);
    const apps = cluster.kubeConfig().makeApiClient(k8s.AppsV1Api);
    const deployment = await eventually(() => apps.readNamespacedDeployment({ name: 'agent-runtime', namespace }), { what: 'the runtime Deployment', timeoutMs: 120_000 });
    const podEnv = await podEnvironment(core, deployment);
    const databaseUrl = new URL(podEnv.DATABASE_URL!);
    expect(decodeURIComponent(databaseUrl.username)).toBe(databaseName);
    expect(databaseUrl.pathname).toBe(`/${databaseName}`);
    expect(podEnv.REDIS_KEY_PREFIX).toContain(project.id);
    expect(podEnv.S3_KEY_PREFIX).toContain(project.id);
    runtime = await startTestRuntime({ adminKey: podEnv.AGENTPLANE_ADMIN_KEY!, env: { ...podEnv, AGENTPLANE_ALLOW_PRIVATE_URLS: 'true' } });
    runtimeLink.point(new URL(runtime.url));

    // Ready on the control plane once the operator saw the runtime ready and the Tenant registered and configured.
    const provisioned = await eventually(
      async () => {
        const shown = await json<{ provisioning: { ready: boolean; reason: string; message: string; pending_changes: number; data_plane_url: string | null } }>(
          api.call(`/api/projects/${project.id}`, { token: session }),
        );
        if (!shown.provisioning.ready || shown.provisioning.pending_changes > 0) throw new Error(`${shown.provisioning.reason}: ${shown.provisioning.message}`);
        return shown.provisioning;
      },
      { what: 'the project provisioned and its configuration delivered', timeoutMs: 180_000 },
    );
    expect(provisioned.data_plane_url).toBe(`https://${project.id}.agents.example.test`);

    // A customer's server sets the project up and mints a token; the end-user chats on the data plane.
    const admin = await json<{ key: string }>(api.call(`/api/projects/${project.id}/keys`, { method: 'POST', token: session, body: JSON.stringify({ scope: 'admin' }) }));
    const registered = await api.call(`/api/projects/${project.id}/providers`, {
      method: 'POST',
      key: admin.key,
      body: JSON.stringify({ provider: 'openai_compatible', models: ['gpt-test'], values: { api_key: PROVIDER_KEY, base_url: provider.url } }),
    });
    expect(registered.status).toBe(201);
    const minted = await json<{ access_token: string }>(
      api.call(`/api/projects/${project.id}/token`, { method: 'POST', key: admin.key, body: JSON.stringify({ subject: 'helpdesk:alice', capabilities: ['chat'] }) }),
    );
    provider.script('Hello Alice, how can I help?');
    const chat = await eventually(
      async () => {
        // The provider's key reaches the runtime through the outbox; until then the turn would end without a model.
        const shown = await json<{ provisioning: { pending_changes: number } }>(api.call(`/api/projects/${project.id}`, { token: session }));
        if (shown.provisioning.pending_changes > 0) throw new Error('configuration still being delivered');
        return runtime!.endUser('/chat', minted.access_token, { method: 'POST', body: JSON.stringify({ message: 'Hi, I am Alice' }) });
      },
      { what: 'the provider delivered', timeoutMs: 60_000 },
    );
    expect(chat.status).toBe(200);
    const turn = (await chat.json()) as { session_id: string; content: string };
    expect(turn.content).toBe('Hello Alice, how can I help?');

    const projectDatabase = new pg.Client({ connectionString: Object.assign(new URL(postgres.adminUrl), { pathname: `/${databaseName}` }).toString() });
    await projectDatabase.connect();
    try {
      const stored = await projectDatabase.query('select count(*)::int as messages from messages where tenant_id = $1 and session_id = $2', [project.tenant_id, turn.session_id]);
      expect(stored.rows[0]).toEqual({ messages: 2 });
    } finally {
      await projectDatabase.end();
    }

    // Deleting the project: the Tenant's erase runs in the runtime, then the database and role go, then the namespace.
    const deleted = await api.call(`/api/projects/${project.id}`, { method: 'DELETE', token: session });
    expect(deleted.status).toBe(202);
    const clusterAdmin = new Admin(cluster.kubeConfig());
    await eventually(async () => (await clusterAdmin.project(project.id)) === null, { what: 'the Project erased and gone', timeoutMs: 180_000 });
    const erase = calls.filter((call) => call.method === 'DELETE');
    expect(erase).toEqual([{ method: 'DELETE', url: `${runtimeLink.url}/tenants/${project.tenant_id}`, status: 200 }]);
    expect(await operator.databases!.exists(databaseName)).toEqual({ database: false, role: false });
    expect(await clusterAdmin.namespaceExists(namespace)).toBe(false);
  });
});
