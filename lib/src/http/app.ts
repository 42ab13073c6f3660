// The HTTP shell every program shares: request ids, in-flight accounting, metrics, a JSON body limit, the four
// operational routes (/health, /ready, /metrics, /openapi.json + /docs), the program's routes, then 404 and the
// one error mapping. Programs hand in their routes and readiness checks; nothing here knows their domain.
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { createDocument, type ZodOpenApiSecuritySchemeObject } from 'zod-openapi';
import type { Logger } from '../logging.js';
import { authorizeOrigin, corsLayer, type CorsOptions } from './cors.js';
import { docsRoute, mountDocAssets } from './docs.js';
import { errorHandler, refuseProtoKeys } from './errors.js';
import { answeredWhileDraining, type Lifecycle } from './lifecycle.js';
import { methodsBeforeRoutes, unknownRoute } from './methods.js';
import type { Registry } from 'prom-client';
import { createHttpMetrics } from './metrics.js';
import { operationalRoutes, type ReadinessCheck } from './operational.js';
import { BODY_ERROR, mountRoutes, openApiPaths, type Guard, type RouteDefinition, type SecurityScheme } from './routes.js';
import { declareStorableText } from './text.js';
import { jsonValue } from '../schemas/json.js';

export const apiVersion = '0.1.0';

export type OpenApiDocument = ReturnType<typeof createDocument>;

export interface HttpAppOptions {
  /** `runtime` or `control-api`: the metrics label and the document title. */
  program: string;
  title: string;
  description: string;
  logger: Logger;
  lifecycle: Lifecycle;
  bodyLimitBytes: number;
  routes: RouteDefinition[];
  guards: Partial<Record<SecurityScheme, Guard>>;
  securitySchemes: Partial<Record<SecurityScheme, ZodOpenApiSecuritySchemeObject>>;
  readiness: Record<string, ReadinessCheck>;
  /** Routers mounted before the JSON routes (for example signed blob URLs, which take raw bodies). */
  rawRouters?: { path: string; router: RequestHandler }[];
  /** The routes browsers on other origins may call, and from where (docs/decisions/0029); unset: none. */
  cors?: CorsOptions;
  /**
   * Paths whose JSON body is also kept as it arrived (`rawBodyOf`), for routes that check a signature over the bytes
   * or key on them (a trigger's event). Only these: every other body is dropped once parsed.
   */
  keepsRawBody?: (path: string) => boolean;
  /** The program's own metrics, served by `/metrics` beside the HTTP ones. */
  registries?: Registry[];
  /** Told of every answered request as its answer's head is sent (the runtime's audit log takes its writes from here). */
  onAnswered?: (req: Request, res: Response) => void;
}

const RAW_BODY = Symbol('rawBody');

/** The bytes of a JSON body as they arrived, on a path `keepsRawBody` names; undefined elsewhere or with no body. */
export function rawBodyOf(req: { [RAW_BODY]?: Buffer }): Buffer | undefined {
  return req[RAW_BODY];
}

const requestIdPattern = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * What every request schema must say beside its own rules (docs/decisions/0076): the text no store holds, which the
 * server refuses before any schema runs. A value that may be any JSON is JsonValue, whose text follows the same rule.
 */
function declareRequestText(jsonSchema: Record<string, unknown>, kind: string): void {
  if ((kind === 'unknown' || kind === 'any') && Object.keys(jsonSchema).length === 0) jsonSchema.$ref = '#/components/schemas/JsonValue';
  else declareStorableText(jsonSchema);
}

/** `openapi` makes the document on its first call (GET /openapi.json), not at start. */
export function createHttpApp(options: HttpAppOptions): { app: Express; openapi: () => OpenApiDocument } {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  const metrics = createHttpMetrics(options.program, options.lifecycle);

  app.use((req, res, next) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && requestIdPattern.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    // A draining process serves what it accepted but takes no more: keep-alive sockets close after this answer,
    // including answers to requests that began before the drain (their headers may already say keep-alive).
    if (options.lifecycle.draining) {
      res.setHeader('Connection', 'close');
      // Accepted work goes on, new work goes elsewhere: only probes and scrapes are still answered.
      if (!answeredWhileDraining.has(req.path)) {
        res.setHeader('Retry-After', '1');
        res.status(503).json({ detail: 'this process is shutting down and takes no new requests; send the request again', code: 'draining', request_id: requestId });
        return;
      }
    }
    const done = options.lifecycle.beginRequest();
    if (options.onAnswered) {
      // Told as the answer's head goes out, before any of it reaches the client: what the hook keeps (the audit
      // log's spool) is kept for every answer a client could have seen, even if the process dies right after.
      const onAnswered = options.onAnswered;
      const writeHead = res.writeHead;
      let told = false;
      res.writeHead = function (this: typeof res, ...args: unknown[]) {
        if (!told) {
          told = true;
          if (typeof args[0] === 'number') this.statusCode = args[0];
          try {
            onAnswered(req, this);
          } catch (error) {
            options.logger.error({ err: error }, 'the answered-request hook failed');
          }
        }
        return (writeHead as (...params: unknown[]) => typeof res).apply(this, args);
      } as typeof res.writeHead;
    }
    res.once('finish', () => {
      if (options.lifecycle.draining) req.socket.end();
      done();
    });
    res.once('close', done);
    next();
  });
  app.use(metrics.middleware);
  for (const raw of options.rawRouters ?? []) app.use(raw.path, raw.router);
  // A body that does not parse (bad JSON, too large) is answered by the route after it has checked the credential
  // and authorized the action (mountRoutes), so a caller who may not act learns nothing from it.
  const keepsRawBody = options.keepsRawBody;
  const json = express.json({
    limit: options.bodyLimitBytes,
    strict: true,
    reviver: refuseProtoKeys,
    ...(keepsRawBody
      ? {
          verify: (req: { path?: string; url?: string; [RAW_BODY]?: Buffer }, _res: unknown, buffer: Buffer) => {
            if (keepsRawBody((req.url ?? '').split('?')[0]!)) req[RAW_BODY] = buffer;
          },
        }
      : {}),
  });
  app.use((req, res, next) => {
    json(req, res, (error?: unknown) => {
      if (error !== undefined) res.locals[BODY_ERROR] = error;
      next();
    });
  });

  // Converting every route's schemas costs a start about a tenth of a second (docs/decisions/0033); the routes are
  // fixed from here on, so the document is made once, when first asked for.
  let document: OpenApiDocument | undefined;
  const openapi = (): OpenApiDocument =>
    (document ??= createDocument(
      {
        openapi: '3.1.0',
        info: { title: options.title, version: apiVersion, description: options.description },
        paths: openApiPaths(allRoutes),
        components: { securitySchemes: options.securitySchemes as Record<string, ZodOpenApiSecuritySchemeObject>, schemas: { JsonValue: jsonValue } },
      },
      {
        override: ({ jsonSchema, zodSchema, io }) => {
          if (io === 'input') declareRequestText(jsonSchema, zodSchema._zod.def.type);
        },
      },
    ));
  const allRoutes = [
    ...operationalRoutes({
      lifecycle: options.lifecycle,
      registries: [metrics.registry, ...(options.registries ?? [])],
      readiness: options.readiness,
      openapi,
    }),
    docsRoute(options.title),
    ...options.routes,
  ];

  mountDocAssets(app);
  const cors = options.cors;
  // CORS first: a preflight is an OPTIONS the method layer would otherwise answer with `Allow` alone.
  if (cors) app.use(corsLayer(allRoutes, cors));
  app.use(methodsBeforeRoutes(allRoutes));
  app.use(
    mountRoutes(allRoutes, {
      guards: options.guards,
      ...(cors ? { authorizeCaller: (route, req, res) => authorizeOrigin(cors, route, req, res) } : {}),
    }),
  );
  app.use(unknownRoute(allRoutes));
  app.use(errorHandler(options.logger));
  return { app, openapi };
}
