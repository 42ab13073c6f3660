// Cross-origin access for browsers (docs/decisions/0029). A program names the routes it opens to other origins and
// decides which origins it allows; this module answers their preflights, puts the CORS headers on their answers and
// refuses, right after authentication, a browser origin the caller's own project did not allow. Routes not opened
// get no CORS headers, so browsers on other origins cannot read them.
import type { Request, RequestHandler, Response } from 'express';
import { permissionDenied } from '../errors.js';
import { pathPattern, type RouteDefinition } from './routes.js';

export interface CorsOptions {
  /** Whether browsers on other origins may call this route at all. */
  opens(route: RouteDefinition): boolean;
  /**
   * Whether some caller may be allowed `origin`. Answers preflights, which carry no credential, and decides whether
   * an answer given before the caller is known (a 401) is readable by the page.
   */
  anyAllows(origin: string): Promise<boolean>;
  /** Whether the authenticated caller may call from `origin`: authorization, run right after the credential. */
  callerAllows(origin: string, req: Request, res: Response): boolean | Promise<boolean>;
  /** Request headers a page may send (`Access-Control-Allow-Headers`). */
  allowHeaders: string[];
  /** Response headers a page may read besides the safelisted ones (`Access-Control-Expose-Headers`). */
  exposeHeaders: string[];
  /** How long a browser may keep a preflight's answer (`Access-Control-Max-Age`). */
  maxAgeSeconds: number;
}

/** Where the CORS layer leaves the origin of a cross-origin request to an opened route, for the route's check. */
const CROSS_ORIGIN = 'crossOrigin';

const ALLOW_ORIGIN = 'Access-Control-Allow-Origin';
const EXPOSE_HEADERS = 'Access-Control-Expose-Headers';

/**
 * Answers preflights of the opened routes and marks their cross-origin requests; mounted before the routes. A
 * request without an Origin (a server), or from the service's own origin (the /docs explorer), passes untouched.
 */
export function corsLayer(routes: RouteDefinition[], options: CorsOptions): RequestHandler {
  const opened = routes.filter((route) => options.opens(route)).map((route) => ({ method: route.method, pattern: pathPattern(route.path) }));
  const methodsOf = (path: string) => new Set<string>(opened.filter((route) => route.pattern.test(path)).map((route) => route.method));
  return (req, res, next) => {
    const methods = methodsOf(req.path);
    const preflight = req.method === 'OPTIONS' ? req.get('access-control-request-method') : undefined;
    const method = (preflight ?? req.method).toLowerCase();
    // HEAD is served by the GET route.
    if (!methods.has(method) && !(method === 'head' && methods.has('get'))) return next();
    // The answer depends on the Origin whether or not this request sent one: caches must keep them apart.
    res.vary('Origin');
    const origin = crossOriginOf(req);
    if (origin === undefined) return next();
    options.anyAllows(origin).then((allowed) => {
      if (preflight !== undefined) {
        if (!allowed) return next(originDenied(origin, 'no project served here allows it'));
        res.setHeader(ALLOW_ORIGIN, origin);
        res.setHeader('Access-Control-Allow-Methods', [...methods].map((m) => m.toUpperCase()).join(', '));
        res.setHeader('Access-Control-Allow-Headers', options.allowHeaders.join(', '));
        res.setHeader('Access-Control-Max-Age', String(options.maxAgeSeconds));
        res.status(204).end();
        return;
      }
      if (allowed) {
        res.setHeader(ALLOW_ORIGIN, origin);
        res.setHeader(EXPOSE_HEADERS, options.exposeHeaders.join(', '));
      }
      res.locals[CROSS_ORIGIN] = origin;
      next();
    }, next);
  };
}

/**
 * The route's origin check, run by mountRoutes after the credential: a cross-origin request whose caller may not
 * call from there is 403 `origin_not_allowed`, answered without CORS headers so the page reads nothing.
 */
export async function authorizeOrigin(options: CorsOptions, route: RouteDefinition, req: Request, res: Response): Promise<void> {
  const origin = res.locals[CROSS_ORIGIN] as string | undefined;
  if (origin === undefined || !options.opens(route)) return;
  if (await options.callerAllows(origin, req, res)) {
    // Another project's origin was let through the preflight; this caller's own list is what counts.
    res.setHeader(ALLOW_ORIGIN, origin);
    res.setHeader(EXPOSE_HEADERS, options.exposeHeaders.join(', '));
    return;
  }
  res.removeHeader(ALLOW_ORIGIN);
  res.removeHeader(EXPOSE_HEADERS);
  throw originDenied(origin, 'the project does not allow it');
}

const originDenied = (origin: string, why: string) => permissionDenied(`origin ${origin} denied: ${why}`, { code: 'origin_not_allowed' });

/**
 * The request's Origin when it is another origin than the service's own. The service's own is told by the Host the
 * browser sent (scheme aside: a proxy in front may end TLS); `null` and unparsable origins are foreign.
 */
function crossOriginOf(req: Request): string | undefined {
  const origin = req.get('origin');
  if (origin === undefined) return undefined;
  const host = req.get('host');
  return host !== undefined && hostOf(origin) === host.toLowerCase() ? undefined : origin;
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

/**
 * Whether `origin`, as a browser sends it, is one of `allowed`: `scheme://host[:port]`, compared as origins (case
 * and default ports do not matter in `allowed`); `scheme://*.host[:port]` allows every subdomain of host, at any
 * depth, but not host itself.
 */
export function originAllowed(allowed: readonly string[], origin: string): boolean {
  const sent = parsedOrigin(origin);
  // Browsers send an origin serialized; anything else (`null`, a path, upper case, a default port) is not one.
  if (!sent || sent.origin !== origin) return false;
  return allowed.some((entry) => {
    const wildcard = /^([a-z][a-z0-9+.-]*:\/\/)\*\.(.+)$/i.exec(entry);
    if (!wildcard) return parsedOrigin(entry)?.origin === sent.origin;
    const base = parsedOrigin(`${wildcard[1]}${wildcard[2]}`);
    return base !== undefined && base.protocol === sent.protocol && base.port === sent.port && sent.hostname.endsWith(`.${base.hostname}`);
  });
}

function parsedOrigin(value: string): URL | undefined {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url : undefined;
  } catch {
    return undefined;
  }
}
