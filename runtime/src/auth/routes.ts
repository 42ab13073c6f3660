// HTTP adapter for what an end-user token may do (bearer): parse, ask, answer.
import { defineRoute, type RouteDefinition } from '../../../lib/src/http/routes.js';
import { Capabilities, capabilitiesOf } from './capabilities.js';
import { principalOf } from './guard.js';

export function capabilityRoutes(): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/capabilities',
      operationId: 'getCapabilities',
      summary: 'What this token holds, and which enable_* switches are worth setting',
      tags: ['tools'],
      security: ['bearer'],
      responses: {
        200: { description: 'The token\'s effective permission under the project\'s current ceiling', schema: Capabilities },
        401: { description: 'Missing, invalid or expired token, or a project key (pk_...) sent to the data plane' },
      },
      async handle({ res }) {
        return { body: capabilitiesOf(principalOf(res)) };
      },
    }),
  ];
}
