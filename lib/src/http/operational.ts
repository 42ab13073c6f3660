// The operational routes every program serves: liveness with in-flight work, readiness of each dependency,
// Prometheus metrics and the OpenAPI document.
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { errorMessage } from '../errors.js';
import type { Lifecycle } from './lifecycle.js';
import { defineRoute, type RouteDefinition } from './routes.js';

/** Resolves when the dependency answers; rejects (with a message safe to show) when it does not. */
export type ReadinessCheck = () => Promise<void>;

const readinessTimeoutMs = 3_000;

const HealthSchema = z
  .object({
    status: z.literal('ok'),
    draining: z.boolean().meta({ description: 'Asked to stop: no new connections, accepted work still served' }),
    in_flight: z.number().int().meta({ description: 'Requests and runs in progress: what a deploy waits on' }),
    requests_in_flight: z.number().int(),
    runs_in_flight: z.number().int(),
    uptime_seconds: z.number(),
  })
  .meta({ id: 'Health' });

const DependencyReport = z
  .object({
    ok: z.boolean(),
    latency_ms: z.number(),
    error: z.string().optional(),
  })
  .meta({ id: 'DependencyReport' });

const ReadinessSchema = z
  .object({
    ready: z.boolean(),
    draining: z.boolean(),
    dependencies: z.record(z.string(), DependencyReport),
  })
  .meta({ id: 'Readiness' });

async function runCheck(check: ReadinessCheck): Promise<z.infer<typeof DependencyReport>> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${readinessTimeoutMs} ms`)), readinessTimeoutMs);
      }),
    ]);
    return { ok: true, latency_ms: Math.round(performance.now() - started) };
  } catch (error) {
    const message = errorMessage(error);
    return { ok: false, latency_ms: Math.round(performance.now() - started), error: message.slice(0, 300) };
  } finally {
    clearTimeout(timer);
  }
}

export function operationalRoutes(deps: {
  lifecycle: Lifecycle;
  /** What `/metrics` serves: the HTTP registry first, then the program's own, one exposition after another. */
  registries: Registry[];
  readiness: Record<string, () => Promise<void>>;
  openapi: () => unknown;
}): RouteDefinition[] {
  const startedAt = Date.now();
  return [
    defineRoute({
      method: 'get',
      path: '/health',
      operationId: 'health',
      summary: 'Liveness, work in flight and whether the process is draining',
      tags: ['service'],
      security: [],
      responses: { 200: { description: 'The process is alive', schema: HealthSchema } },
      async handle() {
        const inFlight = deps.lifecycle.inFlight;
        return {
          body: {
            status: 'ok',
            draining: deps.lifecycle.draining,
            // The health request itself is in flight; a deploy waits on everything else.
            in_flight: Math.max(0, inFlight.total - 1),
            requests_in_flight: Math.max(0, inFlight.requests - 1),
            runs_in_flight: inFlight.runs,
            uptime_seconds: Math.round((Date.now() - startedAt) / 1000),
          },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/ready',
      operationId: 'ready',
      summary: 'Readiness: 200 when every dependency answers, 503 with a per-dependency report otherwise',
      tags: ['service'],
      security: [],
      responses: {
        200: { description: 'Every dependency answers', schema: ReadinessSchema },
        503: { description: 'A dependency does not answer, or the process is draining', schema: ReadinessSchema },
      },
      async handle() {
        const names = Object.keys(deps.readiness);
        const reports = await Promise.all(names.map((name) => runCheck(deps.readiness[name]!)));
        const dependencies = Object.fromEntries(names.map((name, i) => [name, reports[i]!]));
        const draining = deps.lifecycle.draining;
        const ready = !draining && reports.every((report) => report.ok);
        return { status: ready ? 200 : 503, body: { ready, draining, dependencies } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/metrics',
      operationId: 'metrics',
      summary: 'Prometheus metrics',
      tags: ['service'],
      security: [],
      responses: { 200: { description: 'Prometheus text exposition', contentType: 'text/plain' } },
      async handle({ res }) {
        res.setHeader('Content-Type', deps.registries[0]!.contentType);
        res.status(200).send((await Promise.all(deps.registries.map((registry) => registry.metrics()))).join('\n'));
        return 'handled';
      },
    }),
    defineRoute({
      method: 'get',
      path: '/openapi.json',
      operationId: 'openapi',
      summary: 'This OpenAPI 3.1 document',
      tags: ['service'],
      security: [],
      responses: { 200: { description: 'OpenAPI 3.1.0 document', schema: z.record(z.string(), z.unknown()) } },
      async handle() {
        return { body: deps.openapi() };
      },
    }),
  ];
}
