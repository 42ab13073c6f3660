// The runtime's configuration, parsed from the environment once at start. README's table lists every variable.
import { resolve } from 'node:path';
import { EnvReader, type Env } from '../../lib/src/config.js';
import { parseMasterKey } from '../../lib/src/crypto/local-secrets.js';

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

export interface RuntimeConfig {
  host: string;
  port: number;
  /** The data plane's public base URL (signed blob URLs point here). */
  publicUrl: string;
  dataDir: string;
  database: { driver: 'pglite'; dataDir: string } | { driver: 'postgres'; url: string; poolSize: number };
  events: { kind: 'memory' } | { kind: 'redis'; url: string; keyPrefix: string };
  eventLogRetentionSeconds: number;
  blobs: BlobConfig;
  /** Configured admin key; when absent the runtime generates one in the data dir. */
  adminKey: string | undefined;
  /** Configured base64 master key; when absent the runtime generates one in the data dir. */
  masterKey: string | undefined;
  bodyLimitBytes: number;
  shutdownGraceSeconds: number;
  logLevel: string;
  logFormat: 'json' | 'pretty' | 'auto';
}

export function loadRuntimeConfig(env: Env = process.env): RuntimeConfig {
  const read = new EnvReader(env);
  const host = read.string('HOST', '127.0.0.1');
  const port = read.port('DATA_PORT', 8081);
  const dataDir = resolve(read.string('AGENTPLANE_DATA_DIR', './.agentplane'));
  const databaseUrl = read.url('DATABASE_URL', ['postgres', 'postgresql']);
  const redisUrl = read.url('REDIS_URL', ['redis', 'rediss']);
  const blobKind = read.oneOf('BLOB_STORE', ['fs', 's3'], 'fs');
  const adminKey = read.string('AGENTPLANE_ADMIN_KEY');
  if (adminKey !== undefined && adminKey.length < 24) {
    read.problem('AGENTPLANE_ADMIN_KEY is too short: use at least 24 characters (for example `openssl rand -hex 32`)');
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

  const config: RuntimeConfig = {
    host,
    port,
    publicUrl: (read.url('PUBLIC_URL', ['http', 'https']) ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`).replace(/\/$/, ''),
    dataDir,
    database: databaseUrl
      ? { driver: 'postgres', url: databaseUrl, poolSize: read.integer('DATABASE_POOL_SIZE', 10, { min: 1, max: 200 }) }
      : { driver: 'pglite', dataDir: resolve(dataDir, 'runtime', 'pglite') },
    events: redisUrl ? { kind: 'redis', url: redisUrl, keyPrefix: read.string('REDIS_KEY_PREFIX', 'agentplane:') } : { kind: 'memory' },
    eventLogRetentionSeconds: read.integer('EVENT_LOG_RETENTION_SECONDS', 3600, { min: 10, max: 30 * 24 * 3600 }),
    blobs,
    adminKey,
    masterKey,
    bodyLimitBytes: read.integer('REQUEST_BODY_LIMIT_BYTES', 1024 * 1024, { min: 1024, max: 100 * 1024 * 1024 }),
    shutdownGraceSeconds: read.integer('SHUTDOWN_GRACE_SECONDS', 30, { min: 0, max: 3600 }),
    logLevel: read.oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], 'info'),
    logFormat: read.oneOf('LOG_FORMAT', ['json', 'pretty', 'auto'], 'auto'),
  };
  read.done();
  return config;
}
