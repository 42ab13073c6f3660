// HTTP adapters for what an end-user token may do (bearer): parse, ask, answer.
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { PROJECT_KEY_ON_DATA_PLANE } from '@agentplane/lib/tokens/verify';
import { Capabilities, capabilitiesOf, type RuntimeOffers } from './capabilities.js';
import { principalOf } from './guard.js';
import { TokenRequest, TokenResponse, type TokenNarrowingService } from './narrowing.js';

export function capabilityRoutes(runtime: RuntimeOffers = { sandboxHost: false, browser: false }): RouteDefinition[] {
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
        return { body: capabilitiesOf(principalOf(res), runtime) };
      },
    }),
  ];
}

export function narrowingRoutes(narrowing: TokenNarrowingService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/auth/token',
      operationId: 'narrowToken',
      summary: 'Narrow the calling end-user token into a child token that can do no more than it',
      description:
        'The credential is the end-user token being narrowed, as `Authorization: Bearer`; a narrowed token can be narrowed again. ' +
        `A project key (pk_...) in either header is refused: "${PROJECT_KEY_ON_DATA_PLANE}". ` +
        'Every field is optional and keeps the caller\'s value when omitted. Capabilities, models, roles, groups and tools only intersect; ' +
        'effort and limits take the lowest of the request, the caller and the project; `expires_in` is clamped to the project\'s maximum.',
      tags: ['auth'],
      security: ['bearer'],
      body: TokenRequest,
      responses: {
        200: { description: 'The child token and what it was granted', schema: TokenResponse },
        400: { description: 'A malformed path, a scope that is not a prefix of user_ref, or a model the project does not register' },
        401: { description: 'Missing, invalid or expired token, or a project key (pk_...) sent to the data plane' },
        403: { description: 'user_ref other than the calling token\'s own subject, or scope or data_scope outside the calling token\'s' },
        422: { description: 'A field of the wrong type or out of range, or an unknown field' },
      },
      async handle({ res, body }) {
        return { body: await narrowing.narrow(principalOf(res), body) };
      },
    }),
  ];
}
