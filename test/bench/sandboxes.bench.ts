// Sandboxes on both hosts (decision 0079). The local host, measured on the real bubblewrap, cgroups and loop mounts:
// making a sandbox and its first command, a command's round trip (through the host port, and through HTTP as a
// person's `POST /computers/sessions/{id}/exec` is), pause and resume, and BENCH_SANDBOXES (100) sandboxes at once:
// memory per sandbox and the round trip while they all run. Baselines in the same run: the machine's own cost of
// starting a process (`spawn('/bin/true')`) and of a one-shot bubblewrap sandbox around the same program.
// The Kubernetes host, when the binaries are there (as test/kubernetes/sandbox-host.test.ts, decision 0078): a real
// kubelet with containerd and runc beside the test API server; to Running and the first command, a command's round
// trip through the API server's exec, pause (the Pod deleted, the claim kept) and resume (the Pod made again), and
// BENCH_K8S_SANDBOXES (10) at once: memory per sandbox from the kubelet's summary API and the round trip meanwhile.
// Baselines there: a bare Pod (no claim) made and polled to Running by client-node, and the API server's round trip
// (a readNamespacedPod), the floor of anything the host asks of the cluster. BENCH_SANDBOX_HOSTS=local or
// =kubernetes runs one of the two.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { performance } from 'node:perf_hooks';
import * as k8s from '@kubernetes/client-node';
import { silentLogger } from '@agentplane/lib/logging';
import { KubernetesSandboxHost, sandboxPod } from '@agentplane/runtime/computers/kubernetes/host';
import { LocalSandboxHost } from '@agentplane/runtime/computers/local/host';
import { eventually } from '../harness/eventually.js';
import { kubeletBinaries, localStorageClass, sandboxImage, startKubelet } from '../harness/kubelet.js';
import { kubernetesBinaries, startKubernetes } from '../harness/kubernetes.js';
import { configuredTenant, startTestRuntime } from '../harness/runtime.js';
import { makeTempDir } from '../harness/process.js';
import { finishTable, latencyColumns, summarise, Teardown, timeSequential, timingRow, type BenchReport, type Row, type Table, type Timing } from './measure.js';

const COUNT = Number(process.env.BENCH_SANDBOXES ?? 100);
const K8S_COUNT = Number(process.env.BENCH_K8S_SANDBOXES ?? 10);
const HOSTS = (process.env.BENCH_SANDBOX_HOSTS ?? 'local,kubernetes').split(',').map((host) => host.trim());
const limits = { cpus: 1, memoryMiB: 256, processes: 128, diskMiB: 64 };

const runProgram = (command: string, args: string[]) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
const bwrapOnce = () => runProgram('/usr/bin/bwrap', ['--unshare-all', '--unshare-user', '--die-with-parent', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--', '/usr/bin/true']);

async function localHost(report: BenchReport): Promise<void> {
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
    createRows.push(timingRow('create and first exec', { impl: 'LocalSandboxHost: start + exec, none started ahead (ours)' }, summarise(created, created.reduce((a, b) => a + b, 0))));

    // The same with one sandbox started ahead (COMPUTER_LOCAL_POOL=1, the runtime's default): each create waits,
    // untimed, until the one taken before has been replaced, as creates a moment apart find it.
    const pooled = await LocalSandboxHost.create({ root: join(dataDir, 'pooled'), logger: silentLogger(), pool: 1 });
    teardown.add(() => pooled.close());
    const takenAhead: number[] = [];
    for (let i = 0; i < 105; i++) {
      const sandbox = fresh();
      for (let wait = 0; i > 0 && pooled.startedAhead() === 0 && wait < 5_000; wait++) await new Promise((resolve) => setTimeout(resolve, 2));
      const t0 = performance.now();
      await pooled.start(sandbox);
      await pooled.exec(sandbox.id, { argv: ['/usr/bin/true'], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 1024 });
      if (i >= 5) takenAhead.push(performance.now() - t0);
      await pooled.remove(sandbox.id);
    }
    createRows.push(timingRow('create and first exec', { impl: 'LocalSandboxHost: start + exec, one started ahead (ours)' }, summarise(takenAhead, takenAhead.reduce((a, b) => a + b, 0))));

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
    const runtimeHost = rt.runtime.computers.host as LocalSandboxHost;
    for (let i = 0; i < 55; i++) {
      for (let wait = 0; i > 0 && runtimeHost.startedAhead() === 0 && wait < 5_000; wait++) await new Promise((resolve) => setTimeout(resolve, 2));
      const t0 = performance.now();
      const id = await httpCreate();
      if (i >= 5) httpCreated.push(performance.now() - t0);
      await rt.endUser(`/computers/sessions/${id}`, token, { method: 'DELETE' });
    }
    createRows.push(timingRow('create and first exec', { impl: 'POST /computers/sessions + exec, embedded, one started ahead (ours)' }, summarise(httpCreated, httpCreated.reduce((a, b) => a + b, 0))));
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
}

const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const sumOf = (values: number[]) => values.reduce((a, b) => a + b, 0);
const timingOf = (latencies: number[]): Timing => summarise(latencies, sumOf(latencies));
const ms = (latencies: number[]) => latencies.map((value) => Math.round(value)).join(' ');
const commandLine = (pid: string) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};
const pssKiB = (pid: string) => {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
};

interface NodeSummary {
  pods?: Array<{ podRef: { name: string; namespace: string }; memory?: { workingSetBytes?: number; rssBytes?: number; usageBytes?: number } }>;
}

async function kubernetesHost(report: BenchReport): Promise<void> {
  const binaries = kubernetesBinaries();
  const nodeBinaries = binaries ? kubeletBinaries() : null;
  if (!binaries || !nodeBinaries) {
    report.skipped.push("the Kubernetes host: the Kubernetes binaries, the kubelet, containerd, runc, the CNI plugins or the sandbox images are missing, or this is not root (run 'bash hack/test-deps.sh' as root)");
    return;
  }
  const namespace = 'bench-sandboxes';
  const teardown = new Teardown();
  try {
    const loadBefore = loadAverage();
    const cluster = await startKubernetes(binaries, { kwok: false, kubelet: true });
    teardown.add(() => cluster.stop());
    const node = await startKubelet(cluster, nodeBinaries);
    teardown.add(() => node.stop());
    const kc = cluster.kubeConfig();
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({
      body: { metadata: { name: namespace, labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } } },
    });
    await eventually(() => core.readNamespacedServiceAccount({ name: 'default', namespace }), { what: 'ServiceAccount default' });
    const host = new KubernetesSandboxHost({ kubeConfig: kc, namespace, defaultImage: sandboxImage, imagePullPolicy: 'Never', storageClass: localStorageClass, logger: silentLogger() });
    const ids = new Set<string>();
    // Before the node and the cluster stop: claims deleted through the API, so the provisioner removes their directories.
    teardown.add(() => Promise.all([...ids].map((id) => host.remove(id).catch(() => undefined))));
    let made = 0;
    const fresh = () => {
      const id = `bench-${made++}`;
      ids.add(id);
      return { id, tenantId: 'bench', limits };
    };
    const execTrue = async (id: string) => {
      const outcome = await host.exec(id, { argv: ['/usr/bin/true'], cwd: '/workspace', env: {}, timeoutMs: 30_000, outputLimitBytes: 1024 });
      if (outcome.exitCode !== 0) throw new Error(`true in ${id} exited ${outcome.exitCode}`);
    };

    // The raw client's work: the same Pod without a claim (its /workspace an emptyDir), polled to Running every
    // 100 ms as the host polls; the same command through the API server's exec, without the host's state read
    // and environment wrapper.
    const execs = new k8s.Exec(kc);
    const rawExec = (pod: string) =>
      new Promise<void>((resolve, reject) => {
        let status: k8s.V1Status | undefined;
        // The API server refuses an exec with no stream at all: stdout and stderr are read and dropped.
        execs.exec(namespace, pod, 'sandbox', ['/usr/bin/true'], new PassThrough().resume(), new PassThrough().resume(), null, false, (s) => (status = s)).then((socket) => {
          socket.on('close', () => (status?.status === 'Success' ? resolve() : reject(new Error(`raw exec in ${pod}: ${JSON.stringify(status)}`))));
          socket.on('error', reject);
        }, reject);
      });
    const podGone = (name: string) =>
      eventually(() => core.readNamespacedPod({ name, namespace }).then(() => false, (error: unknown) => (error as { code?: number }).code === 404), { what: `Pod ${name} gone`, timeoutMs: 60_000, intervalMs: 100 });
    const barePods = new Set<string>();
    teardown.add(() => Promise.all([...barePods].map((name) => core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 }).catch(() => undefined))));
    const startBare = async (name: string) => {
      const pod = sandboxPod({ id: name, tenantId: 'bench', limits }, { defaultImage: sandboxImage, imagePullPolicy: 'Never' });
      pod.metadata = { name };
      pod.spec!.volumes = pod.spec!.volumes!.map((volume) => (volume.name === 'workspace' ? { name: 'workspace', emptyDir: {} } : volume));
      barePods.add(name);
      await core.createNamespacedPod({ namespace, body: pod });
      await eventually(async () => (await core.readNamespacedPod({ name, namespace })).status?.phase === 'Running', { what: `Pod ${name} Running`, timeoutMs: 120_000, intervalMs: 100 });
    };
    const removeBare = async (name: string) => {
      await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
      await podGone(name);
      barePods.delete(name);
    };

    // To Running and the first command; one round of each first (the first Pod on a node pays for things once).
    const CREATES = 5;
    const bareRunning: number[] = [];
    const bareFirst: number[] = [];
    const ourRunning: number[] = [];
    const ourFirst: number[] = [];
    for (let i = 0; i <= CREATES; i++) {
      const name = `bare-${i}`;
      let t0 = performance.now();
      await startBare(name);
      const running = performance.now() - t0;
      await rawExec(name);
      const first = performance.now() - t0;
      await removeBare(name);
      const sandbox = fresh();
      t0 = performance.now();
      await host.start(sandbox);
      const ourRunningMs = performance.now() - t0;
      await execTrue(sandbox.id);
      const ourFirstMs = performance.now() - t0;
      await host.remove(sandbox.id);
      ids.delete(sandbox.id);
      if (i === 0) continue;
      bareRunning.push(running);
      bareFirst.push(first);
      ourRunning.push(ourRunningMs);
      ourFirst.push(ourFirstMs);
    }
    const rows: Row[] = [
      timingRow('to Running', { impl: 'bare Pod, no claim: client-node create, polled (raw)', baseline: true }, timingOf(bareRunning)),
      timingRow('to Running', { impl: 'KubernetesSandboxHost.start: claim, Pod (ours)' }, timingOf(ourRunning)),
      timingRow('create and first exec', { impl: 'bare Pod + client-node exec of true (raw)', baseline: true }, timingOf(bareFirst)),
      timingRow('create and first exec', { impl: 'KubernetesSandboxHost: start + exec (ours)' }, timingOf(ourFirst)),
    ];

    // A command's round trip in a running sandbox, against the API server's own round trip.
    const one = fresh();
    await host.start(one);
    const oneName = `sandbox-${one.id}`;
    const EXECS = 30;
    rows.push(timingRow('exec of true', { impl: 'API server round trip: readNamespacedPod (floor)', baseline: true }, await timeSequential(() => core.readNamespacedPod({ name: oneName, namespace }), { warmup: 10, ops: 100 })));
    rows.push(timingRow('exec of true', { impl: 'client-node Exec of true, no state read (raw)' }, await timeSequential(() => rawExec(oneName), { warmup: 3, ops: EXECS })));
    rows.push(timingRow('exec of true', { impl: 'KubernetesSandboxHost.exec (ours)' }, await timeSequential(() => execTrue(one.id), { warmup: 3, ops: EXECS })));
    const loadMid = loadAverage();
    report.tables.push(
      finishTable({
        title: 'sandboxes: making one, and a command\'s round trip (Kubernetes host, one test kubelet)',
        columns: latencyColumns,
        rows,
        note: `targets: to Running ≤ 2 s p50, exec ≤ 100 ms p50. ${CREATES} creates after one unmeasured (to Running, ms: bare ${ms(bareRunning)}; ours ${ms(ourRunning)}), ${EXECS} execs after 3; limits ${JSON.stringify(limits)}; load average ${loadBefore} before the cluster started, ${loadMid} here`,
      }),
    );

    // Pause (the Pod deleted, the claim kept) and resume (the Pod made again, to Running), with a file kept.
    await host.exec(one.id, { argv: ['/bin/sh', '-c', 'echo kept > note'], cwd: '/workspace', env: {}, timeoutMs: 30_000, outputLimitBytes: 1024 });
    const PAUSES = 5;
    const pauses: number[] = [];
    const resumes: number[] = [];
    for (let i = 0; i < PAUSES; i++) {
      let t0 = performance.now();
      await host.pause(one.id);
      pauses.push(performance.now() - t0);
      t0 = performance.now();
      await host.resume({ ...one });
      resumes.push(performance.now() - t0);
    }
    const kept = await host.exec(one.id, { argv: ['/bin/cat', 'note'], cwd: '/workspace', env: {}, timeoutMs: 30_000, outputLimitBytes: 1024 });
    if (kept.stdout.toString() !== 'kept\n') throw new Error(`/workspace did not outlive the pauses: ${JSON.stringify(kept.stdout.toString())}`);
    report.tables.push(
      finishTable({
        title: 'sandboxes: pause and resume (Kubernetes host)',
        columns: [
          { key: 'ops', label: 'ops' },
          { key: 'p50Ms', label: 'p50 ms' },
          { key: 'p99Ms', label: 'p99 ms' },
        ],
        rows: [timingRow('pause', { impl: 'Pod deleted and gone, claim kept (ours)' }, timingOf(pauses)), timingRow('resume', { impl: 'Pod made again, to Running (ours)' }, timingOf(resumes))],
        note: `${PAUSES} rounds; a file written in /workspace before them is read back after`,
      }),
    );

    // Many at once: started one after another, each its container's `sleep infinity` and the Pod's pause process.
    const many: string[] = [];
    const startedAt = performance.now();
    for (let i = 0; i < K8S_COUNT; i++) {
      const sandbox = fresh();
      await host.start(sandbox);
      many.push(sandbox.id);
    }
    const startAllMs = performance.now() - startedAt;
    let next = 0;
    const whileRunning = await timeSequential(() => execTrue(many[next++ % many.length]!), { warmup: 3, ops: EXECS });
    const alone = await timeSequential(() => execTrue(one.id), { warmup: 3, ops: EXECS });
    // Memory per sandbox: the kubelet's summary (cAdvisor's reading of each Pod's cgroup, refreshed every ~10-15 s),
    // read through the API server's node proxy once every one of them has a reading.
    const wanted = new Set(many.map((id) => `sandbox-${id}`));
    const readSummary = async (): Promise<NodeSummary> => {
      // Typed as a string; client-node hands back the parsed JSON.
      const answer: unknown = await core.connectGetNodeProxyWithPath({ name: node.nodeName, path: 'stats/summary' });
      return (typeof answer === 'string' ? JSON.parse(answer) : answer) as NodeSummary;
    };
    let memoryNote: string;
    let workingSet = Number.NaN;
    let rss = Number.NaN;
    try {
      const pods = await eventually(
        async () => {
          const found = ((await readSummary()).pods ?? []).filter((pod) => pod.podRef.namespace === namespace && wanted.has(pod.podRef.name) && pod.memory?.workingSetBytes !== undefined);
          return found.length === wanted.size ? found : undefined;
        },
        { what: `memory readings for all ${K8S_COUNT} sandbox Pods in the kubelet's summary`, timeoutMs: 90_000, intervalMs: 2_000 },
      );
      workingSet = sumOf(pods.map((pod) => pod.memory!.workingSetBytes!)) / pods.length / 2 ** 20;
      rss = sumOf(pods.map((pod) => pod.memory!.rssBytes ?? Number.NaN)) / pods.length / 2 ** 20;
      memoryNote = "memory per sandbox: the kubelet's summary API (/api/v1/nodes/<node>/proxy/stats/summary), pods[].memory.workingSetBytes (usage less inactive file pages) and rssBytes of the sandbox Pods";
    } catch (error) {
      memoryNote = `memory per sandbox: not read (${error instanceof Error ? error.message : String(error)})`;
    }
    // What the node spends per Pod outside its cgroup: one containerd shim each (proportional set size, so the
    // shims' shared binary is split among them, not counted once per shim).
    const shims = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry) && commandLine(entry).includes('containerd-shim-runc-v2') && commandLine(entry).includes(cluster.dir));
    const shimPssMiB = shims.length === 0 ? Number.NaN : sumOf(shims.map(pssKiB)) / shims.length / 1024;
    const loadAfter = loadAverage();
    report.tables.push(
      finishTable({
        title: `sandboxes: ${K8S_COUNT} running at once (Kubernetes host, one test kubelet on this machine)`,
        columns: [
          ...latencyColumns,
          { key: 'workingSetMiBPerSandbox', label: 'working set MiB / sandbox' },
          { key: 'rssMiBPerSandbox', label: 'RSS MiB / sandbox' },
          { key: 'shimPssMiBPerSandbox', label: 'shim PSS MiB / sandbox' },
          { key: 'startAllS', label: `start all ${K8S_COUNT} s` },
        ],
        rows: [
          timingRow('exec of true', { impl: 'one sandbox running (ours)', baseline: true }, alone),
          timingRow('exec of true', { impl: `across ${K8S_COUNT} running (ours)` }, whileRunning, { workingSetMiBPerSandbox: workingSet, rssMiBPerSandbox: rss, shimPssMiBPerSandbox: shimPssMiB, startAllS: startAllMs / 1000 }),
        ],
        note: `${memoryNote}; shim PSS: each containerd-shim-runc-v2 of the node (${shims.length}, one per Pod), from /proc/<pid>/smaps_rollup; load average ${loadAfter} at the end`,
      }),
    );
    console.log(`sandboxes, Kubernetes host: load average ${loadBefore} before the cluster, ${loadMid} after the round trips, ${loadAfter} at the end`);
  } finally {
    await teardown.run();
  }
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'sandboxes', tables: [], skipped: [] };
  if (HOSTS.includes('local')) await localHost(report);
  if (HOSTS.includes('kubernetes')) await kubernetesHost(report);
  for (const line of report.skipped) console.warn(`sandboxes: skipped ${line}`);
  return report;
}
