// /console/data/{projectId}/...: the console's way to a project's data plane (docs/decisions/0085). The playground
// calls the data plane as an end-user, with a token the console minted; the browser sends it here, on the console's
// own origin, and this forwards it to the project's data plane as a server would call it. So the console keeps
// `connect-src 'self'`, the project's browser origins are not widened for it, and a data plane reachable only inside
// the cluster still serves the playground.
//
// Only end-user tokens of the project named in the path pass, verified here against the project's keys: a request
// without `Authorization: Bearer <JWT>`, or whose token is another project's, expired or forged, is refused, and an
// account's session token or a project key never leaves the control plane. What passes is what the token's holder
// could send to the data plane directly, minus its operational routes; no credential of the control plane's own is
// added. Only the console's own pages may call it: a request
// from another origin is refused (the console's origin is not forwarded either, so the data plane does not judge it
// against the project's browser origins). The target is the data plane the control plane hands out for the
// project, never a URL from the request.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, RequestHandler, Response } from 'express';

/** A project's data plane as this route needs it: where it is, its tenant, and a check of its end-user tokens. */
export interface ProjectDataPlane {
  url: string;
  tenantId: string;
  /** Whether the token is one of the project's, valid now (signature, issuer, audience, expiry). */
  verifies(token: string): Promise<boolean>;
}

/** The project's data plane, or undefined for a project that does not exist; `fresh` skips any kept answer. */
export type DataPlaneOf = (projectId: string, fresh?: boolean) => Promise<ProjectDataPlane | undefined>;

const FORWARDED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
/** The data plane's operational and administrative surface: never reached through the console. */
const CLOSED_PATHS = /^\/(metrics|ready|health|openapi\.json|docs|tenants|admin)(\/|$)/i;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Three base64url parts: a JWT. A session token (`ses_...`) and a project key (`pk_...`) are not. */
const JWT = /^Bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const FORWARDED_REQUEST_HEADERS = ['authorization', 'content-type', 'accept', 'last-event-id', 'x-request-id', 'x-run-id'];
const FORWARDED_RESPONSE_HEADERS = ['content-type', 'cache-control', 'content-disposition', 'x-run-id', 'x-request-id', 'retry-after', 'www-authenticate'];

function refuse(res: Response, status: number, code: string, detail: string): void {
  res.status(status).json({ detail, code, request_id: res.locals.requestId });
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

/** The `tenant_id` claim of a JWT's payload, unverified. */
function tenantOf(authorization: string): unknown {
  try {
    const payload = authorization.slice('Bearer '.length).split('.')[1]!;
    return (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { tenant_id?: unknown } | null)?.tenant_id;
  } catch {
    return undefined;
  }
}

export function dataPlaneProxy(dataPlaneOf: DataPlaneOf): RequestHandler {
  return (req, res) => {
    void forward(dataPlaneOf, req, res).catch((error: unknown) => {
      if (res.headersSent) res.destroy(error instanceof Error ? error : undefined);
      else refuse(res, 502, 'data_plane_unreachable', "the project's data plane did not answer; try again");
    });
  };
}

async function forward(dataPlaneOf: DataPlaneOf, req: Request, res: Response): Promise<void> {
  // req.url is what follows the mount point: /{projectId}/{path}?{query}
  const match = /^\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(req.url);
  const projectId = match?.[1] ?? '';
  if (!UUID.test(projectId)) return refuse(res, 404, 'not_found', `project '${projectId.slice(0, 64)}' not found`);
  const origin = req.get('origin');
  if (origin !== undefined && hostOf(origin) !== req.get('host')) {
    return refuse(res, 403, 'origin_not_allowed', "only the console's own pages reach the data plane through the control plane; call the data plane itself");
  }
  if (!FORWARDED_METHODS.has(req.method)) {
    res.setHeader('Allow', [...FORWARDED_METHODS].join(', '));
    return refuse(res, 405, 'method_not_allowed', `the console does not call the data plane with ${req.method.slice(0, 16)}`);
  }
  const path = match![2] ?? '/';
  // Dot segments, spelled or encoded, would climb out of a data-plane URL with a path once it is resolved.
  const segments = path.split('/').map((segment) => segment.replace(/%2e/gi, '.'));
  if (segments.some((segment) => segment === '.' || segment === '..') || /%2f|%5c|\\/i.test(path)) return refuse(res, 404, 'not_found', 'no such data-plane path');
  if (CLOSED_PATHS.test(path)) return refuse(res, 404, 'not_found', "the data plane's operational routes are not reached through the console");
  const authorization = req.get('authorization') ?? '';
  if (!JWT.test(authorization)) {
    return refuse(res, 401, 'unauthenticated', 'the console reaches the data plane with an end-user token only: Authorization: Bearer <token minted for the project>');
  }
  let project = await dataPlaneOf(projectId);
  if (project === undefined) return refuse(res, 404, 'not_found', `project '${projectId}' not found`);
  // Read first, to tell a token of another project from a bad one; then verified here, not only by the data plane:
  // an unverified request must not reach a data plane that is otherwise reachable only inside the cluster.
  if (tenantOf(authorization) !== project.tenantId) return refuse(res, 403, 'wrong_project', `the token was not minted for project '${projectId}'`);
  const token = authorization.slice('Bearer '.length);
  if (!(await project.verifies(token))) {
    // The project's keys may have been rotated since they were kept: read them again once.
    project = await dataPlaneOf(projectId, true);
    if (!project || !(await project.verifies(token))) return refuse(res, 401, 'invalid_token', 'the token is not a valid end-user token of this project (expired, or not signed by it)');
  }
  const target = `${project.url.replace(/\/+$/, '')}${path}${match![3] ?? ''}`;
  const headers = new Headers();
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = req.get(name);
    if (value !== undefined) headers.set(name, value);
  }
  // The browser's going away ends the call upstream too (a stream's run goes on there, as SPEC.md says it does).
  const abort = new AbortController();
  res.once('close', () => abort.abort());
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const answer = await fetch(target, {
    method: req.method,
    headers,
    redirect: 'manual',
    signal: abort.signal,
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' } : {}),
  } as RequestInit);
  res.status(answer.status);
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const value = answer.headers.get(name);
    if (value !== null) res.setHeader(name, value);
  }
  // Frames are passed on as they come: nothing between here and the browser may hold them back.
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  if (!answer.body) return void res.end();
  await pipeline(Readable.fromWeb(answer.body as import('node:stream/web').ReadableStream<Uint8Array>), res).catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
}
