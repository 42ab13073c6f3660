// The operator's composition root: wires the Kubernetes client (guarded by leadership, counted by metrics), the
// project databases, the runtime client, the reconcilers, the controllers' watches, the work queue, leader election
// and the small HTTP server for /health, /ready and /metrics. main.ts and the tests build it the same way.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { errorMessage } from '@agentplane/lib/errors';
import { withCallDeadline } from '@agentplane/lib/kubernetes/kube-config';
import { LABELS } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import { listen } from '@agentplane/lib/program';
import type { OperatorConfig } from './config.js';
import { objectKey, parseKey } from './controllers/keys.js';
import { projectController, type Controller } from './controllers/project.js';
import { tenantController } from './controllers/tenant.js';
import { KubeClient, NotLeaderError } from './kube/client.js';
import { OwnedObjectCache } from './kube/owned.js';
import { LeaderElector } from './leader.js';
import { createOperatorMetrics, type OperatorMetrics } from './metrics.js';
import { WorkQueue, type ReconcileReport } from './queue.js';
import { PROJECT_OBJECT_KINDS } from './resources/index.js';
import { ProjectDatabases } from './reconcilers/project/database.js';
import { ProjectReconciler } from './reconcilers/project/index.js';
import { TenantReconciler } from './reconcilers/tenant/index.js';
import { RuntimeClient } from './runtime-client.js';

export interface OperatorDeps {
  config: OperatorConfig;
  logger: Logger;
  /** Default: config.kubeconfig, else the Pod's service-account credentials. */
  kubeConfig?: k8s.KubeConfig;
  runtimeClient?: RuntimeClient;
  /** The admin connection to the projects' PostgreSQL server; default: a small pool on config.stores.databaseAdminUrl. */
  database?: pg.Pool;
  /** Wraps the Kubernetes client the reconcilers use (tests put a concurrent writer in front of it). */
  wrapKube?: (kube: KubeClient) => KubeClient;
}

export interface Operator {
  start(): Promise<void>;
  /** Stops leading, lets running reconciles finish, gives up the lease, stops watching and serving. */
  stop(): Promise<void>;
  metrics: OperatorMetrics;
  /** Where /health, /ready and /metrics are served, once started. */
  url(): string;
  isLeader(): boolean;
  /** Every watch has listed and is watching. */
  isReady(): boolean;
  databases: ProjectDatabases | undefined;
  queue: WorkQueue;
}

/** Reconciles running at once across all objects. */
const CONCURRENCY = 8;
const FIRST_RETRY_MS = 1_000;

export function loadKubeConfig(path: string | undefined): k8s.KubeConfig {
  const kubeConfig = new k8s.KubeConfig();
  if (path) kubeConfig.loadFromFile(path);
  else kubeConfig.loadFromCluster();
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server || !URL.canParse(server)) {
    throw new Error(path ? `the kubeconfig ${path} names no usable cluster` : 'not running in a Kubernetes cluster: set KUBECONFIG to a kubeconfig file');
  }
  return kubeConfig;
}

export function createOperator(deps: OperatorDeps): Operator {
  const { config, logger } = deps;
  const kubeConfig = withCallDeadline(deps.kubeConfig ?? loadKubeConfig(config.kubeconfig));
  let elector: LeaderElector | undefined;
  const isLeader = () => (elector ? elector.isLeader() : true);

  let queue: WorkQueue;
  const metrics = createOperatorMetrics(() => queue?.depth ?? 0);
  const enqueue = (key: string) => queue.add(key);
  // What the operator made, watched: the reconcilers read it from here. A runtime Deployment's changes (its
  // availability) wake its Project at once; so does any owned object's deletion, which the Project puts back.
  const owned = new OwnedObjectCache(kubeConfig, [{ apiVersion: 'v1', kind: 'Namespace', plural: 'namespaces' }, ...PROJECT_OBJECT_KINDS], logger, (kind, object, event) => {
    const project = object.metadata?.labels?.[LABELS.project];
    if (project && (kind === 'Deployment' || event === 'delete')) enqueue(objectKey('Project', project));
  });
  const connection = new KubeClient(kubeConfig, { cache: owned, onRead: (kind) => metrics.reads.inc({ kind }) });
  // Every write, to the API server, a project runtime or the database server, is made only while leading.
  const mayWrite = () => {
    if (!isLeader()) throw new NotLeaderError();
  };
  const guarded = connection.withOptions({
    mayWrite,
    onWrite: (verb, kind) => metrics.writes.inc({ verb, kind }),
    onConflict: (kind) => metrics.conflicts.inc({ kind }),
  });
  const kube = deps.wrapKube ? deps.wrapKube(guarded) : guarded;

  const adminUrl = config.stores.databaseAdminUrl;
  const ownPool = !deps.database && adminUrl ? ProjectDatabases.adminPool(adminUrl) : undefined;
  const pool = deps.database ?? ownPool;
  ownPool?.on('error', (error) => logger.warn({ err: error.message }, 'project database admin connection failed'));
  const databases = pool && adminUrl ? new ProjectDatabases({ pool, adminUrl, databaseHost: config.stores.databaseHost, logger, mayWrite }) : undefined;
  const runtime = (deps.runtimeClient ?? new RuntimeClient()).withOptions({ mayWrite });

  const tenants = tenantController({ kubeConfig, kube, reconciler: new TenantReconciler({ kube, config, logger, runtime }), enqueue, logger });
  const projects = projectController({
    kubeConfig,
    kube,
    reconciler: new ProjectReconciler({ kube, config, logger, runtime, databases }),
    enqueue,
    onProject: (project) => tenants.onProject(project),
    logger,
  });
  const controllers: Record<'Project' | 'Tenant', Controller> = { Project: projects, Tenant: tenants };
  const watches = [...projects.watches, ...tenants.watches, ...owned.watches];

  queue = new WorkQueue({
    reconcile: async (key) => {
      const { kind, namespace, name } = parseKey(key);
      return controllers[kind].reconcile(namespace, name);
    },
    concurrency: CONCURRENCY,
    baseBackoffMs: FIRST_RETRY_MS,
    maxBackoffMs: config.maxBackoffSeconds * 1000,
    onReport: (report) => recordReconcile(report),
  });

  function recordReconcile(report: ReconcileReport): void {
    const kind = report.key.split('/')[0]!;
    metrics.reconciles.inc({ kind, result: report.result });
    metrics.reconcileDuration.observe({ kind }, report.durationMs / 1000);
    if (report.result !== 'error') return;
    const err = errorMessage(report.error);
    if (report.error instanceof NotLeaderError) logger.debug({ key: report.key }, 'reconcile stopped: no longer the leader');
    else logger.warn({ key: report.key, err, retryInMs: report.retryInMs }, 'reconcile failed; retrying');
  }

  /** Every watched object, Projects first: on a resync and when this replica starts leading. */
  const enqueueAll = () => {
    for (const key of [...projects.keys(), ...tenants.keys()]) queue.add(key);
  };

  if (config.leaderElection.enabled) {
    elector = new LeaderElector({
      kube: connection,
      namespace: config.namespace,
      leaseName: config.leaderElection.leaseName,
      identity: config.identity,
      leaseSeconds: config.leaderElection.leaseSeconds,
      renewSeconds: config.leaderElection.renewSeconds,
      logger,
      onStartedLeading: () => {
        metrics.leader.set(1);
        enqueueAll();
        queue.start();
      },
      onStoppedLeading: () => {
        metrics.leader.set(0);
        queue.pause();
      },
    });
  }

  const isReady = () => watches.every((watch) => watch.synced);
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/health') return json(200, { status: 'ok' });
    // Leader and standby alike are ready once their watches run: the standby can take over at once.
    if (path === '/ready') return json(isReady() ? 200 : 503, { ready: isReady(), leader: isLeader() });
    if (path === '/metrics') {
      void metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(text);
        },
        (error: unknown) => json(500, { detail: String(error) }),
      );
      return;
    }
    json(404, { detail: 'not found' });
  });

  let resync: NodeJS.Timeout | undefined;
  let started = false;
  return {
    metrics,
    databases,
    queue,
    isLeader,
    isReady,
    url: () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async start() {
      started = true;
      await listen(server, config.port, config.host);
      await Promise.all(watches.map((watch) => watch.start()));
      resync = setInterval(enqueueAll, config.resyncSeconds * 1000);
      resync.unref();
      if (elector) elector.start();
      else {
        metrics.leader.set(1);
        enqueueAll();
        queue.start();
      }
      logger.info({ url: `http://${config.host}:${(server.address() as AddressInfo).port}`, identity: config.identity }, 'operator started');
    },
    async stop() {
      if (!started) return;
      started = false;
      clearInterval(resync);
      // Finish what runs while still holding the lease, then give it up, so the next leader starts clean.
      await queue.stop();
      await elector?.stop();
      metrics.leader.set(0);
      await Promise.all(watches.map((watch) => watch.stop()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ownPool?.end();
      logger.info({ identity: config.identity }, 'operator stopped');
    },
  };
}
