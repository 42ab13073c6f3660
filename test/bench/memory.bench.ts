// Process memory: RSS and heap of a fresh process after it opens an adapter and makes one write and one read
// through it, ours against the raw client. Each probe runs in its own child process (memory-probe.ts), so no
// adapter is charged for what another loaded, and the run's order does not matter.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startMinio, type MinioServer } from '../harness/minio.js';
import { postgresBinaries, startPostgres, type PostgresServer } from '../harness/postgres.js';
import { makeTempDir, requireBinary, typeScriptNodeArgs } from '../harness/process.js';
import { redisServerBinary, startRedis, type RedisServer } from '../harness/redis.js';
import type { ProbeResult, ProbeSpec, ProbeSubject } from './memory-probe.js';
import { Teardown, finishTable, type BenchReport, type Row } from './measure.js';

const PROBE = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const MiB = 1024 * 1024;
const HELD_FRAMES = 2_000;

function runProbe(spec: ProbeSpec): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', ...typeScriptNodeArgs, PROBE, JSON.stringify(spec)], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const last = stdout.trim().split('\n').pop() ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as ProbeResult);
      else reject(new Error(`memory probe ${spec.subject} exited ${code}:\n${stderr.slice(-2000)}`));
    });
  });
}

function memoryRow(caseName: string, impl: string, baseline: boolean, { before, after }: ProbeResult): Row {
  return {
    case: caseName,
    impl,
    baseline,
    figures: {
      rssMiB: after.rss / MiB,
      rssDeltaMiB: (after.rss - before.rss) / MiB,
      heapMiB: after.heapUsed / MiB,
      heapDeltaMiB: (after.heapUsed - before.heapUsed) / MiB,
      externalMiB: after.external / MiB,
    },
  };
}

interface Servers {
  postgres?: PostgresServer;
  redis?: RedisServer;
  minio?: MinioServer;
}

/** Starts the servers whose binaries are present, in parallel; each is stopped by `teardown`. */
async function startServers(teardown: Teardown, skipped: string[]): Promise<Servers> {
  const servers: Servers = {};
  const redisBinary = redisServerBinary();
  const minioBinary = requireBinary('minio');
  const havePostgres = postgresBinaries() !== null;
  await Promise.all([
    havePostgres
      ? startPostgres().then((server) => {
          servers.postgres = server;
          teardown.add(() => server.stop());
        })
      : skipped.push('PostgreSQL: postgres/initdb binaries not found'),
    redisBinary
      ? startRedis(redisBinary).then((server) => {
          servers.redis = server;
          teardown.add(() => server.stop());
        })
      : skipped.push('Redis: redis-server binary not found'),
    minioBinary
      ? startMinio(minioBinary).then((server) => {
          servers.minio = server;
          teardown.add(() => server.stop());
        })
      : skipped.push('MinIO: minio binary not found'),
  ]);
  return servers;
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'memory', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    const dir = makeTempDir('bench-memory');
    teardown.add(() => rmSync(dir, { recursive: true, force: true }));
    const servers = await startServers(teardown, report.skipped);

    const plans: Array<{ case: string; raw: [ProbeSubject, string]; ours: ProbeSubject; spec?: Partial<ProbeSpec> }> = [
      { case: 'relational: PGlite', raw: ['pglite:raw', 'raw PGlite'], ours: 'pglite:ours' },
      { case: 'events: in-process', raw: ['memory-bus:raw', 'raw Map+JSON'], ours: 'memory-bus:ours' },
      {
        case: `events: in-process, ${HELD_FRAMES} frames held`,
        raw: ['memory-bus:raw', 'raw Map+JSON'],
        ours: 'memory-bus:ours',
        spec: { frames: HELD_FRAMES },
      },
      { case: 'blobs: filesystem', raw: ['fs-store:raw', 'raw fs.promises'], ours: 'fs-store:ours' },
    ];
    if (servers.postgres) {
      plans.push({ case: 'relational: PostgreSQL', raw: ['postgres:raw', 'raw pg.Pool'], ours: 'postgres:ours' });
    }
    if (servers.redis) {
      const redisUrl = servers.redis.url;
      plans.push(
        { case: 'events: Redis', raw: ['redis-bus:raw', 'raw node-redis'], ours: 'redis-bus:ours', spec: { redisUrl } },
        {
          case: `events: Redis, ${HELD_FRAMES} frames appended`,
          raw: ['redis-bus:raw', 'raw node-redis'],
          ours: 'redis-bus:ours',
          spec: { redisUrl, frames: HELD_FRAMES },
        },
      );
    }
    if (servers.minio) {
      const { endpoint, bucket, region, accessKeyId, secretAccessKey } = servers.minio;
      plans.push({
        case: 'blobs: MinIO',
        raw: ['s3-store:raw', 'raw S3Client'],
        ours: 's3-store:ours',
        spec: { s3: { endpoint, bucket, region, accessKeyId, secretAccessKey } },
      });
    }

    const rows: Row[] = [];
    let n = 0;
    for (const plan of plans) {
      // Every probe starts empty: its own dir, and its own database, since each creates the same table.
      for (const [subject, impl, baseline] of [[plan.raw[0], plan.raw[1], true], [plan.ours, 'ours', false]] as const) {
        const spec: ProbeSpec = { ...plan.spec, subject, dir: join(dir, `probe-${++n}`) };
        if (servers.postgres && subject.startsWith('postgres')) spec.postgresUrl = await servers.postgres.createDatabase();
        rows.push(memoryRow(plan.case, impl, baseline, await runProbe(spec)));
      }
    }
    report.tables.push(
      finishTable({
        title: 'process memory after opening the adapter and one write + one read (fresh process each)',
        columns: [
          { key: 'rssMiB', label: 'RSS MiB', ratio: true },
          { key: 'rssDeltaMiB', label: 'ΔRSS MiB' },
          { key: 'heapMiB', label: 'heap MiB', ratio: true },
          { key: 'heapDeltaMiB', label: 'Δheap MiB' },
          { key: 'externalMiB', label: 'external MiB' },
        ],
        rows,
        note: 'Δ = after opening minus the same process just before (node and tsx loaded); module loading counts.',
      }),
    );
  } finally {
    await teardown.run();
  }
  return report;
}
