// Routes as data: one definition per route carries its path, its schemas, its credential and its handler.
// The same definition mounts the express handler (validating with the schemas) and feeds /openapi.json,
// so the document cannot drift from what the server accepts.
import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import type { ZodOpenApiOperationObject, ZodOpenApiPathsObject, ZodOpenApiResponseObject } from 'zod-openapi';
import { AppError, ValidationError, type FieldProblem } from '../errors.js';
import { isMultipart, readMultipart, type MultipartSpec, type UploadedFile } from './multipart.js';
import { nestedDeeperThan } from '../schemas/json.js';
import { untextualFields } from './text.js';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** Names of the security schemes a route may require; each program declares how each is checked. */
export type SecurityScheme = 'adminKey' | 'bearer' | 'apiKey' | 'session' | 'fireKey';

export interface ResponseSpec {
  description: string;
  /** JSON body schema; omit for responses without a JSON body. */
  schema?: z.ZodType;
  /** Non-JSON content (for example `text/plain` metrics or `text/event-stream`). */
  contentType?: string;
}

export interface RouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** A `multipart/form-data` request to a route that takes one: its text fields (checked by `multipart.fields`) and its file. */
  form?: { fields: unknown; file: UploadedFile | undefined; files: UploadedFile[] };
  req: Request;
  res: Response;
}

/** What a handler returns: a JSON body with the route's success status, or `handled` when it wrote itself. */
export type RouteResult = { status?: number; body?: unknown; headers?: Record<string, string> } | 'handled';

export interface RouteDefinition<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
> {
  method: HttpMethod;
  /** OpenAPI style: `/tenants/{tenant_id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** Credentials that satisfy this route (any one); empty for public routes. */
  security: SecurityScheme[];
  params?: P;
  query?: Q;
  body?: B;
  /**
   * The route also takes a `multipart/form-data` body: one file part and text fields. The handler then gets `form`
   * (and `body` is `{}`): the fields checked by `fields`, like a JSON body, after the route's authorization.
   */
  multipart?: MultipartSpec & { fields: z.ZodType };
  responses: Record<number, ResponseSpec>;
  /**
   * Runs after the credential and the path parameters are checked and before the query and body are: authorizes
   * the kind of action and finds its target (not visible answers 404, as a made-up id would), so a caller who may
   * not act learns nothing from how its body would have been validated.
   */
  authorize?(input: Pick<RouteInput<z.infer<P>, unknown, unknown>, 'params' | 'req' | 'res'>): Promise<void> | void;
  handle(input: RouteInput<z.infer<P>, z.infer<Q>, z.infer<B>>): Promise<RouteResult>;
}

/** Identity helper that keeps the handler's input typed from the route's schemas. */
export function defineRoute<P extends z.ZodType = z.ZodUndefined, Q extends z.ZodType = z.ZodUndefined, B extends z.ZodType = z.ZodUndefined>(
  route: RouteDefinition<P, Q, B>,
): RouteDefinition {
  return route as unknown as RouteDefinition;
}

/**
 * A guard checks the caller's credential for one scheme; it throws an `unauthenticated` AppError on failure, and a
 * MissingCredentialError when the request carries no credential of its scheme at all.
 */
export type Guard = (req: Request, res: Response) => Promise<void> | void;

/** 401 because no credential of a guard's scheme was sent: a route that takes several schemes tries the next. */
export class MissingCredentialError extends AppError {
  constructor(message: string) {
    super('unauthenticated', message);
    this.name = 'MissingCredentialError';
  }
}

export interface MountOptions {
  guards: Partial<Record<SecurityScheme, Guard>>;
  /**
   * Authorization of the caller as a whole, run after the credential and before the path (for example a browser
   * origin the caller's project does not allow): a caller refused here learns nothing of the route.
   */
  authorizeCaller?: (route: RouteDefinition, req: Request, res: Response) => Promise<void> | void;
}

/** The issue parameter that marks a field whose invalid value makes the request malformed (see `malformedUnless`). */
const MALFORMED = 'malformed';

/**
 * A field whose invalid value is a malformed request, answered 400 naming the field, not 422 (SPEC.md Errors: an
 * invalid `requiresApproval` value is 400). `check` says which values are valid; give the field its OpenAPI type
 * with `.meta({ type })`, since a custom check has none.
 */
export function malformedUnless<T>(check: (value: unknown) => value is T, message: string) {
  return z.custom<T>(check, { message, params: { [MALFORMED]: true } });
}

/** A 400 naming each malformed field (`tools[0].requiresApproval: ...`) when any issue is one; otherwise undefined. */
function malformedRequest(error: z.ZodError): AppError | undefined {
  const malformed = error.issues.filter((issue) => issue.code === 'custom' && issue.params?.[MALFORMED] === true);
  if (malformed.length === 0) return undefined;
  const field = (path: PropertyKey[]) => path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
  return new AppError('invalid_argument', malformed.map((issue) => `${field(issue.path)}: ${issue.message}`).join('; '));
}

function problemsOf(error: z.ZodError, where: string): FieldProblem[] {
  return error.issues.map((issue) => ({ loc: [where, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))], msg: messageOf(issue) }));
}

/** A record key's own problem ("setting names are ...") says more than zod's generic "Invalid key in record". */
function messageOf(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_key' && issue.issues.length > 0) return `invalid name: ${issue.issues.map((inner) => inner.message).join('; ')}`;
  return issue.message;
}

/** The deepest nesting a request's query or body may have. */
const MAX_NESTING = 64;

function parsePart(schema: z.ZodType | undefined, value: unknown, where: string): unknown {
  if (!schema) return undefined;
  // A value nested past any schema's use (thousands of levels) would overflow a recursive schema's stack: refused
  // here, without recursion, before any schema walks it.
  if (nestedDeeperThan(value, MAX_NESTING)) throw new ValidationError([{ loc: [where], msg: `nests deeper than ${MAX_NESTING} levels` }]);
  const untextual = untextualFields(value, where);
  if (untextual.length > 0) throw new ValidationError(untextual);
  const result = schema.safeParse(value);
  if (!result.success) throw malformedRequest(result.error) ?? new ValidationError(problemsOf(result.error, where));
  return result.data;
}

/** Where the app's body parser leaves a body it could not parse, for the route to answer in its turn. */
export const BODY_ERROR = 'bodyError';

/** Whether the request carries a body at all (the same test body parsers use). */
const hasBody = (req: Request) => req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

const expressPath = (path: string) => path.replace(/\{([^}]+)\}/g, ':$1');

/** Matches the request paths an OpenAPI-style path (`/tenants/{tenant_id}`) serves, as express matches them. */
export function pathPattern(path: string): RegExp {
  return new RegExp(`^${path.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')).join('[^/]+')}/?$`);
}

export function successStatus(route: RouteDefinition): number {
  return Number(Object.keys(route.responses).find((status) => Number(status) < 300) ?? 200);
}

/**
 * Mounts every route on a router. The order is the security order: the credential (401), the caller's
 * authorization (403), the path, the route's own authorization and lookup (403, 404), then the query and body (4xx
 * naming the field), then the handler.
 */
/** Where `mountRoutes` leaves the route that answered a request (`answeredRoute` reads it). */
const ANSWERED_ROUTE = 'agentplaneAnsweredRoute';

/** The route that answered (its OpenAPI path, such as `/chat/sessions/{id}`) and the path's values; undefined when none did. */
export function answeredRoute(res: { locals: Record<string, unknown> }): { path: string; params: Record<string, string> } | undefined {
  return res.locals[ANSWERED_ROUTE] as { path: string; params: Record<string, string> } | undefined;
}

export function mountRoutes(routes: RouteDefinition[], options: MountOptions): Router {
  const router = express.Router();
  for (const route of routes) {
    const guards = route.security.map((scheme) => {
      const guard = options.guards[scheme];
      if (!guard) throw new Error(`route ${route.operationId} needs security scheme '${scheme}', which this program does not provide`);
      return guard;
    });
    router[route.method](expressPath(route.path), async (req, res, next) => {
      // Which route answered, with the path's values as sent: for what runs after the answer (the audit log), since
      // express forgets both once an error leaves the router.
      res.locals[ANSWERED_ROUTE] = { path: route.path, params: { ...req.params } };
      try {
        if (guards.length > 0) await firstPassingGuard(guards, req, res);
        if (options.authorizeCaller) await options.authorizeCaller(route, req, res);
        const params = parsePart(route.params, req.params, 'path');
        if (route.authorize) await route.authorize({ params, req, res });
        if (res.locals[BODY_ERROR] !== undefined) throw res.locals[BODY_ERROR];
        const query = parsePart(route.query, req.query, 'query');
        let form: RouteInput<unknown, unknown, unknown>['form'];
        if (route.multipart && isMultipart(req)) {
          const read = await readMultipart(req, route.multipart);
          form = { fields: parsePart(route.multipart.fields, read.fields, 'body'), file: read.file, files: read.files };
        } else if (route.body && hasBody(req) && !req.is('application/json')) {
          // express.json() leaves other media types unparsed; without this check their body would pass as `{}`.
          throw new AppError(
            'unsupported_media_type',
            route.multipart
              ? 'request body must be JSON (Content-Type: application/json) or a form (Content-Type: multipart/form-data)'
              : 'request body must be JSON, sent with Content-Type: application/json',
          );
        }
        const input = {
          params,
          query,
          body: form ? {} : parsePart(route.body, req.body ?? {}, 'body'),
          ...(form ? { form } : {}),
          req,
          res,
        };
        const result = await route.handle(input);
        if (result === 'handled') return;
        for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
        const status = result.status ?? successStatus(route);
        if (result.body === undefined) res.status(status).end();
        else res.status(status).json(result.body);
      } catch (error) {
        next(error);
      }
    });
  }
  return router;
}

/**
 * Any one scheme suffices, but a credential that was sent and refused is the answer even when another would pass:
 * a wrong key beside a valid session is a 401, never a request made as whoever the other credential names.
 */
async function firstPassingGuard(guards: Guard[], req: Request, res: Response): Promise<void> {
  let firstError: unknown;
  for (const guard of guards) {
    try {
      await guard(req, res);
      return;
    } catch (error) {
      if (!(error instanceof MissingCredentialError)) throw error;
      firstError ??= error;
    }
  }
  throw firstError;
}

const errorFields = {
  code: z.string().meta({ description: 'A stable machine-readable reason (`not_found`, `no_provider`, `validation_failed`, ...)' }),
  request_id: z.string().meta({ description: 'The id of this request in the service\'s logs (also the X-Request-Id header)' }),
};

const errorSchema = z
  .looseObject({ detail: z.string(), ...errorFields })
  .meta({ id: 'Error', description: 'Every error except 422. More fields may be present (for example `run_id`, `session_id`).' });

const validationErrorSchema = z
  .looseObject({
    detail: z.array(z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string() })),
    ...errorFields,
  })
  .meta({ id: 'ValidationError', description: 'A 422: each problem with where it is (`body`, `query` or `path`, then the field path) and what is wrong' });

/** Answers every route may give besides its own, so the document lists them without each route repeating them. */
function standardResponses(route: RouteDefinition): Record<number, ResponseSpec> {
  const standard: Record<number, ResponseSpec> = { 500: { description: 'A service bug or a failed dependency; carries request_id' } };
  if (route.security.length > 0) standard[401] = { description: 'Missing or invalid credential' };
  if (route.body || route.params || route.query) standard[422] = { description: 'Invalid body, path or query' };
  if (route.body) {
    standard[400] = { description: 'Body is not valid JSON, or a field whose invalid value makes the request malformed (the detail names it)' };
    standard[413] = { description: 'Body larger than the configured limit' };
    standard[415] = { description: 'Body sent with a Content-Type other than application/json' };
  }
  return standard;
}

/** The OpenAPI `paths` object for a set of routes, from the same schemas the server validates with. */
export function openApiPaths(routes: RouteDefinition[]): ZodOpenApiPathsObject {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) {
    const responses: Record<string, ZodOpenApiResponseObject> = {};
    for (const [status, spec] of Object.entries({ ...standardResponses(route), ...route.responses })) {
      const contentType = spec.contentType ?? 'application/json';
      const errorBody = status === '422' ? validationErrorSchema : errorSchema;
      const schema = spec.schema ?? (Number(status) >= 400 ? errorBody : undefined);
      responses[status] = {
        description: spec.description,
        ...(schema || spec.contentType ? { content: { [contentType]: { schema: schema ?? z.string() } } } : {}),
      };
    }
    const operation: ZodOpenApiOperationObject = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: route.tags,
      security: route.security.map((scheme) => ({ [scheme]: [] })),
      ...(route.params || route.query
        ? {
            requestParams: {
              ...(route.params ? { path: route.params as never } : {}),
              ...(route.query ? { query: route.query as never } : {}),
            },
          }
        : {}),
      // A body whose every field is optional may be left out (it is read as `{}`); any other is required.
      ...(route.body
        ? {
            requestBody: {
              required: !route.body.safeParse({}).success,
              content: {
                'application/json': { schema: route.body },
                ...(route.multipart ? { 'multipart/form-data': { schema: formSchema(route.multipart) } } : {}),
              },
            },
          }
        : {}),
      responses: responses as ZodOpenApiOperationObject['responses'],
    };
    paths[route.path] = { ...paths[route.path], [route.method]: operation };
  }
  return paths;
}

/** A form's OpenAPI schema: its text fields and its file part, as binary. */
function formSchema(spec: NonNullable<RouteDefinition['multipart']>): z.ZodType {
  const file = z.string().meta({ format: 'binary', description: `The file, at most ${spec.maxFileBytes} bytes` });
  const parts = {
    [spec.file]: spec.repeated ? file.optional() : file,
    ...(spec.repeated
      ? {
          [spec.repeated.name]: z
            .array(z.string().meta({ format: 'binary' }))
            .max(spec.repeated.maxParts)
            .optional()
            .meta({ description: `Instead of ${spec.file}: files each named by its path, at most ${spec.repeated.maxParts}` }),
        }
      : {}),
  };
  return spec.fields instanceof z.ZodObject ? spec.fields.extend(parts) : z.object(parts);
}
