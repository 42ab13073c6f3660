import { describe, expect, it } from 'vitest';
import { defineRoute } from '@agentplane/lib/http/routes';
import { assertProjectRoutesAuthorize } from './routes.js';

const route = (path: string, authorize?: () => void) =>
  defineRoute({ method: 'get', path, operationId: path, summary: path, tags: [], security: ['apiKey'], responses: { 200: { description: 'ok' } }, ...(authorize ? { authorize } : {}), handle: async () => ({ body: {} }) });

describe('project routes', () => {
  it('refuses to serve a route below /api/projects/{id} that has no authorize step', () => {
    expect(() => assertProjectRoutesAuthorize([route('/api/projects/{id}', () => {}), route('/api/projects/{id}/forgotten')])).toThrow('project routes without an authorize step: GET /api/projects/{id}/forgotten');
  });

  it('lets authorized project routes and routes outside projects through', () => {
    const routes = [route('/api/projects/{id}/keys', () => {}), route('/api/me'), route('/api/orgs/{orgId}/projects')];
    expect(assertProjectRoutesAuthorize(routes)).toBe(routes);
  });
});
