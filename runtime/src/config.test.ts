import { describe, expect, it } from 'vitest';
import { ConfigError } from '@agentplane/lib/config';
import { loadRuntimeConfig } from './config.js';

describe('runtime configuration', () => {
  it('runs on embedded defaults with nothing set', () => {
    const config = loadRuntimeConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8081,
      publicUrl: 'http://127.0.0.1:8081',
      events: { kind: 'memory' },
      blobs: { kind: 'fs' },
      adminKey: undefined,
      bodyLimitBytes: 1048576,
    });
    expect(config.database.driver).toBe('pglite');
    expect(config.dataDir).toMatch(/\.agentplane$/);
  });

  it('switches each port to its scale adapter from its variable', () => {
    const config = loadRuntimeConfig({
      DATABASE_URL: 'postgres://u:p@db:5432/agentplane',
      AGENTPLANE_ADMIN_KEY: 'a-shared-admin-key-of-enough-length',
      AGENTPLANE_MASTER_KEY: Buffer.alloc(32, 7).toString('base64'),
      REDIS_URL: 'redis://redis:6379',
      BLOB_STORE: 's3',
      S3_BUCKET: 'blobs',
      S3_ENDPOINT: 'http://minio:9000',
      S3_FORCE_PATH_STYLE: 'true',
    });
    expect(config.database).toEqual({ driver: 'postgres', url: 'postgres://u:p@db:5432/agentplane', poolSize: 10 });
    expect(config.events).toEqual({ kind: 'redis', url: 'redis://redis:6379', keyPrefix: 'agentplane:' });
    expect(config.blobs).toMatchObject({ kind: 's3', bucket: 'blobs', endpoint: 'http://minio:9000', forcePathStyle: true, region: 'us-east-1' });
  });

  it('puts sandboxes in Pods of a namespace, which it must be told along with a default image', () => {
    expect(loadRuntimeConfig({}).computerKubernetes).toBeUndefined();
    const config = loadRuntimeConfig({ COMPUTER_HOST: 'kubernetes', KUBERNETES_NAMESPACE: 'agentplane-acme', COMPUTER_IMAGE: 'registry.example.com/tools:1', COMPUTER_NETWORK_POLICY: 'operator' });
    expect(config.computerHost).toBe('kubernetes');
    expect(config.computerKubernetes).toEqual({
      namespace: 'agentplane-acme',
      image: 'registry.example.com/tools:1',
      imagePullPolicy: 'IfNotPresent',
      storageClass: undefined,
      networkPolicy: 'operator',
      kubeconfig: undefined,
    });
    expect(() => loadRuntimeConfig({ COMPUTER_HOST: 'kubernetes' })).toThrow(/KUBERNETES_NAMESPACE is required when COMPUTER_HOST=kubernetes[\s\S]*COMPUTER_IMAGE is required/);
    expect(() => loadRuntimeConfig({ COMPUTER_HOST: 'kubernetes', KUBERNETES_NAMESPACE: 'a', COMPUTER_IMAGE: 'b', COMPUTER_NETWORK_POLICY: 'nobody' })).toThrow(/COMPUTER_NETWORK_POLICY/);
  });

  it('reports every bad variable at once, naming what is allowed, and never echoes a password', () => {
    let error: unknown;
    try {
      loadRuntimeConfig({
        DATA_PORT: 'eighty',
        DATABASE_URL: 'postgres://root:hunter2@db/x',
        REDIS_URL: 'mysql://root:hunter2@db/x',
        BLOB_STORE: 's3',
        S3_FORCE_PATH_STYLE: 'maybe',
        AGENTPLANE_ADMIN_KEY: 'short',
        AGENTPLANE_MASTER_KEY: 'bm90IDMyIGJ5dGVz',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual([
      'DATA_PORT="eighty" is not valid: expected an integer from 0 to 65535',
      'REDIS_URL="mysql://root:***@db/x" is not valid: expected a URL with scheme redis:// or rediss://',
      'AGENTPLANE_ADMIN_KEY is too short: use at least 24 characters (for example `openssl rand -hex 32`)',
      'AGENTPLANE_MASTER_KEY is not valid: expected 32 bytes of base64, got 12 bytes (for example `openssl rand -base64 32`)',
      'S3_BUCKET is required when BLOB_STORE=s3',
      'S3_FORCE_PATH_STYLE="maybe" is not valid: expected one of true, false, 1, 0, yes, no, on, off',
    ]);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('requires shared admin and master keys when replicas share a database, but not to migrate it', () => {
    expect(() => loadRuntimeConfig({ DATABASE_URL: 'postgres://db/agentplane' })).toThrow(
      /AGENTPLANE_ADMIN_KEY is required when DATABASE_URL is set[\s\S]*AGENTPLANE_MASTER_KEY is required when DATABASE_URL is set/,
    );
    expect(loadRuntimeConfig({ DATABASE_URL: 'postgres://db/agentplane' }, { serving: false }).database.driver).toBe('postgres');
  });
});
