// Soak: the compiled runtime on its embedded defaults, as its own process under the chart's memory limit for a
// runtime container (a cgroup v1 memory group, so the kernel enforces it as the kubelet would), serving a mix of
// blocking turns, follow-ups in growing conversations, streams read to their end and streams dropped after their
// first token, for SOAK_SECONDS (default an hour). It reports the runtime's memory and throughput over time, errors,
// and whether the process was ever killed for memory. Run it by name: `npm run bench -- soak`; it is not in the
// default set, which would otherwise take an hour.
import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { MODEL, OTHER_MODEL, providerSection, CHAT_CAPABILITIES } from '../chat/fixture.js';
import { makeTempDir } from '../harness/process.js';
import { configuredTenant } from '../harness/runtime.js';
import { sseEvents } from '../harness/sse.js';
import { startProviderProcess, startRuntimeProcess } from './children.js';
import { finishTable, percentile, Teardown, type BenchReport, type Row } from './measure.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const SOAK_SECONDS = Number(process.env.SOAK_SECONDS ?? 3_600);
const CLIENTS = Number(process.env.SOAK_CLIENTS ?? 8);
/** Each client's pause between operations: 0 keeps the runtime saturated; a pause gives a steady load instead. */
const PAUSE_MS = Number(process.env.SOAK_PAUSE_MS ?? 0);
/** Readings of the runtime's memory, spread over the run; the table shows about ten of them. */
const SAMPLE_MS = Math.max(1_000, Math.min(15_000, (SOAK_SECONDS * 1000) / 40));
/** A conversation grows to this many turns, then its client starts a new one. */
const CONVERSATION_TURNS = 20;
const MiB = 1024 * 1024;
const CGROUP_ROOT = '/sys/fs/cgroup/memory';
const LONG_PROMPT = Array.from({ length: 48 }, (_, i) => `word${i}`).join(' ');

/** The memory limit of a runtime container in the chart's defaults (`runtime.resources.limits.memory`). */
function chartMemoryLimit(): { text: string; bytes: number } {
  const values = parse(readFileSync(join(REPO, 'charts', 'agentplane', 'values.yaml'), 'utf8')) as { runtime: { resources: { limits: { memory: string } } } };
  const text = values.runtime.resources.limits.memory;
  const match = /^(\d+)(Mi|Gi)$/.exec(text);
  if (!match) throw new Error(`unexpected memory limit in values.yaml: ${text}`);
  return { text, bytes: Number(match[1]) * (match[2] === 'Gi' ? 1024 * MiB : MiB) };
}

/** A cgroup v1 memory group with the limit, when this machine lets us make one (root on cgroup v1); else null. */
function memoryGroup(limitBytes: number): { dir: string; remove(): void } | null {
  if (!existsSync(join(CGROUP_ROOT, 'cgroup.procs'))) return null;
  const dir = join(CGROUP_ROOT, `agentplane-soak-${process.pid}`);
  try {
    mkdirSync(dir);
    writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
  } catch {
    return null;
  }
  return {
    dir,
    remove: () => {
      try {
        rmdirSync(dir);
      } catch {
        // still holds a process; the kernel frees it once that exits
      }
    },
  };
}

const readNumber = (path: string) => Number(readFileSync(path, 'utf8').trim());
/**
 * The group's memory as the kubelet judges it: the working set is usage minus inactive file pages (page cache the
 * kernel reclaims before it kills anything), and `rss` is the anonymous memory alone.
 */
function groupMemory(dir: string): { usage: number; workingSet: number; rss: number; cache: number } {
  const stat = Object.fromEntries(
    readFileSync(join(dir, 'memory.stat'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split(' ') as [string, string])
      .map(([key, value]) => [key, Number(value)]),
  );
  const usage = readNumber(join(dir, 'memory.usage_in_bytes'));
  return { usage, workingSet: usage - (stat.total_inactive_file ?? 0), rss: stat.total_rss ?? 0, cache: stat.total_cache ?? 0 };
}
const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
function oomKills(dir: string): number {
  const line = readFileSync(join(dir, 'memory.oom_control'), 'utf8').split('\n').find((l) => l.startsWith('oom_kill '));
  return line ? Number(line.split(' ')[1]) : 0;
}

interface Window {
  ops: number;
  errors: number;
  latencies: number[];
}

const groupFigures = (memory: ReturnType<typeof groupMemory>) => ({
  workingSetMiB: memory.workingSet / MiB,
  anonMiB: memory.rss / MiB,
  cacheMiB: memory.cache / MiB,
});

function ending(exit: { code: number | null; signal: NodeJS.Signals | null } | undefined, stderr = ''): string {
  return exit ? `the runtime EXITED (${exit.code ?? exit.signal}) before the end: ${stderr.slice(-300)}` : 'the runtime was alive at the end.';
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'soak', tables: [], skipped: [] };
  const teardown = new Teardown();
  const limit = chartMemoryLimit();
  const group = memoryGroup(limit.bytes);
  if (!group) report.skipped.push(`no cgroup v1 memory group could be made here: the ${limit.text} limit is not enforced, only watched`);
  try {
    const provider = await startProviderProcess({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL] });
    teardown.add(() => provider.stop());
    const dataDir = makeTempDir('soak');
    teardown.add(() => rmSync(dataDir, { recursive: true, force: true }));
    // The shell joins the group before it becomes node, so every byte the runtime ever maps counts against the limit.
    const runtime = await startRuntimeProcess({ dataDir, shellPrefix: group ? `echo $$ > ${join(group.dir, 'cgroup.procs')} && ` : '' });
    teardown.add(async () => {
      await runtime.stop();
      group?.remove();
    });
    const exitOf = () => runtime.exit();
    const url = runtime.url;

    const call = (path: string, init: RequestInit, headers: Record<string, string>) =>
      fetch(`${url}${path}`, { ...init, headers: { 'content-type': 'application/json', ...headers } });
    const tenant = await configuredTenant({ admin: runtime.admin }, { ceiling: { capabilities: CHAT_CAPABILITIES, registeredModels: [MODEL, OTHER_MODEL] } });
    const pushed = await tenant.reconfigure({ providers: providerSection(provider), default_model: MODEL });
    if (pushed.status !== 200) throw new Error(`pushing providers answered ${pushed.status}: ${await pushed.text()}`);
    // Tokens live an hour: a client mints a new one every ten minutes, as an app would before expiry.
    let token = await tenant.mint({ capabilities: CHAT_CAPABILITIES });
    const post = (path: string, body: Record<string, unknown>, signal?: AbortSignal) =>
      call(path, { method: 'POST', body: JSON.stringify(body), ...(signal ? { signal } : {}) }, { authorization: `Bearer ${token}` });

    let window: Window = { ops: 0, errors: 0, latencies: [] };
    const totals = { ops: 0, errors: 0, kinds: {} as Record<string, number> };
    const errorsSeen: string[] = [];
    const failed = (what: string) => {
      window.errors++;
      totals.errors++;
      if (errorsSeen.length < 5) errorsSeen.push(what);
    };
    const done = (kind: string, started?: number) => {
      window.ops++;
      totals.ops++;
      totals.kinds[kind] = (totals.kinds[kind] ?? 0) + 1;
      if (started !== undefined) window.latencies.push(performance.now() - started);
    };

    const deadline = performance.now() + SOAK_SECONDS * 1000;
    const client = async (seed: number) => {
      let sessionId: string | undefined;
      let turns = 0;
      for (let i = seed; performance.now() < deadline && !exitOf(); i++) {
        if (PAUSE_MS > 0) await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
        const pick = i % 20;
        try {
          if (pick < 9) {
            const started = performance.now();
            const response = await post('/chat', { message: 'Tell me in one sentence what a soak test is for.' });
            if (response.status !== 200) failed(`POST /chat ${response.status}: ${(await response.text()).slice(0, 200)}`);
            else {
              await response.json();
              done('blocking turn', started);
            }
          } else if (pick < 13) {
            // A follow-up: the conversation's history grows to CONVERSATION_TURNS, then a new one starts.
            if (turns >= CONVERSATION_TURNS) {
              sessionId = undefined;
              turns = 0;
            }
            const response = await post('/chat', { message: `follow-up ${turns}`, ...(sessionId ? { session_id: sessionId } : {}) });
            if (response.status !== 200) failed(`POST /chat (follow-up) ${response.status}: ${(await response.text()).slice(0, 200)}`);
            else {
              sessionId = ((await response.json()) as { session_id: string }).session_id;
              turns++;
              done('follow-up');
            }
          } else if (pick < 19) {
            const response = await post('/chat/stream', { message: LONG_PROMPT });
            if (response.status !== 200) failed(`POST /chat/stream ${response.status}`);
            else {
              let ended = false;
              for await (const frame of sseEvents(response)) {
                if (frame.event === 'error') failed(`stream error frame: ${JSON.stringify(frame.data).slice(0, 200)}`);
                if (frame.event === 'done') ended = true;
              }
              if (ended) done('stream read to its end');
            }
          } else {
            // A client that leaves after the first token: the run goes on without it and ends on its own.
            const controller = new AbortController();
            const response = await post('/chat/stream', { message: LONG_PROMPT }, controller.signal);
            if (response.status !== 200) failed(`POST /chat/stream ${response.status}`);
            else {
              for await (const frame of sseEvents(response)) if (frame.event === 'token') break;
              controller.abort();
              done('stream dropped after its first token');
            }
          }
        } catch (error) {
          if (!exitOf()) failed(`client: ${error instanceof Error ? error.message : String(error)}`);
          else return;
        }
      }
    };

    const rows: Row[] = [];
    const started = performance.now();
    let peakRss = 0;
    let sampledAt = performance.now();
    const sample = () => {
      if (exitOf()) return;
      const rss = rssOf(runtime.pid);
      peakRss = Math.max(peakRss, rss);
      const sorted = Float64Array.from(window.latencies).sort();
      const seconds = (performance.now() - sampledAt) / 1000;
      sampledAt = performance.now();
      rows.push({
        case: 'soak: mixed turns and streams',
        impl: `${((performance.now() - started) / 60_000).toFixed(1)} min`,
        baseline: rows.length === 0,
        figures: {
          rssMiB: rss / MiB,
          ...(group ? groupFigures(groupMemory(group.dir)) : {}),
          opsPerSec: window.ops / seconds,
          errors: window.errors,
          ...(sorted.length > 0 ? { turnP50Ms: percentile(sorted, 0.5), turnP99Ms: percentile(sorted, 0.99) } : {}),
        },
      });
      window = { ops: 0, errors: 0, latencies: [] };
    };
    const sampler = setInterval(sample, SAMPLE_MS);
    const minter = setInterval(() => void tenant.mint({ capabilities: CHAT_CAPABILITIES }).then((fresh) => (token = fresh)), 600_000);
    try {
      await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i * 3)));
    } finally {
      clearInterval(sampler);
      clearInterval(minter);
    }
    sample();

    // About ten rows: the first reading, then evenly spaced ones, and the last.
    const step = Math.max(1, Math.floor(rows.length / 10));
    const shown = rows.filter((row, i) => i === 0 || i % step === 0 || i === rows.length - 1);
    report.tables.push(
      finishTable({
        title: `soak: the compiled runtime (embedded) under a ${limit.text} memory limit for ${(SOAK_SECONDS / 60).toFixed(0)} min, ${CLIENTS} clients${PAUSE_MS > 0 ? `, ${PAUSE_MS} ms between operations` : ''}`,
        columns: [
          { key: 'rssMiB', label: 'RSS MiB', ratio: true },
          ...(group
            ? [
                { key: 'workingSetMiB', label: 'working set MiB' },
                { key: 'anonMiB', label: 'anon MiB' },
                { key: 'cacheMiB', label: 'page cache MiB' },
              ]
            : []),
          { key: 'opsPerSec', label: 'ops/s' },
          { key: 'errors', label: 'errors' },
          { key: 'turnP50Ms', label: 'turn p50 ms' },
          { key: 'turnP99Ms', label: 'turn p99 ms' },
        ],
        rows: shown,
        note:
          `${totals.ops.toLocaleString('en-US')} operations (${Object.entries(totals.kinds).map(([kind, n]) => `${n.toLocaleString('en-US')} ${kind}`).join(', ')}), ` +
          `${totals.errors} errors${errorsSeen.length > 0 ? ` (first: ${errorsSeen.join(' | ')})` : ''}; peak RSS ${(peakRss / MiB).toFixed(0)} MiB; ` +
          (group
            ? `cgroup usage peak ${(readNumber(join(group.dir, 'memory.max_usage_in_bytes')) / MiB).toFixed(0)} MiB with page cache (the kernel reclaimed cache at the limit ${readNumber(join(group.dir, 'memory.failcnt'))} times), OOM kills ${oomKills(group.dir)}; `
            : '') +
          ending(exitOf(), runtime.stderr()),
      }),
    );
  } finally {
    await teardown.run();
  }
  return report;
}
