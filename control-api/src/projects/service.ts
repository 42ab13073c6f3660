// Projects of an org: each is one customer's hard-isolation unit with its own tenant on a runtime, its own
// capability ceiling and configuration, and its own token signing key ring (sealed at rest).
import { computerSettingsOf, type ComputerSettings } from '@agentplane/lib/computer';
import { browserSettingsOf, type BrowserSettings } from '@agentplane/lib/browser';
import type { Guardrails } from '@agentplane/lib/guardrails';
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { conflict, notFound } from '@agentplane/lib/errors';
import { issuerFor } from '@agentplane/lib/tokens/claims';
import { createKeyRing, exportKeyRing, importKeyRing, MAX_TRUSTED_KEYS, pruneKeyRing, ringHasRoom, rotateKeyRing, trustedKeysOf, type KeyRing } from '@agentplane/lib/tokens/keys';
import { enqueue } from '../provisioning/outbox.js';
import type { TenantConfigurationDocument } from '../provisioning/provisioner.js';
import { pushedMcpServers, pushedWebhookTools, webSearchKeyAad } from '../tools/configuration.js';
import { pushedEmbedding, pushedProviders, unpricedModels, vectorIndexKeyAad } from '../providers/configuration.js';
import { modelNotRegistered, registeredModels } from '../providers/registered.js';
import type { BudgetWindow, ControlSchema, StoredCeiling, StoredWebSearch } from '../store/schema.js';
import { ceilingView, defaultCeiling, mergeCeiling, permissionCeiling, type CeilingView, type CeilingPatch } from './ceiling.js';
import { limitsChange, limitsView, pushedLimits, type LimitsPatchInput, type LimitsView } from './limits.js';
import type { z } from 'zod';

export interface ProjectOut {
  id: string;
  org_id: string;
  name: string;
  tenant_id: string;
  created_at: string;
  updated_at: string;
}

export interface ProjectDetail extends ProjectOut {
  ceiling: CeilingView;
  system_prompt: string | null;
  origins: string[];
}

/** The answer to deleting a project: gone from the control plane, its removal from the runtime under way. */
export interface ProjectRemoval {
  id: string;
  org_id: string;
  name: string;
  tenant_id: string;
  deleted_at: string;
  removal: 'queued';
}

type ProjectRow = Selectable<ControlSchema['projects']>;

/** Columns of a project a change may set; the version and `updated_at` are moved by the change itself. */
export type ProjectChange = Partial<{
  name: string;
  ceiling: string;
  system_prompt: string | null;
  origins: string;
  default_model: string | null;
  signing_keys: string;
  rpm_limit: number | null;
  tpm_limit: number | null;
  budget_amount_usd: number | null;
  budget_window: BudgetWindow | null;
  /** JSON of the chosen embedding model, or null. */
  embedding: string | null;
  citations: 'inline' | 'list' | null;
  processor: string | null;
  /** JSON of the web search engine (key sealed), or null. */
  web_search: string | null;
  /** JSON of where subagents run, or null. */
  subagents: string | null;
  webhook_url: string | null;
  guardrails: string | null;
  /** JSON of the computer settings, whole, or null. */
  computer: string | null;
  /** JSON of the browser hand-off settings, whole, or null. */
  browser: string | null;
}>;

/** How the project service hands its queued changes to the delivery (ConfigurationDelivery and the outbox relay). */
export interface QueuedChanges {
  /**
   * A change committed with the outbox entry that carries it: resolves once the runtime holds it or the bounded wait
   * is over, so the write's answer comes after the runtime has it (docs/decisions/0070). Never rejects.
   */
  settle(projectId: string, throughEntryId: number, version: number): Promise<unknown>;
  /** An entry was queued that nobody waits for: deliver it soon. */
  kick(): void;
}

/** The runtime's chunking when a project chose none (docs/decisions/0040). */
export const DEFAULT_PROCESSOR = { chunk_tokens: 400, overlap_tokens: 60 };

export class ProjectService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly secrets: SecretBox,
    /** Told of every change the runtime must hear of, once committed and queued. */
    private readonly changes: QueuedChanges = { settle: async () => {}, kick: () => {} },
  ) {}

  /** Resolves when the account belongs to the org; an org it cannot see answers exactly like one that does not exist. */
  async assertMember(orgId: string, accountId: string): Promise<void> {
    const member = await this.db
      .selectFrom('org_members')
      .select('role')
      .where('org_id', '=', orgId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (!member) throw notFound(`org ${orgId} not found`);
  }

  /** Resolves when the account belongs to the project's org; otherwise 404, as for a project that does not exist. */
  async assertAccountSees(projectId: string, accountId: string): Promise<void> {
    const row = await this.db
      .selectFrom('projects')
      .innerJoin('org_members', 'org_members.org_id', 'projects.org_id')
      .select('projects.id')
      .where('projects.id', '=', projectId)
      .where('org_members.account_id', '=', accountId)
      .executeTakeFirst();
    if (!row) throw notFound(`project ${projectId} not found`);
  }

  async create(orgId: string, accountId: string, name: string): Promise<ProjectOut> {
    await this.assertMember(orgId, accountId);
    const id = randomUUID();
    const ring = await createKeyRing();
    const signingKeys = this.secrets.seal(JSON.stringify(await exportKeyRing(ring)), signingKeysAad(id));
    const { row, entryId } = await this.db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto('projects')
        .values({ id, org_id: orgId, name, tenant_id: randomUUID(), ceiling: JSON.stringify(defaultCeiling()), signing_keys: signingKeys })
        .returningAll()
        .executeTakeFirstOrThrow();
      // The tenant first, then its configuration: the relay delivers a project's entries in this order.
      await enqueue(trx, { projectId: id, tenantId: inserted.tenant_id, kind: 'register_tenant', payload: { name } });
      return { row: inserted, entryId: await enqueue(trx, { projectId: id, tenantId: inserted.tenant_id, kind: 'push_configuration' }) };
    });
    await this.changes.settle(id, entryId, row.config_version);
    return present(row);
  }

  /**
   * Deletes the project at once: its row goes, and with it its keys (no new mints), providers and configuration.
   * What was provisioned for it (its tenant's data on the runtime; on Kubernetes its Project) is removed by the
   * outbox after any of the project's earlier entries, so the answer is that the removal is under way.
   */
  async remove(projectId: string, accountId: string): Promise<ProjectRemoval> {
    await this.assertAccountSees(projectId, accountId);
    const removed = await this.db.transaction().execute(async (trx) => {
      const row = await trx.deleteFrom('projects').where('id', '=', projectId).returningAll().executeTakeFirst();
      if (!row) throw projectNotFound(projectId);
      await enqueue(trx, { projectId, tenantId: row.tenant_id, kind: 'remove_project', payload: { name: row.name } });
      return row;
    });
    // The removal is under way, not awaited: nothing can reach the project's data plane after its row went.
    this.changes.kick();
    return { id: removed.id, org_id: removed.org_id, name: removed.name, tenant_id: removed.tenant_id, deleted_at: new Date().toISOString(), removal: 'queued' };
  }

  async listForOrg(orgId: string, accountId: string): Promise<ProjectOut[]> {
    await this.assertMember(orgId, accountId);
    const rows = await this.db.selectFrom('projects').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
    return rows.map(present);
  }

  async get(projectId: string): Promise<ProjectDetail> {
    return presentDetail(await this.row(projectId));
  }

  /** Whether the project chose an embedding model (its documents are then searched by meaning too). */
  async hasEmbedding(projectId: string): Promise<boolean> {
    return (await this.row(projectId)).embedding !== null;
  }

  /** The project's guardrails (none: both sides empty). */
  async guardrailsOf(projectId: string): Promise<Guardrails> {
    return (await this.row(projectId)).guardrails ?? { input: [], output: [] };
  }

  /** Replaces the project's guardrails; pushed like any change. */
  async setGuardrails(projectId: string, guardrails: Guardrails): Promise<Guardrails> {
    await this.applyChange(projectId, async () => ({ set: { guardrails: JSON.stringify(guardrails) }, result: undefined }));
    return guardrails;
  }

  /** The project's computer settings, the defaults filled where it set none. */
  async computerOf(projectId: string): Promise<ComputerSettings> {
    return computerSettingsOf((await this.row(projectId)).computer ?? undefined);
  }

  /**
   * Replaces the project's computer settings with these, whole: a setting left out is the default, not what was
   * stored before. Pushed like any change; the runtime applies them to every sandbox it makes or wakes from then on.
   */
  async setComputer(projectId: string, settings: ComputerSettings): Promise<ComputerSettings> {
    await this.applyChange(projectId, async () => ({ set: { computer: JSON.stringify(settings) }, result: undefined }));
    return computerSettingsOf(settings);
  }

  /** The project's browser hand-off settings, the defaults filled where it set none. */
  async browserOf(projectId: string): Promise<BrowserSettings> {
    return browserSettingsOf((await this.row(projectId)).browser ?? undefined);
  }

  /**
   * Replaces the project's browser hand-off settings, whole. The check's model must be one the project registers
   * (400 otherwise, checked with the project row locked); null leaves the choice to the conversation.
   */
  async setBrowser(projectId: string, settings: BrowserSettings): Promise<BrowserSettings> {
    await this.applyChange(projectId, async (trx) => {
      const model = settings.handoff_check_model;
      if (model !== null) {
        const registered = await registeredModels(trx, projectId);
        if (!registered.includes(model)) throw modelNotRegistered(model, registered);
      }
      return { set: { browser: JSON.stringify(settings) }, result: undefined };
    });
    return browserSettingsOf(settings);
  }

  /** Where the project's events go, or null. */
  async webhookUrlOf(projectId: string): Promise<string | null> {
    return (await this.row(projectId)).webhook_url;
  }

  /** The project's web search engine as stored, or null. */
  async webSearchOf(projectId: string): Promise<StoredWebSearch | null> {
    return (await this.row(projectId)).web_search;
  }

  /** Which project and tenant a call on the project's runtime is about. */
  async targetOf(projectId: string): Promise<{ projectId: string; tenantId: string }> {
    return { projectId, tenantId: (await this.row(projectId)).tenant_id };
  }

  /**
   * The ceiling with the models the project registered: what a mint is clamped against; and the configuration
   * version they belong to, which the minted token carries.
   */
  async ceilingOf(projectId: string): Promise<{ tenantId: string; ceiling: StoredCeiling; registeredModels: string[]; configVersion: number }> {
    const row = await this.row(projectId);
    return { tenantId: row.tenant_id, ceiling: row.ceiling, registeredModels: await registeredModels(this.db, projectId), configVersion: row.config_version };
  }

  async update(projectId: string, patch: { name?: string; ceiling?: z.infer<typeof CeilingPatch> }): Promise<ProjectDetail> {
    return this.change(projectId, (current) => ({
      ...(patch.name === undefined ? {} : { name: patch.name }),
      ...(patch.ceiling === undefined ? {} : { ceiling: JSON.stringify(mergeCeiling(current.ceiling, patch.ceiling)) }),
    }));
  }

  async setSystemPrompt(projectId: string, systemPrompt: string | null): Promise<ProjectDetail> {
    return this.change(projectId, () => ({ system_prompt: systemPrompt }));
  }

  /** How documents are cut into chunks (null: the runtime's default). Pushed like any change; reingest applies it. */
  async setProcessor(projectId: string, processor: { chunk_tokens: number; overlap_tokens: number } | null): Promise<{ chunk_tokens: number; overlap_tokens: number }> {
    await this.change(projectId, () => ({ processor: processor ? JSON.stringify(processor) : null }));
    return processor ?? DEFAULT_PROCESSOR;
  }

  /**
   * Where the project's subagents run: registered models (empty: the delegating turn's own) and how many at once.
   * A model the project does not register is 400, checked with the project row locked.
   */
  async setSubagents(projectId: string, input: { models: string[]; maxConcurrent: number }): Promise<{ models: string[]; maxConcurrent: number }> {
    const models = [...new Set(input.models)].sort();
    await this.applyChange(projectId, async (trx) => {
      const registered = await registeredModels(trx, projectId);
      const unknown = models.find((model) => !registered.includes(model));
      if (unknown) throw modelNotRegistered(unknown, registered);
      return { set: { subagents: JSON.stringify({ models, max_concurrent: input.maxConcurrent }) }, result: undefined };
    });
    return { models, maxConcurrent: input.maxConcurrent };
  }

  /** How answers cite documents: inline markers, or only the list beside the answer. Pushed like any change. */
  async setCitations(projectId: string, style: 'inline' | 'list'): Promise<{ style: 'inline' | 'list' }> {
    await this.change(projectId, () => ({ citations: style }));
    return { style };
  }

  async setOrigins(projectId: string, origins: string[]): Promise<ProjectDetail> {
    return this.change(projectId, () => ({ origins: JSON.stringify(origins) }));
  }

  /** The project's usage caps, with a warning when a budget is set and some registered model has no price. */
  async limits(projectId: string): Promise<LimitsView> {
    const row = await this.row(projectId);
    return limitsView(row, await unpricedModels(this.db, projectId));
  }

  /** Changes the caps (omitted members kept, null clears); pushed like any change. */
  async setLimits(projectId: string, patch: LimitsPatchInput): Promise<LimitsView> {
    const { project, result: unpriced } = await this.applyChange(projectId, async (trx) => ({ set: limitsChange(patch), result: await unpricedModels(trx, projectId) }));
    return limitsView(project, unpriced);
  }

  /**
   * What the project's runtime is told (runtime `PUT /tenants/{id}/configuration`), at the current version, with
   * the provider keys in clear. Read with the project row share-locked, so no change commits between reading the
   * version and reading the providers: a version always carries the content it was bumped for.
   */
  async configurationDocument(projectId: string): Promise<TenantConfigurationDocument | null> {
    const read = await this.db.transaction().execute(async (trx) => {
      const row = await trx.selectFrom('projects').selectAll().where('id', '=', projectId).forShare().executeTakeFirst();
      if (!row || !row.signing_keys) return null;
      return {
        row,
        registered: await registeredModels(trx, row.id),
        providers: await pushedProviders(trx, this.secrets, row.id),
        embedding: await pushedEmbedding(trx, row.id, row.embedding),
        webhookTools: await pushedWebhookTools(trx, this.secrets, row.id),
        mcpServers: await pushedMcpServers(trx, this.secrets, row.id),
        rerank: row.rerank ? await trx.selectFrom('providers').select('id').where('project_id', '=', row.id).where('id', '=', row.rerank.provider_id).executeTakeFirst() : undefined,
      };
    });
    if (!read) return null;
    const { row, registered, providers, embedding, webhookTools, mcpServers } = read;
    // A rerank model whose provider was removed is left out (searches go back to the fused order).
    const rerank = row.rerank && read.rerank ? { provider: row.rerank.provider_id, model: row.rerank.model } : undefined;
    const ring = await importKeyRing(JSON.parse(this.secrets.open(row.signing_keys!, signingKeysAad(row.id))));
    const ceiling = permissionCeiling(row.ceiling, registered);
    const limits = pushedLimits(row);
    return {
      version: row.config_version,
      issuer: issuerFor(row.id),
      // Retired keys whose tokens have all expired are left out of every push, not only at the next rotation.
      trusted_keys: trustedKeysOf(pruneKeyRing(ring, { maxTokenLifetimeSeconds: ceilingView(row.ceiling).max_token_lifetime_seconds })),
      ceiling: {
        capabilities: [...ceiling.capabilities],
        readOnly: ceiling.readOnly ?? false,
        ...(ceiling.maxTokenLifetimeSeconds === undefined ? {} : { maxTokenLifetimeSeconds: ceiling.maxTokenLifetimeSeconds }),
        ...(ceiling.maxToolIterations === undefined ? {} : { maxToolIterations: ceiling.maxToolIterations }),
        ...(ceiling.maxContextTokens === undefined ? {} : { maxContextTokens: ceiling.maxContextTokens }),
        defaultRoles: [...(ceiling.defaultRoles ?? [])],
        defaultGroups: [...(ceiling.defaultGroups ?? [])],
        registeredModels: [...(ceiling.registeredModels ?? [])],
      },
      system_prompt: row.system_prompt,
      origins: row.origins,
      // Left out, rather than empty, for a project that uses none of them: its document stays what it was before
      // these sections existed, so its digest does too. A default model with no provider left is pushed all the
      // same: the runtime tells a removed provider (409 no_provider) from a model never set (no_model) by it.
      ...(providers.length > 0 ? { providers } : {}),
      ...(providers.length > 0 || row.default_model !== null ? { default_model: row.default_model } : {}),
      ...(limits ? { limits } : {}),
      // Left out for a project with no measured embedding model and no citation style: its documents are searched
      // by their words and cited inline, and its document stays what it was before this section existed.
      ...(embedding || row.citations !== null || row.processor !== null || row.auto_context || rerank || row.vector_index
        ? {
            retrieval: {
              embedding: embedding ?? null,
              ...(row.processor !== null ? { processor: row.processor } : {}),
              ...(row.citations !== null ? { citations: row.citations } : {}),
              ...(rerank ? { rerank } : {}),
              ...(row.auto_context ? { auto_context: true } : {}),
              ...(row.vector_index
                ? {
                    vector_index: {
                      provider: row.vector_index.provider,
                      index_host: row.vector_index.index_host,
                      api_key: this.secrets.open(row.vector_index.sealed_api_key, vectorIndexKeyAad(row.id)),
                    },
                  }
                : {}),
            },
          }
        : {}),
      // Left out for a project that published none, so its document stays what it was before tools existed.
      ...(webhookTools.length > 0 ? { webhook_tools: webhookTools } : {}),
      ...(mcpServers.length > 0 ? { mcp_servers: mcpServers } : {}),
      ...(row.subagents ? { subagents: row.subagents } : {}),
      ...(row.webhook_url ? { webhook: { url: row.webhook_url } } : {}),
      ...(row.guardrails && (row.guardrails.input.length > 0 || row.guardrails.output.length > 0) ? { guardrails: row.guardrails } : {}),
      // Only once the project set it: until then the runtime's defaults (the same lib/computer ones) hold.
      ...(row.computer ? { computer: row.computer } : {}),
      ...(row.browser ? { browser: row.browser } : {}),
      ...(row.web_search
        ? {
            web_search: {
              provider: row.web_search.provider,
              base_url: row.web_search.base_url,
              ...(row.web_search.sealed_api_key ? { api_key: this.secrets.open(row.web_search.sealed_api_key, webSearchKeyAad(row.id)) } : {}),
            },
          }
        : {}),
    };
  }

  private async change(projectId: string, values: (current: ProjectRow) => ProjectChange): Promise<ProjectDetail> {
    const { project } = await this.applyChange(projectId, async (_trx, current) => ({ set: values(current), result: undefined }));
    return presentDetail(project);
  }

  /**
   * Every change the runtime must hear of goes through here (the project's own fields, and other modules' rows
   * such as providers): in one transaction, with the project row locked, `apply` writes what it changes and
   * names the project columns to set; then the configuration version is bumped and a push queued. A throw from
   * `apply` rolls everything back, so nothing is stored and nothing is sent.
   */
  async applyChange<T>(
    projectId: string,
    apply: (trx: Transaction<ControlSchema>, current: ProjectRow) => Promise<{ set?: ProjectChange; result: T }>,
  ): Promise<{ project: ProjectRow; result: T }> {
    const outcome = await this.db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom('projects').selectAll().where('id', '=', projectId).forUpdate().executeTakeFirst();
      if (!current) throw projectNotFound(projectId);
      const { set, result } = await apply(trx, current);
      const project = await trx
        .updateTable('projects')
        .set({ ...set, config_version: current.config_version + 1, updated_at: new Date() })
        .where('id', '=', projectId)
        .returningAll()
        .executeTakeFirstOrThrow();
      const entryId = await enqueue(trx, { projectId, tenantId: project.tenant_id, kind: 'push_configuration' });
      return { project, result, entryId };
    });
    await this.changes.settle(projectId, outcome.entryId, outcome.project.config_version);
    return { project: outcome.project, result: outcome.result };
  }

  /** The project's default model, or null: none is configured and none is shared. */
  async defaultModel(projectId: string): Promise<string | null> {
    return (await this.row(projectId)).default_model;
  }

  /**
   * Rotates the token signing keys: the published `next` key starts signing, a new `next` is published, and the
   * old active key stays trusted until every token it signed has expired (the longest token lifetime plus clock
   * skew); then it leaves the ring and every push. Goes out as a configuration push like any change. A rotation
   * that would make the trusted set larger than the runtime accepts is refused here (409, saying when one fits),
   * never left to stall the push.
   */
  async rotateSigningKeys(projectId: string): Promise<{ active_kid: string; trusted_kids: string[]; rotated_at: string }> {
    const { result } = await this.applyChange(projectId, async (_trx, current) => {
      if (!current.signing_keys) throw new Error(`project ${projectId} has no signing keys`);
      const ring = await importKeyRing(JSON.parse(this.secrets.open(current.signing_keys, signingKeysAad(current.id))));
      const lifetime = ceilingView(current.ceiling).max_token_lifetime_seconds;
      const pruned = pruneKeyRing(ring, { maxTokenLifetimeSeconds: lifetime });
      const room = ringHasRoom(pruned, { maxTokenLifetimeSeconds: lifetime });
      if (!room.ok) {
        throw conflict(
          `the runtime trusts at most ${MAX_TRUSTED_KEYS} signing keys, and every retired one may still verify a live token: the next rotation fits at ${new Date(room.until * 1000).toISOString()}`,
          { code: 'signing_keys_full' },
        );
      }
      const rotated = await rotateKeyRing(pruned, new Date(), { maxTokenLifetimeSeconds: lifetime });
      const sealed = this.secrets.seal(JSON.stringify(await exportKeyRing(rotated)), signingKeysAad(current.id));
      return {
        set: { signing_keys: sealed },
        result: { active_kid: rotated.active.kid, trusted_kids: trustedKeysOf(rotated).keys.map((key) => String(key.kid)), rotated_at: new Date().toISOString() },
      };
    });
    return result;
  }

  /** The project's signing key ring, opened. */
  async signingKeys(projectId: string): Promise<KeyRing> {
    const row = await this.row(projectId);
    if (!row.signing_keys) throw new Error(`project ${projectId} has no signing keys`);
    return importKeyRing(JSON.parse(this.secrets.open(row.signing_keys, signingKeysAad(row.id))));
  }

  private async row(projectId: string): Promise<ProjectRow> {
    const row = await this.db.selectFrom('projects').selectAll().where('id', '=', projectId).executeTakeFirst();
    if (!row) throw projectNotFound(projectId);
    return row;
  }
}

const signingKeysAad = (projectId: string) => `project:${projectId}:signing-keys`;
const projectNotFound = (projectId: string) => notFound(`project ${projectId} not found`);

function present(row: ProjectRow): ProjectOut {
  return {
    id: row.id,
    org_id: row.org_id,
    name: row.name,
    tenant_id: row.tenant_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function presentDetail(row: ProjectRow): ProjectDetail {
  return { ...present(row), ceiling: ceilingView(row.ceiling), system_prompt: row.system_prompt, origins: row.origins };
}
