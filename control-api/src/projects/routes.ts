// HTTP adapter for a project's own routes (X-API-Key or a signed-in session): read, change and delete the project
// and its ceiling, system prompt, origins and usage limits, the starting snippet, and minting end-user tokens.
import { GuardrailsSchema } from '@agentplane/lib/guardrails';
import { AUDIT_DETAIL } from '../audit/log.js';
import { z } from 'zod';
import { notFound, permissionDenied } from '@agentplane/lib/errors';
import { CATALOGUE, modalitySide } from '@agentplane/lib/permissions';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { MAX_TRUSTED_KEYS } from '@agentplane/lib/tokens/keys';
import { authorizeAdmin, callerOf, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectCaller, ProjectKeyService } from '../keys/service.js';
import type { ProvisioningReport } from '../provisioning/status.js';
import { TokenRequest, TokenResponse, type TokenMintService } from '../tokens/service.js';
import { ceilingView, CeilingOut, CeilingPatch } from './ceiling.js';
import { LimitsOut, LimitsPatch } from './limits.js';
import type { ProjectReadiness } from './readiness.js';
import type { ProjectService } from './service.js';

const ProjectDetailOut = z
  .object({
    id: z.uuid(),
    org_id: z.uuid(),
    name: z.string(),
    tenant_id: z.uuid(),
    ceiling: CeilingOut,
    system_prompt: z.string().nullable(),
    origins: z.array(z.string()),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'ProjectDetail' });

const ProvisioningOut = z
  .object({
    ready: z.boolean().meta({ description: "The project's runtime and tenant are up" }),
    reason: z.string().meta({ description: 'CamelCase: why it is or is not ready (on Kubernetes, the Project\'s or Tenant\'s Ready reason)' }),
    message: z.string().meta({ description: 'What to look at' }),
    data_plane_url: z.string().nullable().meta({ description: "The project's own data-plane URL (Kubernetes); null: the shared one" }),
    pending_changes: z.number().int().meta({ description: 'Changes not yet delivered to the runtime' }),
    last_error: z.string().nullable().meta({ description: 'Why the earliest of them has not gone through yet' }),
  })
  .meta({ id: 'ProjectProvisioning' });

const ProjectWithProvisioningOut = ProjectDetailOut.extend({ provisioning: ProvisioningOut }).meta({ id: 'ProjectWithProvisioning' });

const ReadinessOut = z
  .object({
    canAnswer: z.boolean().meta({ description: 'Every essential step is done: a turn can run' }),
    ready: z.boolean().meta({ description: 'Every step is done' }),
    next: z.string().nullable().meta({ description: 'The first step not done, with the call that fixes it; null when ready' }),
    steps: z.array(
      z.object({
        id: z.string().meta({ description: '`runtime`, `configuration`, `provider`, `default-model`' }),
        ok: z.boolean(),
        essential: z.boolean(),
        blocks: z.string().meta({ description: 'What does not work while the step is not done' }),
        fix: z.string().nullable().meta({ description: 'The call that fixes it; null when the platform or the outbox must' }),
        detail: z.string(),
      }),
    ),
  })
  .meta({ id: 'ReadinessReport' });

const ProjectDeletedOut = z
  .object({
    id: z.uuid(),
    org_id: z.uuid(),
    name: z.string(),
    tenant_id: z.uuid(),
    deleted_at: z.iso.datetime(),
    removal: z.literal('queued').meta({ description: "The tenant's erase on the runtime (on Kubernetes, the Project's deletion) is under way" }),
  })
  .meta({ id: 'ProjectDeleted' });

const ProjectPatch = z
  .strictObject({ name: z.string().trim().min(1).max(200).optional(), ceiling: CeilingPatch.optional() })
  .meta({ id: 'ProjectPatch' });

const CapabilitiesOut = z
  .object({
    capabilities: z.array(
      z.object({ name: z.string(), group: z.string(), grants: z.string(), per_request_flag: z.string().nullable(), enabled: z.boolean() }),
    ),
    modalities: z.object({ input: z.array(z.string()), output: z.array(z.string()) }).meta({ description: 'Kinds the ceiling allows on each side' }),
    read_only: z.boolean(),
    limits: z.object({ max_token_lifetime_seconds: z.number().int(), max_tool_iterations: z.number().int().nullable(), max_context_tokens: z.number().int().nullable() }),
  })
  .meta({ id: 'ProjectCapabilities' });

/** An origin a browser sends: scheme, host and optional port, nothing more; http only for local hosts. */
const origin = z
  .string()
  .max(300)
  .refine((value) => {
    try {
      const url = new URL(value);
      const local = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
      return url.origin === value && (url.protocol === 'https:' || (url.protocol === 'http:' && local));
    } catch {
      return false;
    }
  }, 'an origin is https://host[:port] (http only for localhost), with no path or trailing slash');

const forbidden = mintKeyOnAdminRoute;
const hidden = projectHidden;

export function projectRoutes(
  projects: ProjectService,
  keys: ProjectKeyService,
  mint: TokenMintService,
  provisioning: ProvisioningReport,
  readiness: ProjectReadiness,
  urls: { control: string; data: string },
  computer: { offered(projectId: string): Promise<boolean> },
): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}',
      operationId: 'getProject',
      summary: 'The project with its capability ceiling, and whether its runtime is up',
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The project', schema: ProjectWithProvisioningOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        const project = await projects.get(params.id);
        return { body: { ...project, provisioning: await provisioning.of({ projectId: project.id, tenantId: project.tenant_id }) } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/readiness',
      operationId: 'getProjectReadiness',
      summary: 'Whether a turn can run and what is left to do, step by step',
      description:
        'A configuration change that keeps failing to reach the runtime (3 attempts or more) is the `configuration` step not done: the project is not ready, and `detail` gives the last error.',
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The readiness report', schema: ReadinessOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await readiness.of(params.id) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}',
      operationId: 'deleteProject',
      summary: "Delete the project (signed-in account only): its keys stop at once, and its tenant's data is erased from the runtime",
      description:
        "The project, its keys, providers and configuration are deleted now; its tenant's ordered erase on the runtime (on Kubernetes, deleting the Project resource, whose finalizer erases its tenants, database and namespace) follows from the outbox. A project key cannot delete its own project.",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 202: { description: 'Deleted; the removal from the runtime is under way', schema: ProjectDeletedOut }, 403: { description: 'A project key was used' }, 404: hidden },
      authorize: ({ params, res }) => {
        const caller = callerOf(res.locals);
        if (caller.kind === 'key') {
          if (caller.projectId !== params.id) throw notFound(`project ${params.id} not found`);
          throw permissionDenied('deleting a project needs a signed-in account session (Authorization: Bearer ses_...); a project key cannot delete its project');
        }
      },
      async handle({ params, res }) {
        const caller = callerOf(res.locals) as ProjectCaller & { kind: 'account' };
        // The account's membership is checked by the removal itself (a project it cannot see is not found).
        return { status: 202, body: await projects.remove(params.id, caller.accountId) };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/projects/{id}',
      operationId: 'updateProject',
      summary: 'Rename the project or change its ceiling (fields given replace the stored ones)',
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: ProjectPatch,
      responses: { 200: { description: 'The updated project', schema: ProjectDetailOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await projects.update(params.id, body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/capabilities',
      operationId: 'getProjectCapabilities',
      summary: 'The ceiling alone: every capability with whether it is enabled and its per-request flag, plus supported modalities (mint keys may read it)',
      description:
        "`computer`'s flag `enable_computer` is given only where the project's runtime has a sandbox host and the project allows at least one sandbox (PUT /api/projects/{id}/computer); elsewhere it is null.",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The ceiling', schema: CapabilitiesOut }, 404: hidden },
      authorize: ({ params, res }) => keys.authorize(callerOf(res.locals), params.id, 'mint'),
      async handle({ params, res }) {
        const ceiling = ceilingView((await projects.ceilingOf(params.id)).ceiling);
        const enabled = new Set(ceiling.capabilities);
        // A switch is offered only where setting it would do something: `enable_computer` needs a sandbox host on the
        // project's runtime and at least one sandbox allowed, as the runtime's own /capabilities judges it.
        const computerOffered = await computer.offered(params.id);
        const kinds = (side: 'input' | 'output') =>
          ceiling.capabilities.filter((name) => modalitySide(name) === side).map((name) => name.slice(side.length + 1));
        return {
          body: {
            capabilities: CATALOGUE.map((row) => ({
              name: row.name,
              group: row.group,
              grants: row.grants,
              per_request_flag: row.flag === 'enable_computer' && !computerOffered ? null : row.flag,
              enabled: enabled.has(row.name) && !(row.name === 'documents:write' && ceiling.read_only),
            })),
            modalities: { input: kinds('input'), output: kinds('output') },
            read_only: ceiling.read_only,
            limits: {
              max_token_lifetime_seconds: ceiling.max_token_lifetime_seconds,
              max_tool_iterations: ceiling.max_tool_iterations,
              max_context_tokens: ceiling.max_context_tokens,
            },
          },
        };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/system-prompt',
      operationId: 'setSystemPrompt',
      summary: "Set the project's system prompt (it wins over a per-request one); null clears it",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: z.strictObject({ system_prompt: z.string().max(100_000).nullable() }).meta({ id: 'SystemPrompt' }),
      responses: { 200: { description: 'The updated project', schema: ProjectDetailOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await projects.setSystemPrompt(params.id, body.system_prompt) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/document-processor',
      operationId: 'setDocumentProcessor',
      summary: 'How documents are cut into chunks: tokens per chunk and overlap (null: 400 and 60)',
      description: 'Applies to documents read after the change; `POST /documents/{id}/reingest` on the data plane reads one again with it.',
      tags: ['retrieval'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: z
        .strictObject({
          processor: z
            .strictObject({ chunk_tokens: z.int().min(100).max(2000), overlap_tokens: z.int().min(0).max(500) })
            .refine((p) => p.overlap_tokens * 2 <= p.chunk_tokens, { message: 'overlap_tokens must be at most half of chunk_tokens', path: ['overlap_tokens'] })
            .nullable(),
        })
        .meta({ id: 'DocumentProcessorSet' }),
      responses: {
        200: { description: 'The chunking in force', schema: z.object({ chunk_tokens: z.int(), overlap_tokens: z.int() }).meta({ id: 'DocumentProcessor' }) },
        403: forbidden,
        404: hidden,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await projects.setProcessor(params.id, body.processor) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/citations',
      operationId: 'setCitations',
      summary: 'How answers cite the documents they used: inline [n] markers (the default), or only the list beside the answer',
      description: 'Either way the blocking response and the `done` frame carry `citations`: document, title, chunk, heading path, page and score.',
      tags: ['retrieval'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: z.strictObject({ style: z.enum(['inline', 'list']) }).meta({ id: 'CitationStyle' }),
      responses: { 200: { description: 'The style in force', schema: z.object({ style: z.enum(['inline', 'list']) }).meta({ id: 'CitationStyleOut' }) }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await projects.setCitations(params.id, body.style) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/guardrails',
      operationId: 'getGuardrails',
      summary: "The project's input and output checks",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'In force', schema: GuardrailsSchema }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params }) {
        return { body: await projects.guardrailsOf(params.id) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/guardrails',
      operationId: 'setGuardrails',
      summary: "Replace the project's input and output checks: patterns (RE2), word lists, PII detectors, a moderation model",
      description:
        'A check that fires ends the turn with finish_reason `guardrail`: an input check before any model is called, an output check by withholding the answer. The answer names the check, never its rules.',
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: GuardrailsSchema,
      responses: { 200: { description: 'In force', schema: GuardrailsSchema }, 403: forbidden, 404: hidden, 422: { description: 'A check that is not valid, named by its place (a pattern that is not RE2, a duplicate name)' } },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { body: await projects.setGuardrails(params.id, body) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/subagents',
      operationId: 'setSubagents',
      summary: "Where the project's subagents run: the registered models a delegate may use (empty: the delegating turn's own) and how many run at once",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: z
        .strictObject({
          models: z.array(z.string().trim().min(1).max(256)).max(64).meta({ description: "Registered models; empty: the delegating turn's own model" }),
          maxConcurrent: z.int().min(1).max(64).default(4).meta({ description: "How many of the project's subagents may run at once (default 4)" }),
        })
        .meta({ id: 'SubagentsSettings' }),
      responses: {
        200: { description: 'In force', schema: z.object({ models: z.array(z.string()), maxConcurrent: z.int() }).meta({ id: 'SubagentsSettingsOut' }) },
        400: { description: 'A model the project does not register' },
        403: forbidden,
        404: hidden,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body }) {
        return { body: await projects.setSubagents(params.id, body) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/origins',
      operationId: 'setOrigins',
      summary: 'Set the browser origins allowed to call the data plane with this project\'s tokens (replaces the list)',
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: z.strictObject({ origins: z.array(origin).max(100) }).meta({ id: 'Origins' }),
      responses: { 200: { description: 'The updated project', schema: ProjectDetailOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await projects.setOrigins(params.id, [...new Set(body.origins)]) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/limits',
      operationId: 'getLimits',
      summary: "Usage caps on the project's models: calls and tokens per minute, and a spend cap",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The caps; null: none', schema: LimitsOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        return { body: await projects.limits(params.id) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/limits',
      operationId: 'setLimits',
      summary: "Set the project's usage caps: a member omitted keeps its value, null clears it",
      description:
        'Over a cap, turns are answered 429 with the reset time (`budget_exceeded` for the spend cap). The spend is computed from the prices registered with each provider; a model without a price counts no cost, and the answer warns about it when a budget is set.',
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: LimitsPatch,
      responses: { 200: { description: 'The caps after the change', schema: LimitsOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await projects.setLimits(params.id, body) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/signing-keys/rotate',
      operationId: 'rotateSigningKeys',
      summary: 'Rotate the end-user token signing key; tokens signed before keep verifying until they expire',
      tags: ['tokens'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: {
        200: {
          description: 'Rotated; the runtime hears of it through the configuration push',
          schema: z
            .object({ active_kid: z.string(), trusted_kids: z.array(z.string()).meta({ description: 'Every key the runtime trusts: active, next, and retired ones whose tokens may still live' }), rotated_at: z.iso.datetime() })
            .meta({ id: 'SigningKeysRotated' }),
        },
        403: forbidden,
        404: hidden,
        409: {
          description: `\`code\` \`signing_keys_full\`: the runtime would have to trust more than ${MAX_TRUSTED_KEYS} keys, every retired one still able to verify a live token; the detail says when the next rotation fits`,
        },
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        return { body: await projects.rotateSigningKeys(params.id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/connect',
      operationId: 'getConnect',
      summary: "The project's endpoints and a starting snippet",
      tags: ['projects'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: {
        200: {
          description: 'Endpoints and snippet',
          schema: z
            .object({ project_id: z.uuid(), tenant_id: z.uuid(), control_url: z.string(), data_url: z.string(), snippet: z.string() })
            .meta({ id: 'Connect' }),
        },
        403: forbidden,
        404: hidden,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        const project = await projects.get(params.id);
        // On Kubernetes each project has its own data-plane host.
        const own = (await provisioning.of({ projectId: project.id, tenantId: project.tenant_id })).data_plane_url;
        const endpoints = { control: urls.control, data: own ?? urls.data };
        return { body: { project_id: project.id, tenant_id: project.tenant_id, control_url: endpoints.control, data_url: endpoints.data, snippet: connectSnippet(project.id, endpoints) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/token',
      operationId: 'mintToken',
      summary: 'Mint an end-user token (mint or admin key): the request clamped against the project ceiling',
      tags: ['tokens'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: TokenRequest,
      responses: { 200: { description: 'The token and what it grants', schema: TokenResponse }, 400: { description: 'Unregistered model, or a scope that is not a prefix of the subject' }, 404: hidden },
      authorize: ({ params, res }) => keys.authorize(callerOf(res.locals), params.id, 'mint'),
      async handle({ params, body, res }) {
        // The audit log's entry of a mint says for whom and with what, never the token.
        res.locals[AUDIT_DETAIL] = { subject: body.subject, capabilities: body.capabilities ?? null };
        return { body: await mint.mint(callerOf(res.locals), params.id, body) };
      },
    }),
  ];
}

function connectSnippet(projectId: string, urls: { control: string; data: string }): string {
  return [
    '# On your server: mint a token for the signed-in user with a mint-scope project key',
    `curl -s -X POST ${urls.control}/api/projects/${projectId}/token \\`,
    '  -H "X-API-Key: $AGENTPLANE_PROJECT_KEY" -H "content-type: application/json" \\',
    '  -d \'{"subject": "acme:user-42", "capabilities": ["chat", "documents:read"]}\'',
    '# In your app: call the data plane with it',
    `curl -s ${urls.data}/capabilities -H "Authorization: Bearer $ACCESS_TOKEN"`,
  ].join('\n');
}
