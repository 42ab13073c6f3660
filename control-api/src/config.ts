// The control-api's configuration, parsed from the environment once at start. README's table lists every variable.
import { resolve } from 'node:path';
import { EnvReader, readServiceBasics, type Env, type ServiceBasics } from '@agentplane/lib/config';

export interface ControlApiConfig extends ServiceBasics {
  database: { driver: 'pglite'; dataDir: string } | { driver: 'postgres'; url: string; poolSize: number };
  /** Counters for sign-in limits: in-process, or shared through Redis by every replica. */
  events: { kind: 'memory' } | { kind: 'redis'; url: string; keyPrefix: string };
  /** The first owner, created on first start when no account exists. */
  owner: { email: string | undefined; password: string | undefined };
  sessionTtlSeconds: number;
  /** Base64 32-byte key sealing secrets at rest (project signing keys, provider keys); generated into the data dir when unset. */
  masterKey: string | undefined;
  /**
   * How projects get a runtime (PROVISIONER): `local` (the default) reaches one runtime's admin surface at RUNTIME_URL
   * (unset, and not in the all-in-one, which wires its own: changes are queued until one is configured);
   * `kubernetes` writes Project and Tenant resources and reads each project's runtime from their status.
   */
  provisioner: LocalProvisionerConfig | KubernetesProvisionerConfig;
  /** The data-plane URL handed to customers (the all-in-one's runtime; on Kubernetes each project gets its own host). */
  dataPlaneUrl: string;
  /** Where the built console is served from; undefined: the `@agentplane/console` package's dist/. */
  consoleDir: string | undefined;
  signIn: { maxFailures: number; maxFailuresPerAddress: number; windowSeconds: number; lockSeconds: number };
  /**
   * Let customer-supplied URLs (provider `base_url`) reach private and loopback addresses, over plain http too:
   * local development and tests only. Cloud metadata and link-local addresses stay refused (docs/decisions/0011).
   */
  allowPrivateUrls: boolean;
  /** How long a call to a customer's provider may wait for an answer, per request, before 504. */
  providerTimeoutMs: number;
  /**
   * How long a write that changes a project's configuration waits for its runtime to hold the change before it
   * answers with `X-Configuration-State: pending` (docs/decisions/0070); 0 answers at once.
   */
  configurationWaitMs: number;
  /** How often every project's configuration is pushed again although nothing changed, to catch drift (0025); 0: never. */
  configurationResyncMs: number;
}

export interface LocalProvisionerConfig {
  kind: 'local';
  runtime: { url: string; adminKey: string } | undefined;
}

export interface KubernetesProvisionerConfig {
  kind: 'kubernetes';
  /** Kubeconfig file; unset: the Pod's service-account credentials. */
  kubeconfig: string | undefined;
  /** Must be the operator's: a Project's namespace is this prefix and the project id. */
  projectNamespacePrefix: string;
}

export const minOwnerPasswordLength = 12;

/**
 * `defaults.dataPlaneUrl` is what the connect snippet hands out when DATA_PLANE_URL is unset: the all-in-one passes
 * the URL its own data plane serves.
 */
export function loadControlApiConfig(env: Env = process.env, defaults: { dataPlaneUrl?: string } = {}): ControlApiConfig {
  const read = new EnvReader(env);
  const basics = readServiceBasics(read, { port: 'CONTROL_PORT', defaultPort: 8080, publicUrl: 'CONTROL_PUBLIC_URL' });
  const databaseUrl = read.url('CONTROL_DATABASE_URL', ['postgres', 'postgresql']);
  const redisUrl = read.url('REDIS_URL', ['redis', 'rediss']);
  const ownerEmail = read.string('AGENTPLANE_OWNER_EMAIL');
  const ownerPassword = read.string('AGENTPLANE_OWNER_PASSWORD');
  if (ownerEmail !== undefined && !/^[^\s@]+@[^\s@]+$/.test(ownerEmail)) read.problem(`AGENTPLANE_OWNER_EMAIL=${JSON.stringify(ownerEmail)} is not an email address`);
  if (ownerPassword !== undefined && ownerPassword.length < minOwnerPasswordLength) {
    read.problem(`AGENTPLANE_OWNER_PASSWORD is too short: use at least ${minOwnerPasswordLength} characters`);
  }
  if ((ownerEmail === undefined) !== (ownerPassword === undefined)) {
    read.problem('AGENTPLANE_OWNER_EMAIL and AGENTPLANE_OWNER_PASSWORD go together: set both or neither');
  }
  const provisioner = readProvisioner(read);
  const config: ControlApiConfig = {
    ...basics,
    database: databaseUrl
      ? { driver: 'postgres', url: databaseUrl, poolSize: read.integer('CONTROL_DATABASE_POOL_SIZE', 10, { min: 1, max: 200 }) }
      : { driver: 'pglite', dataDir: resolve(basics.dataDir, 'control', 'pglite') },
    events: redisUrl ? { kind: 'redis', url: redisUrl, keyPrefix: read.string('REDIS_KEY_PREFIX', 'agentplane:') + 'control:' } : { kind: 'memory' },
    owner: { email: ownerEmail, password: ownerPassword },
    masterKey: read.string('AGENTPLANE_MASTER_KEY'),
    provisioner,
    dataPlaneUrl: (read.url('DATA_PLANE_URL', ['http', 'https']) ?? defaults.dataPlaneUrl ?? 'http://127.0.0.1:8081').replace(/\/$/, ''),
    consoleDir: read.string('CONSOLE_DIR'),
    sessionTtlSeconds: read.integer('SESSION_TTL_SECONDS', 7 * 24 * 3600, { min: 60, max: 90 * 24 * 3600 }),
    signIn: {
      maxFailures: read.integer('SIGNIN_MAX_FAILURES', 10, { min: 1, max: 1000 }),
      // Higher: many people may sign in from behind one address (an office, a NAT).
      maxFailuresPerAddress: read.integer('SIGNIN_MAX_FAILURES_PER_ADDRESS', 50, { min: 1, max: 100000 }),
      windowSeconds: read.integer('SIGNIN_WINDOW_SECONDS', 15 * 60, { min: 1, max: 24 * 3600 }),
      lockSeconds: read.integer('SIGNIN_LOCK_SECONDS', 30, { min: 1, max: 24 * 3600 }),
    },
    allowPrivateUrls: read.boolean('AGENTPLANE_ALLOW_PRIVATE_URLS', false),
    providerTimeoutMs: read.integer('PROVIDER_TIMEOUT_MS', 30_000, { min: 100, max: 10 * 60_000 }),
    configurationWaitMs: read.integer('CONFIGURATION_WAIT_MS', 5_000, { min: 0, max: 60_000 }),
    configurationResyncMs: read.integer('CONFIGURATION_RESYNC_MS', 5 * 60_000, { min: 0, max: 24 * 3600_000 }),
  };
  read.done();
  return config;
}

function readProvisioner(read: EnvReader): ControlApiConfig['provisioner'] {
  const kind = read.oneOf('PROVISIONER', ['local', 'kubernetes'], 'local');
  const runtimeUrl = read.url('RUNTIME_URL', ['http', 'https']);
  const runtimeAdminKey = read.string('RUNTIME_ADMIN_KEY');
  if (kind === 'kubernetes') {
    for (const name of ['RUNTIME_URL', 'RUNTIME_ADMIN_KEY']) {
      if (read.raw(name) !== undefined) {
        read.problem(`${name} is for PROVISIONER=local only: with PROVISIONER=kubernetes each project's runtime URL and admin key come from its Project's status and Secret; unset ${name}`);
      }
    }
    const projectNamespacePrefix = read.string('PROJECT_NAMESPACE_PREFIX', 'agentplane-');
    // The operator's own rule (operator/src/config.ts): the two must name the same namespaces.
    if (!/^[a-z0-9]([a-z0-9-]{0,20})$/.test(projectNamespacePrefix)) {
      read.problem('PROJECT_NAMESPACE_PREFIX must be at most 21 lower-case letters, digits or `-`, starting with a letter or digit (and the same as the operator\'s)');
    }
    return { kind, kubeconfig: read.string('KUBECONFIG'), projectNamespacePrefix };
  }
  if (read.raw('PROJECT_NAMESPACE_PREFIX') !== undefined) read.problem('PROJECT_NAMESPACE_PREFIX is for PROVISIONER=kubernetes only; unset it, or set PROVISIONER=kubernetes');
  if ((runtimeUrl === undefined) !== (runtimeAdminKey === undefined)) read.problem('RUNTIME_URL and RUNTIME_ADMIN_KEY go together: set both or neither');
  return { kind, runtime: runtimeUrl && runtimeAdminKey ? { url: runtimeUrl.replace(/\/$/, ''), adminKey: runtimeAdminKey } : undefined };
}
