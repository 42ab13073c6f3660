// The benchmark entry (`npm run bench`): runs each port's bench in turn, prints a table per measurement with
// figures and ratios to the baseline measured in the same run, and writes every figure as JSON to
// `BENCH_OUTPUT` when set. Names given as arguments (`relational events`) run only those benches.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import { run as blobs } from './blobs.bench.js';
import { run as browser } from './browser.bench.js';
import { run as chat } from './chat.bench.js';
import { run as events } from './events.bench.js';
import { run as ingest } from './ingest.bench.js';
import { formatTable, type BenchReport } from './measure.js';
import { run as memory } from './memory.bench.js';
import { run as operator } from './operator.bench.js';
import { run as provider } from './provider.bench.js';
import { run as relational } from './relational.bench.js';
import { run as retrieval } from './retrieval.bench.js';
import { run as sandboxes } from './sandboxes.bench.js';
import { run as scheduler } from './scheduler.bench.js';
import { run as soak } from './soak.bench.js';
import { run as startup } from './startup.bench.js';
import { run as tools } from './tools.bench.js';

const benches: Record<string, () => Promise<BenchReport>> = { relational, events, blobs, memory, chat, tools, operator, provider, startup, retrieval, ingest, soak, scheduler, sandboxes, browser };
/** Run only when named: the soak takes an hour. */
const byNameOnly = new Set(['soak']);

async function main(): Promise<number> {
  const wanted = process.argv.slice(2);
  const unknown = wanted.filter((name) => !(name in benches));
  if (unknown.length > 0) {
    console.error(`unknown bench: ${unknown.join(', ')} (have: ${Object.keys(benches).join(', ')})`);
    return 2;
  }
  const machine = {
    node: process.version,
    platform: `${process.platform}/${process.arch}`,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
  };
  // Other work on the machine skews every figure; the load average says how much there was.
  const load = () => loadavg()[0]!.toFixed(2);
  const loadAtStart = load();
  console.log(`agentplane benchmarks: node ${machine.node}, ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB`);
  console.log(`load average at start: ${loadAtStart}`);
  console.log('×base = the figure divided by the baseline row of the same case, measured in this run');
  console.log('(latency above 1× and ops/s or MB/s below 1× mean our layer is slower than the raw client).\n');

  const reports: BenchReport[] = [];
  const failures: Array<{ name: string; error: string }> = [];
  const started = performance.now();
  for (const [name, bench] of Object.entries(benches)) {
    if (wanted.length > 0 ? !wanted.includes(name) : byNameOnly.has(name)) continue;
    const benchStarted = performance.now();
    try {
      const report = await bench();
      reports.push(report);
      for (const table of report.tables) console.log(`${formatTable(table)}\n`);
      console.log(`(${name}: ${((performance.now() - benchStarted) / 1000).toFixed(1)} s)\n`);
    } catch (error) {
      failures.push({ name, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      console.error(`bench ${name} failed:`, error);
    }
  }
  const totalSeconds = (performance.now() - started) / 1000;
  const loadAtEnd = load();
  console.log(`all benches: ${totalSeconds.toFixed(1)} s; load average at end: ${loadAtEnd}`);

  const output = process.env.BENCH_OUTPUT;
  if (output) {
    mkdirSync(dirname(output), { recursive: true });
    const document = {
      startedAt: new Date(Date.now() - totalSeconds * 1000).toISOString(),
      totalSeconds,
      machine: { ...machine, loadAtStart: Number(loadAtStart), loadAtEnd: Number(loadAtEnd) },
      reports,
      failures,
    };
    writeFileSync(output, `${JSON.stringify(document, null, 2)}\n`);
    console.log(`results written to ${output}`);
  }
  return failures.length > 0 ? 1 : 0;
}

process.exitCode = await main();
