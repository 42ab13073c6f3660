// Start-up: how long `npm start`'s process takes until both planes answer GET /health, on a fresh data dir (first
// start) and on the same dir again (restart), and what it keeps resident once idle (VmRSS) and at most (VmHWM), run
// compiled (dist, what `npm start` runs) and from source (tsx, as the tests run it; its compile cache is cold on the
// first start, as on a fresh clone, and warm on the restart). The baseline is a bare process that only opens PGlite
// with pgvector: the floor of the embedded default. Then the runtime alone on PostgreSQL, against a bare process
// holding a pg pool. Every start is a child process of its own; rounds alternate the order of the subjects.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { postgresBinaries, startPostgres } from '../harness/postgres.js';
import { freePort, makeTempDir, typeScriptNodeArgs } from '../harness/process.js';
import { Teardown, finishTable, percentile, type BenchReport, type Row, type Table } from './measure.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const MiB = 1024;
/** Starts per subject and case; each figure is the median. */
const ROUNDS = Number(process.env.STARTUP_ROUNDS ?? 3);
/** How long a started process is left alone before its memory is read. */
const IDLE_MS = 2_000;
const POLL_MS = 20;
const READY_TIMEOUT_MS = 120_000;

/** What a subject's process needs from one start: its data dir, ports and, for tsx, its compile cache. */
interface Place {
  dataDir: string;
  tmpDir: string;
  controlPort: number;
  dataPort: number;
  databaseUrl?: string;
}

interface Subject {
  impl: string;
  baseline?: boolean;
  /** What is spawned with `args`: this node unless said (`npm start` runs the image's entrypoint). */
  program?: string;
  args(place: Place): string[];
  env?(place: Place): Record<string, string>;
  /** Resolves once the process serves; `child` printed `ready` for the bare baselines. */
  ready(place: Place, child: Started): Promise<boolean>;
}

interface Started {
  child: ChildProcess;
  output: string;
}

interface Sample {
  readyMs: number;
  rssKiB: number;
  peakKiB: number;
  load: number;
}

const healthy = async (port: number) => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200;
const bothPlanes = async (place: Place) => (await healthy(place.dataPort)) && (await healthy(place.controlPort));

/** A bare node process running `code` (an ES module) that prints `ready` when done and then idles until killed. */
const inlineModule = (code: string) => ['--input-type=module', '-e', `${code}\nconsole.log('ready');\nsetInterval(() => {}, 1 << 30);`];

const pgliteFloor: Subject = {
  impl: 'PGlite+pgvector alone',
  baseline: true,
  args: () =>
    inlineModule(`
      import { PGlite } from '@electric-sql/pglite';
      import { vector } from '@electric-sql/pglite-pgvector';
      const db = await PGlite.create({ dataDir: process.env.AGENTPLANE_DATA_DIR, extensions: { vector } });
      await db.exec('create extension if not exists vector; select 1');`),
  ready: async (_place, started) => started.output.includes('ready'),
};

const allInOne = (impl: string, args: string[]): Subject => ({ impl, args: () => args, ready: bothPlanes });

// As `npm start` runs it: through the entrypoint, which gives it the runtime's V8 flags and jemalloc where present.
const compiledAllInOne: Subject = { ...allInOne('all-in-one, compiled (npm start)', [join(REPO, 'hack', 'entrypoint.sh'), 'all-in-one']), program: 'sh' };
const sourceAllInOne = allInOne('all-in-one, source (tsx)', [...typeScriptNodeArgs, join(REPO, 'all-in-one', 'src', 'main.ts')]);

const pgPoolFloor: Subject = {
  impl: 'pg pool alone',
  baseline: true,
  env: (place) => ({ DATABASE_URL: place.databaseUrl! }),
  args: () =>
    inlineModule(`
      import pg from 'pg';
      const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
      await pool.query('select 1');`),
  ready: async (_place, started) => started.output.includes('ready'),
};

const runtimeOnPostgres = (impl: string, args: string[]): Subject => ({
  impl,
  args: () => args,
  env: (place) => ({
    DATABASE_URL: place.databaseUrl!,
    // Replicas sharing a database must be given both keys; any will do here.
    AGENTPLANE_ADMIN_KEY: `ak_${randomBytes(24).toString('base64url')}`,
    AGENTPLANE_MASTER_KEY: randomBytes(32).toString('base64'),
  }),
  ready: (place) => healthy(place.dataPort),
});

const compiledRuntime = runtimeOnPostgres('runtime, compiled', [join(REPO, 'runtime', 'dist', 'main.js')]);
const sourceRuntime = runtimeOnPostgres('runtime, source (tsx)', [...typeScriptNodeArgs, join(REPO, 'runtime', 'src', 'main.ts')]);

function status(pid: number): { rssKiB: number; peakKiB: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { rssKiB: field('VmRSS'), peakKiB: field('VmHWM') };
}

/** Starts the subject, times it until ready, lets it idle, reads its memory and stops it. */
async function measureStart(subject: Subject, place: Place): Promise<Sample> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    // tsx keeps its compile cache under the temp dir: one per subject, cold on its first start.
    TMPDIR: place.tmpDir,
    LOG_LEVEL: 'warn',
    AGENTPLANE_DATA_DIR: place.dataDir,
    CONTROL_PORT: String(place.controlPort),
    DATA_PORT: String(place.dataPort),
    ...subject.env?.(place),
  };
  const started0 = performance.now();
  const child = spawn(subject.program ?? process.execPath, subject.args(place), { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const started: Started = { child, output: '' };
  const keep = (chunk: Buffer) => (started.output = (started.output + chunk.toString()).slice(-8000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${subject.impl} exited before it was ready:\n${started.output}`);
      if (await subject.ready(place, started)) break;
      if (performance.now() - started0 > READY_TIMEOUT_MS) throw new Error(`${subject.impl} was not ready in ${READY_TIMEOUT_MS} ms:\n${started.output}`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    const readyMs = performance.now() - started0;
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    return { readyMs, ...status(child.pid!), load: loadavg()[0]! };
  } finally {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

function median(values: number[]): number {
  return percentile(Float64Array.from(values).sort(), 0.5);
}

function startRow(caseName: string, subject: Subject, samples: Sample[]): Row {
  return {
    case: caseName,
    impl: subject.impl,
    baseline: subject.baseline ?? false,
    figures: {
      readyS: median(samples.map((s) => s.readyMs)) / 1000,
      rssMiB: median(samples.map((s) => s.rssKiB)) / MiB,
      peakMiB: median(samples.map((s) => s.peakKiB)) / MiB,
      load: median(samples.map((s) => s.load)),
    },
  };
}

/** Each figure beside the baseline's: ratio, and for idle memory the MiB above it too (the target is in MiB). */
function startTable(title: string, rows: Row[], note: string): Table {
  for (const row of rows) {
    const base = rows.find((candidate) => candidate.case === row.case && candidate.baseline);
    if (base && row !== base) row.figures.overBaseMiB = row.figures.rssMiB! - base.figures.rssMiB!;
  }
  return finishTable({
    title,
    columns: [
      { key: 'readyS', label: 'ready s', ratio: true },
      { key: 'rssMiB', label: 'idle RSS MiB', ratio: true },
      { key: 'overBaseMiB', label: 'RSS over base MiB' },
      { key: 'peakMiB', label: 'peak RSS MiB', ratio: true },
      { key: 'load', label: 'load avg' },
    ],
    rows,
    note,
  });
}

/**
 * Per round, each subject starts on a fresh place and then again on the same one; the subjects' order alternates
 * between rounds, so drift on a shared machine favours none. Returns the rows of both cases.
 */
async function measureSubjects(subjects: Subject[], newPlace: () => Promise<Place>, cases: [string, string]): Promise<Row[]> {
  const samples = new Map<Subject, { first: Sample[]; again: Sample[] }>(subjects.map((s) => [s, { first: [], again: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const subject of round % 2 === 0 ? subjects : [...subjects].reverse()) {
      const place = await newPlace();
      try {
        samples.get(subject)!.first.push(await measureStart(subject, place));
        samples.get(subject)!.again.push(await measureStart(subject, place));
      } finally {
        rmSync(place.dataDir, { recursive: true, force: true });
        rmSync(place.tmpDir, { recursive: true, force: true });
      }
    }
  }
  return [
    ...subjects.map((s) => startRow(cases[0], s, samples.get(s)!.first)),
    ...subjects.map((s) => startRow(cases[1], s, samples.get(s)!.again)),
  ];
}

/** `npm start` builds first; what that costs when nothing changed (tsc's up-to-date check, the template's). */
async function timeBuildCheck(): Promise<number[]> {
  const runs: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = performance.now();
    await runBuild();
    runs.push(performance.now() - t0);
  }
  return runs;
}

function runBuild(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', 'build'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`npm run build exited ${code}:\n${output}`))));
  });
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'startup', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    // The compiled rows run what the build made: build first (a no-op when dist is up to date).
    await runBuild();
    const buildCheck = await timeBuildCheck();

    const root = makeTempDir('bench-startup');
    teardown.add(() => rmSync(root, { recursive: true, force: true }));
    let places = 0;
    const newPlace = async (): Promise<Place> => ({
      dataDir: join(root, `data-${++places}`),
      tmpDir: makeTempDir('bench-startup-tmp'),
      controlPort: await freePort(),
      dataPort: await freePort(),
    });

    const embedded = await measureSubjects([pgliteFloor, compiledAllInOne, sourceAllInOne], newPlace, [
      'first start (fresh data dir)',
      'restart (same data dir)',
    ]);
    report.tables.push(
      startTable(
        'npm start (all-in-one on embedded defaults): spawn until both planes answer /health, memory 2 s later',
        embedded,
        `median of ${ROUNDS}; base = a process that only opens PGlite with pgvector on the same kind of dir (initdb on a fresh one). ` +
          `npm start's build check before it, when nothing changed: ${(median(buildCheck) / 1000).toFixed(2)} s.`,
      ),
    );

    if (postgresBinaries() === null) {
      report.skipped.push('runtime on PostgreSQL: postgres/initdb binaries not found');
      return report;
    }
    const postgres = await startPostgres();
    teardown.add(() => postgres.stop());
    const onPostgres = await measureSubjects(
      [pgPoolFloor, compiledRuntime, sourceRuntime],
      async () => ({ ...(await newPlace()), databaseUrl: await postgres.createDatabase() }),
      ['runtime on PostgreSQL: first start (empty database)', 'runtime on PostgreSQL: restart (migrated)'],
    );
    report.tables.push(
      startTable(
        'runtime alone on PostgreSQL: spawn until /health answers, memory 2 s later',
        onPostgres,
        `median of ${ROUNDS}; base = a process that only opens a pg pool and runs one query.`,
      ),
    );
  } finally {
    await teardown.run();
  }
  return report;
}
