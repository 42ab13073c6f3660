import type { Request, Response } from 'express';
import { describe, expect, it } from 'vitest';
import { methodsBeforeRoutes } from './methods.js';

/** What the middleware does with one request: passes it on, or answers it (status and Allow). */
function outcome(routes: { method: string; path: string }[], method: string, path: string) {
  let passed = false;
  const answer: { status?: number; allow?: string } = {};
  const res = {
    locals: {},
    setHeader: (name: string, value: string) => {
      if (name === 'Allow') answer.allow = value;
    },
    status(code: number) {
      answer.status = code;
      return { json: () => undefined, end: () => undefined };
    },
  } as unknown as Response;
  methodsBeforeRoutes(routes)({ method, path, get: () => undefined } as unknown as Request, res, () => (passed = true));
  return passed ? 'next' : answer;
}

describe('methodsBeforeRoutes', () => {
  const routes = [
    { method: 'get', path: '/api/projects/{id}/tools' },
    { method: 'get', path: '/api/projects/{id}/tools/deliveries' },
    { method: 'get', path: '/api/projects/{id}/tools/{toolId}' },
    { method: 'patch', path: '/api/projects/{id}/tools/{toolId}' },
    { method: 'get', path: '/chat/sessions/models' },
    { method: 'delete', path: '/chat/sessions/{id}' },
  ];

  it('answers 405 on a path a more literal route serves, for a method only a templated route would take', () => {
    expect(outcome(routes, 'PATCH', '/api/projects/p1/tools/deliveries')).toEqual({ status: 405, allow: 'GET, HEAD' });
    expect(outcome(routes, 'DELETE', '/chat/sessions/models')).toEqual({ status: 405, allow: 'GET, HEAD' });
  });

  it("answers OPTIONS with the methods of the path's own, most literal, routes", () => {
    expect(outcome(routes, 'OPTIONS', '/api/projects/p1/tools/deliveries')).toEqual({ status: 204, allow: 'GET, HEAD' });
    expect(outcome(routes, 'OPTIONS', '/api/projects/p1/tools/t1')).toEqual({ status: 204, allow: 'GET, HEAD, PATCH' });
  });

  it('passes on what the most literal route serves, and what only templated routes take', () => {
    expect(outcome(routes, 'GET', '/api/projects/p1/tools/deliveries')).toBe('next');
    expect(outcome(routes, 'PATCH', '/api/projects/p1/tools/t1')).toBe('next');
    expect(outcome(routes, 'DELETE', '/chat/sessions/s1')).toBe('next');
    expect(outcome(routes, 'POST', '/nowhere')).toBe('next');
  });
});
