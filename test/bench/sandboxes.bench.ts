// Sandboxes on the local host (decision 0079), measured on the real bubblewrap, cgroups and loop mounts: making a
// sandbox and its first command, a command's round trip (through the host port, and through HTTP as a person's
// `POST /computers/sessions/{id}/exec` is), pause and resume, and BENCH_SANDBOXES (100) sandboxes at once: memory per
// sandbox and the round trip while they all run. Baselines in the same run: the machine's own cost of starting a
// process (`spawn('/bin/true')`) and of a one-shot bubblewrap sandbox around the same program.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { silentLogger } from '@agentplane/lib/logging';
import { LocalSandboxHost } from '@agentplane/runtime/computers/local/host';
import { configuredTenant, startTestRuntime } from '../harness/runtime.js';
import { makeTempDir } from '../harness/process.js';
import { finishTable, latencyColumns, summarise, Teardown, timeSequential, timingRow, type BenchReport, type Row, type Table } from './measure.js';

const COUNT = Number(process.env.BENCH_SANDBOXES ?? 100);
const limits = { cpus: 1, memoryMiB: 256, processes: 128, diskMiB: 64 };

const runProgram = (command: string, args: string[]) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
const bwrapOnce = () => runProgram('/usr/bin/bwrap', ['--unshare-all', '--unshare-user', '--die-with-parent', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--', '/usr/bin/true']);

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'sandboxes', tables: [], skipped: [] };
  const teardown = new Teardown();
  try {
    const dataDir = makeTempDir('bench-sandboxes');
    teardown.add(() => rmSync(dataDir, { recursive: true, force: true }));
    const host = await LocalSandboxHost.create({ root: join(dataDir, 'sandboxes'), logger: silentLogger() });
    teardown.add(() => host.close());
    const ids: string[] = [];
    teardown.add(async () => {
      for (const id of ids) await host.remove(id).catch(() => undefined);
    });
    let made = 0;
    const fresh = () => {
      const id = `bench-${made++}`;
      ids.push(id);
      return { id, tenantId: 'bench', limits };
    };
    const execTrue = (id: string) => host.exec(id, { argv: ['/usr/bin/true'], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 1024 });

    // Making a sandbox and its first command; each made one is removed outside the timing.
    const createRows: Row[] = [];
    createRows.push(timingRow('create and first exec', { impl: 'spawn /bin/true (the machine)', baseline: true }, await timeSequential(() => runProgram('/usr/bin/true', []), { warmup: 5, ops: 100 })));
    createRows.push(timingRow('create and first exec', { impl: 'one-shot bwrap around /bin/true' }, await timeSequential(bwrapOnce, { warmup: 5, ops: 100 })));
    const created: number[] = [];
    for (let i = 0; i < 105; i++) {
      const sandbox = fresh();
      const t0 = performance.now();
      await host.start(sandbox);
      await execTrue(sandbox.id);
      if (i >= 5) created.push(performance.now() - t0);
      await host.remove(sandbox.id);
    }
    createRows.push(timingRow('create and first exec', { impl: 'LocalSandboxHost: start + exec (ours)' }, summarise(created, created.reduce((a, b) => a + b, 0))));

    // A command's round trip in a running sandbox.
    const one = fresh();
    await host.start(one);
    createRows.push(timingRow('exec of true', { impl: 'spawn /bin/true (the machine)', baseline: true }, await timeSequential(() => runProgram('/usr/bin/true', []), { warmup: 20, ops: 300 })));
    createRows.push(timingRow('exec of true', { impl: 'LocalSandboxHost.exec (ours)' }, await timeSequential(() => execTrue(one.id), { warmup: 20, ops: 300 })));

    // Through HTTP, as a person's exec is: authenticated, found, owned, audited.
    const rt = await startTestRuntime({ env: { COMPUTER_HOST: 'local' } });
    teardown.add(() => rt.stop());
    const tenant = await configuredTenant(rt, { ceiling: { capabilities: ['chat', 'computer'] } });
    const token = await tenant.mint({ sub: 'acme:bench', scope: 'acme:bench' });
    const box = (await (await rt.endUser('/computers/sessions', token, { method: 'POST', body: '{}' })).json()) as { id: string };
    const httpExec = async () => {
      const res = await rt.endUser(`/computers/sessions/${box.id}/exec`, token, { method: 'POST', body: JSON.stringify({ command: ['/usr/bin/true'] }) });
      if (res.status !== 200) throw new Error(`exec answered ${res.status}`);
      await res.arrayBuffer();
    };
    createRows.push(timingRow('exec of true', { impl: 'POST /computers/sessions/{id}/exec, embedded (ours)' }, await timeSequential(httpExec, { warmup: 20, ops: 300 })));
    const httpCreate = async () => {
      const res = await rt.endUser('/computers/sessions', token, { method: 'POST', body: '{}' });
      const { id } = (await res.json()) as { id: string };
      await rt.endUser(`/computers/sessions/${id}/exec`, token, { method: 'POST', body: JSON.stringify({ command: ['/usr/bin/true'] }) }).then((r) => r.arrayBuffer());
      return id;
    };
    const httpCreated: number[] = [];
    for (let i = 0; i < 55; i++) {
      const t0 = performance.now();
      const id = await httpCreate();
      if (i >= 5) httpCreated.push(performance.now() - t0);
      await rt.endUser(`/computers/sessions/${id}`, token, { method: 'DELETE' });
    }
    createRows.push(timingRow('create and first exec', { impl: 'POST /computers/sessions + exec, embedded (ours)' }, summarise(httpCreated, httpCreated.reduce((a, b) => a + b, 0))));
    report.tables.push(
      finishTable({
        title: 'sandboxes: making one, and a command\'s round trip (local host)',
        columns: latencyColumns,
        rows: createRows,
        note: `targets: create and first exec ≤ 50 ms p50, exec round trip ≤ 10 ms p50. Limits ${JSON.stringify(limits)}; the host's enforcement: ${JSON.stringify(host.describe().enforcement)}`,
      }),
    );

    // Pause and resume, with a process running inside.
    await host.exec(one.id, { argv: ['/bin/sh', '-c', 'nohup sleep 3600 >/dev/null 2>&1 &'], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 1024 });
    const pauses: number[] = [];
    const resumes: number[] = [];
    for (let i = 0; i < 105; i++) {
      let t0 = performance.now();
      await host.pause(one.id);
      if (i >= 5) pauses.push(performance.now() - t0);
      t0 = performance.now();
      await host.resume({ ...one });
      if (i >= 5) resumes.push(performance.now() - t0);
    }
    const pauseTable: Table = {
      title: 'sandboxes: pause and resume (local host, a process running inside)',
      columns: [
        { key: 'ops', label: 'ops' },
        { key: 'p50Ms', label: 'p50 ms' },
        { key: 'p99Ms', label: 'p99 ms' },
      ],
      rows: [timingRow('pause', { impl: 'freeze (ours)' }, summarise(pauses, 0)), timingRow('resume', { impl: 'thaw (ours)' }, summarise(resumes, 0))],
    };
    report.tables.push(finishTable(pauseTable));

    // Many at once: each runs a light process; memory per sandbox from its cgroup, and the round trip meanwhile.
    const many: string[] = [];
    const startedAt = performance.now();
    for (let i = 0; i < COUNT; i++) {
      const sandbox = fresh();
      await host.start(sandbox);
      await host.exec(sandbox.id, { argv: ['/bin/sh', '-c', 'nohup sleep 3600 >/dev/null 2>&1 &'], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 1024 });
      many.push(sandbox.id);
    }
    const startAllMs = performance.now() - startedAt;
    let memory = 0;
    for (const id of many) memory += (await host.usage(id)).memoryBytes ?? 0;
    let next = 0;
    const whileRunning = await timeSequential(() => execTrue(many[next++ % many.length]!), { warmup: 20, ops: 500 });
    const alone = await timeSequential(() => execTrue(one.id), { warmup: 20, ops: 200 });
    report.tables.push(
      finishTable({
        title: `sandboxes: ${COUNT} running at once (local host)`,
        columns: [...latencyColumns, { key: 'memoryMiBPerSandbox', label: 'MiB / sandbox' }, { key: 'startAllS', label: `start all ${COUNT} s` }],
        rows: [
          timingRow('exec of true', { impl: 'one sandbox running (ours)', baseline: true }, alone),
          timingRow('exec of true', { impl: `across ${COUNT} running (ours)` }, whileRunning, { memoryMiBPerSandbox: memory / COUNT / 2 ** 20, startAllS: startAllMs / 1000 }),
        ],
        note: 'memory per sandbox: its cgroup\'s memory.usage_in_bytes (its processes, their page cache and tmpfs) with one shell-started sleep running in each',
      }),
    );
  } finally {
    await teardown.run();
  }
  return report;
}
