import type * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, LABELS, MANAGED_BY, type Project, type Tenant } from '@agentplane/lib/kubernetes/resources';
import { CUT_OFF_SECONDS } from '@agentplane/lib/http/lifecycle';
import { loadOperatorConfig, type OperatorConfig } from '../config.js';
import {
  BLOCKED_IPV4_RANGES,
  BLOCKED_IPV6_RANGES,
  PROJECT_OBJECT_KINDS,
  SECRET_HASH_ANNOTATION,
  buildNamespace,
  buildProjectObjects,
  dataPlaneHost,
  namespaceConflict,
  ownsNamespace,
  dataPlaneUrl,
  projectDatabaseName,
  projectNamespaceName,
  runtimeUrl,
  specHash,
  tenantRegistration,
  type RuntimeSecretValues,
} from './index.js';

const uid = '6f1c2b7e-3d4a-4b5c-8d9e-0a1b2c3d4e5f';

function aProject(spec: Project['spec'] = {}, name = 'acme-support'): Project {
  return { apiVersion: API_VERSION, kind: 'Project', metadata: { name, uid, generation: 1 }, spec };
}

/** The operator's configuration as the chart would set it, from environment variables. */
function aConfig(env: Record<string, string> = {}): OperatorConfig {
  return loadOperatorConfig({ OPERATOR_NAMESPACE: 'agentplane-system', ...env });
}

const withAllStores = {
  PROJECT_DATABASE_ADMIN_URL: 'postgres://admin:pw@postgres.agentplane-system.svc:5432/postgres',
  RUNTIME_REDIS_URL: 'redis://:redis-pw@redis.agentplane-system.svc:6379',
  RUNTIME_S3_BUCKET: 'agentplane-blobs',
  RUNTIME_S3_ENDPOINT: 'http://minio.agentplane-system.svc:9000',
  RUNTIME_S3_REGION: 'eu-west-1',
  RUNTIME_S3_ACCESS_KEY_ID: 'access',
  RUNTIME_S3_SECRET_ACCESS_KEY: 'secret-access',
  RUNTIME_S3_FORCE_PATH_STYLE: 'true',
  RUNTIME_PINECONE_INDEX_HOST: 'https://agentplane-abc123.svc.example.pinecone.io',
  RUNTIME_PINECONE_API_KEY: 'pc-operator-key',
};

const secrets: RuntimeSecretValues = { adminKey: 'a'.repeat(48), masterKey: Buffer.alloc(32, 7).toString('base64') };
const secretsWithDatabase: RuntimeSecretValues = {
  ...secrets,
  databaseUrl: 'postgres://agentplane_acme_support:pw@postgres.agentplane-system.svc:5432/agentplane_acme_support',
};

/** How the API server matches a selector against a Pod's labels. */
function selects(selector: k8s.V1LabelSelector, labels: Record<string, string>): boolean {
  return (
    Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value) &&
    (selector.matchExpressions ?? []).every((term) => {
      const has = term.key in labels;
      if (term.operator === 'In') return has && term.values!.includes(labels[term.key]!);
      if (term.operator === 'NotIn') return !has || !term.values!.includes(labels[term.key]!);
      return term.operator === 'Exists' ? has : !has;
    })
  );
}

function find<T extends k8s.KubernetesObject>(objects: k8s.KubernetesObject[], kind: string, name: string): T {
  const found = objects.find((object) => object.kind === kind && object.metadata?.name === name);
  if (!found) throw new Error(`no ${kind}/${name} among ${objects.map((o) => `${o.kind}/${o.metadata?.name}`).join(', ')}`);
  return found as T;
}

const deploymentOf = (objects: k8s.KubernetesObject[]) => find<k8s.V1Deployment>(objects, 'Deployment', 'agent-runtime');
const runtimeContainer = (objects: k8s.KubernetesObject[]) => deploymentOf(objects).spec!.template.spec!.containers[0]!;
const envOf = (objects: k8s.KubernetesObject[]) => Object.fromEntries(runtimeContainer(objects).env!.map((variable) => [variable.name, variable]));
const secretData = (objects: k8s.KubernetesObject[]) =>
  Object.fromEntries(
    Object.entries(find<k8s.V1Secret>(objects, 'Secret', 'agentplane-runtime').data!).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
  );

describe('names', () => {
  it('puts a project in its own namespace, database and role, and fills the runtime URL template', () => {
    const project = aProject();
    const config = aConfig({ PROJECT_NAMESPACE_PREFIX: 'ap-', RUNTIME_URL_TEMPLATE: 'http://127.0.0.1:9999/{project}?ns={namespace}' });
    expect(projectNamespaceName(project, config)).toBe('ap-acme-support');
    expect(projectNamespaceName(project, aConfig())).toBe('agentplane-acme-support');
    expect(projectDatabaseName(project)).toBe('agentplane_acme_support');
    expect(runtimeUrl(project, config)).toBe('http://127.0.0.1:9999/acme-support?ns=ap-acme-support');
    expect(runtimeUrl(project, aConfig())).toBe('http://agent-runtime.agentplane-acme-support.svc:8081');
  });

  it('serves the data plane on <project>.<domain> unless the Project names its own host', () => {
    const config = aConfig({ DATA_PLANE_DOMAIN: 'agents.example.com' });
    expect(dataPlaneHost(aProject(), config)).toBe('acme-support.agents.example.com');
    expect(dataPlaneUrl(aProject(), config)).toBe('https://acme-support.agents.example.com');
    const own = aProject({ dataPlane: { host: 'support.acme.com' } });
    expect(dataPlaneHost(own, config)).toBe('support.acme.com');
    expect(dataPlaneUrl(own, aConfig({ DATA_PLANE_SCHEME: 'http' }))).toBe('http://support.acme.com');

    const ingress = find<k8s.V1Ingress>(buildProjectObjects(own, config, secrets), 'Ingress', 'data-plane');
    expect(ingress.spec!.rules).toEqual([
      { host: 'support.acme.com', http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'agent-runtime', port: { name: 'http' } } } }] } },
    ]);
  });

  it('builds every contracted object, named as contracted, in the project namespace, in apply order', () => {
    const objects = buildProjectObjects(
      aProject({ quota: { pods: 10 }, containerDefaults: { limits: { cpu: '500m' } } }),
      aConfig({ RUNTIME_SANDBOX_IMAGE: 'registry.example.com/sandbox:1' }),
      secrets,
    );
    expect(objects.map((object) => `${object.kind}/${object.metadata?.name}`)).toEqual([
      'ServiceAccount/agent-runtime',
      'RoleBinding/agent-runtime',
      'NetworkPolicy/default-deny',
      'NetworkPolicy/allow-runtime-ingress',
      'NetworkPolicy/allow-egress-dns',
      'NetworkPolicy/allow-egress-internet',
      'NetworkPolicy/allow-runtime-stores',
      'NetworkPolicy/allow-task-fires',
      'ResourceQuota/project-quota',
      'ResourceQuota/sandboxes',
      'LimitRange/container-defaults',
      'Secret/agentplane-runtime',
      'Deployment/agent-runtime',
      'Service/agent-runtime',
      'Ingress/data-plane',
      'PodDisruptionBudget/agent-runtime',
    ]);
    for (const object of objects) {
      expect(object.metadata?.namespace).toBe('agentplane-acme-support');
      expect(PROJECT_OBJECT_KINDS).toContainEqual(expect.objectContaining({ apiVersion: object.apiVersion, kind: object.kind }));
    }
  });

  it('refuses to build owned objects for a Project without a uid', () => {
    const draft = aProject();
    delete draft.metadata.uid;
    expect(() => buildProjectObjects(draft, aConfig(), secrets)).toThrow(/uid/);
  });
});

describe('labels and owner references', () => {
  const project = aProject({ quota: { pods: 5 }, containerDefaults: { requests: { memory: '64Mi' } } });
  const config = aConfig(withAllStores);
  const everything = [buildNamespace(project, config), ...buildProjectObjects(project, config, secretsWithDatabase)];
  const owner = { apiVersion: 'agentplane.io/v1alpha1', kind: 'Project', name: 'acme-support', uid, controller: true, blockOwnerDeletion: true };

  it.each(everything.map((object) => [`${object.kind}/${object.metadata?.name}`, object] as const))('%s is labelled and owned by the Project', (_name, object) => {
    expect(object.metadata?.labels).toMatchObject({
      [LABELS.managedBy]: MANAGED_BY,
      [LABELS.partOf]: 'agentplane',
      [LABELS.project]: 'acme-support',
    });
    expect(object.metadata?.ownerReferences).toEqual([owner]);
  });

  it('labels the namespace for Pod Security restricted', () => {
    expect(buildNamespace(project, config).metadata).toEqual({
      name: 'agentplane-acme-support',
      labels: {
        [LABELS.managedBy]: MANAGED_BY,
        [LABELS.partOf]: 'agentplane',
        [LABELS.project]: 'acme-support',
        'pod-security.kubernetes.io/enforce': 'restricted',
        'pod-security.kubernetes.io/enforce-version': 'latest',
        'pod-security.kubernetes.io/audit': 'restricted',
        'pod-security.kubernetes.io/audit-version': 'latest',
        'pod-security.kubernetes.io/warn': 'restricted',
        'pod-security.kubernetes.io/warn-version': 'latest',
      },
      ownerReferences: [owner],
    });
  });

  it('gives runtime Pods the runtime labels, and every selector of them matches those Pods', () => {
    const objects = buildProjectObjects(project, config, secrets);
    const podLabels = deploymentOf(objects).spec!.template.metadata!.labels!;
    expect(podLabels).toMatchObject({ [LABELS.component]: 'runtime', [LABELS.name]: 'agent-runtime', [LABELS.project]: 'acme-support' });
    const matches = (selector: Record<string, string>) => Object.entries(selector).every(([key, value]) => podLabels[key] === value);
    expect(matches(deploymentOf(objects).spec!.selector.matchLabels!)).toBe(true);
    expect(matches(find<k8s.V1Service>(objects, 'Service', 'agent-runtime').spec!.selector!)).toBe(true);
    expect(matches(find<k8s.V1PodDisruptionBudget>(objects, 'PodDisruptionBudget', 'agent-runtime').spec!.selector!.matchLabels!)).toBe(true);
    for (const name of ['allow-runtime-ingress', 'allow-runtime-stores']) {
      expect(matches(find<k8s.V1NetworkPolicy>(objects, 'NetworkPolicy', name).spec!.podSelector!.matchLabels!)).toBe(true);
    }
  });
});

describe('the runtime Deployment', () => {
  it('runs the configured image as `runtime` with the defaults of the operator', () => {
    const config = aConfig({ RUNTIME_SHUTDOWN_GRACE_SECONDS: '40' });
    const objects = buildProjectObjects(aProject(), config, secrets);
    const deployment = deploymentOf(objects);
    const container = runtimeContainer(objects);
    expect(deployment.spec!.replicas).toBe(1);
    expect(deployment.spec!.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    expect(container.image).toBe('ghcr.io/agentplane/agentplane:0.1.0');
    expect(container.args).toEqual(['runtime']);
    expect(container.ports).toEqual([{ name: 'http', containerPort: 8081, protocol: 'TCP' }]);
    expect(container.livenessProbe!.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(container.readinessProbe!.httpGet).toEqual({ path: '/ready', port: 'http' });
    expect(container.resources).toEqual({ requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } });
    const pod = deployment.spec!.template.spec!;
    // The drain's grace (40), the cut-off in which runs past it record their text and error frame, then a margin.
    expect(pod.terminationGracePeriodSeconds).toBe(55);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(40 + CUT_OFF_SECONDS);
    expect(pod.serviceAccountName).toBe('agent-runtime');
    expect(pod.automountServiceAccountToken).toBe(true);
    expect(pod.enableServiceLinks).toBe(false);
    expect(pod.topologySpreadConstraints).toBeUndefined();
    expect(container.volumeMounts!.map((mount) => mount.mountPath).sort()).toEqual(['/tmp', '/var/lib/agentplane']);
    for (const mount of container.volumeMounts!) {
      expect(pod.volumes!.find((volume) => volume.name === mount.name)).toEqual({ name: mount.name, emptyDir: {} });
    }
  });

  it("follows the Project's image, replicas and resources, spreading replicas across nodes", () => {
    const project = aProject({
      runtime: { image: 'registry.example.com/agentplane:canary', replicas: 3, resources: { requests: { cpu: '1' }, limits: { memory: '2Gi' } } },
    });
    const objects = buildProjectObjects(project, aConfig(), secrets);
    expect(deploymentOf(objects).spec!.replicas).toBe(3);
    expect(runtimeContainer(objects).image).toBe('registry.example.com/agentplane:canary');
    expect(runtimeContainer(objects).resources).toEqual({ requests: { cpu: '1', memory: '256Mi' }, limits: { cpu: '1', memory: '2Gi' } });
    expect(deploymentOf(objects).spec!.template.spec!.topologySpreadConstraints).toEqual([
      expect.objectContaining({ topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' }),
    ]);
  });

  it("never lets a default request exceed the Project's limit, nor a default limit fall under its request", () => {
    const small = buildProjectObjects(aProject({ runtime: { resources: { limits: { cpu: '100m', memory: '128Mi' } } } }), aConfig(), secrets);
    expect(runtimeContainer(small).resources).toEqual({ requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '100m', memory: '128Mi' } });
    const large = buildProjectObjects(aProject({ runtime: { resources: { requests: { cpu: '2', memory: '1.5Gi' } } } }), aConfig(), secrets);
    expect(runtimeContainer(large).resources).toEqual({ requests: { cpu: '2', memory: '1.5Gi' }, limits: { cpu: '2', memory: '1.5Gi' } });
  });

  it('wires only the built-in stores when none is configured', () => {
    const objects = buildProjectObjects(aProject(), aConfig(), secrets);
    const env = envOf(objects);
    expect(Object.keys(env)).toEqual([
      'HOST',
      'DATA_PORT',
      'PUBLIC_URL',
      'AGENTPLANE_DATA_DIR',
      'SHUTDOWN_GRACE_SECONDS',
      'LOG_FORMAT',
      'AGENTPLANE_ADMIN_KEY',
      'AGENTPLANE_MASTER_KEY',
      'COMPUTER_HOST',
      'BROWSER_HOST',
    ]);
    expect(env.HOST!.value).toBe('0.0.0.0');
    // No sandbox image configured: no computer, rather than the local host in a container that cannot hold it.
    expect(env.COMPUTER_HOST!.value).toBe('none');
    expect(env.DATA_PORT!.value).toBe('8081');
    expect(env.PUBLIC_URL!.value).toBe('https://acme-support.agentplane.local');
    expect(env.AGENTPLANE_DATA_DIR!.value).toBe('/var/lib/agentplane');
    expect(env.AGENTPLANE_ADMIN_KEY!.valueFrom).toEqual({ secretKeyRef: { name: 'agentplane-runtime', key: 'admin-key' } });
    expect(env.AGENTPLANE_MASTER_KEY!.valueFrom).toEqual({ secretKeyRef: { name: 'agentplane-runtime', key: 'master-key' } });
    expect(secretData(objects)).toEqual({ 'admin-key': secrets.adminKey, 'master-key': secrets.masterKey });
  });

  it("gives the runtime what its tasks' CronJobs need: its namespace, the image, the Service and the fire key by reference", () => {
    const objects = buildProjectObjects(aProject(), aConfig(), { ...secrets, fireKey: 'f'.repeat(64) });
    const env = envOf(objects);
    expect(env.TASK_CRONJOBS!.value).toBe('true');
    expect(env.KUBERNETES_NAMESPACE!.value).toBe(find<k8s.V1Deployment>(objects, 'Deployment', 'agent-runtime').metadata!.namespace);
    expect(env.TASK_FIRE_IMAGE!.value).toBe(find<k8s.V1Deployment>(objects, 'Deployment', 'agent-runtime').spec!.template.spec!.containers[0]!.image);
    expect(env.TASK_FIRE_URL!.value).toBe('http://agent-runtime:8081');
    expect(env.TASK_FIRE_SECRET!.value).toBe('agentplane-runtime:task-fire-key');
    expect(env.TASK_FIRE_KEY!.valueFrom).toEqual({ secretKeyRef: { name: 'agentplane-runtime', key: 'task-fire-key' } });
    expect(secretData(objects)['task-fire-key']).toBe('f'.repeat(64));
    // Turned off, the database scheduler fires every task.
    expect(envOf(buildProjectObjects(aProject(), aConfig({ RUNTIME_TASK_CRONJOBS: 'false' }), { ...secrets, fireKey: 'f'.repeat(64) })).TASK_CRONJOBS).toBeUndefined();
  });

  it("gives the runtime sandboxes as Pods in its namespace, fenced by the operator's policies and counted by a quota that follows the Project", () => {
    const config = aConfig({ RUNTIME_SANDBOX_IMAGE: 'registry.example.com/sandbox:1', RUNTIME_SANDBOX_STORAGE_CLASS: 'fast', RUNTIME_TASK_CRONJOBS: 'false' });
    const objects = buildProjectObjects(aProject({ computer: { maxSandboxes: 3 } }), config, secrets);
    const env = envOf(objects);
    expect(env.COMPUTER_HOST!.value).toBe('kubernetes');
    expect(env.KUBERNETES_NAMESPACE!.value).toBe('agentplane-acme-support');
    expect(env.COMPUTER_IMAGE!.value).toBe('registry.example.com/sandbox:1');
    expect(env.COMPUTER_IMAGE_PULL_POLICY!.value).toBe('IfNotPresent');
    expect(env.COMPUTER_STORAGE_CLASS!.value).toBe('fast');
    expect(env.COMPUTER_NETWORK_POLICY!.value).toBe('operator');
    // One claim per sandbox, and nothing else in the namespace claims any.
    expect(find<k8s.V1ResourceQuota>(objects, 'ResourceQuota', 'sandboxes').spec).toEqual({ hard: { persistentvolumeclaims: '3' } });
    const byDefault = buildProjectObjects(aProject(), config, secrets);
    expect(find<k8s.V1ResourceQuota>(byDefault, 'ResourceQuota', 'sandboxes').spec).toEqual({ hard: { persistentvolumeclaims: '10' } });
    expect(find<k8s.V1ResourceQuota>(buildProjectObjects(aProject({ computer: { maxSandboxes: 0 } }), config, secrets), 'ResourceQuota', 'sandboxes').spec!.hard).toEqual({
      persistentvolumeclaims: '0',
    });
    // Without sandboxes, no quota of theirs.
    expect(buildProjectObjects(aProject({ computer: { maxSandboxes: 3 } }), aConfig(), secrets).some((object) => object.metadata?.name === 'sandboxes')).toBe(false);
  });

  it('wires PostgreSQL, Redis and S3 with per-project prefixes and credentials from the Secret', () => {
    const objects = buildProjectObjects(aProject(), aConfig(withAllStores), secretsWithDatabase);
    const env = envOf(objects);
    const fromSecret = (key: string) => ({ secretKeyRef: { name: 'agentplane-runtime', key } });
    expect(env.DATABASE_URL!.valueFrom).toEqual(fromSecret('database-url'));
    expect(env.REDIS_URL!.valueFrom).toEqual(fromSecret('redis-url'));
    expect(env.REDIS_KEY_PREFIX!.value).toBe('agentplane:acme-support:');
    expect(env.BLOB_STORE!.value).toBe('s3');
    expect(env.S3_BUCKET!.value).toBe('agentplane-blobs');
    expect(env.S3_ENDPOINT!.value).toBe('http://minio.agentplane-system.svc:9000');
    expect(env.S3_REGION!.value).toBe('eu-west-1');
    expect(env.S3_FORCE_PATH_STYLE!.value).toBe('true');
    expect(env.S3_KEY_PREFIX!.value).toBe('projects/acme-support/');
    expect(env.S3_ACCESS_KEY_ID!.valueFrom).toEqual(fromSecret('s3-access-key-id'));
    expect(env.S3_SECRET_ACCESS_KEY!.valueFrom).toEqual(fromSecret('s3-secret-access-key'));
    expect(env.VECTOR_INDEX!.value).toBe('pinecone');
    expect(env.PINECONE_INDEX_HOST!.value).toBe('https://agentplane-abc123.svc.example.pinecone.io');
    expect(env.PINECONE_API_KEY!.valueFrom).toEqual(fromSecret('pinecone-api-key'));
    expect(secretData(objects)).toEqual({
      'admin-key': secrets.adminKey,
      'master-key': secrets.masterKey,
      'database-url': secretsWithDatabase.databaseUrl,
      'redis-url': 'redis://:redis-pw@redis.agentplane-system.svc:6379',
      's3-access-key-id': 'access',
      's3-secret-access-key': 'secret-access',
      'pinecone-api-key': 'pc-operator-key',
    });
  });

  it('refers only to keys the Secret has, whatever subset of stores is configured', () => {
    const cases: Array<[Record<string, string>, RuntimeSecretValues]> = [
      [{}, secrets],
      [{ RUNTIME_REDIS_URL: withAllStores.RUNTIME_REDIS_URL }, secrets],
      [{ RUNTIME_S3_BUCKET: 'b' }, secrets],
      [{ RUNTIME_S3_BUCKET: 'b', RUNTIME_S3_ACCESS_KEY_ID: 'id' }, secretsWithDatabase],
      [withAllStores, secretsWithDatabase],
    ];
    for (const [env, values] of cases) {
      const objects = buildProjectObjects(aProject(), aConfig(env), values);
      const keys = Object.keys(secretData(objects));
      const references = runtimeContainer(objects)
        .env!.filter((variable) => variable.valueFrom)
        .map((variable) => variable.valueFrom!.secretKeyRef!);
      for (const reference of references) {
        expect(reference.name).toBe('agentplane-runtime');
        expect(keys).toContain(reference.key);
      }
      expect(references.map((reference) => reference.key).sort()).toEqual([...keys].sort());
    }
    const s3WithoutEndpoint = envOf(buildProjectObjects(aProject(), aConfig({ RUNTIME_S3_BUCKET: 'b' }), secrets));
    expect(s3WithoutEndpoint.S3_ENDPOINT).toBeUndefined();
    expect(s3WithoutEndpoint.S3_ACCESS_KEY_ID).toBeUndefined();
    expect(s3WithoutEndpoint.REDIS_URL).toBeUndefined();
  });

  it('rolls the Pods when a secret changes, and only then', () => {
    const secretHash = (config: OperatorConfig, values: RuntimeSecretValues, project = aProject()) =>
      deploymentOf(buildProjectObjects(project, config, values)).spec!.template.metadata!.annotations![SECRET_HASH_ANNOTATION];
    const config = aConfig(withAllStores);
    const before = secretHash(config, secretsWithDatabase);
    expect(before).toMatch(/^[0-9a-f]{16}$/);
    expect(secretHash(config, { ...secretsWithDatabase })).toBe(before);
    expect(secretHash(config, secretsWithDatabase, aProject({ runtime: { replicas: 2 }, quota: { pods: 3 } }))).toBe(before);
    expect(secretHash(config, { ...secretsWithDatabase, adminKey: 'b'.repeat(48) })).not.toBe(before);
    expect(secretHash(config, { ...secretsWithDatabase, masterKey: Buffer.alloc(32, 8).toString('base64') })).not.toBe(before);
    expect(secretHash(config, { ...secretsWithDatabase, databaseUrl: 'postgres://other:pw@db:5432/x' })).not.toBe(before);
    expect(secretHash(aConfig({ ...withAllStores, RUNTIME_S3_SECRET_ACCESS_KEY: 'rotated' }), secretsWithDatabase)).not.toBe(before);
    expect(secretHash(aConfig({ ...withAllStores, RUNTIME_REDIS_URL: 'redis://:new@redis:6379' }), secretsWithDatabase)).not.toBe(before);
  });
});

describe('ResourceQuota and LimitRange', () => {
  const kinds = (project: Project) => buildProjectObjects(project, aConfig(), secrets).map((object) => object.kind);

  it('exist only when the Project asks for them', () => {
    expect(kinds(aProject())).not.toContain('ResourceQuota');
    expect(kinds(aProject())).not.toContain('LimitRange');
    expect(kinds(aProject({ quota: {}, containerDefaults: {} }))).not.toContain('ResourceQuota');
    expect(kinds(aProject({ quota: {}, containerDefaults: {} }))).not.toContain('LimitRange');
    expect(kinds(aProject({ quota: { pods: 4 } }))).toContain('ResourceQuota');
    expect(kinds(aProject({ quota: { pods: 4 } }))).not.toContain('LimitRange');
    expect(kinds(aProject({ containerDefaults: { requests: { cpu: '100m' } } }))).toContain('LimitRange');
    expect(kinds(aProject({ containerDefaults: { requests: { cpu: '100m' } } }))).not.toContain('ResourceQuota');
  });

  it('carry exactly the amounts the Project sets', () => {
    const objects = buildProjectObjects(
      aProject({
        quota: { requests: { cpu: '4', memory: '8Gi' }, limits: { memory: '16Gi' }, pods: 20 },
        containerDefaults: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m' } },
      }),
      aConfig(),
      secrets,
    );
    expect(find<k8s.V1ResourceQuota>(objects, 'ResourceQuota', 'project-quota').spec).toEqual({
      hard: { 'requests.cpu': '4', 'requests.memory': '8Gi', 'limits.memory': '16Gi', pods: '20' },
    });
    expect(find<k8s.V1LimitRange>(objects, 'LimitRange', 'container-defaults').spec).toEqual({
      limits: [{ type: 'Container', defaultRequest: { cpu: '100m', memory: '128Mi' }, _default: { cpu: '500m' } }],
    });
  });
});

describe("the project's browser (decision 0092)", () => {
  const config = aConfig({ RUNTIME_BROWSER_IMAGE: 'ghcr.io/agentplane/agentplane-browser:0.1.0', RUNTIME_BROWSER_ALLOWED_DESTINATIONS: '10.20.30.40:8443,intranet.example:443' });
  const withToken: RuntimeSecretValues = { ...secrets, browserToken: 'T'.repeat(43) };
  const objects = buildProjectObjects(aProject(), config, withToken);
  const policy = (name: string) => find<k8s.V1NetworkPolicy>(objects, 'NetworkPolicy', name).spec!;

  it('runs the browser server in a Deployment of its own, with the token from the runtime Secret and no API token', () => {
    const deployment = find<k8s.V1Deployment>(objects, 'Deployment', 'browser');
    const pod = deployment.spec!.template.spec!;
    expect(pod.automountServiceAccountToken).toBe(false);
    const container = pod.containers[0]!;
    expect(container.image).toBe('ghcr.io/agentplane/agentplane-browser:0.1.0');
    expect(container.args).toEqual(['browser']);
    expect(container.env).toContainEqual({ name: 'BROWSER_TOKEN', valueFrom: { secretKeyRef: { name: 'agentplane-runtime', key: 'browser-token' } } });
    expect(container.env).toContainEqual({ name: 'BROWSER_ALLOWED_DESTINATIONS', value: '10.20.30.40:8443,intranet.example:443' });
    expect(container.securityContext?.readOnlyRootFilesystem).toBe(true);
    expect(pod.volumes).toContainEqual({ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '512Mi' } });
    const secret = find<k8s.V1Secret>(objects, 'Secret', 'agentplane-runtime');
    expect(Buffer.from(secret.data!['browser-token']!, 'base64').toString()).toBe('T'.repeat(43));
    expect(find<k8s.V1Service>(objects, 'Service', 'browser').spec!.ports).toEqual([{ name: 'browser', port: 8083, targetPort: 'browser', protocol: 'TCP' }]);
  });

  it('points the runtime at the browser Service with the same token', () => {
    const env = find<k8s.V1Deployment>(objects, 'Deployment', 'agent-runtime').spec!.template.spec!.containers[0]!.env!;
    expect(env).toContainEqual({ name: 'BROWSER_HOST', value: 'remote' });
    expect(env).toContainEqual({ name: 'BROWSER_ENDPOINT', value: 'ws://browser:8083' });
    expect(env).toContainEqual({ name: 'BROWSER_TOKEN', valueFrom: { secretKeyRef: { name: 'agentplane-runtime', key: 'browser-token' } } });
  });

  it('lets only the runtime reach the browser, and the browser only names and the public internet (and the allowed IP)', () => {
    const browserPod = find<k8s.V1Deployment>(objects, 'Deployment', 'browser').spec!.template.metadata!.labels!;
    const runtimePod = find<k8s.V1Deployment>(objects, 'Deployment', 'agent-runtime').spec!.template.metadata!.labels!;
    const policies = objects.filter((object): object is k8s.V1NetworkPolicy => object.kind === 'NetworkPolicy');
    const ingress = policies.filter((p) => p.spec!.policyTypes!.includes('Ingress') && selects(p.spec!.podSelector!, browserPod));
    expect(ingress.map((p) => p.metadata!.name)).toEqual(['default-deny', 'allow-browser-ingress']);
    expect(policy('allow-browser-ingress').ingress).toEqual([{ _from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'agent-runtime', 'app.kubernetes.io/component': 'runtime' } } }], ports: [{ protocol: 'TCP', port: 8083 }] }]);
    const egress = policies.filter((p) => (p.spec!.egress ?? []).length > 0 && selects(p.spec!.podSelector!, browserPod));
    expect(egress.map((p) => p.metadata!.name)).toEqual(['allow-egress-dns', 'allow-egress-internet', 'allow-browser-destinations']);
    expect(policy('allow-browser-destinations').egress).toEqual([{ to: [{ ipBlock: { cidr: '10.20.30.40/32' } }], ports: [{ protocol: 'TCP', port: 8443 }] }]);
    // The runtime may reach the browser's port, and the browser nothing of the runtime's.
    expect(selects(policy('allow-runtime-browser').podSelector!, runtimePod)).toBe(true);
    expect(policy('allow-runtime-browser').egress).toEqual([{ to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'browser', 'app.kubernetes.io/component': 'browser' } } }], ports: [{ protocol: 'TCP', port: 8083 }] }]);
    expect(selects(policy('allow-runtime-stores').podSelector!, browserPod)).toBe(false);
    // No browser allow selects a sandbox.
    const sandboxPod = { 'app.kubernetes.io/component': 'sandbox' };
    for (const name of ['allow-browser-ingress', 'allow-runtime-browser', 'allow-browser-destinations']) expect(selects(policy(name).podSelector!, sandboxPod), name).toBe(false);
  });

  it('is not there, and the runtime offers none, when the operator has no browser image', () => {
    const without = buildProjectObjects(aProject(), aConfig(), secrets);
    expect(without.filter((object) => object.metadata?.name === 'browser' || object.metadata?.name?.includes('browser'))).toEqual([]);
    const env = find<k8s.V1Deployment>(without, 'Deployment', 'agent-runtime').spec!.template.spec!.containers[0]!.env!;
    expect(env).toContainEqual({ name: 'BROWSER_HOST', value: 'none' });
  });
});

describe('NetworkPolicies', () => {
  const config = aConfig({ INGRESS_NAMESPACE: 'ingress-system' });
  const objects = buildProjectObjects(aProject(), config, secrets);
  const policy = (name: string) => find<k8s.V1NetworkPolicy>(objects, 'NetworkPolicy', name).spec!;

  it('deny everything in and out unless a policy allows it', () => {
    expect(policy('default-deny')).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
  });

  it("allow a sandbox's Pod nothing at all: policies add up, so no allow may select it", () => {
    const sandboxPod = { 'app.kubernetes.io/component': 'sandbox', 'agentplane.io/sandbox': 'b1', 'app.kubernetes.io/managed-by': 'agentplane-runtime' };
    const allows = objects
      .filter((object): object is k8s.V1NetworkPolicy => object.kind === 'NetworkPolicy')
      .filter((object) => (object.spec!.ingress ?? []).length + (object.spec!.egress ?? []).length > 0);
    expect(allows.map((object) => object.metadata!.name)).toEqual(['allow-runtime-ingress', 'allow-egress-dns', 'allow-egress-internet', 'allow-runtime-stores', 'allow-task-fires']);
    for (const allow of allows) expect(selects(allow.spec!.podSelector!, sandboxPod), allow.metadata!.name).toBe(false);
    // The deny covers it, and the task and runtime Pods are still let out.
    expect(selects(policy('default-deny').podSelector!, sandboxPod)).toBe(true);
    expect(selects(policy('allow-egress-internet').podSelector!, { 'app.kubernetes.io/component': 'task-fire' })).toBe(true);
  });

  it("let the runtime port in from the ingress controller, the operator namespace and its own tasks' Jobs only", () => {
    const spec = policy('allow-runtime-ingress');
    expect(spec.policyTypes).toEqual(['Ingress']);
    expect(spec.ingress).toEqual([
      {
        _from: [
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-system' } } },
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'agentplane-system' } } },
          { podSelector: { matchLabels: { 'app.kubernetes.io/component': 'task-fire' } } },
        ],
        ports: [{ protocol: 'TCP', port: 8081 }],
      },
    ]);
    // The Jobs' Pods reach the runtime's port, and nothing else in the cluster.
    expect(policy('allow-task-fires')).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/component': 'task-fire' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'agent-runtime', 'app.kubernetes.io/component': 'runtime' } } }], ports: [{ protocol: 'TCP', port: 8081 }] }],
    });
  });

  it('let every Pod but a sandbox resolve names, and the runtime reach the stores in the operator namespace', () => {
    expect(policy('allow-egress-dns').podSelector).toEqual({ matchExpressions: [{ key: 'app.kubernetes.io/component', operator: 'NotIn', values: ['sandbox'] }] });
    expect(policy('allow-egress-dns').egress).toEqual([
      { to: [{ namespaceSelector: {} }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] },
    ]);
    expect(policy('allow-runtime-stores').egress).toEqual([{ to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'agentplane-system' } } }] }]);
  });

  it('let Pods but sandboxes reach the internet but no private, link-local, shared or loopback range', () => {
    const spec = policy('allow-egress-internet');
    expect(spec.podSelector).toEqual({ matchExpressions: [{ key: 'app.kubernetes.io/component', operator: 'NotIn', values: ['sandbox'] }] });
    const blocks = spec.egress!.flatMap((rule) => rule.to!.map((peer) => peer.ipBlock!));
    expect(spec.egress!.every((rule) => rule.ports === undefined)).toBe(true);
    expect(blocks.map((block) => block.cidr)).toEqual(['0.0.0.0/0', '::/0']);
    const v4 = blocks[0]!.except!;
    const v6 = blocks[1]!.except!;
    for (const range of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10', '127.0.0.0/8']) expect(v4).toContain(range);
    for (const range of ['fc00::/7', 'fe80::/10', '::1/128']) expect(v6).toContain(range);
    expect(v4).toEqual(BLOCKED_IPV4_RANGES);
    expect(v6).toEqual(BLOCKED_IPV6_RANGES);
    // An address the cluster or the cloud uses falls in an excepted range; a public one does not.
    const blocked = (address: string) => v4.some((range) => inIpv4Range(address, range));
    for (const address of ['10.96.0.1', '172.20.3.4', '192.168.1.10', '169.254.169.254', '100.64.0.10', '127.0.0.1']) expect(blocked(address)).toBe(true);
    for (const address of ['1.1.1.1', '172.32.0.1', '8.8.8.8', '100.128.0.1']) expect(blocked(address)).toBe(false);
  });
});

function inIpv4Range(address: string, range: string): boolean {
  const toNumber = (ip: string) => ip.split('.').reduce((sum, octet) => sum * 256 + Number(octet), 0);
  const [base, bits] = range.split('/') as [string, string];
  const size = 2 ** (32 - Number(bits));
  return Math.floor(toNumber(address) / size) === Math.floor(toNumber(base) / size);
}

describe('the Service, Ingress and PodDisruptionBudget', () => {
  it('expose the runtime port as `http` and take down one replica at a time', () => {
    const objects = buildProjectObjects(aProject(), aConfig({ RUNTIME_PORT: '9001' }), secrets);
    expect(find<k8s.V1Service>(objects, 'Service', 'agent-runtime').spec!.ports).toEqual([{ name: 'http', port: 9001, targetPort: 'http', protocol: 'TCP' }]);
    expect(find<k8s.V1PodDisruptionBudget>(objects, 'PodDisruptionBudget', 'agent-runtime').spec!.maxUnavailable).toBe(1);
  });

  it('name the ingress class and TLS secret only when configured', () => {
    const plain = find<k8s.V1Ingress>(buildProjectObjects(aProject(), aConfig(), secrets), 'Ingress', 'data-plane').spec!;
    expect('ingressClassName' in plain).toBe(false);
    expect('tls' in plain).toBe(false);
    const configured = aConfig({ INGRESS_CLASS_NAME: 'nginx', DATA_PLANE_TLS_SECRET: 'agents-tls', DATA_PLANE_DOMAIN: 'agents.example.com' });
    const spec = find<k8s.V1Ingress>(buildProjectObjects(aProject(), configured, secrets), 'Ingress', 'data-plane').spec!;
    expect(spec.ingressClassName).toBe('nginx');
    expect(spec.tls).toEqual([{ hosts: ['acme-support.agents.example.com'], secretName: 'agents-tls' }]);
  });
});

describe('determinism and hashes', () => {
  it('builds deep-equal objects from the same input', () => {
    const project = aProject({ runtime: { replicas: 2 }, quota: { pods: 3 }, containerDefaults: { limits: { memory: '1Gi' } } });
    const build = () => [buildNamespace(project, aConfig(withAllStores)), ...buildProjectObjects(project, aConfig(withAllStores), secretsWithDatabase)];
    const first = build();
    expect(build()).toStrictEqual(first);
    expect(build().map(specHash)).toEqual(first.map(specHash));
    expect(JSON.stringify(first)).not.toMatch(/undefined/);
  });

  it('hashes content, not key order', () => {
    expect(specHash({ a: 1, b: { c: [1, 2], d: 'x' } })).toBe(specHash({ b: { d: 'x', c: [1, 2] }, a: 1 }));
    expect(specHash({ a: 1, b: undefined })).toBe(specHash({ a: 1 }));
    expect(specHash({ a: [1, 2] })).not.toBe(specHash({ a: [2, 1] }));
    expect(specHash({ a: '1' })).not.toBe(specHash({ a: 1 }));
    expect(specHash({ a: 1 })).toMatch(/^[0-9a-f]{16}$/);
  });

  it('changes the Deployment hash when the Project changes what the runtime runs', () => {
    const deploymentHash = (project: Project) => specHash(deploymentOf(buildProjectObjects(project, aConfig(), secrets)));
    expect(deploymentHash(aProject({ runtime: { replicas: 2 } }))).not.toBe(deploymentHash(aProject()));
    expect(deploymentHash(aProject({ runtime: { image: 'x:1' } }))).not.toBe(deploymentHash(aProject()));
    expect(deploymentHash(aProject({ displayName: 'Acme' }))).toBe(deploymentHash(aProject()));
  });
});

describe('tenantRegistration', () => {
  it("sends the tenant's id, display name and settings, copied", () => {
    const tenant: Tenant = {
      apiVersion: API_VERSION,
      kind: 'Tenant',
      metadata: { name: '0f0e0d0c-0b0a-4909-8807-060504030201', namespace: 'agentplane-acme-support' },
      spec: { tenantId: '0f0e0d0c-0b0a-4909-8807-060504030201', project: 'acme-support', displayName: 'Acme', settings: { default_model: 'gpt', nested: { a: 1 } } },
    };
    const body = tenantRegistration(tenant);
    expect(body).toEqual({ tenant_id: '0f0e0d0c-0b0a-4909-8807-060504030201', name: 'Acme', settings_json: { default_model: 'gpt', nested: { a: 1 } } });
    (body.settings_json.nested as { a: number }).a = 2;
    expect(tenant.spec.settings).toEqual({ default_model: 'gpt', nested: { a: 1 } });
    expect(tenantRegistration({ ...tenant, spec: { tenantId: tenant.spec.tenantId, project: 'acme-support' } })).toEqual({
      tenant_id: tenant.spec.tenantId,
      name: '',
      settings_json: {},
    });
  });
});

describe('who a namespace belongs to', () => {
  const namespace = (name: string, metadata: Partial<k8s.V1ObjectMeta> = {}): k8s.V1Namespace => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, ...metadata } });
  const config = aConfig();

  it("adopts one an admin made ahead of the operator, and claims its own", () => {
    expect(namespaceConflict(namespace('agentplane-acme-support'), aProject(), config)).toBeUndefined();
    const made = buildNamespace(aProject(), config);
    expect(namespaceConflict(made, aProject(), config)).toBeUndefined();
    expect(ownsNamespace(made, aProject())).toBe(true);
    expect(ownsNamespace(namespace('agentplane-acme-support'), aProject())).toBe(false);
  });

  it("never takes the operator's own namespace, a system namespace, or another Project's", () => {
    expect(namespaceConflict(namespace('agentplane-system'), aProject({}, 'system'), config)).toBe("namespace agentplane-system is the operator's own");
    const kubePrefixed = aConfig({ PROJECT_NAMESPACE_PREFIX: 'kube-' });
    expect(namespaceConflict(namespace('kube-system'), aProject({}, 'system'), kubePrefixed)).toBe('namespace kube-system is a system namespace');
    expect(namespaceConflict(namespace('default'), aProject({}, 'default'), aConfig({ PROJECT_NAMESPACE_PREFIX: 'x' }))).toBe('namespace default is a system namespace');
    const other = { ...aProject({}, 'other'), metadata: { name: 'other', uid: 'a-different-uid' } };
    const theirs = buildNamespace(other, config);
    expect(namespaceConflict({ ...theirs, metadata: { ...theirs.metadata, name: 'agentplane-acme-support' } }, aProject(), config)).toBe(
      'namespace agentplane-acme-support belongs to project other',
    );
    expect(namespaceConflict(namespace('agentplane-acme-support', { labels: { [LABELS.project]: 'other' } }), aProject(), config)).toBe(
      'namespace agentplane-acme-support belongs to project other',
    );
    expect(ownsNamespace(theirs, aProject())).toBe(false);
  });
});
