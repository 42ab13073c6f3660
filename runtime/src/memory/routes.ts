// HTTP adapters for memory and the wiki: `GET /memory` and `DELETE /memory/{item_id}` for end-users (bearer,
// capability `memory`), and the wiki on the runtime's admin surface for the control plane's
// `/api/projects/:id/wiki` (X-Admin-Key; docs/decisions/0044).
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { principalOf } from '../auth/guard.js';
import type { TenantService } from '../tenants/service.js';
import type { MemoryService } from './service.js';

const timestamp = z.iso.datetime();
const MemoryItemOut = z
  .object({
    id: z.uuid(),
    kind: z.literal('memory'),
    subject: z.string().meta({ description: 'Whose memory it is' }),
    content: z.string(),
    session_id: z.uuid().nullable().meta({ description: 'The conversation it was remembered in, when known' }),
    created_at: timestamp,
  })
  .meta({ id: 'MemoryItem' });
const WikiPageOut = z
  .object({
    id: z.uuid(),
    kind: z.literal('wiki'),
    title: z.string(),
    content: z.string(),
    scope: z.string().meta({ description: 'Who sees it: this subtree, whoever\'s scope covers it, and privileged roles' }),
    author: z.string().meta({ description: 'The subject whose turn wrote it last' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'WikiPage' });

const page = {
  limit: queryNumber((n) => n.int().min(1).max(200)).default(100).meta({ description: 'Page size, at most 200' }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
};
const MemoryQuery = z.object({
  subject: z.string().min(1).max(256).optional().meta({ description: "Another subject's memory: a privileged token (admin, owner, service) only" }),
  ...page,
});
const ItemParams = z.object({ item_id: z.uuid({ error: 'item_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const tenantId = z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase());
const WikiParams = z.object({ tenant_id: tenantId });
const WikiPageParams = z.object({ tenant_id: tenantId, item_id: z.uuid({ error: 'item_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const Deleted = z.object({ id: z.uuid(), deleted: z.literal(true) }).meta({ id: 'MemoryDeleted' });

const denied = { description: 'The token lacks capability `memory` (`code` `capability_denied`); or `subject` names another subject and the token is not privileged' };

export function memoryRoutes(memory: MemoryService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/memory',
      operationId: 'listMemory',
      summary: 'What the agent remembers for this person, newest first, and the project wiki pages they may see',
      description: 'Wiki pages come with the first page of items (offset 0), most recently updated first.',
      tags: ['memory'],
      security: ['bearer'],
      query: MemoryQuery,
      responses: {
        200: {
          description: 'The memory and the wiki',
          schema: z.object({ items: z.array(MemoryItemOut), wiki: z.array(WikiPageOut), has_more: z.boolean(), next_offset: z.int().nullable() }).meta({ id: 'MemoryList' }),
        },
        403: denied,
      },
      authorize: ({ res }) => memory.requireMemory(principalOf(res)),
      async handle({ query, res }) {
        return { body: await memory.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/memory/{item_id}',
      operationId: 'forgetMemoryItem',
      summary: 'Forget one memory item of this person',
      description: "Another subject's item, which a privileged token may read, is 403 `not_owner`; so is a wiki page (managed on the control plane).",
      tags: ['memory'],
      security: ['bearer'],
      params: ItemParams,
      responses: { 200: { description: 'Forgotten', schema: Deleted }, 403: denied, 404: { description: 'No such item, or one this token may not see (the same answer)' } },
      authorize: ({ res }) => memory.requireMemory(principalOf(res)),
      async handle({ params, res }) {
        return { body: await memory.forget(principalOf(res), params.item_id) };
      },
    }),
  ];
}

export function wikiAdminRoutes(memory: MemoryService, tenants: TenantService): RouteDefinition[] {
  const unauthorized = { description: 'Missing or wrong X-Admin-Key' };
  const notFound = { description: 'No such tenant (`code` `tenant_not_found`), or no such page in its wiki' };
  const tenantOf = (tenantId: string) => tenants.existing(tenantId);
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/wiki',
      operationId: 'listWikiPages',
      summary: "The pages the agent wrote in the tenant's wiki, most recently updated first",
      tags: ['tenants'],
      security: ['adminKey'],
      params: WikiParams,
      query: z.object(page),
      responses: {
        200: { description: 'One page', schema: z.object({ pages: z.array(WikiPageOut), has_more: z.boolean(), next_offset: z.int().nullable() }).meta({ id: 'WikiPageList' }) },
        401: unauthorized,
        404: notFound,
      },
      async handle({ params, query }) {
        return { body: await memory.listWiki(await tenantOf(params.tenant_id), query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/wiki/{item_id}',
      operationId: 'getWikiPage',
      summary: 'One page of the wiki',
      tags: ['tenants'],
      security: ['adminKey'],
      params: WikiPageParams,
      responses: { 200: { description: 'The page', schema: WikiPageOut }, 401: unauthorized, 404: notFound },
      async handle({ params }) {
        return { body: await memory.wikiPage(await tenantOf(params.tenant_id), params.item_id) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/tenants/{tenant_id}/wiki/{item_id}',
      operationId: 'deleteWikiPage',
      summary: 'Delete a page of the wiki',
      tags: ['tenants'],
      security: ['adminKey'],
      params: WikiPageParams,
      responses: { 200: { description: 'Deleted', schema: Deleted }, 401: unauthorized, 404: notFound },
      async handle({ params }) {
        return { body: await memory.deleteWikiPage(await tenantOf(params.tenant_id), params.item_id) };
      },
    }),
  ];
}
