// The provisioner port: how the control plane makes a project's tenant exist on a runtime, gives it its
// configuration, tells whether it is up, and removes it. `local` (the all-in-one and plain processes) talks to one
// runtime's admin surface over HTTP; `kubernetes` writes Project and Tenant resources and reads their status
// (docs/decisions/0024).
import { AppError } from '@agentplane/lib/errors';
import type { ComputerSettings } from '@agentplane/lib/computer';
import type { BrowserSettings } from '@agentplane/lib/browser';
import type { Guardrails } from '@agentplane/lib/guardrails';
import type { BudgetWindow, ProviderKind, StoredPrice } from '../store/schema.js';
import type { PushedMcpServer, PushedWebhookTool } from '../tools/configuration.js';

/**
 * A provider credential as pushed: the key in clear, so only over the runtime's admin channel (the runtime seals
 * it at rest). A provisioner that writes resources must put it in a Secret, never in a resource's spec.
 */
export interface PushedProvider {
  id: string;
  kind: ProviderKind;
  base_url: string;
  api_key: string;
  models: string[];
  prices?: Record<string, StoredPrice>;
}

/** The project's usage caps, each present only when set (docs/decisions/0018). */
export interface PushedLimits {
  rpm_limit?: number;
  tpm_limit?: number;
  budget?: { amount_usd: number; window: BudgetWindow };
}

/** What the runtime stores for a tenant (runtime `PUT /tenants/{id}/configuration`). */
export interface TenantConfigurationDocument {
  version: number;
  issuer: string;
  trusted_keys: { keys: object[] };
  ceiling: {
    capabilities: string[];
    readOnly: boolean;
    maxTokenLifetimeSeconds?: number;
    maxToolIterations?: number;
    maxContextTokens?: number;
    defaultRoles: string[];
    defaultGroups: string[];
    registeredModels?: string[];
  };
  system_prompt: string | null;
  origins: string[];
  /** Present when the project has a provider; then `default_model` is present too (null: none), as it is when a default outlived its provider. */
  providers?: PushedProvider[];
  default_model?: string | null;
  /** Present when the project has any cap. */
  limits?: PushedLimits;
  /** Present when a provider of the project has a measured embedding model. */
  retrieval?: {
    embedding: { provider: string; model: string; dimensions: number } | null;
    processor?: { chunk_tokens: number; overlap_tokens: number };
    citations?: 'inline' | 'list';
    /** Present when the project has a rerank model whose provider is still registered. */
    rerank?: { provider: string; model: string };
    /** Present (true) when each turn starts with the best-matching passages. */
    auto_context?: boolean;
    /** Present when the project chose its own Pinecone index; its key in clear on the admin channel. */
    vector_index?: { provider: 'pinecone'; index_host: string; api_key: string };
  };
  /** Present when the project published a webhook tool; secrets in clear on the admin channel. */
  webhook_tools?: PushedWebhookTool[];
  /** Present when the project has an MCP server; headers in clear on the admin channel. */
  mcp_servers?: PushedMcpServer[];
  /** Present when the project said where its subagents run. */
  subagents?: { models: string[]; max_concurrent: number };
  /** Present when the project gave a webhook URL for its events. */
  webhook?: { url: string };
  /** Present when the project set input or output checks. */
  guardrails?: Guardrails;
  /** Present when the project chose a web search engine; its key in clear on the admin channel. */
  web_search?: { provider: 'brave' | 'searxng'; base_url: string; api_key?: string };
  /** Present when the project set its computer settings (every one, defaults filled). */
  computer?: ComputerSettings;
  /** Present when the project set its browser hand-off settings. */
  browser?: BrowserSettings;
}

/** Which project and tenant an outbox entry is about. */
export interface TenantTarget {
  projectId: string;
  tenantId: string;
}

/** Whether a project's runtime and tenant are up, as the provisioner sees them. */
export interface ProvisioningStatus {
  ready: boolean;
  /** CamelCase, machine-readable: `Registered`, `RuntimeUnavailable`, ... (on Kubernetes, the resources' own reasons). */
  reason: string;
  /** What a person can act on. */
  message: string;
  /** Where customers call this project's data plane, when the provisioner gives each project its own. */
  dataPlaneUrl?: string;
}

/**
 * Every method is called by the outbox relay (or a readiness read) and must be idempotent: a delivery may be
 * repeated after a crash. A throw means "not yet": the relay keeps the entry, records the message and retries.
 */
export interface Provisioner {
  /** Makes sure the tenant exists and is ready for its configuration. An existing tenant is success. */
  registerTenant(target: TenantTarget, name: string): Promise<void>;
  /**
   * Delivers a configuration: afterwards the runtime holds exactly this document. One it already has is success;
   * a newer version or other content it holds is replaced (the control plane is the source of truth, 0025).
   */
  pushConfiguration(target: TenantTarget, document: TenantConfigurationDocument): Promise<void>;
  /** Erases the project's tenant and whatever was provisioned for the project. Already gone is success. */
  removeProject(target: TenantTarget): Promise<void>;
  /** Reads whether the project's runtime and tenant are up; never throws for an unreachable backend, says so. */
  status(target: TenantTarget): Promise<ProvisioningStatus>;
  /**
   * Makes calls on the project's runtime admin surface for a person's request (the corpus, the wiki): `call` gets a
   * client for the runtime that serves the project. A stale admin key is read again and the call made once more.
   */
  withRuntime<T>(target: TenantTarget, call: (runtime: TenantCalls) => Promise<T>): Promise<T>;
}

/** Calls on one tenant's own admin routes of a runtime (RuntimeAdminClient), for a person's request. */
export interface TenantCalls {
  tenantCall<T>(tenantId: string, method: 'GET' | 'POST' | 'DELETE', path: string, options?: { query?: Record<string, string>; body?: unknown }): Promise<T>;
}

/** A request's query as the runtime's admin routes take it: every given value as a string, absent ones left out. */
export const runtimeQuery = (query: Record<string, string | number | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(query).flatMap(([name, value]) => (value === undefined ? [] : [[name, String(value)]])));

/**
 * Runs `call` on the runtime that serves the project, for a person's request. With no runtime configured the
 * answer is 503, saying what is kept there (`kept`: "the project's documents are kept there").
 */
export async function onProjectRuntime<T>(
  projects: { targetOf(projectId: string): Promise<TenantTarget> },
  provisioner: Provisioner | undefined,
  projectId: string,
  kept: string,
  call: (runtime: TenantCalls, tenantId: string) => Promise<T>,
): Promise<T> {
  const target = await projects.targetOf(projectId);
  if (!provisioner) throw new AppError('unavailable', `no runtime is configured (RUNTIME_URL, RUNTIME_ADMIN_KEY): ${kept}`);
  return provisioner.withRuntime(target, (runtime) => call(runtime, target.tenantId));
}
