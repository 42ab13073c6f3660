// Starts a runtime in this process on a free loopback port, in one of two setups: `embedded` (PGlite, local
// files, in-process events: what `npm start` uses) or `scale` (real PostgreSQL, MinIO and Redis started here).
// `configuredTenant` plays the control plane's part for one tenant: its key ring, its pushed configuration, mints.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { rmSync } from 'node:fs';
import { pino } from 'pino';
import { silentLogger, type Logger } from '@agentplane/lib/logging';
import { issuerFor, type AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { createKeyRing, trustedKeysOf, type KeyRing, type SigningKey } from '@agentplane/lib/tokens/keys';
import { signAccessToken } from '@agentplane/lib/tokens/mint';
import { createRuntime, type Runtime } from '@agentplane/runtime/app';
import { loadRuntimeConfig, type RuntimeConfig } from '@agentplane/runtime/config';
import { startMinio, type MinioServer } from './minio.js';
import { postgresBinaries, startPostgres, type PostgresServer } from './postgres.js';
import { listenOnAnyPort, makeTempDir, requireBinary } from './process.js';
import { redisServerBinary, startRedis, type RedisServer } from './redis.js';

export type Setup = 'embedded' | 'scale';

/** The setups whose binaries are present (scale needs PostgreSQL, Redis and MinIO). */
export function availableSetups(): Setup[] {
  const scale = postgresBinaries() !== null && redisServerBinary() !== null && requireBinary('minio') !== null;
  return scale ? ['embedded', 'scale'] : ['embedded'];
}

/** The outside services a scale setup uses; started once per suite and shared by its runtimes. */
export class ScaleServices {
  private constructor(
    readonly postgres: PostgresServer,
    readonly redis: RedisServer,
    readonly minio: MinioServer,
  ) {}

  static async start(): Promise<ScaleServices> {
    const started = await Promise.allSettled([startPostgres(), startRedis(redisServerBinary()!), startMinio(requireBinary('minio')!)]);
    const [postgres, redis, minio] = started;
    if (postgres.status === 'fulfilled' && redis.status === 'fulfilled' && minio.status === 'fulfilled') {
      return new ScaleServices(postgres.value, redis.value, minio.value);
    }
    // Leave nothing running when one of them fails to start.
    await Promise.all(started.map((s) => (s.status === 'fulfilled' ? s.value.stop() : undefined)));
    throw started.map((s) => (s.status === 'rejected' ? s.reason : null)).find(Boolean);
  }

  async env(): Promise<Record<string, string>> {
    return {
      DATABASE_URL: await this.postgres.createDatabase(),
      AGENTPLANE_MASTER_KEY: randomBytes(32).toString('base64'),
      REDIS_URL: this.redis.url,
      REDIS_KEY_PREFIX: `test-${Math.random().toString(36).slice(2)}:`,
      BLOB_STORE: 's3',
      S3_ENDPOINT: this.minio.endpoint,
      S3_BUCKET: this.minio.bucket,
      S3_REGION: this.minio.region,
      S3_ACCESS_KEY_ID: this.minio.accessKeyId,
      S3_SECRET_ACCESS_KEY: this.minio.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
      S3_KEY_PREFIX: `test-${Math.random().toString(36).slice(2)}`,
    };
  }

  async stop(): Promise<void> {
    await Promise.all([this.postgres.stop(), this.redis.stop(), this.minio.stop()]);
  }
}

export interface TestRuntime {
  url: string;
  adminKey: string;
  runtime: Runtime;
  config: RuntimeConfig;
  server: Server;
  /** fetch against this runtime with the admin key set (pass `adminKey: null` to omit it). */
  admin(path: string, init?: RequestInit & { adminKey?: string | null }): Promise<Response>;
  /** fetch against this runtime as an end-user: `Authorization: Bearer <token>`. */
  endUser(path: string, token: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

export async function startTestRuntime(options: { env?: Record<string, string>; adminKey?: string; logger?: Logger } = {}): Promise<TestRuntime> {
  const dataDir = makeTempDir('runtime');
  // Bound first: the configuration names the port (signed URLs point at it), and no other process can take it since.
  const server = createServer();
  const port = await listenOnAnyPort(server);
  const adminKey = options.adminKey ?? `test-admin-key-${Math.random().toString(36).slice(2)}-padding`;
  let config: RuntimeConfig;
  let runtime: Runtime;
  try {
    config = loadRuntimeConfig({
      AGENTPLANE_DATA_DIR: dataDir,
      DATA_PORT: String(port),
      AGENTPLANE_ADMIN_KEY: adminKey,
      REQUEST_BODY_LIMIT_BYTES: String(64 * 1024),
      ...options.env,
    });
    // TEST_RUNTIME_LOGS=1 shows the runtime's warnings and errors (a 500's cause) on stdout.
    runtime = await createRuntime({ config, logger: options.logger ?? (process.env.TEST_RUNTIME_LOGS ? pino({ level: 'warn' }) : silentLogger()) });
  } catch (error) {
    server.close();
    throw error;
  }
  server.on('request', runtime.app);
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    adminKey,
    runtime,
    config,
    server,
    admin(path, init = {}) {
      const headers = new Headers(init.headers);
      const key = init.adminKey === undefined ? adminKey : init.adminKey;
      if (key !== null) headers.set('x-admin-key', key);
      if (typeof init.body === 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${url}${path}`, { ...init, headers });
    },
    endUser(path, token, init = {}) {
      const headers = new Headers(init.headers);
      headers.set('authorization', `Bearer ${token}`);
      // Text is sent as JSON unless said otherwise; a form carries its own type (with its boundary).
      if (typeof init.body === 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${url}${path}`, { ...init, headers });
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runtime.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The wire form of `PUT /tenants/{id}/configuration` (runtime/src/tenants/schemas.ts `TenantConfiguration`). */
export interface ConfigurationBody {
  version: number;
  issuer: string;
  trusted_keys: { keys: unknown[] };
  ceiling: { capabilities: string[]; [limit: string]: unknown };
  system_prompt?: string | null;
  origins?: string[];
  [section: string]: unknown;
}

export interface TestTenant {
  tenantId: string;
  projectId: string;
  issuer: string;
  ring: KeyRing;
  /** The configuration last pushed successfully. */
  configuration: ConfigurationBody;
  /** Pushes the next version: the last configuration with these members replaced. Answers the raw response. */
  reconfigure(change: Partial<ConfigurationBody>): Promise<Response>;
  /** An end-user token of this tenant, signed with its active key unless `key` says otherwise. */
  mint(grant?: Partial<AccessTokenGrant>, options?: { key?: SigningKey; lifetimeSeconds?: number; now?: Date; issuer?: string }): Promise<string>;
}

/**
 * Registers a tenant and pushes it a configuration as the control plane would: a fresh key ring, issuer
 * `agentplane:project:<project id>`, and the given ceiling (default: `chat` and `documents:read`).
 */
export async function configuredTenant(rt: Pick<TestRuntime, 'admin'>, options: { ceiling?: ConfigurationBody['ceiling']; ring?: KeyRing } = {}): Promise<TestTenant> {
  const created = await rt.admin('/tenants', { method: 'POST', body: JSON.stringify({ name: 'configured' }) });
  if (created.status !== 201) throw new Error(`creating a tenant answered ${created.status}: ${await created.text()}`);
  const { tenant_id: tenantId } = (await created.json()) as { tenant_id: string };
  const projectId = randomUUID();
  const ring = options.ring ?? (await createKeyRing());
  const tenant: TestTenant = {
    tenantId,
    projectId,
    issuer: issuerFor(projectId),
    ring,
    configuration: {
      version: 0,
      issuer: issuerFor(projectId),
      trusted_keys: trustedKeysOf(ring),
      ceiling: options.ceiling ?? { capabilities: ['chat', 'documents:read'] },
    },
    async reconfigure(change) {
      const next = { ...tenant.configuration, version: tenant.configuration.version + 1, ...change };
      const res = await rt.admin(`/tenants/${tenantId}/configuration`, { method: 'PUT', body: JSON.stringify(next) });
      if (res.status === 200) tenant.configuration = next;
      return res;
    },
    async mint(grant = {}, mintOptions = {}) {
      const signed = await signAccessToken(
        { sub: 'acme:alice', scope: 'acme', tenant_id: tenantId, capabilities: tenant.configuration.ceiling.capabilities, roles: [], groups: [], ...grant },
        mintOptions.key ?? ring.active,
        { issuer: mintOptions.issuer ?? tenant.issuer, lifetimeSeconds: mintOptions.lifetimeSeconds ?? 3600, ...(mintOptions.now ? { now: mintOptions.now } : {}) },
      );
      return signed.token;
    },
  };
  const pushed = await tenant.reconfigure({});
  if (pushed.status !== 200) throw new Error(`configuring tenant ${tenantId} answered ${pushed.status}: ${await pushed.text()}`);
  return tenant;
}
