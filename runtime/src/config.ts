// The runtime's configuration, parsed from the environment once at start. README's table lists every variable.
import { resolve } from 'node:path';
import { EnvReader, readServiceBasics, type Env, type ServiceBasics } from '@agentplane/lib/config';
import { parseMasterKey } from '@agentplane/lib/crypto/local-secrets';
import { BROWSER_TOKEN_RULE, isBrowserToken } from '@agentplane/lib/browser';
import { readAllowedDestinations } from '@agentplane/lib/net/egress-proxy';
import type { CronJobSettings } from './tasks/cronjobs.js';

export type BlobConfig =
  | { kind: 'fs' }
  | {
      kind: 's3';
      endpoint: string | undefined;
      /** Host that outside clients reach the store by, when it differs from `endpoint` (presigned URLs). */
      publicEndpoint: string | undefined;
      bucket: string;
      region: string;
      accessKeyId: string | undefined;
      secretAccessKey: string | undefined;
      forcePathStyle: boolean;
      prefix: string | undefined;
    };

export interface RuntimeConfig extends ServiceBasics {
  database: { driver: 'pglite'; dataDir: string } | { driver: 'postgres'; url: string; poolSize: number };
  events: { kind: 'memory' } | { kind: 'redis'; url: string; keyPrefix: string };
  eventLogRetentionSeconds: number;
  /** In-process run logs: bytes held at most before the oldest finished runs' frames are dropped. */
  eventLogMemoryBytes: number;
  blobs: BlobConfig;
  /** Largest object or part a signed upload URL of the filesystem store accepts. */
  blobMaxUploadBytes: number;
  /** Configured admin key; when absent the runtime generates one in the data dir. */
  adminKey: string | undefined;
  /** Configured base64 master key; when absent the runtime generates one in the data dir. */
  masterKey: string | undefined;
  /** Lets provider base URLs (and other user-supplied URLs) reach private and loopback addresses, over http too. */
  allowPrivateUrls: boolean;
  /** How long a provider may take to answer, and to send the next chunk of a stream. */
  providerTimeoutMs: number;
  /** How long a webhook tool's handler may take to answer a call (each attempt). */
  webhookToolTimeoutMs: number;
  /** How long an MCP server may take to connect, list its tools or answer a call. */
  mcpTimeoutMs: number;
  /** How long a web search or a page read may take. */
  webFetchTimeoutMs: number;
  /** How long a run's lease lasts without renewal; a run whose process died is failed this long after. */
  runLeaseSeconds: number;
  /** Documents read at once by this process. */
  ingestConcurrency: number;
  /** How long an ingest job's lease lasts without renewal; a job whose process died is taken up again this long after. */
  ingestLeaseSeconds: number;
  /** Attempts at a document before it fails for good on errors that may pass (a provider down, a store unreachable). */
  ingestMaxAttempts: number;
  /** The delay before an ingest's first retry; each next one doubles it. */
  ingestRetryBaseMs: number;
  /** How often the ingest worker looks for jobs it was not told of (enqueued by another replica, or due for a retry). */
  ingestPollMs: number;
  /** How often the scheduler looks for due tasks (and settles ended fires). */
  schedulerTickMs: number;
  /** After downtime, a recurring task fires once for its latest missed slot if it lies within this window. */
  schedulerCatchUpSeconds: number;
  /** How often the event outbox looks for deliveries due (a new event is sent at once). */
  deliveryTickMs: number;
  /** How long an answered write's audit entry may wait to be written with others. */
  auditFlushMs: number;
  /**
   * Scheduled tasks as CronJobs on Kubernetes (docs/decisions/0066), where the operator turns them on; unset, the
   * database scheduler fires every task.
   */
  taskCronJobs: (CronJobSettings & { kubeconfig: string | undefined }) | undefined;
  /** The key a task's CronJob fires with (X-Fire-Key); unset, the fire route refuses every call. */
  taskFireKey: string | undefined;
  /**
   * Where sandboxes run (docs/decisions/0079, 0081): `local` (bubblewrap on this machine), `kubernetes` (Pods in
   * `computerKubernetes.namespace`), `none`, or `auto`: local where bubblewrap is installed, none where it is not.
   */
  computerHost: 'auto' | 'local' | 'kubernetes' | 'none';
  /** The Kubernetes host's settings, when `computerHost` is `kubernetes`. */
  computerKubernetes:
    | {
        namespace: string;
        /** The image of a sandbox whose project names none. */
        image: string;
        imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
        /** The claims' storage class; unset: the cluster's default. */
        storageClass: string | undefined;
        /** Who fences the sandboxes' network: the operator's policies, or a deny-all this runtime writes. */
        networkPolicy: 'operator' | 'runtime';
        /** Unset: in-cluster ServiceAccount credentials. */
        kubeconfig: string | undefined;
      }
    | undefined;
  /** The host user a local sandbox runs as when the runtime is root (never root). */
  computerLocalUid: number;
  computerLocalUids: number;
  /** Local sandboxes kept started ahead per disk size (a new sandbox takes one instead of waiting for bubblewrap). */
  computerLocalPool: number;
  /** How often idle sandboxes are paused and those past their lifetime stopped. */
  computerSweepMs: number;
  /**
   * The agent's browser (docs/decisions/0087, 0088, 0092): `local` (Chromium as a child process), `remote` (the
   * browser Pod's server at `browser.remote`), `none`, or `auto`: local where Chromium is installed at
   * `browser.executablePath`, none where it is not.
   */
  browserHost: 'auto' | 'local' | 'remote' | 'none';
  browser: {
    executablePath: string;
    /** The browser Pod's server (`BROWSER_ENDPOINT`, `BROWSER_TOKEN`), with `browserHost` remote. */
    remote: { endpoint: string; token: string } | undefined;
    /** Chromium's own sandbox: `auto` is on unless this process is root (Chromium refuses to sandbox itself as root). */
    sandbox: boolean;
    maxContexts: number;
    maxPagesPerContext: number;
    maxMemoryBytes: number | null;
    idleMs: number;
    waitMs: number;
    /** Contexts made ahead for the next conversations (docs/decisions/0088). */
    spare: number;
    /** The most one browser tool call may take before its page is closed. */
    callMs: number;
    /** How long a page handed to a person stays open for them without anyone watching, whoever else needs the pool. */
    handoffMs: number;
    /** Private addresses a page may reach (never loopback to the service's ports, link-local or metadata). Default false. */
    allowPrivate: boolean;
    /** `host:port` destinations allowed even where they are private (an intranet site, a test's pages). */
    allowedDestinations: string[];
  };
  /** How often the text of answers being streamed is saved (what a crash can lose at most). */
  draftSaveMs: number;
  /** Where chunk vectors live (docs/decisions/0046): beside the chunks (pgvector), or in a Pinecone index. */
  vectors: { kind: 'pgvector' } | { kind: 'pinecone'; apiKey: string; host: string };
}

/** Shorter admin keys are refused, configured or read from the data dir. */
export const minAdminKeyLength = 24;

/**
 * `serving` false is for tools that only touch the database (`npm run migrate`): they need no shared keys.
 */
export function loadRuntimeConfig(env: Env = process.env, { serving = true }: { serving?: boolean } = {}): RuntimeConfig {
  const read = new EnvReader(env);
  // PUBLIC_URL: where clients reach the data plane (signed blob URLs point here).
  const basics = readServiceBasics(read, { port: 'DATA_PORT', defaultPort: 8081, publicUrl: 'PUBLIC_URL' });
  const databaseUrl = read.url('DATABASE_URL', ['postgres', 'postgresql']);
  const redisUrl = read.url('REDIS_URL', ['redis', 'rediss']);
  const blobKind = read.oneOf('BLOB_STORE', ['fs', 's3'], 'fs');
  const vectorKind = read.oneOf('VECTOR_INDEX', ['pgvector', 'pinecone'], 'pgvector');
  const adminKey = read.string('AGENTPLANE_ADMIN_KEY');
  if (adminKey !== undefined && adminKey.length < minAdminKeyLength) {
    read.problem(`AGENTPLANE_ADMIN_KEY is too short: use at least ${minAdminKeyLength} characters (for example \`openssl rand -hex 32\`)`);
  }

  const masterKey = read.string('AGENTPLANE_MASTER_KEY');
  if (masterKey !== undefined) {
    try {
      parseMasterKey(masterKey);
    } catch (error) {
      read.problem(`AGENTPLANE_MASTER_KEY is not valid: ${(error as Error).message} (for example \`openssl rand -base64 32\`)`);
    }
  }

  let blobs: BlobConfig = { kind: 'fs' };
  if (blobKind === 's3') {
    const bucket = read.string('S3_BUCKET');
    if (!bucket) read.problem('S3_BUCKET is required when BLOB_STORE=s3');
    blobs = {
      kind: 's3',
      endpoint: read.url('S3_ENDPOINT', ['http', 'https']),
      publicEndpoint: read.url('S3_PUBLIC_ENDPOINT', ['http', 'https']),
      bucket: bucket ?? '',
      region: read.string('S3_REGION', 'us-east-1'),
      accessKeyId: read.string('S3_ACCESS_KEY_ID'),
      secretAccessKey: read.string('S3_SECRET_ACCESS_KEY'),
      forcePathStyle: read.boolean('S3_FORCE_PATH_STYLE', false),
      prefix: read.string('S3_KEY_PREFIX'),
    };
  }

  let vectors: RuntimeConfig['vectors'] = { kind: 'pgvector' };
  if (vectorKind === 'pinecone') {
    const apiKey = read.string('PINECONE_API_KEY');
    const host = read.url('PINECONE_INDEX_HOST', ['https', 'http']);
    if (!apiKey) read.problem('PINECONE_API_KEY is required when VECTOR_INDEX=pinecone');
    if (!host) read.problem("PINECONE_INDEX_HOST is required when VECTOR_INDEX=pinecone (the index's host, from describe_index or the console)");
    vectors = { kind: 'pinecone', apiKey: apiKey ?? '', host: host ?? '' };
  }

  const taskFireKey = read.string('TASK_FIRE_KEY');
  if (taskFireKey !== undefined && taskFireKey.length < 32) read.problem('TASK_FIRE_KEY must be at least 32 characters');
  let taskCronJobs: RuntimeConfig['taskCronJobs'];
  if (read.boolean('TASK_CRONJOBS', false)) {
    const namespace = read.string('KUBERNETES_NAMESPACE');
    const image = read.string('TASK_FIRE_IMAGE');
    const fireUrl = read.url('TASK_FIRE_URL', ['http', 'https']);
    const [secretName, secretKey] = read.string('TASK_FIRE_SECRET', 'agentplane-runtime:task-fire-key').split(':');
    if (!namespace) read.problem('KUBERNETES_NAMESPACE is required when TASK_CRONJOBS=true (the namespace the CronJobs go in)');
    if (!image) read.problem('TASK_FIRE_IMAGE is required when TASK_CRONJOBS=true (the image whose entrypoint runs `fire`)');
    if (!fireUrl) read.problem("TASK_FIRE_URL is required when TASK_CRONJOBS=true (where a Job's Pod reaches this runtime)");
    if (!secretName || !secretKey) read.problem('TASK_FIRE_SECRET must be <secret name>:<key>');
    if (taskFireKey === undefined) read.problem('TASK_FIRE_KEY is required when TASK_CRONJOBS=true (the key in TASK_FIRE_SECRET)');
    taskCronJobs = {
      namespace: namespace ?? '',
      image: image ?? '',
      imagePullPolicy: read.oneOf('TASK_FIRE_IMAGE_PULL_POLICY', ['Always', 'IfNotPresent', 'Never'], 'IfNotPresent'),
      fireUrl: fireUrl ?? '',
      fireKeySecret: { name: secretName ?? '', key: secretKey ?? '' },
      reconcileMs: read.integer('TASK_CRONJOB_RECONCILE_SECONDS', 60, { min: 1, max: 86_400 }) * 1000,
      kubeconfig: read.string('KUBECONFIG'),
    };
  }

  const computerHost = read.oneOf('COMPUTER_HOST', ['auto', 'local', 'kubernetes', 'none'], 'auto');
  let computerKubernetes: RuntimeConfig['computerKubernetes'];
  if (computerHost === 'kubernetes') {
    const namespace = read.string('KUBERNETES_NAMESPACE');
    const image = read.string('COMPUTER_IMAGE');
    if (!namespace) read.problem('KUBERNETES_NAMESPACE is required when COMPUTER_HOST=kubernetes (the namespace sandbox Pods go in)');
    if (!image) read.problem("COMPUTER_IMAGE is required when COMPUTER_HOST=kubernetes (a sandbox's image when its project names none)");
    computerKubernetes = {
      namespace: namespace ?? '',
      image: image ?? '',
      imagePullPolicy: read.oneOf('COMPUTER_IMAGE_PULL_POLICY', ['Always', 'IfNotPresent', 'Never'], 'IfNotPresent'),
      storageClass: read.string('COMPUTER_STORAGE_CLASS'),
      networkPolicy: read.oneOf('COMPUTER_NETWORK_POLICY', ['operator', 'runtime'], 'runtime'),
      kubeconfig: read.string('KUBECONFIG'),
    };
  }

  const browserHost = read.oneOf('BROWSER_HOST', ['auto', 'local', 'remote', 'none'], 'auto');
  let browserRemote: RuntimeConfig['browser']['remote'];
  if (browserHost === 'remote') {
    const endpoint = read.url('BROWSER_ENDPOINT', ['ws', 'wss']);
    const token = read.raw('BROWSER_TOKEN');
    if (!endpoint) read.problem("BROWSER_ENDPOINT is required when BROWSER_HOST=remote (the browser server's ws://host:port)");
    if (token === undefined || !isBrowserToken(token)) read.problem(`BROWSER_TOKEN is required when BROWSER_HOST=remote: ${BROWSER_TOKEN_RULE}`);
    browserRemote = { endpoint: (endpoint ?? '').replace(/\/+$/, ''), token: token ?? '' };
  }

  // Replicas sharing a database must share these keys: one generated per replica would make admin calls and
  // sealed secrets depend on which replica answers.
  if (serving && databaseUrl !== undefined) {
    if (adminKey === undefined) read.problem('AGENTPLANE_ADMIN_KEY is required when DATABASE_URL is set (replicas must share it)');
    if (masterKey === undefined) read.problem('AGENTPLANE_MASTER_KEY is required when DATABASE_URL is set (replicas must share it)');
  }

  const config: RuntimeConfig = {
    ...basics,
    database: databaseUrl
      ? { driver: 'postgres', url: databaseUrl, poolSize: read.integer('DATABASE_POOL_SIZE', 10, { min: 1, max: 200 }) }
      : { driver: 'pglite', dataDir: resolve(basics.dataDir, 'runtime', 'pglite') },
    events: redisUrl ? { kind: 'redis', url: redisUrl, keyPrefix: read.string('REDIS_KEY_PREFIX', 'agentplane:') } : { kind: 'memory' },
    eventLogRetentionSeconds: read.integer('EVENT_LOG_RETENTION_SECONDS', 3600, { min: 10, max: 30 * 24 * 3600 }),
    eventLogMemoryBytes: read.integer('EVENT_LOG_MEMORY_MB', 64, { min: 1, max: 65_536 }) * 1024 * 1024,
    blobs,
    blobMaxUploadBytes: read.integer('BLOB_MAX_UPLOAD_BYTES', 5 * 1024 ** 3, { min: 1024, max: 5 * 1024 ** 3 }),
    adminKey,
    masterKey,
    allowPrivateUrls: read.boolean('AGENTPLANE_ALLOW_PRIVATE_URLS', false),
    providerTimeoutMs: read.integer('PROVIDER_TIMEOUT_MS', 60_000, { min: 100, max: 10 * 60_000 }),
    webhookToolTimeoutMs: read.integer('WEBHOOK_TOOL_TIMEOUT_MS', 30_000, { min: 100, max: 5 * 60_000 }),
    mcpTimeoutMs: read.integer('MCP_TIMEOUT_MS', 30_000, { min: 100, max: 5 * 60_000 }),
    webFetchTimeoutMs: read.integer('WEB_FETCH_TIMEOUT_MS', 15_000, { min: 100, max: 2 * 60_000 }),
    runLeaseSeconds: read.integer('RUN_LEASE_SECONDS', 30, { min: 1, max: 3600 }),
    ingestConcurrency: read.integer('INGEST_CONCURRENCY', 2, { min: 1, max: 64 }),
    ingestLeaseSeconds: read.integer('INGEST_LEASE_SECONDS', 120, { min: 2, max: 3600 }),
    ingestMaxAttempts: read.integer('INGEST_MAX_ATTEMPTS', 5, { min: 1, max: 20 }),
    ingestRetryBaseMs: read.integer('INGEST_RETRY_BASE_MS', 5_000, { min: 10, max: 3_600_000 }),
    ingestPollMs: read.integer('INGEST_POLL_MS', 1_000, { min: 50, max: 3_600_000 }),
    schedulerTickMs: read.integer('SCHEDULER_TICK_MS', 500, { min: 50, max: 3_600_000 }),
    schedulerCatchUpSeconds: read.integer('SCHEDULER_CATCH_UP_SECONDS', 3600, { min: 0, max: 7 * 86_400 }),
    deliveryTickMs: read.integer('DELIVERY_TICK_MS', 1000, { min: 50, max: 3_600_000 }),
    auditFlushMs: read.integer('AUDIT_FLUSH_MS', 200, { min: 10, max: 3_600_000 }),
    taskCronJobs,
    taskFireKey,
    vectors,
    computerHost,
    computerKubernetes,
    computerLocalUid: read.integer('COMPUTER_LOCAL_UID', 61_000, { min: 1, max: 4_294_967_294 }),
    computerLocalUids: read.integer('COMPUTER_LOCAL_UIDS', 184, { min: 1, max: 1_000_000 }),
    computerLocalPool: read.integer('COMPUTER_LOCAL_POOL', 1, { min: 0, max: 64 }),
    computerSweepMs: read.integer('COMPUTER_SWEEP_MS', 5_000, { min: 50, max: 3_600_000 }),
    browserHost,
    browser: {
      executablePath: read.string('BROWSER_EXECUTABLE', '/usr/bin/chromium'),
      remote: browserRemote,
      sandbox: (() => {
        const chosen = read.oneOf('BROWSER_SANDBOX', ['auto', 'true', 'false'], 'auto');
        return chosen === 'auto' ? process.getuid?.() !== 0 : chosen === 'true';
      })(),
      maxContexts: read.integer('BROWSER_MAX_CONTEXTS', 4, { min: 1, max: 1000 }),
      maxPagesPerContext: read.integer('BROWSER_MAX_PAGES_PER_CONTEXT', 3, { min: 1, max: 100 }),
      maxMemoryBytes: (() => {
        const mib = read.integer('BROWSER_MAX_MEMORY_MIB', 3072, { min: 0, max: 1024 * 1024 });
        return mib === 0 ? null : mib * 1024 * 1024;
      })(),
      idleMs: read.integer('BROWSER_IDLE_SECONDS', 300, { min: 1, max: 86_400 }) * 1000,
      waitMs: read.integer('BROWSER_WAIT_MS', 10_000, { min: 0, max: 600_000 }),
      spare: read.integer('BROWSER_SPARE', 1, { min: 0, max: 16 }),
      callMs: read.integer('BROWSER_CALL_SECONDS', 45, { min: 1, max: 600 }) * 1000,
      handoffMs: read.integer('BROWSER_HANDOFF_SECONDS', 900, { min: 10, max: 86_400 }) * 1000,
      allowPrivate: read.boolean('BROWSER_ALLOW_PRIVATE_URLS', false),
      allowedDestinations: readAllowedDestinations(read),
    },
    draftSaveMs: read.integer('DRAFT_SAVE_MS', 1_000, { min: 50, max: 3_600_000 }),
  };
  read.done();
  return config;
}
