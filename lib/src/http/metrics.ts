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
  new Gauge({
    name: 'http_requests_in_flight',
    help: 'HTTP requests accepted and not yet answered',
    registers: [registry],
    collect() {
      this.set(lifecycle.inFlight.requests);
    },
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
    res.once('finish', () => {
      // The template, not the raw path, keeps label cardinality bounded (ids stay out of the labels).
      const route = req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      const labels = { method: req.method, route, status: String(res.statusCode) };
      requests.inc(labels);
      stop(labels);
    });
    next();
  };
  return { registry, middleware };
}
