// A tenant's configuration as the control plane pushes it (DESIGN.md flow 2): stored whole and replaced only by a
// higher version, so an outbox that retries, or delivers out of order, can never roll it back. Provider keys are
// sealed at rest and shown redacted. docs/decisions/0013 and 0018 record the rules.
import { createHash, createHmac, hkdfSync } from 'node:crypto';
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { conflict, notFound } from '@agentplane/lib/errors';
import type { FeatureHost } from '../features.js';
import type { RuntimeSchema, TenantConfigurationsTable } from '../store/schema.js';
import {
  TenantConfiguration,
  type ModelPrice,
  type ProviderKind,
  type ProviderSection,
  type TenantConfigurationDocument,
  type TenantConfigurationInput,
  type TenantConfigurationOutput,
  type VectorIndexSection,
  type McpServerSection,
  type WebhookToolSection,
} from './schemas.js';
import { redact } from '@agentplane/lib/schemas/redaction';
import { canonicalTenantId, tenantNotFound } from './service.js';

export type { ModelPrice, ProviderKind, ProviderSection, UsageLimits } from './schemas.js';

type ConfigurationRow = Selectable<TenantConfigurationsTable>;

/** A provider section as stored: its key sealed, under another name so a sealed value can never pass for a key. */
type StoredProvider = Omit<ProviderSection, 'api_key'> & { sealed_api_key: string };
/** The project's own vector index as stored: its key sealed the same way. */
type StoredVectorIndex = Omit<VectorIndexSection, 'api_key'> & { sealed_api_key: string };
type Retrieval = NonNullable<TenantConfigurationDocument['retrieval']>;
type StoredRetrieval = Omit<Retrieval, 'vector_index'> & { vector_index?: StoredVectorIndex };
/** A webhook tool as stored: each signing secret sealed, under another name. */
type StoredWebhookTool = Omit<WebhookToolSection, 'secrets'> & { secrets: Array<{ sealed_secret: string; until?: string }> };
/** An MCP server as stored: its headers sealed as one secret. */
type StoredMcpServer = Omit<McpServerSection, 'headers'> & { sealed_headers?: string };
type StoredDocument = Omit<TenantConfigurationDocument, 'providers' | 'retrieval' | 'webhook_tools' | 'mcp_servers' | 'web_search'> & {
  web_search?: Omit<NonNullable<TenantConfigurationDocument['web_search']>, 'api_key'> & { sealed_api_key?: string };
  providers?: StoredProvider[];
  retrieval?: StoredRetrieval;
  webhook_tools?: StoredWebhookTool[];
  mcp_servers?: StoredMcpServer[];
};
/** A section that holds a key: in clear in a pushed document, sealed in a stored one. */
type KeyHolder = { api_key?: string; sealed_api_key?: string };

/** What a turn needs to call a model: the credential that serves it, in clear, and the customer's price for it. */
export interface ProviderCredential {
  /** The control plane's credential id. */
  providerId: string;
  kind: ProviderKind;
  /** The API root, such as https://api.openai.com/v1. */
  baseUrl: string;
  apiKey: string;
  /** Undefined: the customer set no price, and calls to the model count no cost against the budget. */
  price: ModelPrice | undefined;
}

/** The one credential serving `model` in a loaded configuration; undefined when no provider serves it. */
export function providerFor(document: TenantConfigurationDocument, model: string): ProviderCredential | undefined {
  const provider = document.providers?.find((candidate) => candidate.models.includes(model));
  if (!provider) return undefined;
  return { providerId: provider.id, kind: provider.kind, baseUrl: provider.base_url, apiKey: provider.api_key, price: provider.prices?.[model] };
}

/** A project's own Pinecone index (docs/decisions/0047), its key in clear. */
export interface ProjectIndex {
  host: string;
  apiKey: string;
}

/** The project's own vector index; undefined: the deployment's. */
export function projectIndexOf(document: TenantConfigurationDocument): ProjectIndex | undefined {
  const index = document.retrieval?.vector_index;
  return index && { host: index.index_host, apiKey: index.api_key };
}

/** Where a tenant's documents are embedded: the credential, the model and its space; undefined when none is set. */
export interface EmbeddingTarget {
  /** The embedding space a vector belongs to: vectors of different spaces are never compared. */
  space: string;
  /** The space as the model alone makes it, whatever index holds the vectors: what memory, kept beside its rows, is embedded in. */
  modelSpace: string;
  /** The provider credential's id in the configuration. */
  providerId: string;
  baseUrl: string;
  apiKey: string;
  model: string;
  dimensions: number;
  /** The project's own index the space's vectors live in; undefined: the deployment's. */
  index?: ProjectIndex;
}

export function embeddingFor(document: TenantConfigurationDocument): EmbeddingTarget | undefined {
  const embedding = document.retrieval?.embedding;
  return embedding ? embeddingTargetOf(document, embedding, projectIndexOf(document)) : undefined;
}

/**
 * A space's target from the configuration's providers; undefined when its provider is no longer configured. The
 * space names the index its vectors live in, so moving a project to another index is a new space, built in the
 * background like a change of model while searches keep using the old one.
 */
export function embeddingTargetOf(
  document: TenantConfigurationDocument,
  embedding: { provider: string; model: string; dimensions: number },
  index?: ProjectIndex,
): EmbeddingTarget | undefined {
  const provider = document.providers?.find((candidate) => candidate.id === embedding.provider);
  if (!provider) return undefined;
  const modelSpace = `${provider.base_url}|${embedding.model}|${embedding.dimensions}`;
  return {
    space: index ? `${modelSpace}|pinecone:${index.host}` : modelSpace,
    modelSpace,
    providerId: provider.id,
    baseUrl: provider.base_url,
    apiKey: provider.api_key,
    model: embedding.model,
    dimensions: embedding.dimensions,
    ...(index ? { index } : {}),
  };
}

/** Where the project's rerank model is served (docs/decisions/0042). */
export interface RerankTarget {
  baseUrl: string;
  apiKey: string;
  model: string;
}

/** The project's rerank model; undefined without one, or when its provider is no longer configured. */
export function rerankFor(document: TenantConfigurationDocument): RerankTarget | undefined {
  const rerank = document.retrieval?.rerank;
  const provider = rerank ? document.providers?.find((candidate) => candidate.id === rerank.provider) : undefined;
  return rerank && provider ? { baseUrl: provider.base_url, apiKey: provider.api_key, model: rerank.model } : undefined;
}

/** The key that fingerprints provider keys in the digest, derived from the master key (the same on every replica). */
export function configurationDigestKey(masterKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), 'agentplane configuration digest', 32));
}

/** Enough to tell whether a copy of a tenant's configuration held in memory is still the stored one. */
export interface ConfigurationStamp {
  version: number;
  digest: string;
}

/**
 * A configuration's stamp, the time the tenant's settings last changed (their routing keys live there) and the time
 * of its latest forget (the subjects whose earlier tokens are refused, docs/decisions/0074).
 */
export interface TenantStamp extends ConfigurationStamp {
  settingsUpdatedAt: number;
  forgottenAt: number;
}

export interface StoredConfiguration extends ConfigurationStamp {
  tenantId: string;
  document: TenantConfigurationDocument;
}

/** The configuration's part of the tenant erase: its row. */
export function registerConfigurations(host: FeatureHost, configurations: TenantConfigurationService): void {
  host.eraseRows({ table: 'tenant_configurations', purge: (trx, tenantId) => configurations.purge(trx, tenantId) });
}

export class TenantConfigurationService {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    /** Seals provider keys at rest. */
    private readonly secrets: SecretBox,
    /** Keys the fingerprints of provider keys in the digest (`configurationDigestKey`). */
    private readonly digestKey: Buffer,
    /**
     * A count of changes to the tenant tables: while it stands still, a stamp read before is still the stored one,
     * and a request costs no read to learn so. On the embedded store, the writes sent (`Database.changesTo`); on a
     * shared store, the change notices heard from every replica (TenantChangeNotices), with `trustMs` as well.
     */
    private readonly tenantWrites?: () => number,
    /** How long a stamp is trusted at most, whatever the count says (a shared store: a notice can be lost). */
    private readonly trustMs?: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Stamps read under a count of tenant changes, and when they were read. */
  private readonly stamps = new Map<string, { writes: number; stamp: TenantStamp; readAt: number }>();

  /**
   * Stores a pushed configuration. A higher version replaces the stored one; the same version with the same
   * content changes nothing (a retried push); a lower version, or the same version with other content, is 409
   * and changes nothing. Each 409 names what is stored (`stored_version`, `stored_digest`), and a push naming that
   * digest in `replaceDigest` replaces it whatever the versions: the control plane is the source of truth, and
   * brings back a runtime restored to, or left holding, another configuration (docs/decisions/0025). The digest
   * makes the replacement conditional, so it never overwrites something the caller has not seen.
   */
  async put(tenantId: string, input: TenantConfigurationInput, options: { replaceDigest?: string } = {}): Promise<TenantConfigurationOutput> {
    tenantId = canonicalTenantId(tenantId);
    const { version, ...document } = input;
    const digest = digestOf(this.fingerprinted(document));
    const row = await this.db.transaction().execute(async (trx) => {
      // Locking the tenant row serializes pushes for this tenant, the first one included (it has no row to lock).
      const tenant = await trx.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).forUpdate().executeTakeFirst();
      if (!tenant) throw tenantNotFound(tenantId);
      const stored = await trx.selectFrom('tenant_configurations').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
      const storedStamp = stored ? { stored_version: stored.version, stored_digest: stored.digest } : {};
      if (stored && version === stored.version && stored.digest === digest) return stored;
      if (options.replaceDigest !== undefined) {
        if (!stored || stored.digest !== options.replaceDigest) {
          throw conflict(`the stored configuration is not the one to replace (digest ${options.replaceDigest}): read it again`, {
            code: 'configuration_changed',
            extra: storedStamp,
          });
        }
      } else if (stored && version < stored.version) {
        throw conflict(`configuration version ${version} is older than the stored version ${stored.version}`, {
          code: 'configuration_outdated',
          extra: storedStamp,
        });
      } else if (stored && version === stored.version) {
        throw conflict(`configuration version ${version} is already stored with different content`, {
          code: 'configuration_version_conflict',
          extra: storedStamp,
        });
      }
      const values = { version, digest, document: JSON.stringify(this.sealed(tenantId, document)), updated_at: new Date() };
      return trx
        .insertInto('tenant_configurations')
        .values({ tenant_id: tenantId, ...values })
        .onConflict((oc) => oc.column('tenant_id').doUpdateSet(values))
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return this.present(row);
  }

  /** The stored configuration, provider keys redacted; 404 for an unknown tenant and, with code `not_configured`, for one never configured. */
  async get(tenantId: string): Promise<TenantConfigurationOutput> {
    tenantId = canonicalTenantId(tenantId);
    const row = await this.db.selectFrom('tenant_configurations').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
    if (row) return this.present(row);
    const tenant = await this.db.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!tenant) throw tenantNotFound(tenantId);
    throw notFound(`tenant ${tenantId} has no configuration yet`, { code: 'not_configured' });
  }

  /**
   * The version and digest, and when the tenant's settings last changed: tells whether what a replica cached for
   * the tenant (its configuration, verifier and model routing) is current. Read from the store, or trusted as read
   * before while no tenant write was counted since (and, on a shared store, for at most `trustMs`). A stamp held
   * with a version below `atLeastVersion` (a token minted after a change this replica has not heard of yet) is read
   * again: the write's answer came after the store had it (docs/decisions/0070).
   */
  async stamp(tenantId: string, atLeastVersion?: number): Promise<TenantStamp | undefined> {
    tenantId = canonicalTenantId(tenantId);
    // Taken before the read: a write sent meanwhile makes this entry stale rather than newer than it is.
    const writes = this.tenantWrites?.();
    const readAt = this.now();
    const held = writes === undefined ? undefined : this.stamps.get(tenantId);
    if (
      held &&
      held.writes === writes &&
      (this.trustMs === undefined || readAt - held.readAt < this.trustMs) &&
      (atLeastVersion === undefined || held.stamp.version >= atLeastVersion)
    ) {
      return held.stamp;
    }
    const stamp = await this.readStamp(tenantId);
    if (writes !== undefined) {
      if (stamp) this.stamps.set(tenantId, { writes, stamp, readAt });
      else this.stamps.delete(tenantId);
    }
    return stamp;
  }

  private async readStamp(tenantId: string): Promise<TenantStamp | undefined> {
    const row = await this.db
      .selectFrom('tenant_configurations')
      .select((eb) => [
        'version',
        'digest',
        eb.selectFrom('tenants').select('updated_at').whereRef('tenants.tenant_id', '=', 'tenant_configurations.tenant_id').as('settings_updated_at'),
        eb
          .selectFrom('forgotten_subjects')
          .select((inner) => inner.fn.max('forgotten_subjects.forgotten_at').as('at'))
          .whereRef('forgotten_subjects.tenant_id', '=', 'tenant_configurations.tenant_id')
          .as('forgotten_at'),
      ])
      .where('tenant_id', '=', tenantId)
      .executeTakeFirst();
    return row && { version: row.version, digest: row.digest, settingsUpdatedAt: row.settings_updated_at?.getTime() ?? 0, forgottenAt: row.forgotten_at ? new Date(row.forgotten_at).getTime() : 0 };
  }

  /** The stored configuration with provider keys in clear: what a turn calls models with, never an HTTP answer. */
  async load(tenantId: string): Promise<StoredConfiguration | undefined> {
    const row = await this.db.selectFrom('tenant_configurations').selectAll().where('tenant_id', '=', canonicalTenantId(tenantId)).executeTakeFirst();
    if (!row) return undefined;
    // Parsed again rather than cast: a row is only ever read back through the schema that admitted it.
    const { version, ...document } = TenantConfiguration.parse({ ...this.opened(row.tenant_id, row.document as StoredDocument), version: row.version });
    return { tenantId: row.tenant_id, version, digest: row.digest, document };
  }

  /**
   * Every browser origin some tenant here allows, as configured (wildcards included): a preflight carries no
   * credential, so it is answered for the union (docs/decisions/0029). Read each time, so a push or an erase on any
   * replica counts at the next preflight.
   */
  async allowedOrigins(): Promise<string[]> {
    const { rows } = await sql<{ origin: string }>`
      select distinct entry.origin
      from tenant_configurations, jsonb_array_elements_text(document -> 'origins') as entry(origin)
    `.execute(this.db);
    return rows.map((row) => row.origin);
  }

  /** The tenant's configuration row, inside the erase's purge transaction. */
  async purge(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<number> {
    const result = await trx.deleteFrom('tenant_configurations').where('tenant_id', '=', tenantId).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /**
   * The document with every key in it (the providers', the project's vector index's, the webhook tools' signing
   * secrets) passed through `key`: what is sealed, opened, fingerprinted or shown. Each key is named by the AAD that
   * binds it to its tenant and place.
   */
  private withKeys(tenantId: string, document: StoredDocument | TenantConfigurationDocument, key: (section: KeyHolder, aad: string) => Record<string, string>): never {
    const { providers, retrieval, webhook_tools: webhookTools, mcp_servers: mcpServers, web_search: webSearch, ...rest } = document;
    const swap = (section: KeyHolder, aad: string) => {
      const { api_key: _key, sealed_api_key: _sealed, ...others } = section;
      return { ...others, ...key(section, aad) };
    };
    // A tool's signing secret goes through `key` as a key would, under its own names.
    const swapSecret = (held: { secret?: string; sealed_secret?: string; until?: string }, aad: string) => {
      const { secret, sealed_secret: sealed, ...others } = held;
      const swapped = key({ ...(secret === undefined ? {} : { api_key: secret }), ...(sealed === undefined ? {} : { sealed_api_key: sealed }) }, aad);
      return { ...others, ...Object.fromEntries(Object.entries(swapped).map(([name, value]) => [name.replace('api_key', 'secret'), value])) };
    };
    // An MCP server's headers go through `key` as one secret (their JSON), under their own names.
    const swapHeaders = (server: { id: string; headers?: Record<string, string>; sealed_headers?: string }, aad: string) => {
      const { headers, sealed_headers: sealed, ...others } = server;
      if (headers === undefined && sealed === undefined) return others;
      const swapped = key({ ...(headers === undefined ? {} : { api_key: JSON.stringify(headers) }), ...(sealed === undefined ? {} : { sealed_api_key: sealed }) }, aad);
      const held: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(swapped)) {
        if (name === 'api_key') held.headers = headersOf(value);
        else held[name.replace('api_key', 'headers')] = value;
      }
      return { ...others, ...held };
    };
    const index: KeyHolder | undefined = retrieval?.vector_index;
    return {
      ...rest,
      ...(providers === undefined ? {} : { providers: providers.map((provider: KeyHolder & { id: string }) => swap(provider, providerKeyAad(tenantId, provider.id))) }),
      ...(retrieval === undefined ? {} : { retrieval: { ...retrieval, ...(index === undefined ? {} : { vector_index: swap(index, vectorIndexKeyAad(tenantId)) }) } }),
      // A search engine may have no key (a SearXNG instance open to the runtime): then there is nothing to pass.
      ...(webSearch === undefined
        ? {}
        : { web_search: (webSearch as KeyHolder).api_key === undefined && (webSearch as KeyHolder).sealed_api_key === undefined ? webSearch : swap(webSearch as KeyHolder, webSearchKeyAad(tenantId)) }),
      ...(mcpServers === undefined
        ? {}
        : {
            mcp_servers: (mcpServers as Array<{ id: string; headers?: Record<string, string>; sealed_headers?: string }>).map((server) =>
              swapHeaders(server, mcpHeadersAad(tenantId, server.id)),
            ),
          }),
      ...(webhookTools === undefined
        ? {}
        : {
            webhook_tools: (webhookTools as Array<{ id: string; secrets: Array<{ secret?: string; sealed_secret?: string; until?: string }> }>).map((tool) => ({
              ...tool,
              secrets: tool.secrets.map((held, place) => swapSecret(held, webhookSecretAad(tenantId, tool.id, place))),
            })),
          }),
    } as never;
  }

  /** The document a digest is taken of: each key replaced by its HMAC, so no plain hash of a key is kept. */
  private fingerprinted(document: TenantConfigurationDocument): unknown {
    return this.withKeys('', document, ({ api_key }) => ({ api_key_hmac: createHmac('sha256', this.digestKey).update(api_key!).digest('hex') }));
  }

  private sealed(tenantId: string, document: TenantConfigurationDocument): StoredDocument {
    return this.withKeys(tenantId, document, ({ api_key }, aad) => ({ sealed_api_key: this.secrets.seal(api_key!, aad) }));
  }

  private opened(tenantId: string, document: StoredDocument): TenantConfigurationDocument {
    return this.withKeys(tenantId, document, ({ sealed_api_key }, aad) => ({ api_key: this.secrets.open(sealed_api_key!, aad) }));
  }

  /** The configuration as an answer shows it: every key redacted like a secret setting. */
  private present(row: ConfigurationRow): TenantConfigurationOutput {
    const shown = this.withKeys(row.tenant_id, row.document as StoredDocument, ({ sealed_api_key }, aad) => ({
      api_key: redact(this.secrets.open(sealed_api_key!, aad)),
    })) as TenantConfigurationDocument;
    return { tenant_id: row.tenant_id, version: row.version, ...shown, updated_at: row.updated_at.toISOString() };
  }
}

/** Binds a sealed provider key to its tenant and credential, so it cannot be copied onto another. */
const providerKeyAad = (tenantId: string, providerId: string) => `tenant:${tenantId}:provider:${providerId}:api-key`;
/** Binds the sealed key of the project's web search engine to its tenant. */
const webSearchKeyAad = (tenantId: string) => `tenant:${tenantId}:web-search:api-key`;
/** Binds an MCP server's sealed headers to its tenant and server. */
const mcpHeadersAad = (tenantId: string, serverId: string) => `tenant:${tenantId}:mcp-server:${serverId}:headers`;
/**
 * Headers opened from their JSON. A redacted rendering (what an answer shows) is not JSON: it is shown as one
 * masked value, without the last characters a redacted key shows (they would be a header value's).
 */
const headersOf = (value: string): Record<string, string> => {
  try {
    return JSON.parse(value) as Record<string, string>;
  } catch {
    return { '(sealed)': '****' };
  }
};
/** Binds a webhook tool's sealed signing secret to its tenant, tool and place (current 0, replaced 1). */
const webhookSecretAad = (tenantId: string, toolId: string, place: number) => `tenant:${tenantId}:webhook-tool:${toolId}:secret:${place}`;
/** Binds the sealed key of a project's own vector index to its tenant. */
export const vectorIndexKeyAad = (tenantId: string) => `tenant:${tenantId}:vector-index:api-key`;

/**
 * SHA-256 of the document as canonical JSON (keys sorted at every level, absent members dropped). Set-like lists
 * are already sorted by the schema, so a push that differs only in order has the same digest. `put` hands it the
 * document with provider keys fingerprinted.
 */
export function digestOf(document: unknown): string {
  return createHash('sha256').update(canonicalJson(document)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, member]) => member !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
