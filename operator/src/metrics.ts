// The operator's Prometheus metrics (one registry per operator, so tests can run several in one process):
// reconciles by kind and result, their duration, the queue's depth, and every write to the API server by verb and
// kind, from which the benchmark reads "writes per reconcile at steady state", and every read that reached the API
// server rather than a watch cache.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface OperatorMetrics {
  registry: Registry;
  reconciles: Counter<'kind' | 'result'>;
  reconcileDuration: Histogram<'kind'>;
  writes: Counter<'verb' | 'kind'>;
  conflicts: Counter<'kind'>;
  reads: Counter<'kind'>;
  leader: Gauge;
  /** All writes so far, summed over verbs and kinds. */
  writesTotal(): Promise<number>;
  /** Reads sent to the API server so far, of one kind or summed over kinds. */
  readsTotal(kind?: string): Promise<number>;
  /** Reconciles so far that ended without error, summed over kinds. */
  reconcilesTotal(kind?: string): Promise<number>;
}

export function createOperatorMetrics(queueDepth: () => number): OperatorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const reconciles = new Counter({
    name: 'agentplane_operator_reconciles_total',
    help: 'Reconciles run, by kind (Project, Tenant) and result (success, requeue, error)',
    labelNames: ['kind', 'result'] as const,
    registers: [registry],
  });
  const reconcileDuration = new Histogram({
    name: 'agentplane_operator_reconcile_duration_seconds',
    help: 'How long one reconcile took, by kind',
    labelNames: ['kind'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const writes = new Counter({
    name: 'agentplane_operator_writes_total',
    help: 'Writes sent to the Kubernetes API server, by verb (create, apply, patch, update_status, delete) and kind; leader-election renewals excluded',
    labelNames: ['verb', 'kind'] as const,
    registers: [registry],
  });
  const conflicts = new Counter({
    name: 'agentplane_operator_conflicts_total',
    help: 'Writes the API server refused with 409 Conflict (retried from a fresh read), by kind',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const reads = new Counter({
    name: 'agentplane_operator_api_reads_total',
    help: 'Reads (get, list) sent to the Kubernetes API server by the reconcilers, by kind; answers from the watch caches excluded',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'agentplane_operator_queue_depth',
    help: 'Objects waiting in the work queue for a reconcile',
    registers: [registry],
    collect() {
      this.set(queueDepth());
    },
  });
  const leader = new Gauge({ name: 'agentplane_operator_leader', help: '1 while this replica holds the leader lease', registers: [registry] });

  const sum = async (counter: Counter<string>, match: (labels: Record<string, unknown>) => boolean = () => true) =>
    (await counter.get()).values.filter((v) => match(v.labels)).reduce((total, v) => total + v.value, 0);

  return {
    registry,
    reconciles,
    reconcileDuration,
    writes,
    conflicts,
    reads,
    leader,
    writesTotal: () => sum(writes),
    readsTotal: (kind) => sum(reads, (labels) => kind === undefined || labels.kind === kind),
    reconcilesTotal: (kind) => sum(reconciles, (labels) => labels.result !== 'error' && (kind === undefined || labels.kind === kind)),
  };
}
