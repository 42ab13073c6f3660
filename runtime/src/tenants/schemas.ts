// Request and response schemas of the tenant routes; they validate requests and feed /openapi.json.
// SPEC.md leaves these "not shown": docs/decisions/0003-tenant-schemas.md records the choices.
import { z } from 'zod';
import { GuardrailsSchema } from '@agentplane/lib/guardrails';
import { ComputerSettingsSchema } from '@agentplane/lib/computer';
import { BrowserSettingsSchema } from '@agentplane/lib/browser';
import { MCP_SERVER_NAME, mcpHeaderEntries } from '@agentplane/lib/mcp';
import { CAPABILITIES, type Capability } from '@agentplane/lib/permissions';
import { jsonValue } from '@agentplane/lib/schemas/json';
import { isRedacted, redactedSecretMessage } from '@agentplane/lib/schemas/redaction';
import { trustedKeysSchema } from '@agentplane/lib/tokens/keys';

export const maxSettingsBytes = 64 * 1024;

const reservedNames = new Set(['__proto__', 'constructor', 'prototype']);

const settingKey = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,100}$/, 'setting names are 1 to 100 letters, digits, `_`, `.` or `-`')
  .refine((name) => !reservedNames.has(name), 'this setting name is reserved');

/** Words that mark a credential when they stand as a segment of a name (split on `_`, `.`, `-` and case). */
const secretWords =
  'key|keys|token|tokens|secret|secrets|password|passwd|passphrase|pass|pwd|credential|credentials|auth|authorization|bearer|cookie|session|dsn|private|privatekey|apikey|signature|signing|salt|pem|cert';

const secretSegment = new RegExp(`(^|[_.-])(${secretWords})([_.-]|\\d|$)`, 'i');

/**
 * Whether a setting's value is a credential: sealed at rest and shown redacted. Errs towards secret: any
 * segment of the name that is a credential word (`litellm_key`, `openai-api-key`, `private_key_pem`,
 * `signing_key_v2`, `session_cookie`, `dsn`, `token_limit`) makes it one.
 */
export function isSecretSetting(name: string): boolean {
  // camelCase counts as segments too: `openaiApiKey` -> `openai_Api_Key`.
  return secretSegment.test(name.replace(/([a-z0-9])([A-Z])/g, '$1_$2'));
}

const settingsMap = z
  .record(settingKey, jsonValue)
  .superRefine((value, ctx) => {
    if (JSON.stringify(value).length > maxSettingsBytes) {
      ctx.addIssue({ code: 'custom', message: `settings_json is larger than ${maxSettingsBytes} bytes` });
    }
    for (const [name, setting] of Object.entries(value)) {
      if (isSecretSetting(name) && isRedacted(setting)) ctx.addIssue({ code: 'custom', path: [name], message: `${name} ${redactedSecretMessage}` });
    }
    for (const name of ['litellm_key', 'default_model'] as const) {
      const v = value[name];
      if (v !== undefined && v !== null && (typeof v !== 'string' || v.length === 0 || v.length > 1000)) {
        ctx.addIssue({ code: 'custom', path: [name], message: `${name} must be a non-empty string of at most 1000 characters, or null to remove it` });
      }
    }
  });

/** A UUID in its canonical lower-case form: the database returns it so, and keys and prefixes are built from it. */
const tenantId = () => z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase());

export const TenantIdParams = z.object({
  tenant_id: tenantId().meta({ description: 'The tenant, a UUID' }),
});

export const TenantCreate = z
  .strictObject({
    tenant_id: tenantId().optional().meta({ description: 'Chosen by the caller (the control plane uses the project\'s tenant id); generated when omitted' }),
    name: z.string().max(200).default('').meta({ description: 'A label for people; not unique' }),
    settings_json: settingsMap.default({}).meta({
      description:
        'Free-form settings. `litellm_key` and `default_model` route this tenant\'s model calls. A name with a credential word as one of its segments (key, token, secret, password, credential, auth, cookie, dsn, private, ...) is sealed at rest and shown redacted.',
    }),
  })
  .meta({ id: 'TenantCreate' });

export const TenantOut = z
  .object({
    tenant_id: z.uuid(),
    name: z.string(),
    settings_json: z.record(z.string(), jsonValue).meta({ description: 'Secret values appear redacted, as `****` plus their last four characters' }),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'TenantOut' });

export const TenantCreated = TenantOut.extend({
  webhook_secret: z.string().meta({ description: 'Signs `turn.stopped` and `scheduled_task.fired` deliveries (header `X-Signature`); also readable later' }),
}).meta({ id: 'TenantCreated' });

export const TenantSettingsUpdate = z
  .strictObject({
    name: z.string().max(200).optional(),
    settings_json: settingsMap
      .optional()
      .meta({ description: 'Merged key by key into the stored settings; a key set to null is removed. Keys not named are kept.' }),
  })
  .meta({ id: 'TenantSettingsUpdate' });

export const EraseStepOutcomeSchema = z
  .object({
    step: z.string(),
    phase: z.enum(['stop_work', 'sandboxes', 'rows', 'outside_database']),
    outcome: z.enum(['done', 'failed', 'already_done', 'not_run']),
    items: z.number().int().optional(),
    error: z.string().optional(),
  })
  .meta({ id: 'EraseStepOutcome' });

export const TenantDeleted = z
  .object({
    tenant_id: z.uuid(),
    erased: z.literal(true).meta({ description: 'The tenant\'s rows are purged (now or by an earlier call)' }),
    complete: z.boolean().meta({ description: 'Every best-effort step succeeded; when false, DELETE again retries the failed steps' }),
    rows_deleted: z.record(z.string(), z.number().int()),
    steps: z.array(EraseStepOutcomeSchema).meta({ description: 'Each step in the order it ran' }),
    erased_at: z.iso.datetime(),
  })
  .meta({ id: 'TenantDeleted' });

export const WebhookSecret = z
  .object({
    tenant_id: z.uuid(),
    webhook_secret: z.string(),
    rotated_at: z.iso.datetime().meta({ description: 'When this secret became the live one' }),
  })
  .meta({ id: 'WebhookSecret' });

/** Lists that are sets: order and repeats carry no meaning, so a re-push in another order is the same content. */
const sortedUnique = <T extends string>(list: T[]) => [...new Set(list)].sort();

const configName = z.string().min(1).max(256);
const configNames = z.array(configName).max(256).overwrite(sortedUnique);

/**
 * A project's ceiling as `lib/src/permissions` defines `CapabilityCeiling`, in the same (camelCase) names, so the
 * control plane pushes what it stores. Unset limits mean unlimited.
 */
export const CapabilityCeilingSchema = z
  .strictObject({
    capabilities: z
      .array(z.enum(CAPABILITIES as [Capability, ...Capability[]], { error: 'not a capability of the catalogue' }))
      .max(128)
      .overwrite(sortedUnique)
      .meta({ description: 'What any token of the project may hold at most' }),
    readOnly: z.boolean().default(false).meta({ description: 'A read-only project never grants `documents:write`, even when `capabilities` names it' }),
    maxTokenLifetimeSeconds: z.int().min(1).optional().meta({ description: 'Longest `expires_in` a token may get (narrowing clamps to it)' }),
    maxToolIterations: z.int().min(0).optional().meta({ description: 'Agent-tool loop ceiling; unset means unlimited' }),
    maxContextTokens: z.int().min(0).optional().meta({ description: 'History ceiling; unset means unlimited' }),
    defaultRoles: configNames.default([]).meta({ description: 'Added to every token\'s roles at mint' }),
    defaultGroups: configNames.default([]).meta({ description: 'Added to every token\'s groups at mint' }),
    registeredModels: configNames.optional().meta({ description: 'Models the project registered; unset means the runtime does not check registration' }),
  })
  .meta({ id: 'CapabilityCeiling' });

/** `scheme://host[:port]`, no path, query or credentials; the host may start with `*.` for any subdomain. */
const origin = z
  .string()
  .max(2048)
  .regex(/^https?:\/\/(\*\.)?[^\s/?#@*]+$/, 'must be an origin: http(s)://host[:port], without path, query or credentials');

export const maxConfigurationVersion = 2_147_483_647;
export const maxSystemPromptLength = 100_000;
export const maxProviders = 64;

export const PROVIDER_KINDS = ['openai', 'openai_compatible'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** An absolute http(s) URL without credentials in it (they would be shown unredacted). */
function isApiRoot(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '';
  } catch {
    return false;
  }
}

/** A URL the control plane pushes, `what` named in its refusal. */
const apiRoot = (what: string) => z.string().max(2048).refine(isApiRoot, `must be an http(s) URL without credentials: ${what}`);

/** A secret the control plane pushes: in clear on the admin channel, never one of our redacted renderings of it. */
const pushedSecret = (field: string) =>
  z
    .string()
    .min(1)
    .max(4096)
    .refine((key) => !isRedacted(key), `${field} ${redactedSecretMessage}`);
const pushedKey = pushedSecret('api_key');

export const ModelPriceSchema = z
  .strictObject({
    input_per_million_usd: z.number().min(0).meta({ description: 'USD per million input (prompt) tokens' }),
    output_per_million_usd: z.number().min(0).meta({ description: 'USD per million output (completion) tokens' }),
  })
  .meta({ id: 'ModelPrice' });

export const ProviderSectionSchema = z
  .strictObject({
    id: z.string().min(1).max(256).meta({ description: 'The control plane\'s credential id' }),
    kind: z.enum(PROVIDER_KINDS).meta({ description: 'How the provider is spoken to: OpenAI itself, or any server speaking its API' }),
    base_url: apiRoot('the API root, such as https://api.openai.com/v1').meta({ description: 'The API root, such as https://api.openai.com/v1' }),
    api_key: pushedKey.meta({ description: 'The provider key, in clear on the admin channel; sealed at rest and shown redacted (`****` plus its last four characters), and a redacted one is refused' }),
    models: configNames.meta({ description: 'Chat models this credential serves' }),
    prices: z
      .record(configName, ModelPriceSchema)
      .optional()
      .meta({ description: 'The customer\'s prices per model, for the spend cap; a model without one counts no cost' }),
  })
  .superRefine((provider, ctx) => {
    for (const model of Object.keys(provider.prices ?? {})) {
      if (!provider.models.includes(model)) ctx.addIssue({ code: 'custom', path: ['prices', model], message: `model '${model}' has a price but is not one of this provider's models` });
    }
  })
  .meta({ id: 'ProviderSection' });

const providerSections = z
  .array(ProviderSectionSchema)
  .max(maxProviders)
  .superRefine((providers, ctx) => {
    // A model is served by exactly one credential, so a turn knows where to send it.
    const servedBy = new Map<string, number>();
    const ids = new Set<string>();
    providers.forEach((provider, index) => {
      if (ids.has(provider.id)) ctx.addIssue({ code: 'custom', path: [index, 'id'], message: `provider id '${provider.id}' appears twice` });
      ids.add(provider.id);
      for (const model of provider.models) {
        const first = servedBy.get(model);
        if (first === undefined) servedBy.set(model, index);
        else ctx.addIssue({ code: 'custom', path: [index, 'models'], message: `model '${model}' is already served by provider ${providers[first]!.id}; a model may appear under one provider only` });
      }
    });
  });

export const UsageLimitsSchema = z
  .strictObject({
    rpm_limit: z.int().min(1).optional().meta({ description: 'Model calls per 60-second window for the project; unset: no cap' }),
    tpm_limit: z.int().min(1).optional().meta({ description: 'Input plus output tokens per 60-second window for the project; unset: no cap' }),
    budget: z
      .strictObject({
        amount_usd: z.number().positive().meta({ description: 'Spend cap in USD, computed from the providers\' prices' }),
        window: z.enum(['day', 'month']).meta({ description: 'The calendar window the cap applies to (UTC)' }),
      })
      .optional()
      .meta({ description: 'Spend cap per window; unset: no cap' }),
  })
  .meta({ id: 'UsageLimits' });

/** A project's own Pinecone index (docs/decisions/0047): its data-plane host and key; the tenant's vectors go in its namespace. */
export const VectorIndexSectionSchema = z
  .strictObject({
    provider: z.literal('pinecone').meta({ description: 'The only index a project may bring: Pinecone' }),
    index_host: apiRoot('the index host, such as https://docs-abc123.svc.us-east-1.pinecone.io').meta({ description: "The index's data-plane host, from describe_index or the console" }),
    api_key: pushedKey.meta({ description: 'The Pinecone key, in clear on the admin channel; sealed at rest and shown redacted, and a redacted one is refused' }),
  })
  .meta({ id: 'VectorIndexSection' });

export const maxWebhookTools = 128;
/** The longest description a tool's definition carries to the model. */
export const maxToolDescriptionLength = 4_096;
/** The largest parameters schema of a published tool, as JSON. */
export const maxToolParametersBytes = 32 * 1024;
/** A tool name as the models' function-calling APIs take it. */
export const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** A signing secret of a webhook tool: the current one, or the one it replaced, which signs too until `until`. */
const WebhookToolSecretSchema = z.strictObject({
  secret: pushedSecret('secret').meta({ description: 'The secret, in clear on the admin channel; sealed at rest and shown redacted' }),
  until: z.iso.datetime().optional().meta({ description: 'Set on a replaced secret: it signs beside the new one until then (24 hours after the rotation)' }),
});

/** A webhook tool the project published (docs/decisions/0052): an HTTPS endpoint the agent calls, signed with its own secret. */
export const WebhookToolSectionSchema = z
  .strictObject({
    id: z.string().min(1).max(256).meta({ description: "The control plane's tool id" }),
    name: z.string().regex(toolNamePattern, 'must be 1-64 letters, digits, _ or -').meta({ description: 'The name the model calls it by' }),
    description: z.string().max(maxToolDescriptionLength).meta({ description: 'What the tool does, for the model' }),
    parameters: z.record(z.string(), z.unknown()).meta({ description: "JSON Schema of the tool's arguments (an object schema)" }),
    url: apiRoot('the handler URL').meta({ description: 'The handler the call is POSTed to; reached through the SSRF guard' }),
    requires_approval: z.boolean().meta({ description: "Each call waits for the person's approval (in an unattended run, the operator's)" }),
    secrets: z.array(WebhookToolSecretSchema).min(1).max(2).meta({ description: 'The current secret first; a replaced one second, with `until`' }),
  })
  .meta({ id: 'WebhookToolSection' });

const webhookToolSections = z
  .array(WebhookToolSectionSchema)
  .max(maxWebhookTools)
  .superRefine((tools, ctx) => {
    const names = new Set<string>();
    tools.forEach((tool, index) => {
      if (names.has(tool.name)) ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `tool name '${tool.name}' appears twice` });
      names.add(tool.name);
    });
  });

export const maxMcpServers = 32;

/** A project's MCP server (docs/decisions/0053): reached over HTTP, with static headers sent on every request. */
export const McpServerSectionSchema = z
  .strictObject({
    id: z.string().min(1).max(256).meta({ description: "The control plane's server id" }),
    name: z.string().regex(MCP_SERVER_NAME, 'must be 1-24 lower-case letters, digits, _ or -, starting with a letter or digit').meta({ description: "Its tools are offered as `<name>__<tool>`" }),
    url: apiRoot('the MCP endpoint').meta({ description: 'The Streamable HTTP (or SSE) endpoint; reached through the SSRF guard' }),
    transport: z.enum(['auto', 'streamable_http', 'sse']).meta({ description: '`auto`: Streamable HTTP, falling back to SSE' }),
    headers: mcpHeaderEntries()
      .optional()
      .meta({ description: 'Static headers sent on every request, in clear on the admin channel; sealed at rest and shown redacted' }),
  })
  .meta({ id: 'McpServerSection' });

const mcpServerSections = z
  .array(McpServerSectionSchema)
  .max(maxMcpServers)
  .superRefine((servers, ctx) => {
    const names = new Set<string>();
    servers.forEach((server, index) => {
      if (names.has(server.name)) ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `server name '${server.name}' appears twice` });
      names.add(server.name);
    });
  });

/** The project's web search engine (docs/decisions/0055): Brave Search's API, or a SearXNG instance it hosts. */
export const WebSearchSectionSchema = z
  .strictObject({
    provider: z.enum(['brave', 'searxng']).meta({ description: '`brave`: Brave Search\'s API with the project\'s key; `searxng`: a SearXNG instance\'s JSON API' }),
    base_url: apiRoot('the engine\'s root, such as https://api.search.brave.com').meta({ description: "The engine's root; reached through the SSRF guard" }),
    api_key: pushedKey.optional().meta({ description: 'The key, in clear on the admin channel; sealed at rest and shown redacted. Required for brave' }),
  })
  .refine((section) => section.provider !== 'brave' || section.api_key !== undefined, { path: ['api_key'], message: 'brave needs an api_key' })
  .meta({ id: 'WebSearchSection' });

/** Where a project's events go (docs/decisions/0059): its webhook URL, reached through the SSRF guard. */
export const WebhookSectionSchema = z
  .strictObject({
    url: apiRoot('the receiver, such as https://hooks.example.com/agentplane').meta({ description: 'Receives `turn.stopped` and `scheduled_task.fired`, signed in `X-Signature`' }),
  })
  .meta({ id: 'WebhookSection' });

/** Where a project's subagents may run (docs/decisions/0057): the models delegates may use, and how many at once. */
export const SubagentsSectionSchema = z
  .strictObject({
    models: configNames.meta({ description: "Registered models a delegate may run on; empty: the delegating turn's own model" }),
    max_concurrent: z.int().min(1).max(64).meta({ description: "How many of the project's subagents may run at once" }),
  })
  .meta({ id: 'SubagentsSection' });

/** How documents are embedded and searched (docs/decisions/0041). */
export const RetrievalSectionSchema = z
  .strictObject({
    embedding: z
      .strictObject({
        provider: configName.meta({ description: 'The id of the provider credential (in `providers`) that serves the embedding model' }),
        model: configName,
        dimensions: z.int().min(1).max(16_000).meta({ description: 'The model\'s dimension, as the control plane measured it' }),
      })
      .nullable()
      .meta({ description: 'The project\'s embedding model; null: none, and documents are searched by their words only' }),
    processor: z
      .strictObject({
        chunk_tokens: z.int().min(100).max(2000).meta({ description: 'The most tokens in one chunk' }),
        overlap_tokens: z.int().min(0).max(500).meta({ description: 'A short last passage up to this size starts the next chunk too' }),
      })
      .refine((processor) => processor.overlap_tokens * 2 <= processor.chunk_tokens, { message: 'overlap_tokens must be at most half of chunk_tokens', path: ['overlap_tokens'] })
      .optional()
      .meta({ description: 'How documents are cut into chunks; unset: 400 tokens with a 60-token overlap. Applies to documents read (or reingested) after it changes' }),
    citations: z
      .enum(['inline', 'list'])
      .optional()
      .meta({ description: '`inline` (default): the answer cites passages by their [n] markers; `list`: no markers in the text, the sources only listed with the answer' }),
    rerank: z
      .strictObject({
        provider: configName.meta({ description: 'The id of the provider credential (in `providers`) that serves the rerank model' }),
        model: configName,
      })
      .optional()
      .meta({ description: 'The project\'s rerank model (`POST /rerank` on its provider): it orders the search\'s best candidates; unset: none' }),
    auto_context: z
      .boolean()
      .optional()
      .meta({ description: 'true: each turn starts with the passages of the documents the person may read that best match their message (for tokens that may search them)' }),
    vector_index: VectorIndexSectionSchema.optional().meta({
      description: "The project's own vector index; unset: the deployment's (pgvector, or the deployment's Pinecone index). A change re-embeds the documents into the new index in the background",
    }),
  })
  .meta({ id: 'RetrievalSection' });

/**
 * What the control plane pushes for a tenant (DESIGN.md flow 2), replaced whole by each push. Later features add
 * their sections (providers, webhook tools, MCP servers, ...) as optional members; unknown members are refused
 * (422), so a control plane newer than its runtime retries until the runtime is upgraded rather than having a
 * setting silently ignored. A section added later must have no default: a default would change the digest of a
 * configuration already stored, and a retried push of that same version would be refused as different content.
 */
const configurationShape = z.strictObject({
  version: z
    .int()
    .min(1)
    .max(maxConfigurationVersion)
    .meta({ description: 'The control plane\'s counter for this tenant. A lower one than stored is refused; the same one must carry the same content' }),
  issuer: z
    .string()
    .min(1)
    .max(256)
    // Those name the runtime's own narrowing keys (docs/decisions/0016); the project's issuer must never be one.
    .refine((issuer) => !issuer.startsWith('agentplane:tenant:'), 'issuers starting with agentplane:tenant: belong to the runtime\'s narrowed tokens')
    .meta({ description: 'The `iss` every token the project mints carries (`agentplane:project:<project id>`); not one starting with `agentplane:tenant:`' }),
  trusted_keys: trustedKeysSchema
    .extend({ keys: trustedKeysSchema.shape.keys.min(1, 'at least one key is needed') })
    .meta({ description: 'The public JWKS end-user tokens are verified against; the only source of keys (never a URL in a token)' }),
  ceiling: CapabilityCeilingSchema,
  system_prompt: z.string().max(maxSystemPromptLength).nullable().default(null).meta({ description: 'The project\'s system prompt; it wins over a per-request one' }),
  origins: z.array(origin).max(256).overwrite(sortedUnique).default([]).meta({ description: 'Browser origins allowed to call the data plane' }),
  providers: providerSections
    .optional()
    .meta({ description: `The project's provider credentials (at most ${maxProviders}); a model appears under one provider only. Unset: none` }),
  default_model: configName
    .nullable()
    .optional()
    .meta({
      description:
        'The model a turn uses when nothing else names one. Unset or null: none (a turn ends `no_model`). One no provider serves (its provider was removed): a turn answers 409 `no_provider`',
    }),
  limits: UsageLimitsSchema.optional().meta({ description: 'The project\'s usage caps on its models; unset: none' }),
  retrieval: RetrievalSectionSchema.optional().meta({ description: 'How documents are embedded and searched; unset: by their words only' }),
  subagents: SubagentsSectionSchema.optional().meta({ description: "Where the project's subagents run; unset: on the delegating turn's model, 4 at once" }),
  webhook: WebhookSectionSchema.optional().meta({ description: "Where the project's events go; unset: only tasks' callback URLs receive them" }),
  guardrails: GuardrailsSchema.optional().meta({ description: "Checks on what end-users send and what the agent answers; unset: none" }),
  web_search: WebSearchSectionSchema.optional().meta({ description: "The project's web search engine; unset: web_search is not offered (browse_url still is)" }),
  computer: ComputerSettingsSchema.optional().meta({ description: "The project's sandboxes: command timeout, count, limits, idle pause, lifetime, image; unset: the defaults" }),
  browser: BrowserSettingsSchema.optional().meta({ description: "The project's browser hand-off: the check's model and rate; unset: the defaults" }),
  mcp_servers: mcpServerSections
    .optional()
    .meta({ description: `The project's MCP servers (at most ${maxMcpServers}); their tools are offered to every turn of the project. Unset: none` }),
  webhook_tools: webhookToolSections
    .optional()
    .meta({ description: `The project's published webhook tools (at most ${maxWebhookTools}), offered under capability webhook_tools. Unset: none` }),
});

// A default model no provider serves is allowed: it is the project's choice whose provider was removed or rotated
// out, and a turn on it answers 409 `no_provider` rather than `no_model` (docs/decisions/0030).
// The embedding model's credential must be one of the providers, so ingestion knows where to send it.
export const TenantConfiguration = configurationShape
  .superRefine((configuration, ctx) => {
    const embedding = configuration.retrieval?.embedding;
    if (embedding && !configuration.providers?.some((provider) => provider.id === embedding.provider)) {
      ctx.addIssue({ code: 'custom', path: ['retrieval', 'embedding', 'provider'], message: `provider '${embedding.provider}' is not one of this configuration's providers` });
    }
    const rerank = configuration.retrieval?.rerank;
    if (rerank && !configuration.providers?.some((provider) => provider.id === rerank.provider)) {
      ctx.addIssue({ code: 'custom', path: ['retrieval', 'rerank', 'provider'], message: `provider '${rerank.provider}' is not one of this configuration's providers` });
    }
  })
  .meta({ id: 'TenantConfiguration' });

export const ConfigurationPutQuery = z.object({
  replace_digest: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'replace_digest is the 64 hex digits of a stored_digest')
    .optional()
    .meta({ description: 'Replace the stored configuration whatever its version, if its digest is this one (from a 409\'s `stored_digest`)' }),
});

// Built from the shape, not the refined schema: refinements do not carry over `extend`, and an answer is never parsed.
export const TenantConfigurationOut = configurationShape
  .extend({
    tenant_id: z.uuid(),
    updated_at: z.iso.datetime().meta({ description: 'When this version was stored; a repeated push does not move it' }),
  })
  .meta({ id: 'TenantConfigurationOut' });

export type TenantCreateInput = z.infer<typeof TenantCreate>;
export type TenantSettingsUpdateInput = z.infer<typeof TenantSettingsUpdate>;
export type TenantOutput = z.infer<typeof TenantOut>;
export type TenantConfigurationInput = z.infer<typeof TenantConfiguration>;
export type TenantConfigurationOutput = z.infer<typeof TenantConfigurationOut>;
/** The stored part of a configuration: everything but its version. */
export type TenantConfigurationDocument = Omit<TenantConfigurationInput, 'version'>;
export type ProviderSection = z.infer<typeof ProviderSectionSchema>;
export type VectorIndexSection = z.infer<typeof VectorIndexSectionSchema>;
export type WebhookToolSection = z.infer<typeof WebhookToolSectionSchema>;
export type McpServerSection = z.infer<typeof McpServerSectionSchema>;
export type WebSearchSection = z.infer<typeof WebSearchSectionSchema>;
export type ModelPrice = z.infer<typeof ModelPriceSchema>;
export type UsageLimits = z.infer<typeof UsageLimitsSchema>;
