// The operator's configuration, parsed from the environment once at start. README's table lists every variable;
// the Helm chart sets them from values.yaml.
import { EnvReader, type Env } from '@agentplane/lib/config';
import { readAllowedDestinations } from '@agentplane/lib/net/egress-proxy';

export interface RuntimeStores {
  /** Admin connection that creates each project's database and role (CREATEDB, CREATEROLE); unset: runtimes run embedded. */
  databaseAdminUrl: string | undefined;
  /** Host and port the runtimes use for their database, when they differ from the admin connection's. */
  databaseHost: string | undefined;
  /** Redis the runtimes share, each under its own key prefix; unset: in-process events (one replica). */
  redisUrl: string | undefined;
  /** S3-compatible store the runtimes share, each under its own key prefix; unset: the Pod's own volume. */
  s3:
    | {
        endpoint: string | undefined;
        bucket: string;
        region: string;
        accessKeyId: string | undefined;
        secretAccessKey: string | undefined;
        forcePathStyle: boolean;
      }
    | undefined;
  /** A Pinecone index the runtimes keep their vectors in, each tenant in its own namespace; unset: pgvector. */
  pinecone: { indexHost: string; apiKey: string } | undefined;
}

export interface BrowserPodSettings {
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  /** The browser server's container port. */
  port: number;
  resources: { requests: { cpu: string; memory: string }; limits: { cpu: string; memory: string } };
  /** `host:port` destinations its pages may reach though private (an intranet site); IP literals also get an egress allow. */
  allowedDestinations: string[];
  /**
   * A `Localhost` seccomp profile on the nodes (a path under the kubelet's seccomp directory) that lets Chromium make
   * the user namespaces its own sandbox needs; the container runtime's default profile refuses them. Unset:
   * RuntimeDefault, and Chromium runs without its own sandbox (docs/decisions/0092).
   */
  seccompProfile: string | undefined;
}

export interface OperatorConfig {
  /** Kubeconfig file; unset: in-cluster service-account credentials. */
  kubeconfig: string | undefined;
  /** Where the operator itself runs: its Lease lives here, and project runtimes accept admin calls from here. */
  namespace: string;
  /** This replica's identity in the Lease (the Pod name on Kubernetes). */
  identity: string;
  leaderElection: { enabled: boolean; leaseName: string; leaseSeconds: number; renewSeconds: number };
  /** Every object is reconciled again this often even when nothing changed. */
  resyncSeconds: number;
  /** Longest wait between retries of a failing object. */
  maxBackoffSeconds: number;
  /** Port of `/health`, `/ready` and `/metrics`; 0 picks a free one. */
  port: number;
  host: string;
  projectNamespacePrefix: string;
  runtime: {
    image: string;
    imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
    /** Container port the runtime listens on. */
    port: number;
    resources: { requests: { cpu: string; memory: string }; limits: { cpu: string; memory: string } };
    /** How long a runtime drains before it is killed; the Pod's grace period is longer. */
    shutdownGraceSeconds: number;
    /**
     * Where the operator reaches a project's runtime admin surface; `{namespace}` and `{project}` are filled in.
     * Tests point it at a runtime process they started.
     */
    urlTemplate: string;
    /**
     * The ClusterRole (installed by the chart) that each project's runtime ServiceAccount is bound to by a RoleBinding
     * in the project namespace only. The operator holds `bind` on it rather than the permissions themselves.
     */
    clusterRole: string;
    /** Whether tasks a CronJob can express get one in the project's namespace (docs/decisions/0066). */
    taskCronJobs: boolean;
    /**
     * The runtimes' sandboxes: Pods in the project's namespace (docs/decisions/0081). Unset: the runtimes offer no
     * computer.
     */
    sandboxes: { image: string; imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never'; storageClass: string | undefined } | undefined;
    /**
     * The agent's browser: a Deployment in the project's namespace running the browser server, which the runtimes
     * connect to (docs/decisions/0092). Unset: the runtimes offer no browser.
     */
    browser: BrowserPodSettings | undefined;
  };
  dataPlane: { domain: string; scheme: 'http' | 'https'; ingressClassName: string | undefined; tlsSecretName: string | undefined };
  /** The namespace of the ingress controller, the one source NetworkPolicies let in. */
  ingressNamespace: string;
  stores: RuntimeStores;
  logLevel: string;
  logFormat: 'json' | 'pretty' | 'auto';
}

export function loadOperatorConfig(env: Env = process.env): OperatorConfig {
  const read = new EnvReader(env);
  const namespace = read.string('OPERATOR_NAMESPACE', 'agentplane');
  const bucket = read.string('RUNTIME_S3_BUCKET');
  const pineconeHost = read.url('RUNTIME_PINECONE_INDEX_HOST', ['https', 'http']);
  const pineconeKey = read.string('RUNTIME_PINECONE_API_KEY');
  if ((pineconeHost === undefined) !== (pineconeKey === undefined)) read.problem('RUNTIME_PINECONE_INDEX_HOST and RUNTIME_PINECONE_API_KEY go together');
  const scheme = read.oneOf('DATA_PLANE_SCHEME', ['http', 'https'], 'https');
  const sandboxImage = read.string('RUNTIME_SANDBOX_IMAGE');
  const browserImage = read.string('RUNTIME_BROWSER_IMAGE');
  const config: OperatorConfig = {
    kubeconfig: read.string('KUBECONFIG'),
    namespace,
    identity: read.string('POD_NAME', `operator-${process.pid}`),
    leaderElection: {
      enabled: read.boolean('LEADER_ELECTION', true),
      leaseName: read.string('LEADER_ELECTION_LEASE', 'agentplane-operator'),
      leaseSeconds: read.integer('LEADER_ELECTION_LEASE_SECONDS', 15, { min: 2, max: 600 }),
      renewSeconds: read.integer('LEADER_ELECTION_RENEW_SECONDS', 5, { min: 1, max: 300 }),
    },
    resyncSeconds: read.integer('RESYNC_SECONDS', 300, { min: 1, max: 24 * 3600 }),
    maxBackoffSeconds: read.integer('MAX_BACKOFF_SECONDS', 300, { min: 1, max: 3600 }),
    port: read.port('OPERATOR_PORT', 8082),
    host: read.string('HOST', '0.0.0.0'),
    projectNamespacePrefix: read.string('PROJECT_NAMESPACE_PREFIX', 'agentplane-'),
    runtime: {
      image: read.string('RUNTIME_IMAGE', 'ghcr.io/agentplane/agentplane:0.1.0'),
      imagePullPolicy: read.oneOf('RUNTIME_IMAGE_PULL_POLICY', ['Always', 'IfNotPresent', 'Never'], 'IfNotPresent'),
      port: read.port('RUNTIME_PORT', 8081),
      resources: {
        requests: { cpu: read.string('RUNTIME_CPU_REQUEST', '250m'), memory: read.string('RUNTIME_MEMORY_REQUEST', '256Mi') },
        limits: { cpu: read.string('RUNTIME_CPU_LIMIT', '1'), memory: read.string('RUNTIME_MEMORY_LIMIT', '1Gi') },
      },
      shutdownGraceSeconds: read.integer('RUNTIME_SHUTDOWN_GRACE_SECONDS', 30, { min: 0, max: 3600 }),
      urlTemplate: read.string('RUNTIME_URL_TEMPLATE', 'http://agent-runtime.{namespace}.svc:8081'),
      clusterRole: read.string('RUNTIME_CLUSTER_ROLE', 'agentplane-project-runtime'),
      taskCronJobs: read.boolean('RUNTIME_TASK_CRONJOBS', true),
      sandboxes: sandboxImage
        ? {
            image: sandboxImage,
            imagePullPolicy: read.oneOf('RUNTIME_SANDBOX_IMAGE_PULL_POLICY', ['Always', 'IfNotPresent', 'Never'], 'IfNotPresent'),
            storageClass: read.string('RUNTIME_SANDBOX_STORAGE_CLASS'),
          }
        : undefined,
      browser: browserImage
        ? {
            image: browserImage,
            imagePullPolicy: read.oneOf('RUNTIME_BROWSER_IMAGE_PULL_POLICY', ['Always', 'IfNotPresent', 'Never'], 'IfNotPresent'),
            port: read.port('RUNTIME_BROWSER_PORT', 8083),
            resources: {
              requests: { cpu: read.string('RUNTIME_BROWSER_CPU_REQUEST', '250m'), memory: read.string('RUNTIME_BROWSER_MEMORY_REQUEST', '512Mi') },
              limits: { cpu: read.string('RUNTIME_BROWSER_CPU_LIMIT', '2'), memory: read.string('RUNTIME_BROWSER_MEMORY_LIMIT', '3Gi') },
            },
            allowedDestinations: readAllowedDestinations(read, 'RUNTIME_BROWSER_ALLOWED_DESTINATIONS'),
            seccompProfile: read.string('RUNTIME_BROWSER_SECCOMP_PROFILE'),
          }
        : undefined,
    },
    dataPlane: {
      domain: read.string('DATA_PLANE_DOMAIN', 'agentplane.local'),
      scheme,
      ingressClassName: read.string('INGRESS_CLASS_NAME'),
      tlsSecretName: read.string('DATA_PLANE_TLS_SECRET'),
    },
    ingressNamespace: read.string('INGRESS_NAMESPACE', 'ingress-nginx'),
    stores: {
      databaseAdminUrl: read.url('PROJECT_DATABASE_ADMIN_URL', ['postgres', 'postgresql']),
      databaseHost: read.string('PROJECT_DATABASE_HOST'),
      redisUrl: read.url('RUNTIME_REDIS_URL', ['redis', 'rediss']),
      s3: bucket
        ? {
            endpoint: read.url('RUNTIME_S3_ENDPOINT', ['http', 'https']),
            bucket,
            region: read.string('RUNTIME_S3_REGION', 'us-east-1'),
            accessKeyId: read.string('RUNTIME_S3_ACCESS_KEY_ID'),
            secretAccessKey: read.string('RUNTIME_S3_SECRET_ACCESS_KEY'),
            forcePathStyle: read.boolean('RUNTIME_S3_FORCE_PATH_STYLE', false),
          }
        : undefined,
      pinecone: pineconeHost !== undefined && pineconeKey !== undefined ? { indexHost: pineconeHost, apiKey: pineconeKey } : undefined,
    },
    logLevel: read.oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], 'info'),
    logFormat: read.oneOf('LOG_FORMAT', ['json', 'pretty', 'auto'], 'auto'),
  };
  if (config.leaderElection.renewSeconds >= config.leaderElection.leaseSeconds) {
    read.problem('LEADER_ELECTION_RENEW_SECONDS must be shorter than LEADER_ELECTION_LEASE_SECONDS');
  }
  if (!/^[a-z0-9]([a-z0-9-]{0,20})$/.test(config.projectNamespacePrefix)) {
    read.problem('PROJECT_NAMESPACE_PREFIX must be at most 21 lower-case letters, digits or `-`, starting with a letter or digit');
  }
  read.done();
  return config;
}
