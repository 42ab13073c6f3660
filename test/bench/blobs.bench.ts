// Blob store: put and get of 4 KiB and 1 MiB objects through `createBlobStore`, against the raw calls doing the
// same: fs.promises.writeFile/readFile for the filesystem store, @aws-sdk/client-s3 Put/GetObject for MinIO.
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { createBlobStore, type BlobStore } from '@agentplane/runtime/blob';
import { minioClient, startMinio } from '../harness/minio.js';
import { makeTempDir, requireBinary } from '../harness/process.js';
import {
  Teardown,
  finishTable,
  runCases,
  timeSequential,
  type BenchReport,
  type Case,
  type Subject,
  type Table,
  type Timing,
} from './measure.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SIZES = [
  { label: '4 KiB', bytes: 4 * KiB, loop: { warmup: 20, ops: 400 } },
  { label: '1 MiB', bytes: MiB, loop: { warmup: 5, ops: 80 } },
];

interface BlobTarget extends Subject {
  put(key: string, body: Buffer): Promise<unknown>;
  /** Reads the whole object; returns its length. Absent on a put-only reference row. */
  get?(key: string): Promise<number>;
}

async function drain(body: AsyncIterable<Uint8Array>): Promise<number> {
  let length = 0;
  for await (const chunk of body) length += chunk.length;
  return length;
}

function ours(store: BlobStore): BlobTarget {
  return {
    impl: `ours (${store.kind} store)`,
    put: (key, body) => store.put(key, body, { contentType: 'application/octet-stream' }),
    get: async (key) => drain((await store.get(key)).body),
  };
}

function rawFs(root: string, flush: boolean): BlobTarget {
  mkdirSync(root, { recursive: true });
  // `bench/4KiB/17` becomes the flat file `bench-4KiB-17`: the raw call makes no directories of its own.
  const path = (key: string) => join(root, key.replaceAll('/', '-'));
  return {
    impl: flush ? 'raw writeFile+flush' : 'raw writeFile/readFile',
    baseline: !flush,
    put: (key, body) => writeFile(path(key), body, { flush }),
    // The flushed copy is a reference for puts only; reading it back would repeat the baseline's get.
    ...(flush ? {} : { get: async (key: string) => (await readFile(path(key))).length }),
  };
}

function rawS3(client: S3Client, bucket: string, prefix: string): BlobTarget {
  return {
    impl: 'raw S3Client',
    baseline: true,
    put: (key, body) =>
      client.send(
        new PutObjectCommand({ Bucket: bucket, Key: prefix + key, Body: body, ContentType: 'application/octet-stream' }),
      ),
    get: async (key) => {
      const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: prefix + key }));
      return drain(response.Body as Readable);
    },
  };
}

async function measureTargets(title: string, targets: BlobTarget[], note?: string): Promise<Table> {
  const cases: Case<BlobTarget>[] = [];
  for (const size of SIZES) {
    const body = randomBytes(size.bytes);
    // Every put writes a new key; gets cycle over the keys the same target wrote.
    const written = new Map<BlobTarget, number>(targets.map((target) => [target, 0]));
    const key = (n: number) => `bench/${size.label.replace(' ', '')}/${n}`;
    const mibPerSec = (timing: Timing) => ({ mibPerSec: (timing.opsPerSec * size.bytes) / MiB });
    cases.push(
      {
        name: `put ${size.label}`,
        loop: size.loop,
        time: (target, loop) =>
          timeSequential(() => {
            const n = written.get(target)!;
            written.set(target, n + 1);
            return target.put(key(n), body);
          }, loop),
        extra: mibPerSec,
      },
      {
        name: `get ${size.label}`,
        loop: size.loop,
        appliesTo: (target) => target.get !== undefined,
        time: (target, loop) => {
          let n = 0;
          return timeSequential(() => target.get!(key(n++ % written.get(target)!)), loop);
        },
        extra: mibPerSec,
      },
    );
  }
  return finishTable({
    title,
    columns: [
      { key: 'ops', label: 'ops' },
      { key: 'mibPerSec', label: 'MiB/s', ratio: true },
      { key: 'p50Ms', label: 'p50 ms', ratio: true },
      { key: 'p99Ms', label: 'p99 ms' },
    ],
    rows: await runCases(cases, targets),
    ...(note === undefined ? {} : { note }),
  });
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'blobs', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    const dir = makeTempDir('bench-blobs');
    teardown.add(() => rmSync(dir, { recursive: true, force: true }));
    const fsStore = await createBlobStore({
      kind: 'fs',
      root: join(dir, 'ours'),
      publicBaseUrl: 'http://127.0.0.1:8081',
      signingSecret: randomBytes(32).toString('hex'),
    });
    report.tables.push(
      await measureTargets(
        'blobs: filesystem in the temp dir (embedded default)',
        [rawFs(join(dir, 'raw'), false), rawFs(join(dir, 'raw-flush'), true), ours(fsStore)],
        'our put stages a temp file flushed to disk, hashes it, writes a metadata file and renames both into place.',
      ),
    );
    await teardown.run();

    const binary = requireBinary('minio');
    if (!binary) {
      report.skipped.push('MinIO: minio binary not found');
      return report;
    }
    const minio = await startMinio(binary);
    teardown.add(() => minio.stop());
    const client = minioClient(minio);
    teardown.add(() => client.destroy());
    const s3Store = await createBlobStore({
      kind: 's3',
      endpoint: minio.endpoint,
      bucket: minio.bucket,
      region: minio.region,
      accessKeyId: minio.accessKeyId,
      secretAccessKey: minio.secretAccessKey,
      forcePathStyle: true,
      prefix: 'bench-ours',
    });
    await s3Store.ping();
    report.tables.push(
      await measureTargets('blobs: MinIO over loopback (scale)', [rawS3(client, minio.bucket, 'bench-raw/'), ours(s3Store)]),
    );
  } finally {
    await teardown.run();
  }
  return report;
}
