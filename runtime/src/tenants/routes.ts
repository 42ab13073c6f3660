// HTTP adapter for tenants and their configuration (X-Admin-Key): parse, call the service, answer.
import type { RouteDefinition } from '@agentplane/lib/http/routes';
import { defineRoute } from '@agentplane/lib/http/routes';
import { z } from 'zod';
import type { TenantConfigurationService } from './configuration.js';
import type { TenantService } from './service.js';
import {
  ConfigurationPutQuery,
  TenantConfiguration,
  TenantConfigurationOut,
  TenantCreate,
  TenantCreated,
  TenantDeleted,
  TenantIdParams,
  TenantOut,
  TenantSettingsUpdate,
  WebhookSecret,
} from './schemas.js';

const unauthorized = { description: 'Missing or wrong X-Admin-Key' };
const notFound = { description: 'No such tenant' };
const invalid = { description: 'Invalid body or tenant_id (not a UUID)' };

export function tenantRoutes(tenants: TenantService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/tenants',
      operationId: 'createTenant',
      summary: 'Register a tenant',
      tags: ['tenants'],
      security: ['adminKey'],
      body: TenantCreate,
      responses: { 201: { description: 'Created', schema: TenantCreated }, 401: unauthorized, 409: { description: 'tenant_id taken' }, 422: invalid },
      async handle({ body }) {
        return { status: 201, body: await tenants.create(body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants',
      operationId: 'listTenants',
      summary: 'List tenants, oldest first',
      tags: ['tenants'],
      security: ['adminKey'],
      responses: { 200: { description: 'Every tenant', schema: z.array(TenantOut) }, 401: unauthorized },
      async handle() {
        return { body: await tenants.list() };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}',
      operationId: 'getTenant',
      summary: 'Read one tenant',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      responses: { 200: { description: 'The tenant', schema: TenantOut }, 401: unauthorized, 404: notFound, 422: invalid },
      async handle({ params }) {
        return { body: await tenants.get(params.tenant_id) };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/tenants/{tenant_id}',
      operationId: 'updateTenant',
      summary: 'Merge keys into settings_json (null removes a key); optionally rename',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      body: TenantSettingsUpdate,
      responses: { 200: { description: 'The updated tenant', schema: TenantOut }, 401: unauthorized, 404: notFound, 422: invalid },
      async handle({ params, body }) {
        return { body: await tenants.update(params.tenant_id, body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/tenants/{tenant_id}',
      operationId: 'deleteTenant',
      summary: 'Erase a tenant: stop its work, delete sandboxes, purge rows (all or nothing), then vectors and stored bytes (best effort, reported)',
      description:
        'Calling again for an erased tenant retries the best-effort steps and answers a fresh report, so a finalizer can repeat until `complete` is true.',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      responses: {
        200: { description: 'Erased; each step reported', schema: TenantDeleted },
        401: unauthorized,
        404: notFound,
        422: invalid,
        500: {
          description:
            'Nothing was purged. Either the row purge failed (`internal server error`), or a step that must precede it (stopping work, deleting sandboxes) failed: then `code` is `erase_incomplete`, `detail` names the step and `report` lists each step. Retry.',
        },
      },
      async handle({ params }) {
        return { body: await tenants.erase(params.tenant_id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/webhook-secret',
      operationId: 'getTenantWebhookSecret',
      summary: 'Read the secret that signs deliveries to the customer',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      responses: { 200: { description: 'The live secret', schema: WebhookSecret }, 401: unauthorized, 404: notFound, 422: invalid },
      async handle({ params }) {
        return { body: await tenants.webhookSecret(params.tenant_id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tenants/{tenant_id}/webhook-secret/rotate',
      operationId: 'rotateTenantWebhookSecret',
      summary: 'Replace the webhook secret at once (no dual-signature window)',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      responses: { 200: { description: 'The new secret', schema: WebhookSecret }, 401: unauthorized, 404: notFound, 422: invalid },
      async handle({ params }) {
        return { body: await tenants.rotateWebhookSecret(params.tenant_id) };
      },
    }),
  ];
}

export function tenantConfigurationRoutes(configurations: TenantConfigurationService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'put',
      path: '/tenants/{tenant_id}/configuration',
      operationId: 'putTenantConfiguration',
      summary: 'Store the configuration the control plane pushes (idempotent by version)',
      description:
        'Replaces the whole configuration when `version` is higher than the stored one. The same version with the same content answers 200 and changes nothing, so a retried push is harmless. With `replace_digest` (the `stored_digest` of a 409) it replaces the stored configuration whatever the versions, if that is still the one stored: the control plane brings back a runtime that holds a newer version, or other content at the same version.',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      query: ConfigurationPutQuery,
      body: TenantConfiguration,
      responses: {
        200: { description: 'Stored, or already stored', schema: TenantConfigurationOut },
        401: unauthorized,
        404: notFound,
        409: {
          description:
            'Nothing changed: `version` is lower than the stored one (`code` `configuration_outdated`), or equal with other content (`code` `configuration_version_conflict`), or `replace_digest` does not name the stored configuration (`code` `configuration_changed`); `stored_version` and `stored_digest` say what is stored',
        },
        422: invalid,
      },
      async handle({ params, query, body }) {
        return { body: await configurations.put(params.tenant_id, body, query.replace_digest === undefined ? {} : { replaceDigest: query.replace_digest }) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/configuration',
      operationId: 'getTenantConfiguration',
      summary: 'Read the stored configuration and its version',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantIdParams,
      responses: {
        200: { description: 'The stored configuration', schema: TenantConfigurationOut },
        401: unauthorized,
        404: { description: 'No such tenant, or (`code` `not_configured`) no configuration pushed yet' },
        422: invalid,
      },
      async handle({ params }) {
        return { body: await configurations.get(params.tenant_id) };
      },
    }),
  ];
}
