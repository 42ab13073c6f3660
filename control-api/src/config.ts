// The control-api's configuration, parsed from the environment once at start. README's table lists every variable.
import { resolve } from 'node:path';
import { EnvReader, readServiceBasics, type Env, type ServiceBasics } from '../../lib/src/config.js';

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
   * Where the local provisioner reaches the runtime's admin surface. Unset (and not in the all-in-one, which wires
   * its own runtime): changes are queued and delivered once a runtime is configured.
   */
  runtime: { url: string; adminKey: string } | undefined;
  /** The data-plane URL handed to customers (the all-in-one's runtime; on Kubernetes each project gets its own host). */
  dataPlaneUrl: string;
  signIn: { maxFailures: number; maxFailuresPerAddress: number; windowSeconds: number };
  /**
   * Let customer-supplied URLs (provider `base_url`) reach private and loopback addresses, over plain http too:
   * local development and tests only. Cloud metadata and link-local addresses stay refused (docs/decisions/0011).
   */
  allowPrivateUrls: boolean;
  /** How long a call to a customer's provider may wait for an answer, per request, before 504. */
  providerTimeoutMs: number;
}

export const minOwnerPasswordLength = 12;

export function loadControlApiConfig(env: Env = process.env): ControlApiConfig {
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
  const runtimeUrl = read.url('RUNTIME_URL', ['http', 'https']);
  const runtimeAdminKey = read.string('RUNTIME_ADMIN_KEY');
  if ((runtimeUrl === undefined) !== (runtimeAdminKey === undefined)) read.problem('RUNTIME_URL and RUNTIME_ADMIN_KEY go together: set both or neither');
  const config: ControlApiConfig = {
    ...basics,
    database: databaseUrl
      ? { driver: 'postgres', url: databaseUrl, poolSize: read.integer('CONTROL_DATABASE_POOL_SIZE', 10, { min: 1, max: 200 }) }
      : { driver: 'pglite', dataDir: resolve(basics.dataDir, 'control', 'pglite') },
    events: redisUrl ? { kind: 'redis', url: redisUrl, keyPrefix: read.string('REDIS_KEY_PREFIX', 'agentplane:') + 'control:' } : { kind: 'memory' },
    owner: { email: ownerEmail, password: ownerPassword },
    masterKey: read.string('AGENTPLANE_MASTER_KEY'),
    runtime: runtimeUrl && runtimeAdminKey ? { url: runtimeUrl.replace(/\/$/, ''), adminKey: runtimeAdminKey } : undefined,
    dataPlaneUrl: (read.url('DATA_PLANE_URL', ['http', 'https']) ?? 'http://127.0.0.1:8081').replace(/\/$/, ''),
    sessionTtlSeconds: read.integer('SESSION_TTL_SECONDS', 7 * 24 * 3600, { min: 60, max: 90 * 24 * 3600 }),
    signIn: {
      maxFailures: read.integer('SIGNIN_MAX_FAILURES', 10, { min: 1, max: 1000 }),
      // Higher: many people may sign in from behind one address (an office, a NAT).
      maxFailuresPerAddress: read.integer('SIGNIN_MAX_FAILURES_PER_ADDRESS', 50, { min: 1, max: 100000 }),
      windowSeconds: read.integer('SIGNIN_WINDOW_SECONDS', 15 * 60, { min: 1, max: 24 * 3600 }),
    },
    allowPrivateUrls: read.boolean('AGENTPLANE_ALLOW_PRIVATE_URLS', false),
    providerTimeoutMs: read.integer('PROVIDER_TIMEOUT_MS', 30_000, { min: 100, max: 10 * 60_000 }),
  };
  read.done();
  return config;
}
