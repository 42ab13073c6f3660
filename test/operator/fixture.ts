// What the operator suites share: a real API server with the agentplane CRDs installed, the operator's own
// namespace, the ClusterRole project runtimes are bound to, and helpers to build an operator's configuration and
// to read and write Projects and Tenants as an admin would.
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { API_VERSION, type Project, type ProjectSpec, type Tenant } from '@agentplane/lib/kubernetes/resources';
import { silentLogger } from '@agentplane/lib/logging';
import { createOperator, type Operator, type OperatorDeps } from '@agentplane/operator/app';
import { loadOperatorConfig, type OperatorConfig } from '@agentplane/operator/config';
import { KubeClient } from '@agentplane/operator/kube/client';
import { RuntimeClient, type RuntimeCall } from '@agentplane/operator/runtime-client';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { postgresBinaries, startPostgres, type PostgresServer } from '../harness/postgres.js';
import { startTestRuntime, type TestRuntime } from '../harness/runtime.js';

export const OPERATOR_NAMESPACE = 'agentplane-system';
export const RUNTIME_CLUSTER_ROLE = 'agentplane-project-runtime';

const crdDir = join(import.meta.dirname, '..', '..', 'crds');

/**
 * Installs crds/*.yaml (waiting for the files while another engineer may still be writing them) and waits until
 * the API server serves them. The YAML is read with client-node's own loader, into its models: its serializer
 * writes only the models' members, so a plain YAML parse would lose the schemas' `x-kubernetes-*` members.
 */
export async function installCrds(kubeConfig: k8s.KubeConfig): Promise<void> {
  const api = kubeConfig.makeApiClient(k8s.ApiextensionsV1Api);
  const files = await eventually(
    () => {
      const found = readdirSync(crdDir).filter((file) => file.endsWith('.yaml'));
      return found.length >= 2 && found;
    },
    { what: 'crds/*.yaml', timeoutMs: 10 * 60_000, intervalMs: 5_000 },
  );
  const names: string[] = [];
  for (const file of files) {
    for (const body of k8s.loadAllYaml(readFileSync(join(crdDir, file), 'utf8')) as k8s.V1CustomResourceDefinition[]) {
      if (body?.kind !== 'CustomResourceDefinition') continue;
      await api.createCustomResourceDefinition({ body });
      names.push(body.metadata!.name!);
    }
  }
  await eventually(
    async () => {
      for (const name of names) {
        const crd = await api.readCustomResourceDefinition({ name });
        if (!crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return false;
      }
      return true;
    },
    { what: 'CRDs established' },
  );
}

/**
 * The operator's namespace (its Lease lives there) and, unless the chart is installed instead, the ClusterRole the
 * chart installs for project runtimes.
 */
export async function prepareCluster(kubeConfig: k8s.KubeConfig, options: { runtimeClusterRole?: boolean } = {}): Promise<void> {
  const core = kubeConfig.makeApiClient(k8s.CoreV1Api);
  const rbac = kubeConfig.makeApiClient(k8s.RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: OPERATOR_NAMESPACE } } });
  if (options.runtimeClusterRole === false) return;
  await rbac.createClusterRole({
    body: {
      metadata: { name: RUNTIME_CLUSTER_ROLE },
      rules: [
        { apiGroups: [''], resources: ['pods', 'pods/log'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
        { apiGroups: [''], resources: ['pods/exec'], verbs: ['create', 'get'] },
        { apiGroups: ['batch'], resources: ['jobs', 'cronjobs'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      ],
    },
  });
}

/** An operator configuration as the environment would give it, for this cluster and runtime. */
export function operatorConfig(env: Record<string, string>): OperatorConfig {
  return loadOperatorConfig({
    OPERATOR_NAMESPACE,
    POD_NAME: `operator-${randomBytes(3).toString('hex')}`,
    OPERATOR_PORT: '0',
    HOST: '127.0.0.1',
    LEADER_ELECTION_LEASE_SECONDS: '4',
    LEADER_ELECTION_RENEW_SECONDS: '1',
    RESYNC_SECONDS: '30',
    MAX_BACKOFF_SECONDS: '2',
    RUNTIME_CLUSTER_ROLE,
    RUNTIME_IMAGE: 'registry.invalid/agentplane:test',
    DATA_PLANE_DOMAIN: 'agents.example.test',
    LOG_LEVEL: 'silent',
    ...env,
  });
}

/** Starts an operator on the cluster; stopped by the returned list's owner. */
export async function startOperator(cluster: KubernetesCluster, config: OperatorConfig, extra: Partial<OperatorDeps> = {}): Promise<Operator> {
  const operator = createOperator({
    config,
    logger: process.env.OPERATOR_TEST_LOGS ? (await import('@agentplane/lib/logging')).createLogger({ level: 'debug', name: config.identity }) : silentLogger(),
    kubeConfig: config.kubeconfig ? undefined : cluster.kubeConfig(),
    ...extra,
  });
  await operator.start();
  return operator;
}

/** Reads and writes agentplane objects as an admin (the test's side of the API). */
export class Admin {
  readonly kube: KubeClient;
  readonly core: k8s.CoreV1Api;
  readonly apps: k8s.AppsV1Api;

  constructor(readonly kubeConfig: k8s.KubeConfig) {
    this.kube = new KubeClient(kubeConfig);
    this.core = kubeConfig.makeApiClient(k8s.CoreV1Api);
    this.apps = kubeConfig.makeApiClient(k8s.AppsV1Api);
  }

  createProject(name: string, spec: ProjectSpec = {}): Promise<Project> {
    const body: Project = { apiVersion: API_VERSION, kind: 'Project', metadata: { name }, spec };
    return this.kube.custom.createClusterCustomObject({ group: 'agentplane.io', version: 'v1alpha1', plural: 'projects', body }) as Promise<Project>;
  }

  createTenant(project: string, namespace: string, settings: Record<string, unknown> = {}, tenantId = randomUUID()): Promise<Tenant> {
    const body: Tenant = {
      apiVersion: API_VERSION,
      kind: 'Tenant',
      metadata: { name: tenantId, namespace },
      spec: { tenantId, project, displayName: `tenant of ${project}`, settings },
    };
    return this.kube.custom.createNamespacedCustomObject({ group: 'agentplane.io', version: 'v1alpha1', plural: 'tenants', namespace, body }) as Promise<Tenant>;
  }

  project(name: string): Promise<Project | null> {
    return this.kube.getCustom('Project', name);
  }

  tenant(namespace: string, name: string): Promise<Tenant | null> {
    return this.kube.getCustom('Tenant', name, namespace);
  }

  /** A merge patch of the Project's spec, as `kubectl patch --type merge` does. */
  async patchProjectSpec(name: string, spec: Record<string, unknown>): Promise<void> {
    await this.kube.custom.patchClusterCustomObject(
      { group: 'agentplane.io', version: 'v1alpha1', plural: 'projects', name, body: { spec } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  }

  async patchTenantSpec(namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
    await this.kube.custom.patchNamespacedCustomObject(
      { group: 'agentplane.io', version: 'v1alpha1', plural: 'tenants', namespace, name, body: { spec } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  }

  async namespaceExists(name: string): Promise<boolean> {
    return (await this.kube.get({ apiVersion: 'v1', kind: 'Namespace', name })) !== null;
  }

  /**
   * Creates the project's namespace and its runtime Secret ahead of the operator, with the admin key of the runtime
   * the test started: an admin bringing their own keys, which the operator keeps.
   */
  async seedRuntimeSecret(namespace: string, adminKey: string): Promise<void> {
    await this.core.createNamespace({ body: { metadata: { name: namespace } } });
    await this.core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'agentplane-runtime' }, stringData: { 'admin-key': adminKey, 'master-key': randomBytes(32).toString('base64') } },
    });
  }
}

export const conditionOf = (object: Project | Tenant | null, type: string) => object?.status?.conditions?.find((c) => c.type === type);

/** Waits until the object's condition has this status (and reason, when given). */
export async function waitForCondition(
  read: () => Promise<Project | Tenant | null>,
  type: string,
  status: 'True' | 'False',
  options: { reason?: string; timeoutMs?: number } = {},
): Promise<Project | Tenant> {
  return eventually(
    async () => {
      const object = await read();
      const condition = conditionOf(object, type);
      if (condition?.status !== status || (options.reason && condition.reason !== options.reason)) {
        throw new Error(`${type} is ${condition ? `${condition.status} (${condition.reason}: ${condition.message})` : 'not set'}`);
      }
      return object!;
    },
    { what: `${type}=${status}${options.reason ? ` (${options.reason})` : ''}`, timeoutMs: options.timeoutMs ?? 60_000 },
  );
}

/**
 * A TCP relay in front of a server (the test runtime, or the API server): the operator is pointed here, so a test
 * can cut it off (connections refused, open ones dropped) and let it through again.
 */
export interface TcpLink {
  url: string;
  /** Sends new connections to this server from now on (a link started without a target refuses until then). */
  point(target: URL): void;
  cut(): void;
  /**
   * Drops the connection carrying a request with one of these methods, once the request has been read (so it never
   * reaches the server and no answer comes back), and lets every other request through: the runtime stays `/ready`
   * while its registrations and erases are lost. `restore()` ends it.
   */
  dropRequests(methods: string[]): void;
  restore(): void;
  stop(): Promise<void>;
}

export async function startTcpLink(initialTarget?: URL): Promise<TcpLink> {
  const sockets = new Set<Socket>();
  let open = true;
  let target = initialTarget;
  let dropped: string[] = [];
  const server = createNetServer((client) => {
    if (!open || !target) return client.destroy();
    const upstream = connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    // Each request on a kept-alive connection arrives as a chunk starting with its request line.
    client.on('data', (chunk: Buffer) => {
      const line = chunk.subarray(0, 16).toString('latin1');
      if (dropped.some((method) => line.startsWith(`${method} `))) {
        client.destroy();
        upstream.destroy();
        return;
      }
      upstream.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    point(next) {
      target = next;
    },
    cut() {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    dropRequests(methods) {
      dropped = methods;
    },
    restore() {
      open = true;
      dropped = [];
    },
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Everything an operator suite runs against; `stop()` tears it down. */
export interface OperatorEnvironment {
  cluster: KubernetesCluster;
  admin: Admin;
  postgres: PostgresServer;
  runtime: TestRuntime;
  link: TcpLink;
  /** Every call an operator of this environment made to the runtime, in order. */
  calls: Array<RuntimeCall & { at: number }>;
  runtimeClient: RuntimeClient;
  /** An operator configuration reaching this environment's runtime (through the link) and database server. */
  config(env?: Record<string, string>): OperatorConfig;
  stop(): Promise<void>;
}

/** Binaries the operator suites need; null (skip) when one is missing. */
export function operatorSuiteBinaries() {
  const kubernetes = kubernetesBinaries();
  const postgres = postgresBinaries();
  return kubernetes && postgres ? { kubernetes, postgres } : null;
}

export async function startOperatorEnvironment(
  binaries: NonNullable<ReturnType<typeof operatorSuiteBinaries>>,
  /** `chart`: the suite installs the Helm chart, which brings the CRDs and the runtime ClusterRole itself. */
  options: { chart?: boolean } = {},
): Promise<OperatorEnvironment> {
  const [cluster, postgres, runtime] = await Promise.all([startKubernetes(binaries.kubernetes), startPostgres(), startTestRuntime()]);
  if (!options.chart) await installCrds(cluster.kubeConfig());
  await prepareCluster(cluster.kubeConfig(), { runtimeClusterRole: !options.chart });
  const link = await startTcpLink(new URL(runtime.url));
  const calls: OperatorEnvironment['calls'] = [];
  const runtimeClient = new RuntimeClient({ timeoutMs: 5_000, onCall: (call) => calls.push({ ...call, at: Date.now() }) });
  return {
    cluster,
    admin: new Admin(cluster.kubeConfig()),
    postgres,
    runtime,
    link,
    calls,
    runtimeClient,
    config: (env = {}) => operatorConfig({ RUNTIME_URL_TEMPLATE: link.url, PROJECT_DATABASE_ADMIN_URL: postgres.adminUrl, ...env }),
    async stop() {
      await link.stop();
      await Promise.allSettled([runtime.stop(), postgres.stop(), cluster.stop()]);
    },
  };
}
