// What the benchmarks share: timing loops, percentiles, and tables whose rows carry figures and their ratio to
// the baseline measured in the same run. Benchmarks print figures; nothing here asserts a time.
import { performance } from 'node:perf_hooks';

export interface Timing {
  /** Every measured call's latency in ms, in the order taken. */
  latencies: number[];
  ops: number;
  wallMs: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /**
   * CPU time of this whole process per call (user + system), when the loop measured it. Less swayed than wall time by
   * other work on the machine, and the figure that bounds throughput once a process is busy.
   */
  cpuMsPerOp?: number;
}

export interface LoopOptions {
  /** Calls made and discarded before measuring (JIT, connection pools, caches). */
  warmup: number;
  /** Measured calls. */
  ops: number;
}

/** One caller awaiting `op` `ops` times: per-call latency and the resulting throughput. */
export async function timeSequential(op: () => Promise<unknown>, options: LoopOptions): Promise<Timing> {
  for (let i = 0; i < options.warmup; i++) await op();
  const latencies = new Array<number>(options.ops);
  const start = performance.now();
  for (let i = 0; i < options.ops; i++) {
    const t0 = performance.now();
    await op();
    latencies[i] = performance.now() - t0;
  }
  return summarise(latencies, performance.now() - start);
}

/** The same loop made `factor` times longer, for targets fast enough that the default is over in milliseconds. */
export function scaled<T extends LoopOptions>(options: T, factor: number): T {
  return { ...options, warmup: options.warmup * factor, ops: options.ops * factor };
}

/** `callers` loops running at once, each awaiting `op(caller)` `ops / callers` times; latency includes queueing. */
export async function timeConcurrent(
  op: (caller: number) => Promise<unknown>,
  options: LoopOptions & { callers: number },
): Promise<Timing> {
  const perCaller = Math.ceil(options.ops / options.callers);
  const warmPerCaller = Math.ceil(options.warmup / options.callers);
  const callers = Array.from({ length: options.callers }, (_, caller) => caller);
  await Promise.all(callers.map(async (caller) => {
    for (let i = 0; i < warmPerCaller; i++) await op(caller);
  }));
  const latencies: number[] = [];
  const start = performance.now();
  const cpuAtStart = process.cpuUsage();
  await Promise.all(callers.map(async (caller) => {
    for (let i = 0; i < perCaller; i++) {
      const t0 = performance.now();
      await op(caller);
      latencies.push(performance.now() - t0);
    }
  }));
  const cpu = process.cpuUsage(cpuAtStart);
  return { ...summarise(latencies, performance.now() - start), cpuMsPerOp: (cpu.user + cpu.system) / 1000 / latencies.length };
}

export function summarise(latencies: number[], wallMs: number): Timing {
  const sorted = Float64Array.from(latencies).sort();
  return {
    latencies,
    ops: sorted.length,
    wallMs,
    opsPerSec: (sorted.length / wallMs) * 1000,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
  };
}

/** Two runs of the same loop as one: samples pooled, wall times added. */
export function merge(a: Timing, b: Timing): Timing {
  const merged = summarise([...a.latencies, ...b.latencies], a.wallMs + b.wallMs);
  if (a.cpuMsPerOp === undefined || b.cpuMsPerOp === undefined) return merged;
  return { ...merged, cpuMsPerOp: (a.cpuMsPerOp * a.ops + b.cpuMsPerOp * b.ops) / (a.ops + b.ops) };
}

/** Nearest-rank percentile of ascending samples. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

// ---- tables ----

export interface Column {
  key: string;
  label: string;
  /** Also print this figure divided by the baseline's. */
  ratio?: boolean;
}

export interface Row {
  case: string;
  /** Who did the work: `ours` (our adapter) or a raw client, named. */
  impl: string;
  /** The row every other row of the same case is divided by. */
  baseline?: boolean;
  figures: Record<string, number>;
  /** Filled by `finishTable`: figure ÷ the baseline's figure, for the columns marked `ratio`. */
  ratios?: Record<string, number>;
}

export interface Table {
  title: string;
  columns: Column[];
  rows: Row[];
  /** One line under the table on what the case measures. */
  note?: string;
}

export interface BenchReport {
  name: string;
  tables: Table[];
  /** One line per adapter that did not run, and why. */
  skipped: string[];
}

/** Computes each row's ratios against its case's baseline row. */
export function finishTable(table: Table): Table {
  for (const row of table.rows) {
    const base = table.rows.find((candidate) => candidate.case === row.case && candidate.baseline);
    if (!base || row === base) continue;
    row.ratios = {};
    for (const column of table.columns) {
      if (!column.ratio) continue;
      const [mine, theirs] = [row.figures[column.key], base.figures[column.key]];
      if (mine !== undefined && theirs !== undefined && theirs !== 0) row.ratios[column.key] = mine / theirs;
    }
  }
  return table;
}

/** Who did the work in a row: our adapter, or the raw client that is its baseline. */
export interface Subject {
  impl: string;
  baseline?: boolean;
}

export function timingRow(caseName: string, subject: Subject, timing: Timing, extra: Record<string, number> = {}): Row {
  return {
    case: caseName,
    impl: subject.impl,
    baseline: subject.baseline ?? false,
    figures: {
      ops: timing.ops,
      opsPerSec: timing.opsPerSec,
      p50Ms: timing.p50Ms,
      p99Ms: timing.p99Ms,
      ...(timing.cpuMsPerOp === undefined ? {} : { cpuMsPerOp: timing.cpuMsPerOp }),
      ...extra,
    },
  };
}

/** One measurement run for every target that `appliesTo`; `time` runs the loop it is given against one target. */
export interface Case<T extends Subject> {
  name: string;
  loop: LoopOptions;
  time(target: T, loop: LoopOptions): Promise<Timing>;
  appliesTo?(target: T): boolean;
  /** Figures derived from the timing, e.g. MiB/s. */
  extra?(timing: Timing): Record<string, number>;
}

/**
 * Runs each case over the targets in order and then in reverse (A B B A), half the ops each time, and pools the
 * halves: drift during a run (page cache, a server warming up, a noisy neighbour) then favours no target.
 */
export async function runCases<T extends Subject>(cases: Case<T>[], targets: T[]): Promise<Row[]> {
  const rows: Row[] = [];
  for (const measurement of cases) {
    const applicable = targets.filter((target) => measurement.appliesTo?.(target) ?? true);
    const half = { ...measurement.loop, ops: Math.ceil(measurement.loop.ops / 2) };
    const first = new Map<T, Timing>();
    for (const target of applicable) first.set(target, await measurement.time(target, half));
    const pooled = new Map<T, Timing>();
    for (const target of [...applicable].reverse()) {
      pooled.set(target, merge(first.get(target)!, await measurement.time(target, half)));
    }
    for (const target of applicable) {
      const timing = pooled.get(target)!;
      rows.push(timingRow(measurement.name, target, timing, measurement.extra?.(timing)));
    }
  }
  return rows;
}

export function formatTable(table: Table): string {
  const header = ['case', 'impl'];
  for (const column of table.columns) {
    header.push(column.label);
    if (column.ratio) header.push(`${column.label} ×base`);
  }
  const body = table.rows.map((row) => {
    const cells = [row.case, row.impl];
    for (const column of table.columns) {
      cells.push(formatNumber(row.figures[column.key]));
      if (column.ratio) cells.push(row.baseline ? 'base' : formatRatio(row.ratios?.[column.key]));
    }
    return cells;
  });
  const widths = header.map((cell, i) => Math.max(cell.length, ...body.map((cells) => cells[i]!.length)));
  // The first two columns are text (left-aligned); the rest are figures (right-aligned).
  const line = (cells: string[]) =>
    cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ').trimEnd();
  const rule = widths.map((width) => '-'.repeat(width)).join('  ');
  const out = [`## ${table.title}`, line(header), rule, ...body.map(line)];
  if (table.note) out.push(`   ${table.note}`);
  return out.join('\n');
}

function formatNumber(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return '-';
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  const magnitude = Math.abs(value);
  if (magnitude >= 1000) return Math.round(value).toLocaleString('en-US');
  if (magnitude >= 100) return value.toFixed(0);
  if (magnitude >= 10) return value.toFixed(1);
  if (magnitude >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

function formatRatio(value: number | undefined): string {
  return value === undefined ? '-' : `${value.toFixed(2)}×`;
}

// ---- shared figures ----

export const latencyColumns: Column[] = [
  { key: 'ops', label: 'ops' },
  { key: 'opsPerSec', label: 'ops/s', ratio: true },
  { key: 'p50Ms', label: 'p50 ms', ratio: true },
  { key: 'p99Ms', label: 'p99 ms' },
];

/** Stops whatever a bench started, last first, even when the bench failed: no server outlives its bench. */
export class Teardown {
  private readonly steps: Array<() => Promise<unknown> | unknown> = [];

  add(step: () => Promise<unknown> | unknown): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step();
      } catch (error) {
        console.error('bench teardown step failed:', error);
      }
    }
  }
}
