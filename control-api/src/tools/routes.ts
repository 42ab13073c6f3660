// HTTP adapters for a project's tools: webhook tools, MCP servers, the web search engine and skills (admin key or
// signed-in session; docs/decisions/0052, 0053, 0055 and 0056). The webhook tools' write surface spells the approval gate
// `requiresApproval`: any value but true or false (null, 0, "false") is 400, the spelling `requires_approval` is 400
// whatever its value, and a PATCH without it leaves the gate as it was.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { invalidArgument } from '@agentplane/lib/errors';
import { defineRoute, malformedUnless, type RouteDefinition } from '@agentplane/lib/http/routes';
import { MCP_SERVER_NAME, mcpHeaderEntries, stdioField } from '@agentplane/lib/mcp';
import { isRedacted, redactedSecretMessage } from '@agentplane/lib/schemas/redaction';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import { MCP_TRANSPORTS, type McpServerService } from './mcp-servers.js';
import type { SkillRelay } from './skills.js';
import type { WebSearchService } from './web-search.js';
import { MAX_PARAMETERS_BYTES, TOOL_NAME, type WebhookToolService } from './webhook-tools.js';

const forbidden = mintKeyOnAdminRoute;
const hidden = projectHidden;

const requiresApproval = malformedUnless((value): value is boolean => typeof value === 'boolean', 'requiresApproval must be true or false')
  .meta({ type: 'boolean', description: 'Each call waits for approval, in attended and unattended runs alike. Any value but true or false (null, 0, "false") is 400' })
  .optional();
const underscored = malformedUnless((_value): _value is never => false, 'the write surface spells it requiresApproval')
  .meta({ not: {}, description: 'Refused with 400 whatever its value: the write surface spells it `requiresApproval`' })
  .optional();

const description = z.string().trim().min(1).max(4_096).meta({ description: 'What the tool does, for the model: when to call it and what it returns' });
const parameters = z
  .record(z.string(), z.json())
  .meta({ description: `JSON Schema of the arguments, an object schema (\`{"type":"object","properties":{...}}\`), at most ${MAX_PARAMETERS_BYTES / 1024} KiB` });
const url = z.string().trim().min(1).max(2_048).meta({ description: 'The handler: an HTTPS URL, checked by the URL guard (no private or metadata addresses)' });

const WebhookToolCreate = z
  .strictObject({
    name: z.string().regex(TOOL_NAME, 'name must be 1-64 letters, digits, _ or -').meta({ description: 'What the model calls it; unique in the project, not a built-in tool\'s name' }),
    description,
    parameters: parameters.optional(),
    url,
    requiresApproval,
    requires_approval: underscored,
  })
  .meta({ id: 'WebhookToolCreate' });

const WebhookToolPatch = z
  .strictObject({ description: description.optional(), parameters: parameters.optional(), url: url.optional(), requiresApproval, requires_approval: underscored })
  .meta({ id: 'WebhookToolPatch' });

const WebhookToolOut = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    parameters: z.record(z.string(), z.unknown()),
    url: z.string(),
    requiresApproval: z.boolean(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
    rotated_at: z.iso.datetime().nullable(),
    previousSecretUntil: z.iso.datetime().nullable().meta({ description: 'While a rotation\'s 24 hours last: when the replaced secret stops signing' }),
  })
  .meta({ id: 'WebhookTool' });

const WebhookToolCreated = WebhookToolOut.extend({
  secret: z.string().meta({ description: 'The signing secret: shown this once, never listed again. Verify `X-Service-Signature` with it' }),
}).meta({ id: 'WebhookToolCreated' });

const WebhookToolRotated = z
  .object({
    id: z.uuid(),
    secret: z.string().meta({ description: 'The new signing secret, shown this once' }),
    previousSecretUntil: z.iso.datetime().meta({ description: 'Until then calls carry both signatures, comma-separated; afterwards only the new one' }),
  })
  .meta({ id: 'WebhookToolRotated' });

const ToolParams = ProjectParams.extend({ toolId: z.uuid({ error: 'toolId must be a UUID' }).overwrite((id) => id.toLowerCase()) });

const DeliveriesQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(1_000)).optional().meta({ description: 'How many, newest first (default 100, at most 1,000)' }),
});

export function webhookToolRoutes(tools: WebhookToolService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/webhook-tools',
      operationId: 'listWebhookTools',
      summary: "The project's webhook tools (never their secrets)",
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'Oldest first', schema: z.object({ tools: z.array(WebhookToolOut) }).meta({ id: 'WebhookToolList' }) }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: { tools: await tools.list(params.id) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/webhook-tools',
      operationId: 'createWebhookTool',
      summary: 'Publish a webhook tool; its signing secret is in this answer and never again',
      description: 'Publishing grants nothing: a token reaches the tool only with capability `webhook_tools` (and `enable_webhook_tools` not false).',
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: WebhookToolCreate,
      responses: {
        201: { description: 'Published', schema: WebhookToolCreated },
        400: { description: 'A URL the guard refuses, a built-in tool\'s name, parameters that are not an object schema, or an invalid `requiresApproval`' },
        403: forbidden,
        404: hidden,
        409: { description: 'The name is taken in this project (`code` `name_taken`), or the project has 128 tools' },
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { status: 201, body: await tools.create(params.id, body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/webhook-tools/deliveries',
      operationId: 'listWebhookToolDeliveries',
      summary: 'Recent calls of the project\'s webhook tools, newest first: when, tool, result excerpt, duration and error',
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      query: DeliveriesQuery,
      responses: {
        200: { description: 'As the runtime recorded them', schema: z.object({ deliveries: z.array(z.record(z.string(), z.unknown())) }).meta({ id: 'WebhookToolDeliveries' }) },
        403: forbidden,
        404: hidden,
        503: { description: 'The project\'s runtime is not reachable yet' },
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, query }) {
        return { body: (await tools.deliveries(params.id, query.limit)) as { deliveries: Record<string, unknown>[] } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/webhook-tools/{toolId}',
      operationId: 'getWebhookTool',
      summary: 'One webhook tool (never its secret)',
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ToolParams,
      responses: { 200: { description: 'The tool', schema: WebhookToolOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await tools.get(params.id, params.toolId) };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/projects/{id}/webhook-tools/{toolId}',
      operationId: 'updateWebhookTool',
      summary: 'Change a webhook tool: the fields sent change, the rest (the approval gate included) stay as they were',
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ToolParams,
      body: WebhookToolPatch,
      responses: {
        200: { description: 'The tool as changed', schema: WebhookToolOut },
        400: { description: 'An invalid `requiresApproval` (null, 0, "false"), the spelling `requires_approval`, a URL the guard refuses, or parameters that are not an object schema: nothing is changed' },
        403: forbidden,
        404: hidden,
      },
      // The tool is found before its body is read: an unknown one is 404 whatever the body says.
      authorize: async ({ params, res }) => {
        await admin(res.locals, params.id);
        await tools.get(params.id, params.toolId);
      },
      async handle({ params, body }) {
        return { body: await tools.update(params.id, params.toolId, body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/webhook-tools/{toolId}',
      operationId: 'removeWebhookTool',
      summary: 'Remove a webhook tool; the agent can no longer call it',
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ToolParams,
      responses: { 200: { description: 'The removed tool', schema: WebhookToolOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await tools.remove(params.id, params.toolId) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/webhook-tools/{toolId}/rotate',
      operationId: 'rotateWebhookToolSecret',
      summary: 'A new signing secret, shown this once; for 24 hours calls carry both signatures',
      tags: ['webhook-tools'],
      security: ['apiKey', 'session'],
      params: ToolParams,
      responses: { 200: { description: 'Rotated', schema: WebhookToolRotated }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await tools.rotate(params.id, params.toolId) };
      },
    }),
  ];
}

/** A stdio server's fields: refused with 400 whatever their value, as SPEC.md refuses stdio servers everywhere. */
const stdio = stdioField();

const McpServerCreate = z
  .strictObject({
    name: z.string().regex(MCP_SERVER_NAME, 'name must be 1-24 lower-case letters, digits, _ or -').meta({ description: "Its tools are offered as `<name>__<tool>`; unique in the project" }),
    url: z.string().trim().min(1).max(2_048).meta({ description: 'The Streamable HTTP (or SSE) endpoint, checked by the URL guard' }),
    transport: z.enum(MCP_TRANSPORTS).optional().meta({ description: '`auto` (default): Streamable HTTP, falling back to the older SSE transport' }),
    headers: mcpHeaderEntries()
      .refine((headers) => Object.keys(headers).length <= 16, 'at most 16 headers')
      .optional()
      .meta({ description: 'Static headers sent on every request (an API key, say): sealed at rest, never returned' }),
    command: stdio,
    args: stdio,
    type: stdio,
  })
  .meta({ id: 'McpServerCreate' });

const McpServerOut = z
  .object({
    id: z.uuid(),
    name: z.string(),
    url: z.string(),
    transport: z.enum(MCP_TRANSPORTS),
    header_names: z.array(z.string()).meta({ description: 'The headers it is sent; their values are never returned' }),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'McpServer' });

const McpParams = ProjectParams.extend({ mcpId: z.uuid({ error: 'mcpId must be a UUID' }).overwrite((id) => id.toLowerCase()) });

export function mcpServerRoutes(servers: McpServerService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/mcp',
      operationId: 'listMcpServers',
      summary: "The project's MCP servers (never their headers' values)",
      tags: ['mcp'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'Oldest first', schema: z.object({ servers: z.array(McpServerOut) }).meta({ id: 'McpServerList' }) }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: { servers: await servers.list(params.id) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/mcp',
      operationId: 'addMcpServer',
      summary: "Add an MCP server reached over HTTP; its tools are offered to the project's turns",
      tags: ['mcp'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: McpServerCreate,
      responses: {
        201: { description: 'Added', schema: McpServerOut },
        400: { description: 'A stdio server (`command`, `args` or `type`), or a URL the guard refuses' },
        403: forbidden,
        404: hidden,
        409: { description: 'The name is taken in this project (`code` `name_taken`), or the project has 32 servers' },
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { status: 201, body: await servers.add(params.id, body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/mcp/{mcpId}',
      operationId: 'getMcpServer',
      summary: 'One MCP server',
      tags: ['mcp'],
      security: ['apiKey', 'session'],
      params: McpParams,
      responses: { 200: { description: 'The server', schema: McpServerOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await servers.get(params.id, params.mcpId) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/mcp/{mcpId}',
      operationId: 'removeMcpServer',
      summary: 'Remove an MCP server; its tools are no longer offered',
      tags: ['mcp'],
      security: ['apiKey', 'session'],
      params: McpParams,
      responses: { 200: { description: 'The removed server', schema: McpServerOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await servers.remove(params.id, params.mcpId) };
      },
    }),
  ];
}

const WebSearchSet = z
  .strictObject({
    provider: z.enum(['brave', 'searxng']).nullable().meta({ description: '`brave`: Brave Search\'s API; `searxng`: a SearXNG instance you host; null: none' }),
    base_url: z.string().trim().min(1).max(2_048).optional().meta({ description: 'The engine\'s root (default for brave: https://api.search.brave.com); checked by the URL guard' }),
    api_key: z
      .string()
      .trim()
      .min(1)
      .max(4_096)
      .refine((key) => !isRedacted(key), `api_key ${redactedSecretMessage}`)
      .optional()
      .meta({ description: 'Required for brave; optional for searxng (sent as a bearer). Sealed at rest, never returned' }),
  })
  .meta({ id: 'WebSearchSet' });

const WebSearchOut = z
  .object({
    provider: z.enum(['brave', 'searxng']).nullable(),
    base_url: z.string().nullable(),
    key_last_four: z.string().nullable().meta({ description: 'null for no key or one shorter than 12 characters' }),
  })
  .meta({ id: 'WebSearch' });

export function webSearchRoutes(search: WebSearchService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/web-search',
      operationId: 'getWebSearch',
      summary: "The project's web search engine (never its key)",
      tags: ['web-search'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The engine; provider null: none', schema: WebSearchOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await search.get(params.id) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/web-search',
      operationId: 'setWebSearch',
      summary: 'Choose the web search engine the agent\'s web_search uses (tried with one real search first), or none',
      tags: ['web-search'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: WebSearchSet,
      responses: {
        200: { description: 'Stored and pushed', schema: WebSearchOut },
        400: { description: 'A missing key or base_url, a URL the guard refuses (`url_not_allowed`), or an engine that refused the key (`provider_rejected`)' },
        403: forbidden,
        404: hidden,
        502: { description: 'The engine could not be reached, or failed the test search' },
        504: { description: 'The engine did not answer in time' },
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { body: await search.set(params.id, body) };
      },
    }),
  ];
}

const MAX_SKILL_PACKAGE_BYTES = 10 * 1024 * 1024;
const PluginParams = ProjectParams.extend({ pluginId: z.uuid({ error: 'pluginId must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const SkillPackage = z.record(z.string(), z.unknown()).meta({ id: 'SkillPackage', description: 'A package as the runtime keeps it: id, name, visibility, owner_subject, skills, warnings' });

export function skillRoutes(skills: SkillRelay, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/skills',
      operationId: 'listSkills',
      summary: "Every skill package of the project: the project's and each end-user's own (`visibility`, `owner_subject`)",
      tags: ['skills'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'Oldest first', schema: z.object({ plugins: z.array(SkillPackage) }).meta({ id: 'SkillPackageList' }) }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: (await skills.list(params.id)) as { plugins: Record<string, unknown>[] } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/skills',
      operationId: 'uploadSkills',
      summary: 'Publish a skill package for the whole project',
      description:
        'A form: part `file` (a .zip, a .tar.gz or a single SKILL.md, at most 10 MiB), or parts `files` each named by its path. A skill is a file named exactly SKILL.md whose YAML frontmatter has `name` and `description`; `warnings` names what was left out.',
      tags: ['skills'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      multipart: { file: 'file', maxFileBytes: MAX_SKILL_PACKAGE_BYTES, tooLargeHint: 'a package is at most 10 MiB', repeated: { name: 'files', maxParts: 500 }, fields: z.object({}) },
      responses: {
        201: { description: 'Published', schema: SkillPackage },
        400: { description: 'A package with no skill, or a hostile archive (a path leaving it, a link, too large, too many files), or not a form' },
        403: forbidden,
        404: hidden,
        409: { description: "A skill of that name is already the project's" },
        413: { description: 'The form is larger than a package may be' },
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, form }) {
        if (!form) throw invalidArgument('request body: a skill package is sent as a form (Content-Type: multipart/form-data)');
        return { status: 201, body: (await skills.upload(params.id, form.file, form.files)) as Record<string, unknown> };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/skills/{pluginId}',
      operationId: 'removeSkills',
      summary: 'Remove a skill package (the project\'s, or an end-user\'s)',
      tags: ['skills'],
      security: ['apiKey', 'session'],
      params: PluginParams,
      responses: { 200: { description: 'Removed', schema: SkillPackage }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: (await skills.remove(params.id, params.pluginId)) as Record<string, unknown> };
      },
    }),
  ];
}
