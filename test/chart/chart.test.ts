// The Helm chart a platform engineer installs: it lints, renders objects that carry the standard labels and run
// under Pod Security "restricted", keeps credentials in Secrets it does not write unless asked, hands the programs
// a configuration their own loaders accept, refuses mistyped values, ships the repo's CRDs unchanged, and on a real
// API server creates every object it renders and grants its ServiceAccounts what they need and nothing more.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadControlApiConfig } from '@agentplane/control-api/config';
import { loadOperatorConfig } from '@agentplane/operator/config';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { requireBinary } from '../harness/process.js';
import {
  chartDir,
  chartServiceAccounts,
  installChart,
  lintChart,
  parseManifest,
  renderChart,
  serviceAccountKubeconfig,
  templateChart,
  type ManifestObject,
} from './install.js';

const namespace = 'agentplane-system';
const release = 'agentplane';
const masterKey = Buffer.alloc(32, 7).toString('base64');

/** The Secrets a production install refers to, as the installer would create them beforehand. */
const existingSecrets: Record<string, Record<string, string>> = {
  'agentplane-postgresql': {
    'control-database-url': 'postgres://control:control-password@postgres.db.svc:5432/agentplane',
    'admin-database-url': 'postgres://admin:admin-password@postgres.db.svc:5432/postgres',
  },
  'agentplane-redis': { 'redis-url': 'redis://:redis-password@redis.cache.svc:6379' },
  'agentplane-s3': { 'access-key-id': 'AKIAEXAMPLE', 'secret-access-key': 's3-secret-example' },
  'agentplane-pinecone': { 'api-key': 'pc-example-key' },
  'agentplane-master-key': { 'master-key': masterKey },
  'agentplane-owner': { email: 'ops@example.test', password: 'a-long-owner-password' },
};

/** Every store configured through existing Secrets, several replicas, the control plane on an Ingress. */
const productionValues = {
  operator: { replicas: 2 },
  runtime: { port: 9091 },
  controlPlane: {
    replicas: 2,
    host: 'control.example.test',
    ingress: { enabled: true, tlsSecretName: 'control-tls' },
    masterKey: { existingSecret: 'agentplane-master-key' },
    owner: { existingSecret: 'agentplane-owner' },
  },
  dataPlane: { domain: 'agents.example.test', ingressClassName: 'nginx', tlsSecretName: 'agents-wildcard-tls' },
  postgresql: { existingSecret: 'agentplane-postgresql', runtimeHost: 'postgres.db.svc:5432' },
  redis: { existingSecret: 'agentplane-redis' },
  s3: { bucket: 'agentplane', endpoint: 'http://minio.storage.svc:9000', forcePathStyle: true, existingSecret: 'agentplane-s3' },
  pinecone: { indexHost: 'https://agentplane-abc123.svc.example.pinecone.io', existingSecret: 'agentplane-pinecone' },
};

/** Development: the chart writes the Secrets from inline values. */
const developmentValues = {
  postgresql: {
    create: true,
    controlUrl: 'postgres://control:dev-control-password@postgres:5432/agentplane',
    adminUrl: 'postgres://admin:dev-admin-password@postgres:5432/postgres',
  },
  redis: { create: true, url: 'redis://:dev-redis-password@redis:6379' },
  s3: { bucket: 'dev', create: true, accessKeyId: 'dev-access-key', secretAccessKey: 'dev-secret-key' },
  pinecone: { indexHost: 'http://pinecone-local.dev.svc:5080', create: true, apiKey: 'dev-pinecone-key' },
  controlPlane: { masterKey: { create: true, value: masterKey }, owner: { create: true, email: 'dev@example.test', password: 'dev-owner-password' } },
};

/** Environment variables that carry credentials: only ever read from a Secret. */
const credentialVariables = [
  'CONTROL_DATABASE_URL',
  'PROJECT_DATABASE_ADMIN_URL',
  'REDIS_URL',
  'RUNTIME_REDIS_URL',
  'AGENTPLANE_MASTER_KEY',
  'AGENTPLANE_OWNER_EMAIL',
  'AGENTPLANE_OWNER_PASSWORD',
  'RUNTIME_S3_ACCESS_KEY_ID',
  'RUNTIME_S3_SECRET_ACCESS_KEY',
  'RUNTIME_PINECONE_API_KEY',
];

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
}
interface Container {
  name: string;
  env?: EnvVar[];
  securityContext?: Record<string, unknown> & { capabilities?: { drop?: string[]; add?: string[] } };
  ports?: { hostPort?: number }[];
}
interface PodSpec {
  securityContext?: Record<string, unknown>;
  containers: Container[];
  initContainers?: Container[];
  volumes?: Record<string, unknown>[];
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
}
interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
}

type Workload = ManifestObject & { spec: { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } };

const workloads = (objects: ManifestObject[]) => objects.filter((o): o is Workload => o.kind === 'Deployment');
const workload = (objects: ManifestObject[], component: string) => {
  const found = workloads(objects).find((o) => o.metadata.labels?.['app.kubernetes.io/component'] === component);
  if (!found) throw new Error(`no ${component} Deployment rendered`);
  return found;
};
const container = (objects: ManifestObject[], component: string) => workload(objects, component).spec.template.spec.containers[0]!;

/** A container's environment as the kubelet would give it, with Secret references resolved from `secrets`. */
function resolveEnv(env: EnvVar[], secrets: Record<string, Record<string, string>>): Record<string, string> {
  return Object.fromEntries(
    env.map((variable) => {
      const secret = variable.valueFrom?.secretKeyRef;
      if (secret) {
        const value = secrets[secret.name]?.[secret.key];
        if (value === undefined) throw new Error(`${variable.name} refers to ${secret.name}/${secret.key}, which does not exist`);
        return [variable.name, value];
      }
      if (variable.valueFrom?.fieldRef) return [variable.name, `pod-${variable.valueFrom.fieldRef.fieldPath}`];
      return [variable.name, variable.value ?? ''];
    }),
  );
}

const standardLabels = (component: string) => ({
  'helm.sh/chart': 'agentplane-0.1.0',
  'app.kubernetes.io/name': 'agentplane',
  'app.kubernetes.io/instance': release,
  'app.kubernetes.io/version': '0.1.0',
  'app.kubernetes.io/managed-by': 'Helm',
  'app.kubernetes.io/part-of': 'agentplane',
  'app.kubernetes.io/component': component,
});

/** Pod Security "restricted", field by field, plus a read-only root filesystem. */
function expectRestricted(name: string, pod: PodSpec): void {
  expect(pod.securityContext, name).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  expect(pod.hostNetwork || pod.hostPID || pod.hostIPC, name).toBeFalsy();
  for (const volume of pod.volumes ?? []) {
    const sources = Object.keys(volume).filter((key) => key !== 'name');
    expect(sources.every((source) => ['emptyDir', 'secret', 'configMap', 'projected', 'downwardAPI'].includes(source)), `${name} volume ${String(volume.name)}`).toBe(true);
  }
  for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
    expect(c.securityContext, `${name}/${c.name}`).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true });
    expect(c.securityContext?.capabilities?.drop, `${name}/${c.name}`).toContain('ALL');
    expect(c.securityContext?.capabilities?.add ?? [], `${name}/${c.name}`).toEqual([]);
    expect(c.securityContext?.privileged ?? false, `${name}/${c.name}`).toBe(false);
    expect(c.securityContext?.runAsUser, `${name}/${c.name}`).not.toBe(0);
    expect((c.ports ?? []).every((port) => port.hostPort === undefined), `${name}/${c.name}`).toBe(true);
  }
}

const helm = requireBinary('helm');

describe.skipIf(!helm)('the Helm chart, rendered', () => {
  it('passes helm lint --strict with the defaults, a production and a development configuration', async () => {
    for (const values of [undefined, productionValues, developmentValues]) {
      const result = await lintChart(helm!, values);
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain('0 chart(s) failed');
    }
  });

  it('renders objects that parse and carry the standard labels, on the objects and on their Pods', async () => {
    for (const values of [{}, productionValues, developmentValues]) {
      const objects = await renderChart(helm!, { release, namespace, values });
      expect(objects.length).toBeGreaterThan(10);
      for (const object of objects) {
        const what = `${object.kind}/${object.metadata.name}`;
        expect(object.apiVersion, what).toMatch(/^[a-z0-9.]*\/?v\d/);
        const labels = object.metadata.labels ?? {};
        expect(labels, what).toMatchObject(standardLabels(labels['app.kubernetes.io/component'] ?? '(missing)'));
        expect(['operator', 'control-api', 'runtime', 'postgresql', 'redis', 's3', 'pinecone'], what).toContain(labels['app.kubernetes.io/component']);
        if (object.metadata.namespace !== undefined) expect(object.metadata.namespace, what).toBe(namespace);
      }
      for (const deployment of workloads(objects)) {
        expect(deployment.spec.template.metadata.labels).toMatchObject(standardLabels(deployment.metadata.labels!['app.kubernetes.io/component']!));
      }
    }
  });

  it('runs every workload under Pod Security restricted with a read-only root filesystem', async () => {
    for (const values of [{}, productionValues]) {
      const objects = await renderChart(helm!, { release, namespace, values });
      expect(workloads(objects).map((o) => o.metadata.name).sort()).toEqual(['agentplane-control-api', 'agentplane-operator']);
      for (const deployment of workloads(objects)) expectRestricted(deployment.metadata.name, deployment.spec.template.spec);
    }
  });

  it('writes no Secret by default and reads every credential from the Secrets it is pointed at', async () => {
    for (const values of [{}, productionValues]) {
      const objects = await renderChart(helm!, { release, namespace, values });
      expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    }
    const objects = await renderChart(helm!, { release, namespace, values: productionValues });
    const env = workloads(objects).flatMap((d) => d.spec.template.spec.containers.flatMap((c) => c.env ?? []));
    const credentials = env.filter((variable) => credentialVariables.includes(variable.name));
    expect(credentials.map((variable) => variable.name).sort()).toEqual([...credentialVariables].sort());
    for (const variable of credentials) {
      expect(variable.value, variable.name).toBeUndefined();
      expect(Object.keys(existingSecrets), variable.name).toContain(variable.valueFrom?.secretKeyRef?.name);
    }
  });

  it('writes Secrets from inline values only when asked, and the workloads still read them by reference', async () => {
    const objects = await renderChart(helm!, { release, namespace, values: developmentValues });
    const secrets = objects.filter((o) => o.kind === 'Secret') as (ManifestObject & { stringData: Record<string, string> })[];
    expect(secrets.map((s) => s.metadata.name).sort()).toEqual([
      'agentplane-master-key',
      'agentplane-owner',
      'agentplane-pinecone',
      'agentplane-postgresql',
      'agentplane-redis',
      'agentplane-s3',
    ]);
    const byName = Object.fromEntries(secrets.map((s) => [s.metadata.name, s.stringData]));
    expect(byName['agentplane-redis']).toEqual({ 'redis-url': developmentValues.redis.url });
    // The Deployments hold references, never the values.
    const deployments = JSON.stringify(workloads(objects));
    for (const secret of ['dev-control-password', 'dev-admin-password', 'dev-redis-password', 'dev-secret-key', 'dev-owner-password', 'dev-pinecone-key', masterKey]) {
      expect(deployments).not.toContain(secret);
    }
    const controlEnv = resolveEnv(container(objects, 'control-api').env ?? [], byName);
    expect(controlEnv.AGENTPLANE_OWNER_PASSWORD).toBe('dev-owner-password');
  });

  it("hands the operator a configuration operator/src/config.ts accepts, with every value where it belongs", async () => {
    const objects = await renderChart(helm!, { release, namespace, values: productionValues });
    const env = resolveEnv(container(objects, 'operator').env ?? [], existingSecrets);
    const config = loadOperatorConfig(env);
    expect(config).toMatchObject({
      kubeconfig: undefined,
      namespace,
      identity: 'pod-metadata.name',
      leaderElection: { enabled: true, leaseName: 'agentplane-operator', leaseSeconds: 15, renewSeconds: 5 },
      port: 8082,
      host: '0.0.0.0',
      projectNamespacePrefix: 'agentplane-',
      runtime: {
        image: 'ghcr.io/agentplane/agentplane:0.1.0',
        port: 9091,
        resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } },
        urlTemplate: 'http://agent-runtime.{namespace}.svc:9091',
        clusterRole: 'agentplane-project-runtime',
        sandboxes: { image: 'docker.io/library/python:3.13-slim-bookworm', imagePullPolicy: 'IfNotPresent', storageClass: undefined },
        browser: {
          image: 'ghcr.io/agentplane/agentplane-browser:0.1.0',
          imagePullPolicy: 'IfNotPresent',
          port: 8083,
          resources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { cpu: '2', memory: '3Gi' } },
          allowedDestinations: [],
          seccompProfile: undefined,
        },
      },
      dataPlane: { domain: 'agents.example.test', scheme: 'https', ingressClassName: 'nginx', tlsSecretName: 'agents-wildcard-tls' },
      stores: {
        databaseAdminUrl: existingSecrets['agentplane-postgresql']!['admin-database-url'],
        databaseHost: 'postgres.db.svc:5432',
        redisUrl: existingSecrets['agentplane-redis']!['redis-url'],
        s3: {
          endpoint: 'http://minio.storage.svc:9000',
          bucket: 'agentplane',
          region: 'us-east-1',
          accessKeyId: 'AKIAEXAMPLE',
          secretAccessKey: 's3-secret-example',
          forcePathStyle: true,
        },
        pinecone: { indexHost: 'https://agentplane-abc123.svc.example.pinecone.io', apiKey: 'pc-example-key' },
      },
      logFormat: 'json',
    });
    // With the defaults the runtimes run embedded: no store at all.
    const defaults = await renderChart(helm!, { release, namespace });
    expect(loadOperatorConfig(resolveEnv(container(defaults, 'operator').env ?? [], {})).stores).toEqual({
      databaseAdminUrl: undefined,
      databaseHost: undefined,
      redisUrl: undefined,
      s3: undefined,
      pinecone: undefined,
    });
    // Sandboxes in a storage class of the platform's, or none at all.
    const sandboxesOf = async (sandboxes: Record<string, unknown>) =>
      loadOperatorConfig(resolveEnv(container(await renderChart(helm!, { release, namespace, values: { runtime: { sandboxes } } }), 'operator').env ?? [], {})).runtime.sandboxes;
    expect(await sandboxesOf({ storageClass: 'fast-ssd', image: 'registry.example.com/tools:2', pullPolicy: 'Always' })).toEqual({
      image: 'registry.example.com/tools:2',
      imagePullPolicy: 'Always',
      storageClass: 'fast-ssd',
    });
    expect(await sandboxesOf({ enabled: false })).toBeUndefined();
    // The browser Pod: an intranet site, a seccomp profile that gives Chromium its own sandbox, or none at all.
    const browserOf = async (browser: Record<string, unknown>) =>
      loadOperatorConfig(resolveEnv(container(await renderChart(helm!, { release, namespace, values: { runtime: { browser } } }), 'operator').env ?? [], {})).runtime.browser;
    expect(await browserOf({ allowedDestinations: ['10.1.2.3:443', 'wiki.corp.example:8443'], seccompProfile: 'profiles/chromium.json', image: { repository: 'ghcr.io/agentplane/agentplane-browser', digest: `sha256:${'ab'.repeat(32)}` } })).toMatchObject({
      image: `ghcr.io/agentplane/agentplane-browser@sha256:${'ab'.repeat(32)}`,
      allowedDestinations: ['10.1.2.3:443', 'wiki.corp.example:8443'],
      seccompProfile: 'profiles/chromium.json',
    });
    expect(await browserOf({ enabled: false })).toBeUndefined();
  });

  it('hands the control-api a configuration control-api/src/config.ts accepts: the kubernetes provisioner and the stores', async () => {
    const objects = await renderChart(helm!, { release, namespace, values: productionValues });
    const env = resolveEnv(container(objects, 'control-api').env ?? [], existingSecrets);
    const config = loadControlApiConfig(env);
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 8080,
      publicUrl: 'https://control.example.test',
      dataDir: '/var/lib/agentplane',
      database: { driver: 'postgres', url: existingSecrets['agentplane-postgresql']!['control-database-url'] },
      events: { kind: 'redis', url: existingSecrets['agentplane-redis']!['redis-url'] },
      owner: { email: 'ops@example.test', password: 'a-long-owner-password' },
      masterKey,
      provisioner: { kind: 'kubernetes', kubeconfig: undefined, projectNamespacePrefix: 'agentplane-' },
      logFormat: 'json',
    });
    const defaults = await renderChart(helm!, { release, namespace });
    expect(loadControlApiConfig(resolveEnv(container(defaults, 'control-api').env ?? [], {}))).toMatchObject({
      database: { driver: 'pglite' },
      events: { kind: 'memory' },
      masterKey: undefined,
      provisioner: { kind: 'kubernetes' },
    });
  });

  it('refuses mistyped keys, values out of range and combinations that cannot work, saying what is wrong', async () => {
    const refusals: [Record<string, unknown>, RegExp][] = [
      [{ operater: { replicas: 2 } }, /additional properties 'operater' not allowed/],
      [{ operator: { replicaz: 2 } }, /additional properties 'replicaz' not allowed/],
      [{ controlPlane: { ingress: { enable: true } } }, /additional properties 'enable' not allowed/],
      [{ postgresql: { existingSecrets: 'pg' } }, /additional properties 'existingSecrets' not allowed/],
      [{ dataPlane: { scheme: 'ftp' } }, /scheme/],
      [{ projectNamespacePrefix: 'Not_A_Prefix' }, /projectNamespacePrefix/],
      [{ controlPlane: { replicas: 2 } }, /controlPlane.replicas > 1 needs postgresql/],
      [{ postgresql: { existingSecret: 'pg' } }, /postgresql needs controlPlane.masterKey.existingSecret/],
      [{ operator: { replicas: 2, leaderElection: { enabled: false } } }, /needs operator.leaderElection.enabled/],
      [{ controlPlane: { ingress: { enabled: true } } }, /controlPlane.ingress.enabled needs controlPlane.host/],
      [{ redis: { create: true } }, /redis.create needs redis.url/],
      [{ pinecone: { indexHost: 'https://index.svc.pinecone.io' } }, /pinecone.indexHost needs pinecone.existingSecret/],
      [{ pinecone: { existingSecret: 'pc' } }, /pinecone credentials are set but pinecone.indexHost is not/],
    ];
    for (const [values, message] of refusals) {
      const result = await templateChart(helm!, { release, namespace, values });
      expect(result.code, JSON.stringify(values)).not.toBe(0);
      expect(result.stderr, JSON.stringify(values)).toMatch(message);
    }
  });

  it("gives project runtimes a ClusterRole of exactly what tasks and sandboxes need, in its own template", async () => {
    const [role, ...rest] = await renderChart(helm!, { release, namespace, args: ['--show-only', 'templates/runtime-clusterrole.yaml'] });
    expect(rest).toEqual([]);
    expect(role).toMatchObject({ kind: 'ClusterRole', metadata: { name: 'agentplane-project-runtime' } });
    expect((role as ManifestObject & { rules: PolicyRule[] }).rules).toEqual([
      { apiGroups: ['batch'], resources: ['cronjobs', 'jobs'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
      { apiGroups: [''], resources: ['pods/exec'], verbs: ['create', 'get'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
      // A sandbox's /workspace; `patch` marks it paused. No verb on NetworkPolicies or ResourceQuotas.
      { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['get', 'create', 'patch', 'delete'] },
    ]);
    const renamed = await renderChart(helm!, { values: { runtime: { clusterRoleName: 'runtime-b' } }, args: ['--show-only', 'templates/runtime-clusterrole.yaml'] });
    expect(renamed[0]!.metadata.name).toBe('runtime-b');
  });

  it('grants no wildcard anywhere, and the operator `bind` on the runtime ClusterRole alone', async () => {
    const objects = await renderChart(helm!, { release, namespace });
    const roles = objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role') as (ManifestObject & { rules: PolicyRule[] })[];
    for (const role of roles) {
      for (const rule of role.rules) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs, rule.resourceNames]) expect(list ?? [], role.metadata.name).not.toContain('*');
      }
    }
    const operator = roles.find((r) => r.kind === 'ClusterRole' && r.metadata.name === 'agentplane-operator')!;
    const binds = operator.rules.filter((rule) => rule.verbs.includes('bind') || rule.verbs.includes('escalate'));
    expect(binds).toEqual([{ apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], verbs: ['bind'], resourceNames: ['agentplane-project-runtime'] }]);
  });

  it('ships the CRDs of crds/ byte for byte', () => {
    const repoCrds = join(chartDir, '..', '..', 'crds');
    const chartCrds = join(chartDir, 'crds');
    const yamlFiles = (dir: string) => readdirSync(dir).filter((file) => file.endsWith('.yaml')).sort();
    expect(yamlFiles(chartCrds)).toEqual(yamlFiles(repoCrds));
    expect(yamlFiles(repoCrds)).toEqual(['project.yaml', 'tenant.yaml']);
    for (const file of yamlFiles(repoCrds)) {
      expect(readFileSync(join(chartCrds, file), 'utf8'), `charts/agentplane/crds/${file} differs from crds/${file}: cp crds/*.yaml charts/agentplane/crds/`).toBe(
        readFileSync(join(repoCrds, file), 'utf8'),
      );
    }
  });
});

const binaries = kubernetesBinaries();

describe.skipIf(!binaries)('the Helm chart on a real API server', () => {
  let cluster: KubernetesCluster;
  let rendered: ManifestObject[];
  let notes: string;
  let operatorKubeconfig: string;
  let controlApiKubeconfig: string;
  const accounts = chartServiceAccounts(release);

  const kubectl = async (args: string[], options: { input?: string; kubeconfig?: string } = {}) => {
    const result = await cluster.kubectl(args, options);
    if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed:\n${result.stderr}`);
    return result.stdout;
  };
  /** `kubectl auth can-i` as a kubeconfig's user: true for yes. */
  const can = async (kubeconfig: string, args: string[]) => {
    const result = await cluster.kubectl(['auth', 'can-i', ...args], { kubeconfig });
    if (result.stdout.trim() !== 'yes' && result.stdout.trim() !== 'no') throw new Error(`kubectl auth can-i ${args.join(' ')}: ${result.stderr}`);
    return result.stdout.trim() === 'yes';
  };
  const reference = (object: ManifestObject) => {
    const group = object.apiVersion.includes('/') ? `.${object.apiVersion.split('/')[0]}` : '';
    return `${object.kind.toLowerCase()}${group}/${object.metadata.name}`;
  };

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!);
    // Pods in the release namespace must pass Pod Security "restricted" to be created at all.
    await kubectl(['create', 'namespace', namespace]);
    await kubectl(['label', 'namespace', namespace, 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/enforce-version=latest']);
    for (const [name, data] of Object.entries(existingSecrets)) {
      await kubectl(['create', 'secret', 'generic', name, '--namespace', namespace, ...Object.entries(data).map(([key, value]) => `--from-literal=${key}=${value}`)]);
    }
    rendered = await renderChart(helm!, { release, namespace, values: productionValues });
    notes = (await installChart(cluster, { release, namespace, values: productionValues })).stdout;
    operatorKubeconfig = await serviceAccountKubeconfig(cluster, namespace, accounts.operator);
    controlApiKubeconfig = await serviceAccountKubeconfig(cluster, namespace, accounts.controlApi);
  }, 240_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('creates every object it renders, and the CRDs', async () => {
    const live = parseManifest(await kubectl(['get', '--namespace', namespace, '--output', 'yaml', ...rendered.map(reference)]));
    const items = (live[0] as ManifestObject & { items: ManifestObject[] }).items;
    expect(items.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(rendered.map((o) => `${o.kind}/${o.metadata.name}`).sort());
    for (const object of items) expect(object.metadata.annotations?.['meta.helm.sh/release-name'], reference(object)).toBe(release);
    for (const crd of ['projects.agentplane.io', 'tenants.agentplane.io']) {
      await kubectl(['wait', '--for=condition=Established', '--timeout=60s', `customresourcedefinition/${crd}`]);
    }
    expect(notes).toContain('kubectl get projects,tenants');
    expect(notes).toContain('https://control.example.test');
  });

  it('runs its Deployments to availability in a namespace that enforces Pod Security restricted', async () => {
    for (const name of ['agentplane-operator', 'agentplane-control-api']) {
      await eventually(
        async () => {
          const status = JSON.parse(await kubectl(['get', 'deployment', name, '--namespace', namespace, '--output', 'jsonpath={.status}'])) as {
            availableReplicas?: number;
          };
          return status.availableReplicas === 2;
        },
        { what: `${name} with 2 available replicas`, timeoutMs: 90_000 },
      );
    }
  }, 120_000);

  it("lets the operator's ServiceAccount do what reconciling needs", async () => {
    const allowed: string[][] = [
      ['get', 'projects.agentplane.io'],
      ['watch', 'tenants.agentplane.io', '--all-namespaces'],
      ['patch', 'tenants.agentplane.io', '--namespace', 'agentplane-p1'],
      ['delete', 'tenants.agentplane.io', '--namespace', 'agentplane-p1'],
      ['update', 'projects.agentplane.io', '--subresource=status'],
      ['patch', 'tenants.agentplane.io', '--subresource=status', '--namespace', 'agentplane-p1'],
      ['update', 'projects.agentplane.io', '--subresource=finalizers'],
      ['create', 'namespaces'],
      ['delete', 'namespaces'],
      ['create', 'serviceaccounts', '--namespace', 'agentplane-p1'],
      ['create', 'secrets', '--namespace', 'agentplane-p1'],
      ['delete', 'services', '--namespace', 'agentplane-p1'],
      ['create', 'resourcequotas', '--namespace', 'agentplane-p1'],
      ['update', 'limitranges', '--namespace', 'agentplane-p1'],
      ['patch', 'deployments.apps', '--namespace', 'agentplane-p1'],
      ['create', 'networkpolicies.networking.k8s.io', '--namespace', 'agentplane-p1'],
      ['create', 'ingresses.networking.k8s.io', '--namespace', 'agentplane-p1'],
      ['create', 'poddisruptionbudgets.policy', '--namespace', 'agentplane-p1'],
      ['create', 'rolebindings.rbac.authorization.k8s.io', '--namespace', 'agentplane-p1'],
      ['bind', 'clusterroles.rbac.authorization.k8s.io/agentplane-project-runtime'],
      ['create', 'events', '--namespace', 'default'],
      ['patch', 'events.events.k8s.io', '--namespace', 'agentplane-p1'],
      ['create', 'leases.coordination.k8s.io', '--namespace', namespace],
      ['update', 'leases.coordination.k8s.io/agentplane-operator', '--namespace', namespace],
    ];
    for (const args of allowed) expect(await can(operatorKubeconfig, args), args.join(' ')).toBe(true);
  });

  it("denies the operator's ServiceAccount everything beyond that", async () => {
    const denied: string[][] = [
      ['create', 'projects.agentplane.io'],
      ['delete', 'projects.agentplane.io'],
      ['create', 'tenants.agentplane.io', '--namespace', 'agentplane-p1'],
      ['create', 'clusterroles.rbac.authorization.k8s.io'],
      ['create', 'clusterrolebindings.rbac.authorization.k8s.io'],
      ['create', 'roles.rbac.authorization.k8s.io', '--namespace', 'agentplane-p1'],
      ['bind', 'clusterroles.rbac.authorization.k8s.io/cluster-admin'],
      ['bind', 'clusterroles.rbac.authorization.k8s.io/admin'],
      ['escalate', 'clusterroles.rbac.authorization.k8s.io/agentplane-project-runtime'],
      ['delete', 'customresourcedefinitions.apiextensions.k8s.io'],
      ['create', 'pods', '--namespace', 'agentplane-p1'],
      ['create', 'pods', '--subresource=exec', '--namespace', 'agentplane-p1'],
      ['create', 'jobs.batch', '--namespace', 'agentplane-p1'],
      ['impersonate', 'serviceaccounts'],
      ['update', 'nodes'],
      ['update', 'leases.coordination.k8s.io/kube-controller-manager', '--namespace', namespace],
      ['create', 'leases.coordination.k8s.io', '--namespace', 'kube-system'],
    ];
    for (const args of denied) expect(await can(operatorKubeconfig, args), args.join(' ')).toBe(false);
  });

  it('lets the operator bind the runtime ClusterRole in a project namespace, and no more powerful one', async () => {
    const project = 'agentplane-chart-check';
    const asOperator = { kubeconfig: operatorKubeconfig };
    await kubectl(['create', 'namespace', project], asOperator);
    await kubectl(['create', 'serviceaccount', 'agent-runtime', '--namespace', project], asOperator);
    await kubectl(
      ['create', 'rolebinding', 'agent-runtime', '--namespace', project, '--clusterrole=agentplane-project-runtime', `--serviceaccount=${project}:agent-runtime`],
      asOperator,
    );
    // The API server's escalation check: binding `admin` would grant what the operator does not hold.
    const escalation = await cluster.kubectl(
      ['create', 'rolebinding', 'sneaky', '--namespace', project, '--clusterrole=admin', `--serviceaccount=${project}:agent-runtime`],
      asOperator,
    );
    expect(escalation.code).not.toBe(0);
    expect(escalation.stderr).toMatch(/forbidden/i);

    // The runtime's ServiceAccount now reaches its own namespace, and only that one.
    const asRuntime = `--as=system:serviceaccount:${project}:agent-runtime`;
    const runtimeCan = async (args: string[]) => (await cluster.kubectl(['auth', 'can-i', asRuntime, ...args])).stdout.trim() === 'yes';
    expect(await runtimeCan(['create', 'jobs.batch', '--namespace', project])).toBe(true);
    expect(await runtimeCan(['create', 'pods', '--subresource=exec', '--namespace', project])).toBe(true);
    expect(await runtimeCan(['get', 'pods', '--subresource=log', '--namespace', project])).toBe(true);
    expect(await runtimeCan(['create', 'jobs.batch', '--namespace', 'default'])).toBe(false);
    expect(await runtimeCan(['get', 'secrets', '--namespace', project])).toBe(false);
    expect(await runtimeCan(['create', 'rolebindings.rbac.authorization.k8s.io', '--namespace', project])).toBe(false);
  });

  it("lets the control-api's ServiceAccount write Projects and Tenants and read only the runtime admin Secret", async () => {
    const allowed: string[][] = [
      ['create', 'projects.agentplane.io'],
      ['delete', 'projects.agentplane.io'],
      ['watch', 'projects.agentplane.io'],
      ['create', 'tenants.agentplane.io', '--namespace', 'agentplane-p1'],
      ['patch', 'tenants.agentplane.io', '--namespace', 'agentplane-p1'],
      ['get', 'secrets/agentplane-runtime', '--namespace', 'agentplane-p1'],
    ];
    const denied: string[][] = [
      ['get', 'secrets/other', '--namespace', 'agentplane-p1'],
      ['list', 'secrets', '--namespace', 'agentplane-p1'],
      ['get', 'secrets/agentplane-postgresql', '--namespace', namespace],
      ['update', 'projects.agentplane.io', '--subresource=status'],
      ['create', 'namespaces'],
      ['create', 'deployments.apps', '--namespace', 'agentplane-p1'],
    ];
    for (const args of allowed) expect(await can(controlApiKubeconfig, args), args.join(' ')).toBe(true);
    for (const args of denied) expect(await can(controlApiKubeconfig, args), args.join(' ')).toBe(false);
  });

  it('refuses to delete a Project with foreground propagation, which would remove its runtime before its tenants are erased', async () => {
    await kubectl(['apply', '-f', '-'], { input: 'apiVersion: agentplane.io/v1alpha1\nkind: Project\nmetadata:\n  name: cascade\nspec: {}\n' });
    // The policy binding takes effect once the API server has loaded it: probe with a server-side dry run, which
    // runs admission without deleting anything, until the policy answers.
    const policyMessage = 'cannot be deleted with foreground propagation';
    await eventually(
      async () => {
        const probe = await cluster.kubectl(['delete', 'project', 'cascade', '--cascade=foreground', '--dry-run=server']);
        if (!probe.stderr.includes(policyMessage)) throw new Error(`not refused yet: ${probe.stdout}${probe.stderr}`);
        return true;
      },
      { what: 'the deletion policy loaded' },
    );
    const refused = await cluster.kubectl(['delete', 'project', 'cascade', '--cascade=foreground', '--wait=false']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'Project cascade cannot be deleted with foreground propagation: its runtime would go before its tenants are erased. Delete it with the default background propagation (kubectl delete project cascade)',
    );
    await kubectl(['get', 'project', 'cascade']);
    expect(await kubectl(['delete', 'project', 'cascade', '--wait=false'])).toContain('deleted');
  });

  it('removes what it installed on uninstall and keeps the CRDs, so Projects and their data outlive a reinstall', async () => {
    const result = await cluster.helm(['uninstall', release, '--namespace', namespace, '--wait', '--timeout', '60s']);
    expect(result.code, result.stderr).toBe(0);
    await eventually(
      async () => {
        const left = await cluster.kubectl(['get', '--namespace', namespace, '--ignore-not-found', '--output', 'name', ...rendered.map(reference)]);
        return left.code === 0 && left.stdout.trim() === '';
      },
      { what: 'every installed object gone', timeoutMs: 60_000 },
    );
    await kubectl(['get', 'customresourcedefinition', 'projects.agentplane.io', 'tenants.agentplane.io']);
  }, 90_000);
});
