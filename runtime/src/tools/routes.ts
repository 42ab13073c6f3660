// HTTP adapters for tools (SPEC.md Tools and capabilities): `GET /tools`, what the caller may call; the record of
// webhook-tool calls, `GET /tools/deliveries` for a privileged token of the tenant and the same list on the admin
// surface for the control plane (X-Admin-Key); and an end-user's own MCP servers (`mcp:manage`): attach, list,
// remove, and `POST /tools/mcp/probe`, which checks one without storing it.
import { z } from 'zod';
import { permissionDenied } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { MCP_SERVER_NAME, mcpHeaderEntries, stdioField } from '@agentplane/lib/mcp';
import { isPrivileged, REQUEST_FLAGS, requireCapability, type RequestFlag } from '@agentplane/lib/permissions';
import { principalOf } from '../auth/guard.js';
import type { TenantService } from '../tenants/service.js';
import type { ToolCatalog } from './catalog.js';
import { DEFAULT_DELIVERIES_LIMIT, DELIVERY_EXCERPT_CHARS, MAX_DELIVERIES_LIMIT, type ToolDeliveries } from './deliveries.js';
import type { McpTools } from './mcp.js';
import type { UserMcpServers } from './user-mcp.js';

const DeliveryOut = z
  .object({
    id: z.uuid(),
    at: z.iso.datetime().meta({ description: 'When the call was made' }),
    tool: z.string().meta({ description: 'The tool\'s name when it was called' }),
    tool_id: z.string().meta({ description: 'The control plane\'s tool id' }),
    session_id: z.uuid(),
    run_id: z.string(),
    subject: z.string().meta({ description: 'Whose turn made the call' }),
    status: z.int().nullable().meta({ description: 'The handler\'s HTTP status; null when none answered' }),
    ok: z.boolean().meta({ description: 'The handler answered 2xx' }),
    attempts: z.int().meta({ description: 'More than 1 when the handler could not have acted on an attempt (refused connection, 429, 503)' }),
    duration_ms: z.int(),
    result: z.string().meta({ description: `The first ${DELIVERY_EXCERPT_CHARS} characters of what the agent was given` }),
    error: z.string().nullable().meta({ description: 'Why the call failed; null for a 2xx answer' }),
  })
  .meta({ id: 'ToolDelivery' });

const DeliveryList = z.object({ deliveries: z.array(DeliveryOut) }).meta({ id: 'ToolDeliveryList' });

const DeliveriesQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_DELIVERIES_LIMIT)
    .default(DEFAULT_DELIVERIES_LIMIT)
    .meta({ description: `How many, newest first (default ${DEFAULT_DELIVERIES_LIMIT}, at most ${MAX_DELIVERIES_LIMIT})` }),
});

const TenantParams = z.object({ tenant_id: z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });

const transports = ['auto', 'streamable_http', 'sse'] as const;
const stdio = stdioField();
const mcpUrl = z.string().trim().min(1).max(2_048).meta({ description: 'The Streamable HTTP (or SSE) endpoint, checked by the URL guard' });
const mcpHeaders = mcpHeaderEntries()
  .refine((headers) => Object.keys(headers).length <= 16, 'at most 16 headers')
  .optional()
  .meta({ description: 'Static headers sent on every request: sealed at rest, never returned' });

const McpAttach = z
  .strictObject({
    name: z.string().regex(MCP_SERVER_NAME, 'name must be 1-24 lower-case letters, digits, _ or -').meta({ description: 'Its tools are offered to your turns as `<name>__<tool>`' }),
    url: mcpUrl,
    transport: z.enum(transports).optional().meta({ description: '`auto` (default): Streamable HTTP, falling back to SSE' }),
    headers: mcpHeaders,
    command: stdio,
    args: stdio,
    type: stdio,
  })
  .meta({ id: 'McpAttach' });

const McpProbeRequest = z
  .strictObject({ url: mcpUrl, transport: z.enum(transports).optional(), headers: mcpHeaders, command: stdio, args: stdio, type: stdio })
  .meta({ id: 'McpProbeRequest' });

const McpProbeResult = z
  .object({
    ok: z.boolean().meta({ description: 'true unless the loader has something to say against the server' }),
    verdict: z.string().nullable().meta({ description: 'What the loader says of it, in the words the tool listing uses; null: nothing' }),
    transport: z.enum(['streamable_http', 'sse']).nullable().meta({ description: 'The transport it answered on' }),
    tools: z.array(z.object({ name: z.string(), description: z.string() })).meta({ description: 'Its tools, by their names on the server' }),
  })
  .meta({ id: 'McpProbeResult' });

const UserMcpOut = z
  .object({
    id: z.uuid(),
    name: z.string(),
    url: z.string(),
    transport: z.enum(transports),
    header_names: z.array(z.string()),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'UserMcpServer' });

const ToolListingOut = z
  .object({
    tools: z.array(
      z.object({
        name: z.string(),
        description: z.string(),
        origin: z.enum(['builtin', 'webhook', 'mcp', 'skill']),
        requires_approval: z.boolean(),
      }),
    ),
    mcp_servers: z.array(
      z.object({
        name: z.string(),
        origin: z.enum(['project', 'personal']),
        ok: z.boolean(),
        verdict: z.string().nullable().meta({ description: 'Why it offers no tools; null: nothing to say' }),
        tools: z.int(),
      }),
    ),
  })
  .meta({ id: 'ToolListing' });

const flagQuery = z.enum(['true', 'false']).transform((value) => value === 'true');
const ToolsQuery = z.object(
  Object.fromEntries(REQUEST_FLAGS.map((flag) => [flag, flagQuery.optional().meta({ description: `As the chat request's \`${flag}\`: false declines` })])) as Record<
    RequestFlag,
    z.ZodOptional<typeof flagQuery>
  >,
);

const ServerParams = z.object({ server_id: z.uuid({ error: 'server_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });

export interface ToolRouteDeps {
  deliveries: ToolDeliveries;
  tenants: TenantService;
  catalog: ToolCatalog;
  mcp: McpTools;
  userMcp: UserMcpServers;
  urlPolicy: UrlPolicy;
}

export function toolRoutes({ deliveries, tenants, catalog, mcp, userMcp, urlPolicy }: ToolRouteDeps): RouteDefinition[] {
  const manage = { description: 'The token lacks capability `mcp:manage` (`code` `capability_denied`)' };
  const unauthenticated = { description: 'Missing, invalid or expired token' };
  return [
    defineRoute({
      method: 'get',
      path: '/tools',
      operationId: 'listTools',
      summary: 'What this token may call: built-in, webhook and MCP tools, each with its origin and whether it waits for approval',
      description:
        "The tool set a turn of this caller's would be offered, with the chat request's `enable_*` flags given as query parameters. Client tools are declared by each chat request, so none is listed. `mcp_servers` says what the loader found of each MCP server the caller reaches.",
      tags: ['tools'],
      security: ['bearer'],
      query: ToolsQuery,
      responses: { 200: { description: 'The tools', schema: ToolListingOut }, 401: unauthenticated },
      async handle({ query, res }) {
        return { body: await catalog.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tools/mcp',
      operationId: 'listMyMcpServers',
      summary: 'The MCP servers this person attached for themselves',
      tags: ['tools'],
      security: ['bearer'],
      responses: { 200: { description: 'Oldest first', schema: z.object({ servers: z.array(UserMcpOut) }).meta({ id: 'UserMcpServerList' }) }, 401: unauthenticated, 403: manage },
      authorize: ({ res }) => userMcp.authorize(principalOf(res)),
      async handle({ res }) {
        return { body: { servers: await userMcp.list(principalOf(res)) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tools/mcp',
      operationId: 'attachMcpServer',
      summary: "Attach an MCP server reached over HTTP for this person alone: its tools are offered to their turns",
      tags: ['tools'],
      security: ['bearer'],
      body: McpAttach,
      responses: {
        201: { description: 'Attached', schema: UserMcpOut },
        400: { description: 'A stdio server (`command`, `args` or `type`), or a URL the guard refuses' },
        401: unauthenticated,
        403: manage,
        409: { description: "The name is one of the person's or the project's servers (`code` `name_taken`), or they have 8" },
      },
      authorize: ({ res }) => userMcp.authorize(principalOf(res)),
      async handle({ body, res }) {
        return { status: 201, body: await userMcp.add(principalOf(res), body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/tools/mcp/{server_id}',
      operationId: 'detachMcpServer',
      summary: 'Remove one of this person\'s MCP servers',
      tags: ['tools'],
      security: ['bearer'],
      params: ServerParams,
      responses: { 200: { description: 'Removed', schema: UserMcpOut }, 401: unauthenticated, 403: manage, 404: { description: 'No such server of this person\'s' } },
      authorize: ({ res }) => userMcp.authorize(principalOf(res)),
      async handle({ params, res }) {
        return { body: await userMcp.remove(principalOf(res), params.server_id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tools/mcp/probe',
      operationId: 'probeMcpServer',
      summary: 'Check one MCP server without storing it: the verdict the tool listing would give, and its tools',
      description: 'Answers `ok` true with no verdict when the loader has nothing to say, or itself fails.',
      tags: ['tools'],
      security: ['bearer'],
      body: McpProbeRequest,
      responses: { 200: { description: 'What the loader found', schema: McpProbeResult }, 400: { description: 'A stdio server, or a URL the guard refuses' }, 401: unauthenticated, 403: manage },
      authorize: ({ res }) => requireCapability(principalOf(res).permission, 'mcp:manage', 'probing MCP servers'),
      async handle({ body }) {
        await checkUrl(body.url, urlPolicy, 'url');
        const load = await mcp.probe({ id: 'probe', name: 'probe', url: body.url, transport: body.transport ?? 'auto', headers: body.headers });
        return {
          body: {
            ok: load.verdict === null,
            verdict: load.verdict,
            transport: load.transport,
            tools: load.tools.map((tool) => ({ name: tool.remote, description: tool.description })),
          },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tools/deliveries',
      operationId: 'listToolDeliveries',
      summary: 'Recent webhook-tool calls of this project, newest first: when, tool, result excerpt, duration and error',
      tags: ['tools'],
      security: ['bearer'],
      query: DeliveriesQuery,
      responses: {
        200: { description: 'Newest first', schema: DeliveryList },
        401: { description: 'Missing, invalid or expired token' },
        403: { description: 'The token carries no privileged role (admin, owner or service)' },
      },
      authorize: ({ res }) => {
        if (!isPrivileged(principalOf(res).claims.roles)) {
          throw permissionDenied('webhook tool deliveries are for a privileged token (role admin, owner or service)', { code: 'not_privileged' });
        }
      },
      async handle({ query, res }) {
        return { body: { deliveries: await deliveries.recent(principalOf(res).tenantId, query.limit) } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/tools/deliveries',
      operationId: 'listTenantToolDeliveries',
      summary: "Recent webhook-tool calls of the tenant's project, newest first",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: DeliveriesQuery,
      responses: {
        200: { description: 'Newest first', schema: DeliveryList },
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant (`code` `tenant_not_found`)' },
      },
      async handle({ params, query }) {
        return { body: { deliveries: await deliveries.recent(await tenants.existing(params.tenant_id), query.limit) } };
      },
    }),
  ];
}
