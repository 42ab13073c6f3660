// Prometheus metrics for one program: request counts and latency by route template and status, requests in
// flight, and process metrics. Each program has its own registry so the all-in-one can serve both.
import type { RequestHandler } from 'express';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Lifecycle } from './lifecycle.js';

export interface HttpMetrics {
  registry: Registry;
  middleware: RequestHandler;
}

export function createHttpMetrics(program: string, lifecycle: Lifecycle): HttpMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ program });
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency, by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  // Counted per program (not from the lifecycle, which the all-in-one shares between both programs).
  const inFlight = new Gauge({
    name: 'http_requests_in_flight',
    help: 'HTTP requests accepted and not yet answered',
    registers: [registry],
  });
  new Gauge({
    name: 'agentplane_runs_in_flight',
    help: 'Detached runs in progress in this process',
    registers: [registry],
    collect() {
      this.set(lifecycle.inFlight.runs);
    },
  });

  const middleware: RequestHandler = (req, res, next) => {
    const stop = duration.startTimer();
    inFlight.inc();
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      inFlight.dec();
      // The template, not the raw path, keeps label cardinality bounded (ids stay out of the labels).
      const route = req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      // A client that went away before the answer was complete is counted too, as `aborted`.
      const status = res.writableFinished ? String(res.statusCode) : 'aborted';
      const labels = { method: req.method, route, status };
      requests.inc(labels);
      stop(labels);
    };
    res.once('finish', record);
    res.once('close', record);
    next();
  };
  return { registry, middleware };
}
