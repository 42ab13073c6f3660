// The control-api's tables as Kysely sees them (queried through `withSchema('control')`).
import type { ComputerSettings } from '@agentplane/lib/computer';
import type { BrowserSettings } from '@agentplane/lib/browser';
import type { Guardrails } from '@agentplane/lib/guardrails';
import type { ColumnType, Generated } from 'kysely';

/** A project's capability ceiling and maxima as stored (see projects/ceiling.ts). */
export interface StoredCeiling {
  capabilities?: string[];
  read_only?: boolean;
  max_token_lifetime_seconds?: number;
  max_tool_iterations?: number | null;
  max_context_tokens?: number | null;
  default_roles?: string[];
  default_groups?: string[];
}

/** How a provider is spoken to: OpenAI itself, or any server speaking its API at a `base_url`. */
export type ProviderKind = 'openai' | 'openai_compatible';

/** The customer's price of one model, in the runtime's (pushed) names. */
export interface StoredPrice {
  input_per_million_usd: number;
  output_per_million_usd: number;
}

/** The calendar window a spend cap applies to. */
export type BudgetWindow = 'day' | 'month';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

/** A project's own Pinecone index as stored: the key sealed, the dimension it answered when it was tried. */
export interface StoredVectorIndex {
  provider: 'pinecone';
  index_host: string;
  sealed_api_key: string;
  dimension: number;
}

/** The project's web search engine as stored: its key, when it has one, sealed. */
export interface StoredWebSearch {
  provider: 'brave' | 'searxng';
  base_url: string;
  sealed_api_key?: string;
}

export interface ControlSchema {
  accounts: { id: string; email: string; password_hash: string; created_at: Generated<Date> };
  orgs: { id: string; name: string; created_at: Generated<Date> };
  org_members: { org_id: string; account_id: string; role: 'owner' | 'member' };
  sessions: { id: string; token_hash: string; account_id: string; created_at: Generated<Date>; expires_at: Timestamp; revoked_at: Date | null };
  projects: {
    id: string;
    org_id: string;
    name: string;
    tenant_id: string;
    created_at: Generated<Date>;
    updated_at: Generated<Date>;
    ceiling: ColumnType<StoredCeiling, string | undefined, string>;
    system_prompt: string | null;
    origins: ColumnType<string[], string | undefined, string>;
    signing_keys: string | null;
    config_version: Generated<number>;
    /** A registered model turns use when a request names none; null: none (no shared fallback). */
    default_model: string | null;
    /** Usage caps on the project's models (projects/limits.ts); null: no cap. */
    rpm_limit: number | null;
    tpm_limit: number | null;
    /** Set together with `budget_window`, or neither. */
    budget_amount_usd: number | null;
    budget_window: BudgetWindow | null;
    /** The chosen embedding model, measured; null: the oldest provider's own. */
    embedding: ColumnType<{ provider_id: string; model: string; dimensions: number } | null, string | null | undefined, string | null>;
    /** How answers cite documents; null: inline markers (the default). */
    citations: 'inline' | 'list' | null;
    /** How documents are cut into chunks; null: the runtime's default. */
    processor: ColumnType<{ chunk_tokens: number; overlap_tokens: number } | null, string | null | undefined, string | null>;
    /** Whether each turn starts with the best-matching passages (docs/decisions/0045). */
    auto_context: Generated<boolean>;
    /** The rerank model, tried when chosen; null: none. */
    rerank: ColumnType<{ provider_id: string; model: string } | null, string | null | undefined, string | null>;
    /** The project's own vector index, its key sealed; null: the deployment's (docs/decisions/0047). */
    vector_index: ColumnType<StoredVectorIndex | null, string | null | undefined, string | null>;
    web_search: ColumnType<StoredWebSearch | null, string | null | undefined, string | null>;
    subagents: ColumnType<{ models: string[]; max_concurrent: number } | null, string | null | undefined, string | null>;
    /** Where the project's events go (docs/decisions/0059); null: nowhere but tasks' callbacks. */
    webhook_url: ColumnType<string | null, string | null | undefined, string | null>;
    /** The project's input and output checks (docs/decisions/0064); null: none. */
    guardrails: ColumnType<Guardrails | null, string | null | undefined, string | null>;
    /** The project's computer settings as it last set them, whole (docs/decisions/0080); null: the defaults. */
    computer: ColumnType<ComputerSettings | null, string | null | undefined, string | null>;
    /** The project's browser hand-off settings as it last set them, whole (docs/decisions/0090); null: the defaults. */
    browser: ColumnType<BrowserSettings | null, string | null | undefined, string | null>;
  };
  /** Every control-plane write and token mint (docs/decisions/0065); append-only. */
  audit_log: {
    id: Generated<string>;
    project_id: string | null;
    org_id: string | null;
    at: Generated<Date>;
    /** `account:<id>` or `key:<id>`. */
    actor: string;
    action: string;
    resource: ColumnType<Record<string, unknown>, string | undefined, string>;
    outcome: string;
    status: number | null;
    ip: string | null;
    request_id: string | null;
  };
  providers: {
    id: string;
    project_id: string;
    provider: ProviderKind;
    base_url: string;
    /** Chat models registered through this credential, in the order given. */
    models: ColumnType<string[], string, string>;
    embedding_model: string | null;
    /** Measured by an embeddings call, never assumed. */
    embedding_dim: number | null;
    /** Sealed with the SecretBox (providers/service.ts `apiKeyAad`); never returned or logged. */
    api_key: string;
    key_last_four: string | null;
    /** Per registered model, the customer's price; null: none set (calls then count no cost against a budget). */
    prices: ColumnType<Record<string, StoredPrice> | null, string | null | undefined, string | null>;
    created_at: Generated<Date>;
    refreshed_at: ColumnType<Date, Date | undefined, Date>;
  };
  mcp_servers: {
    id: string;
    project_id: string;
    name: string;
    url: string;
    transport: 'auto' | 'streamable_http' | 'sse';
    /** The names of its static headers, shown in listings; their values are in `headers`. */
    header_names: ColumnType<string[], string, string>;
    /** The headers as JSON, sealed with the SecretBox (tools/configuration.ts `mcpHeadersAad`); null: none. */
    headers: string | null;
    created_at: Generated<Date>;
  };
  webhook_tools: {
    id: string;
    project_id: string;
    name: string;
    description: string;
    parameters: ColumnType<Record<string, unknown>, string, string>;
    url: string;
    requires_approval: boolean;
    /** Sealed with the SecretBox (tools/webhook-tools.ts `webhookSecretAad`); returned once, at creation or rotation. */
    secret: string;
    /** The secret a rotation replaced, sealed; it signs beside the new one until `previous_secret_until`. */
    previous_secret: string | null;
    previous_secret_until: Date | null;
    created_at: Generated<Date>;
    updated_at: ColumnType<Date, Date | undefined, Date>;
    rotated_at: Date | null;
  };
  outbox: {
    id: Generated<number>;
    project_id: string;
    tenant_id: string;
    kind: 'register_tenant' | 'push_configuration' | 'remove_project';
    payload: ColumnType<Record<string, unknown>, string | undefined, string>;
    attempts: Generated<number>;
    next_attempt_at: ColumnType<Date, Date | undefined, Date>;
    last_error: string | null;
    created_at: Generated<Date>;
    delivered_at: Date | null;
  };
  project_keys: {
    id: string;
    project_id: string;
    name: string;
    scope: 'mint' | 'admin';
    key_hash: string;
    last_four: string;
    created_at: Generated<Date>;
    /** `account:<id>` or `key:<id>`: who made it. */
    created_by: string;
    revoked_at: Date | null;
  };
}
