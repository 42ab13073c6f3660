// Starts a real MinIO server for the S3 suites: loopback only, random credentials, data in a temp dir, one bucket.
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, makeTempDir, startProcess } from './process.js';

export interface MinioServer {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  bucket: string;
  region: string;
  stop(): Promise<void>;
}

/** `binary` comes from `requireBinary('minio')`, which decides whether the calling suite runs at all. */
export async function startMinio(binary: string): Promise<MinioServer> {
  const [port, consolePort] = [await freePort(), await freePort()];
  const dir = makeTempDir('minio');
  const accessKeyId = `test-${randomBytes(6).toString('hex')}`;
  const secretAccessKey = randomBytes(24).toString('hex');
  const endpoint = `http://127.0.0.1:${port}`;
  const region = 'us-east-1';
  const bucket = 'agentplane-test';

  const server = await startProcess({
    name: 'minio',
    command: binary,
    args: ['server', join(dir, 'data'), '--address', `127.0.0.1:${port}`, '--console-address', `127.0.0.1:${consolePort}`, '--quiet'],
    dir,
    env: {
      MINIO_ROOT_USER: accessKeyId,
      MINIO_ROOT_PASSWORD: secretAccessKey,
      MINIO_BROWSER: 'off',
      MINIO_UPDATE: 'off',
      MINIO_REGION: region,
    },
    // A server that takes the connection but never answers must not stall the start past its deadline.
    ready: async () => (await fetch(`${endpoint}/minio/health/live`, { signal: AbortSignal.timeout(1000) })).ok,
  }).catch((error: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });

  const client = minioClient({ endpoint, region, accessKeyId, secretAccessKey });
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (error) {
    await server.stop();
    throw error;
  } finally {
    client.destroy();
  }

  return { endpoint, accessKeyId, secretAccessKey, bucket, region, stop: server.stop };
}

/** A plain S3 client for a test MinIO, set up as NOTES.md says MinIO needs (path style, checksums when required). */
export function minioClient(server: Pick<MinioServer, 'endpoint' | 'region' | 'accessKeyId' | 'secretAccessKey'>): S3Client {
  return new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}
