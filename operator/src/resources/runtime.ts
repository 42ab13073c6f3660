// The project's runtime and how it is reached: the agent-runtime Deployment (Pod Security `restricted`, shared keys
// and store credentials from the runtime Secret), its Service, the data-plane Ingress on the project's host and a
// PodDisruptionBudget so voluntary disruptions take one replica at a time.
import type * as k8s from '@kubernetes/client-node';
import type { Project } from '@agentplane/lib/kubernetes/resources';
import { CUT_OFF_SECONDS } from '@agentplane/lib/http/lifecycle';
import type { OperatorConfig } from '../config.js';
import { projectObjectMeta, runtimeLabels, runtimeSelector } from './metadata.js';
import {
  DATA_PLANE_INGRESS_NAME,
  RUNTIME_NAME,
  RUNTIME_PORT_NAME,
  RUNTIME_SECRET_NAME,
  blobKeyPrefix,
  dataPlaneHost,
  dataPlaneUrl,
  projectNamespaceName,
  redisKeyPrefix,
} from './names.js';
import { browserEndpoint } from './browser.js';
import { exceeds } from './quantity.js';
import { RUNTIME_SECRET_KEYS, runtimeSecretEntries, runtimeSecretHash, type RuntimeSecretValues } from './secret.js';

/** Pod-template annotation carrying the hash of the runtime Secret's content: a changed secret rolls the Pods. */
export const SECRET_HASH_ANNOTATION = 'agentplane.io/secret-hash';

/** The image's own user (Dockerfile `USER 10001:10001`); stated so the kubelet can verify it is not root. */
export const RUNTIME_USER_ID = 10001;

/** Where the runtime keeps its files: an emptyDir, since the root filesystem is read-only. */
export const RUNTIME_DATA_DIR = '/var/lib/agentplane';

/**
 * How much longer than the runtime's drain (its grace, then the cut-off in which runs record how far they came) the
 * kubelet waits before it kills the container: closing stores and the exit.
 */
const TERMINATION_MARGIN_SECONDS = 10;

const RUNTIME_CONTAINER = 'runtime';

/** The security context that meets Pod Security `restricted`, on the Pod and again on the container. */
function restrictedContainerSecurity(): k8s.V1SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: RUNTIME_USER_ID,
    runAsGroup: RUNTIME_USER_ID,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/**
 * The runtime container's requests and limits: the Project's over the operator's defaults. A default must not
 * contradict what the Project set on the other side (a limit of 128Mi under a default request of 256Mi would be
 * refused by the API server), so there the Project's value wins on both sides.
 */
export function runtimeResources(project: Project, config: OperatorConfig): k8s.V1ResourceRequirements {
  const wanted = project.spec.runtime?.resources;
  const requests: Record<string, string> = {};
  const limits: Record<string, string> = {};
  for (const resource of ['cpu', 'memory'] as const) {
    const wantedRequest = wanted?.requests?.[resource];
    const wantedLimit = wanted?.limits?.[resource];
    let request = wantedRequest ?? config.runtime.resources.requests[resource];
    let limit = wantedLimit ?? config.runtime.resources.limits[resource];
    if (exceeds(request, limit)) {
      if (wantedLimit !== undefined && wantedRequest === undefined) request = limit;
      else if (wantedRequest !== undefined && wantedLimit === undefined) limit = request;
    }
    requests[resource] = request;
    limits[resource] = limit;
  }
  return { requests, limits };
}

/** The runtime's environment (runtime/src/config.ts reads it); secrets only by reference to keys the Secret has. */
export function runtimeEnv(project: Project, config: OperatorConfig, secrets: RuntimeSecretValues): k8s.V1EnvVar[] {
  const secretKeys = new Set(Object.keys(runtimeSecretEntries(secrets, config)));
  const value = (name: string, text: string): k8s.V1EnvVar => ({ name, value: text });
  const fromSecret = (name: string, key: string): k8s.V1EnvVar[] =>
    secretKeys.has(key) ? [{ name, valueFrom: { secretKeyRef: { name: RUNTIME_SECRET_NAME, key } } }] : [];
  const { redisUrl, s3, pinecone } = config.stores;
  const cronJobs = config.runtime.taskCronJobs && secretKeys.has(RUNTIME_SECRET_KEYS.fireKey);
  const { sandboxes, browser } = config.runtime;
  return [
    value('HOST', '0.0.0.0'),
    value('DATA_PORT', String(config.runtime.port)),
    // Signed blob URLs point here, so they must be the customers' address, not the Pod's.
    value('PUBLIC_URL', dataPlaneUrl(project, config)),
    value('AGENTPLANE_DATA_DIR', RUNTIME_DATA_DIR),
    value('SHUTDOWN_GRACE_SECONDS', String(config.runtime.shutdownGraceSeconds)),
    value('LOG_FORMAT', 'json'),
    ...fromSecret('AGENTPLANE_ADMIN_KEY', RUNTIME_SECRET_KEYS.adminKey),
    ...fromSecret('AGENTPLANE_MASTER_KEY', RUNTIME_SECRET_KEYS.masterKey),
    ...fromSecret('DATABASE_URL', RUNTIME_SECRET_KEYS.databaseUrl),
    // Tasks' CronJobs and sandboxes' Pods go in the project's own namespace, where the runtime's Role holds.
    ...(cronJobs || sandboxes ? [value('KUBERNETES_NAMESPACE', projectNamespaceName(project, config))] : []),
    // Tasks a CronJob can express get one in this namespace, whose Jobs run this image's `fire` against the Service
    // with the fire key (docs/decisions/0066).
    ...(cronJobs
      ? [
          value('TASK_CRONJOBS', 'true'),
          value('TASK_FIRE_IMAGE', project.spec.runtime?.image ?? config.runtime.image),
          value('TASK_FIRE_IMAGE_PULL_POLICY', config.runtime.imagePullPolicy),
          value('TASK_FIRE_URL', `http://${RUNTIME_NAME}:${config.runtime.port}`),
          value('TASK_FIRE_SECRET', `${RUNTIME_SECRET_NAME}:${RUNTIME_SECRET_KEYS.fireKey}`),
          ...fromSecret('TASK_FIRE_KEY', RUNTIME_SECRET_KEYS.fireKey),
        ]
      : []),
    // Sandboxes are Pods beside the runtime (docs/decisions/0081), fenced by the operator's NetworkPolicies (so the
    // runtime needs no verb on policies) and counted by its quota. Without them, no computer: the runtime's container
    // (restricted, RuntimeDefault seccomp) cannot make the namespaces bubblewrap needs.
    ...(sandboxes
      ? [
          value('COMPUTER_HOST', 'kubernetes'),
          value('COMPUTER_IMAGE', sandboxes.image),
          value('COMPUTER_IMAGE_PULL_POLICY', sandboxes.imagePullPolicy),
          ...(sandboxes.storageClass === undefined ? [] : [value('COMPUTER_STORAGE_CLASS', sandboxes.storageClass)]),
          value('COMPUTER_NETWORK_POLICY', 'operator'),
        ]
      : [value('COMPUTER_HOST', 'none')]),
    // The agent's browser is the browser Pod's (docs/decisions/0092): the runtime's image has no Chromium, and pages
    // do not run beside the runtime's keys.
    ...(browser && secretKeys.has(RUNTIME_SECRET_KEYS.browserToken)
      ? [value('BROWSER_HOST', 'remote'), value('BROWSER_ENDPOINT', browserEndpoint(browser)), ...fromSecret('BROWSER_TOKEN', RUNTIME_SECRET_KEYS.browserToken)]
      : [value('BROWSER_HOST', 'none')]),
    ...(redisUrl === undefined ? [] : [...fromSecret('REDIS_URL', RUNTIME_SECRET_KEYS.redisUrl), value('REDIS_KEY_PREFIX', redisKeyPrefix(project))]),
    ...(s3 === undefined
      ? []
      : [
          value('BLOB_STORE', 's3'),
          value('S3_BUCKET', s3.bucket),
          ...(s3.endpoint === undefined ? [] : [value('S3_ENDPOINT', s3.endpoint)]),
          value('S3_REGION', s3.region),
          value('S3_FORCE_PATH_STYLE', String(s3.forcePathStyle)),
          value('S3_KEY_PREFIX', blobKeyPrefix(project)),
          ...fromSecret('S3_ACCESS_KEY_ID', RUNTIME_SECRET_KEYS.s3AccessKeyId),
          ...fromSecret('S3_SECRET_ACCESS_KEY', RUNTIME_SECRET_KEYS.s3SecretAccessKey),
        ]),
    // Vectors in Pinecone: one index for the platform, each tenant in its own namespace (docs/decisions/0046).
    ...(pinecone === undefined
      ? []
      : [value('VECTOR_INDEX', 'pinecone'), value('PINECONE_INDEX_HOST', pinecone.indexHost), ...fromSecret('PINECONE_API_KEY', RUNTIME_SECRET_KEYS.pineconeApiKey)]),
  ];
}

export function buildRuntimeDeployment(project: Project, namespace: string, config: OperatorConfig, secrets: RuntimeSecretValues): k8s.V1Deployment {
  const replicas = project.spec.runtime?.replicas ?? 1;
  const httpGet = (path: string): k8s.V1HTTPGetAction => ({ path, port: RUNTIME_PORT_NAME });
  const container: k8s.V1Container = {
    name: RUNTIME_CONTAINER,
    image: project.spec.runtime?.image ?? config.runtime.image,
    imagePullPolicy: config.runtime.imagePullPolicy,
    // The image's entrypoint picks the program by its first argument.
    args: ['runtime'],
    ports: [{ name: RUNTIME_PORT_NAME, containerPort: config.runtime.port, protocol: 'TCP' }],
    env: runtimeEnv(project, config, secrets),
    resources: runtimeResources(project, config),
    // Migrations run at start; liveness waits for the startup probe, so a slow first start is not a restart loop.
    startupProbe: { httpGet: httpGet('/health'), periodSeconds: 2, timeoutSeconds: 2, failureThreshold: 60 },
    livenessProbe: { httpGet: httpGet('/health'), periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 },
    readinessProbe: { httpGet: httpGet('/ready'), periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 2 },
    securityContext: restrictedContainerSecurity(),
    volumeMounts: [
      { name: 'data', mountPath: RUNTIME_DATA_DIR },
      { name: 'tmp', mountPath: '/tmp' },
    ],
  };
  const podSpec: k8s.V1PodSpec = {
    serviceAccountName: RUNTIME_NAME,
    // The runtime creates its tasks' Jobs and sandboxes' Pods through the API, as its ServiceAccount.
    automountServiceAccountToken: true,
    // Service links would put every Service of the namespace into the environment, for nothing.
    enableServiceLinks: false,
    terminationGracePeriodSeconds: config.runtime.shutdownGraceSeconds + CUT_OFF_SECONDS + TERMINATION_MARGIN_SECONDS,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: RUNTIME_USER_ID,
      runAsGroup: RUNTIME_USER_ID,
      fsGroup: RUNTIME_USER_ID,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    containers: [container],
    volumes: [
      { name: 'data', emptyDir: {} },
      { name: 'tmp', emptyDir: {} },
    ],
    ...(replicas > 1
      ? {
          // Preferred, not required: a one-node cluster still runs every replica.
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: runtimeSelector() },
              matchLabelKeys: ['pod-template-hash'],
            },
          ],
        }
      : {}),
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: projectObjectMeta(project, namespace, RUNTIME_NAME, runtimeLabels(project)),
    spec: {
      replicas,
      revisionHistoryLimit: 3,
      selector: { matchLabels: runtimeSelector() },
      // A new Pod must be ready before an old one goes: a rollout never lowers capacity.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: {
          labels: runtimeLabels(project),
          annotations: {
            [SECRET_HASH_ANNOTATION]: runtimeSecretHash(secrets, config),
            'kubectl.kubernetes.io/default-container': RUNTIME_CONTAINER,
          },
        },
        spec: podSpec,
      },
    },
  };
}

export function buildRuntimeService(project: Project, namespace: string, config: OperatorConfig): k8s.V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: projectObjectMeta(project, namespace, RUNTIME_NAME, runtimeLabels(project)),
    spec: {
      type: 'ClusterIP',
      selector: runtimeSelector(),
      ports: [{ name: RUNTIME_PORT_NAME, port: config.runtime.port, targetPort: RUNTIME_PORT_NAME, protocol: 'TCP' }],
    },
  };
}

/**
 * The data plane on the project's host. A TLS secret, when configured, is looked up by the ingress controller in
 * the project namespace (Ingresses cannot refer to another namespace's Secrets), so it must be present there too.
 */
export function buildDataPlaneIngress(project: Project, namespace: string, config: OperatorConfig): k8s.V1Ingress {
  const host = dataPlaneHost(project, config);
  const { ingressClassName, tlsSecretName } = config.dataPlane;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: projectObjectMeta(project, namespace, DATA_PLANE_INGRESS_NAME, runtimeLabels(project)),
    spec: {
      ...(ingressClassName === undefined ? {} : { ingressClassName }),
      rules: [
        {
          host,
          http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: RUNTIME_NAME, port: { name: RUNTIME_PORT_NAME } } } }] },
        },
      ],
      ...(tlsSecretName === undefined ? {} : { tls: [{ hosts: [host], secretName: tlsSecretName }] }),
    },
  };
}

export function buildRuntimeDisruptionBudget(project: Project, namespace: string): k8s.V1PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: projectObjectMeta(project, namespace, RUNTIME_NAME, runtimeLabels(project)),
    spec: {
      maxUnavailable: 1,
      selector: { matchLabels: runtimeSelector() },
      // A Pod that is not ready serves nobody: draining a node may always evict it.
      unhealthyPodEvictionPolicy: 'AlwaysAllow',
    },
  };
}
