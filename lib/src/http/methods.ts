// Which methods each path is served with: `OPTIONS` answered with `Allow`, 405 for a method a path is not served
// with (RFC 9110), 404 for a path no route serves. Given each route's method and OpenAPI-style path.
import type { RequestHandler } from 'express';
import { pathPattern } from './routes.js';

/** The methods routes serve on each path pattern (OpenAPI style: `/tenants/{tenant_id}`), `HEAD` with `GET`. */
class ServedMethods {
  private readonly patterns: { literals: boolean[]; method: string; pattern: RegExp }[];

  constructor(routes: { method: string; path: string }[]) {
    this.patterns = routes.map((route) => ({
      // Which segments are literal: of two patterns that take a path, the one literal where the other is templated
      // (at the first place they differ) is the path's own route.
      literals: route.path.split('/').map((segment) => !segment.includes('{')),
      method: route.method.toUpperCase(),
      pattern: pathPattern(route.path),
    }));
  }

  /**
   * The methods served on `path` by its most literal routes (`/projects/{id}/tools/deliveries` rather than
   * `/projects/{id}/tools/{toolId}`, which would take the same path): the path's own.
   */
  on(path: string): Set<string> {
    const matching = this.patterns.filter((candidate) => candidate.pattern.test(path));
    const rank = (literals: boolean[]) => literals.map((literal) => (literal ? '1' : '0')).join('');
    const best = matching.reduce((top, candidate) => (rank(candidate.literals) > top ? rank(candidate.literals) : top), '');
    return withHead(matching.filter((candidate) => rank(candidate.literals) === best));
  }
}

function withHead(patterns: { method: string }[]): Set<string> {
  const methods = new Set(patterns.map((candidate) => candidate.method));
  if (methods.has('GET')) methods.add('HEAD');
  return methods;
}

function methodNotAllowed(res: Parameters<RequestHandler>[1], method: string, path: string, allowed: Set<string>): void {
  const allow = [...allowed].sort().join(', ');
  const requestId = res.locals.requestId as string | undefined;
  res.setHeader('Allow', allow);
  res.status(405).json({ detail: `${method} is not allowed on ${path}; allowed: ${allow}`, code: 'method_not_allowed', ...(requestId ? { request_id: requestId } : {}) });
}

/**
 * Before the routes: `OPTIONS` (other than a CORS preflight) answers 204 with `Allow`, and a path that a route
 * serves more literally (`/chat/sessions/models`) answers 405 for the methods it does not serve, even where a more
 * templated route (`/chat/sessions/{id}`) would take the same path with that method.
 */
export function methodsBeforeRoutes(routes: { method: string; path: string }[]): RequestHandler {
  const all = new ServedMethods(routes);
  return (req, res, next) => {
    if (req.method === 'OPTIONS') {
      const allowed = all.on(req.path);
      if (allowed.size === 0 || req.get('access-control-request-method') !== undefined) return next();
      res.setHeader('Allow', [...allowed].sort().join(', '));
      res.status(204).end();
      return;
    }
    const allowed = all.on(req.path);
    if (allowed.size === 0 || allowed.has(req.method)) return next();
    methodNotAllowed(res, req.method, req.path, allowed);
  };
}

/**
 * The last handler: a path no route serves is 404; a path served only with other methods is 405 with `Allow`
 * (RFC 9110).
 */
export function unknownRoute(routes: { method: string; path: string }[]): RequestHandler {
  const served = new ServedMethods(routes);
  return (req, res) => {
    const allowed = served.on(req.path);
    if (allowed.size > 0) {
      methodNotAllowed(res, req.method, req.path, allowed);
      return;
    }
    const requestId = res.locals.requestId as string | undefined;
    res.status(404).json({ detail: `no route for ${req.method} ${req.path}`, code: 'no_route', ...(requestId ? { request_id: requestId } : {}) });
  };
}
