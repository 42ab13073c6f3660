// Operator: 100 Projects created at once against a real API server (etcd, kube-apiserver, controller-manager,
// scheduler, kwok), each given its own database on a real PostgreSQL. Figures: time from create to Ready (p50, p99),
// writes per reconcile at steady state (the goal is zero), and the operator's memory. Baselines measured in the
// same run: 100 bare Deployments created straight through the client and awaited to Available (what the platform
// itself takes, with no operator), and for memory the same operator process, started and idle before the burst.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { API_VERSION, GROUP, PROJECTS, VERSION, type Project } from '@agentplane/lib/kubernetes/resources';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { postgresBinaries, startPostgres } from '../harness/postgres.js';
import { freePort } from '../harness/process.js';
import { installCrds, OPERATOR_NAMESPACE, prepareCluster, RUNTIME_CLUSTER_ROLE } from '../operator/fixture.js';
import { finishTable, percentile, Teardown, type BenchReport, type Table } from './measure.js';

/** `BENCH_OPERATOR_PROJECTS` runs a smaller round while developing. */
const PROJECT_COUNT = Number(process.env.BENCH_OPERATOR_PROJECTS ?? 100);
/** Long enough for several resyncs of every object while the steady state is watched. */
const RESYNC_SECONDS = 10;
const STEADY_WINDOW_MS = 3 * RESYNC_SECONDS * 1000 + 2000;
/** How long the bench waits for every one to be ready (`BENCH_OPERATOR_READY_MINUTES`, default 15). */
const READY_TIMEOUT_MS = Number(process.env.BENCH_OPERATOR_READY_MINUTES ?? 15) * 60_000;
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
/** The compiled operator, as the image runs it: through its entrypoint, with the V8 flags the image uses. */
const OPERATOR_MAIN = 'operator/dist/main.js';
const ENTRYPOINT = 'hack/entrypoint.sh';

export async function run(): Promise<BenchReport> {
  if (!existsSync(`${repoRoot}/${OPERATOR_MAIN}`)) throw new Error('the benchmark runs the compiled operator: run `npm run build` first');
  const binaries = kubernetesBinaries();
  const pgBinaries = postgresBinaries();
  if (!binaries || !pgBinaries) return { name: 'operator', tables: [], skipped: ['operator: Kubernetes or PostgreSQL binaries missing (bash hack/test-deps.sh)'] };

  const teardown = new Teardown();
  try {
    const cluster = await startKubernetes(binaries);
    teardown.add(() => cluster.stop());
    const postgres = await startPostgres();
    teardown.add(() => postgres.stop());
    const kubeConfig = cluster.kubeConfig();
    await installCrds(kubeConfig);
    await prepareCluster(kubeConfig);
    // Every project's runtime URL points here: the operator's last readiness step asks `/ready` of the runtime.
    const runtime = await readyServer();
    teardown.add(() => runtime.close());

    const baselineRequests = await apiRequestTotal(kubeConfig);
    const baseline = await deploymentsToAvailable(kubeConfig, PROJECT_COUNT);
    const baselinePerObject = (await apiRequestTotal(kubeConfig) - baselineRequests - baseline.ownRequests!) / PROJECT_COUNT;
    delete baseline.ownRequests;

    const port = await freePort();
    const operator = startOperatorProcess(cluster, {
      OPERATOR_PORT: String(port),
      RUNTIME_URL_TEMPLATE: runtime.url,
      PROJECT_DATABASE_ADMIN_URL: postgres.adminUrl,
    });
    teardown.add(() => stopProcess(operator));
    const metricsUrl = `http://127.0.0.1:${port}/metrics`;
    await eventually(async () => (await fetch(`http://127.0.0.1:${port}/ready`)).ok, { what: 'operator ready', timeoutMs: 60_000 });
    // Idle: watching (nothing yet), serving its metrics, no Project.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const idle = { ...processMemory(operator.pid!), ...(await heapMiB(metricsUrl)) };

    const projectRequests = await apiRequestTotal(kubeConfig);
    const ready = await projectsToReady(kubeConfig, PROJECT_COUNT);
    const projectPerObject = (await apiRequestTotal(kubeConfig) - projectRequests - ready.ownRequests!) / PROJECT_COUNT;
    delete ready.ownRequests;
    const steadyRequests = await apiRequestTotal(kubeConfig);
    const steady = await steadyState(metricsUrl);
    steady.apiRequestsPerProjectPerResync = (await apiRequestTotal(kubeConfig) - steadyRequests) / PROJECT_COUNT / (STEADY_WINDOW_MS / 1000 / RESYNC_SECONDS);
    baseline.apiRequests = baselinePerObject;
    ready.apiRequests = projectPerObject;
    const memory = { ...processMemory(operator.pid!), ...(await heapMiB(metricsUrl)) };

    const latency: Table = finishTable({
      title: `operator: ${PROJECT_COUNT} created at once until ready`,
      columns: [
        { key: 'p50Ms', label: 'p50 ms', ratio: true },
        { key: 'p99Ms', label: 'p99 ms', ratio: true },
        { key: 'wallMs', label: 'all ready ms', ratio: true },
        { key: 'apiRequests', label: 'API requests each', ratio: true },
        { key: 'ready', label: 'ready' },
      ],
      rows: [
        { case: 'create → ready', impl: 'bare Deployment → Available', baseline: true, figures: baseline },
        { case: 'create → ready', impl: 'Project → Ready (ours)', figures: ready },
      ],
      note:
        'A Project is ready once its namespace, database, 12 objects and runtime Pods are up and the runtime answers /ready; the baseline is the platform alone. ' +
        `ready: how many of the ${PROJECT_COUNT} were ready within ${READY_TIMEOUT_MS / 60_000} min (the percentiles are of those). ` +
        "API requests each: the API server's apiserver_request_total over the burst (every client: operator, controller-manager, scheduler, kwok), less the bench's own creates and polls, per Project or bare Deployment.",
    });
    const writes: Table = {
      title: 'operator: steady state',
      columns: [
        { key: 'reconciles', label: 'reconciles' },
        { key: 'writes', label: 'writes' },
        { key: 'writesPerReconcile', label: 'writes/reconcile' },
        { key: 'readsPerReconcile', label: 'API reads/reconcile' },
        { key: 'apiRequestsPerProjectPerResync', label: 'API requests per Project per resync' },
      ],
      rows: [{ case: `${STEADY_WINDOW_MS / 1000} s of resyncs every ${RESYNC_SECONDS} s`, impl: 'ours', figures: steady }],
      note: 'Every write to the API server (objects and status) counted by the operator itself; the goal is 0. API reads: the reconcilers\' gets and lists that reached the API server rather than a watch cache.',
    };
    const memoryTable: Table = finishTable({
      title: 'operator: memory',
      columns: [
        { key: 'rssMiB', label: 'RSS MiB', ratio: true },
        { key: 'peakMiB', label: 'peak RSS MiB', ratio: true },
        { key: 'heapMiB', label: 'heap used MiB', ratio: true },
        { key: 'heapTotalMiB', label: 'heap reserved MiB', ratio: true },
        { key: 'externalMiB', label: 'external MiB', ratio: true },
        { key: 'anonMiB', label: 'anonymous RSS MiB', ratio: true },
      ],
      rows: [
        { case: 'resident memory', impl: 'operator started, no Project yet', baseline: true, figures: idle },
        { case: 'resident memory', impl: `operator, ${PROJECT_COUNT} Projects (ours)`, figures: memory },
      ],
    });
    return { name: 'operator', tables: [latency, writes, memoryTable], skipped: [] };
  } finally {
    await teardown.run();
  }
}

/** The platform's own pace: namespaces with one Deployment each, created at once, until every one is Available. */
async function deploymentsToAvailable(kubeConfig: k8s.KubeConfig, count: number): Promise<Record<string, number>> {
  const core = kubeConfig.makeApiClient(k8s.CoreV1Api);
  const apps = kubeConfig.makeApiClient(k8s.AppsV1Api);
  const labels = { app: 'baseline' };
  const started = performance.now();
  const createdAt = new Map<string, number>();
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const namespace = `baseline-${i}`;
      createdAt.set(namespace, performance.now());
      await core.createNamespace({ body: { metadata: { name: namespace } } });
      await apps.createNamespacedDeployment({
        namespace,
        body: {
          metadata: { name: 'app' },
          spec: {
            replicas: 1,
            selector: { matchLabels: labels },
            template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
          },
        },
      });
    }),
  );
  const readyAt = new Map<string, number>();
  let polls = 0;
  await eventually(
    async () => {
      polls++;
      const list = await apps.listDeploymentForAllNamespaces({ labelSelector: undefined });
      for (const deployment of list.items) {
        const namespace = deployment.metadata!.namespace!;
        if (!namespace.startsWith('baseline-') || readyAt.has(namespace)) continue;
        if (deployment.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True')) readyAt.set(namespace, performance.now());
      }
      return readyAt.size === count;
    },
    { what: 'baseline Deployments available', timeoutMs: READY_TIMEOUT_MS, intervalMs: 100 },
  ).catch(() => undefined); // past the deadline: the figures of those that made it, and how many did
  // A namespace and a Deployment created per object, and one list per poll.
  return { ...figures(createdAt, readyAt, started), ownRequests: 2 * count + polls };
}

async function projectsToReady(kubeConfig: k8s.KubeConfig, count: number): Promise<Record<string, number>> {
  const custom = kubeConfig.makeApiClient(k8s.CustomObjectsApi);
  const started = performance.now();
  const createdAt = new Map<string, number>();
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const name = `bench-${String(i).padStart(3, '0')}`;
      const body: Project = { apiVersion: API_VERSION, kind: 'Project', metadata: { name }, spec: { displayName: `Bench ${i}` } };
      createdAt.set(name, performance.now());
      await custom.createClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS, body });
    }),
  );
  const readyAt = new Map<string, number>();
  let polls = 0;
  await eventually(
    async () => {
      polls++;
      const list = (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PROJECTS })) as { items: Project[] };
      for (const project of list.items) {
        const name = project.metadata.name;
        if (readyAt.has(name)) continue;
        if (project.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) readyAt.set(name, performance.now());
      }
      return readyAt.size === count;
    },
    { what: 'Projects ready', timeoutMs: READY_TIMEOUT_MS, intervalMs: 100 },
  ).catch(() => undefined); // past the deadline: the figures of those that made it, and how many did
  // A Project created per object, and one list per poll.
  return { ...figures(createdAt, readyAt, started), ownRequests: count + polls };
}

function figures(createdAt: Map<string, number>, readyAt: Map<string, number>, started: number): Record<string, number> {
  const latencies = [...readyAt].map(([name, at]) => at - createdAt.get(name)!).sort((a, b) => a - b);
  return { p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99), wallMs: Math.max(...readyAt.values()) - started, ready: readyAt.size };
}

/** Every request the API server has served so far, by any client: the sum of its apiserver_request_total counters. */
async function apiRequestTotal(kubeConfig: k8s.KubeConfig): Promise<number> {
  const url = new URL('/metrics', kubeConfig.getCurrentCluster()!.server);
  const options: https.RequestOptions = {};
  await kubeConfig.applyToHTTPSOptions(options);
  const text = await new Promise<string>((resolve, reject) => {
    https
      .get(url, options, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET /metrics answered ${res.statusCode}`))));
      })
      .on('error', reject);
  });
  return text
    .split('\n')
    .filter((line) => line.startsWith('apiserver_request_total{'))
    .reduce((total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** Writes and reconciles counted by the operator over several resyncs once everything is ready. */
async function steadyState(metricsUrl: string): Promise<Record<string, number>> {
  // Let the last status writes of the ready pass land before counting.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const before = await counters(metricsUrl);
  await new Promise((resolve) => setTimeout(resolve, STEADY_WINDOW_MS));
  const after = await counters(metricsUrl);
  const reconciles = after.reconciles - before.reconciles;
  const writes = after.writes - before.writes;
  const per = (count: number) => (reconciles === 0 ? Number.NaN : count / reconciles);
  return { reconciles, writes, writesPerReconcile: per(writes), readsPerReconcile: per(after.reads - before.reads) };
}

async function counters(metricsUrl: string): Promise<{ reconciles: number; writes: number; reads: number }> {
  const text = await (await fetch(metricsUrl)).text();
  const sum = (metric: string, filter: (line: string) => boolean = () => true) =>
    text
      .split('\n')
      .filter((line) => line.startsWith(`${metric}{`) && filter(line))
      .reduce((total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  return {
    reconciles: sum('agentplane_operator_reconciles_total', (line) => !line.includes('result="error"')),
    writes: sum('agentplane_operator_writes_total'),
    reads: sum('agentplane_operator_api_reads_total'),
  };
}

function startOperatorProcess(cluster: KubernetesCluster, env: Record<string, string>): ChildProcess {
  const child = spawn('sh', [ENTRYPOINT, 'operator'], {
    cwd: repoRoot,
    env: {
      // The node this bench runs on comes first: the entrypoint runs `node`.
      PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
      KUBECONFIG: cluster.kubeconfigPath,
      OPERATOR_NAMESPACE,
      RUNTIME_CLUSTER_ROLE,
      POD_NAME: 'bench-operator',
      HOST: '127.0.0.1',
      RESYNC_SECONDS: String(RESYNC_SECONDS),
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      // For a look inside while it runs, e.g. `--heapsnapshot-signal=SIGUSR2`.
      ...(process.env.BENCH_OPERATOR_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_OPERATOR_NODE_OPTIONS } : {}),
      // glibc's allocator tuning (MALLOC_ARENA_MAX, MALLOC_TRIM_THRESHOLD_, ...), to see where memory outside the heap goes.
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('MALLOC_'))),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

/** Resident and peak memory of a process, from /proc. */
function processMemory(pid: number): Record<string, number> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(/(\d+) kB/.exec(status.split('\n').find((line) => line.startsWith(`${field}:`)) ?? '')?.[1] ?? Number.NaN);
  return { rssMiB: kib('VmRSS') / 1024, peakMiB: kib('VmHWM') / 1024, anonMiB: kib('RssAnon') / 1024 };
}

/** The operator's V8 heap, live and reserved, from its own metrics (prom-client's process.memoryUsage()). */
async function heapMiB(metricsUrl: string): Promise<{ heapMiB: number; heapTotalMiB: number; externalMiB: number }> {
  const text = await (await fetch(metricsUrl)).text();
  const read = (metric: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${metric} `));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) / 2 ** 20 : Number.NaN;
  };
  return { heapMiB: read('nodejs_heap_size_used_bytes'), heapTotalMiB: read('nodejs_heap_size_total_bytes'), externalMiB: read('nodejs_external_memory_bytes') };
}

/** Answers `/ready` like a runtime at rest. */
async function readyServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    res.writeHead(req.url === '/ready' || req.url === '/health' ? 200 : 404, { 'content-type': 'application/json' });
    res.end('{"ready":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
