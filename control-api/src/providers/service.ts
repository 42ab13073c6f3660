// A project's providers (bring your own keys): the customer's OpenAI or OpenAI-compatible credentials, checked
// against the provider before anything is stored, the API key sealed at rest, and the project's default model.
// Each change bumps the project's configuration version and queues its push (ProjectService.applyChange).
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { AppError, conflict, invalidArgument, notFound } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import type { ProjectService } from '../projects/service.js';
import type { ControlSchema, ProviderKind, StoredPrice, StoredVectorIndex } from '../store/schema.js';
import { apiKeyAad, pushedEmbedding, vectorIndexKeyAad } from './configuration.js';
import { modelNotRegistered, registeredModels } from './registered.js';
import type { ProviderTarget, ProviderUpstream } from './upstream.js';
import type { VectorIndexUpstream } from './vector-index.js';

export const PROVIDER_KINDS = ['openai', 'openai_compatible'] as const satisfies readonly ProviderKind[];

/** Where `openai` is reached when no `base_url` is given. */
export const OPENAI_BASE_URL = 'https://api.openai.com/v1';

/** The embedding model measured for `openai` when none is named; other providers have no default to assume. */
export const DEFAULT_EMBEDDING_MODEL: Record<ProviderKind, string | undefined> = { openai: 'text-embedding-3-small', openai_compatible: undefined };

/** OpenAI's API (and the compatible ones) publish no prices; refresh says so instead of inventing figures. */
export const PRICES_NOTE =
  'Prices are not re-read: the OpenAI API and OpenAI-compatible APIs publish no prices, so `prices` are the ones set at registration (null: none) and none are invented.';

/** A model's price on the control surface (camelCase, like `rpmLimit`). */
export interface ModelPrice {
  inputPerMillionUsd: number;
  outputPerMillionUsd: number;
}

export interface ProviderRegistration {
  provider: ProviderKind;
  /** Chat models to register, the first becoming the default when the project has none. */
  models: string[];
  values: { api_key: string; base_url?: string | undefined; embedding_model?: string | undefined };
  /** The customer's prices for some or all of `models`, counted by the project's spend cap. */
  prices?: Record<string, ModelPrice> | undefined;
}

export interface Derived {
  /** The project's default model after this call (null: none; nothing falls back to a shared model). */
  defaultModel: string | null;
  /** Null when the provider has no embedding model to measure. */
  embeddingModel: string | null;
  /** Measured by a real embeddings call, never assumed. */
  embeddingDim: number | null;
}

export interface ProviderOut {
  id: string;
  provider: ProviderKind;
  models: string[];
  base_url: string;
  /** The key's last four characters (null for keys too short to show any of); the key is never returned. */
  key_last_four: string | null;
  /** The customer's prices per model, as registered; null: none set. */
  prices: Record<string, ModelPrice> | null;
  created_at: string;
  refreshed_at: string;
  derived: Derived;
  /** Present when something was accepted with a caveat (an unlisted catalog, an embedding model refused). */
  warnings?: string[];
}

export interface ProviderRefreshed extends ProviderOut {
  /** Registered models the provider's catalog no longer lists (they stay registered until removed). */
  missing_models: string[];
  prices_note: string;
}

type ProviderRow = Selectable<ControlSchema['providers']>;

// Names in a catalog refusal: enough to spot a typo, not a page of every model a provider offers.
const CATALOG_SHOWN = 30;

export class ProviderService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly secrets: SecretBox,
    private readonly projects: ProjectService,
    private readonly upstream: ProviderUpstream,
    private readonly urlPolicy: UrlPolicy,
    /** Tries a project's own vector index before it is stored. */
    private readonly indexes: VectorIndexUpstream,
  ) {}

  async list(projectId: string): Promise<ProviderOut[]> {
    const defaultModel = await this.projects.defaultModel(projectId);
    const rows = await this.db.selectFrom('providers').selectAll().where('project_id', '=', projectId).orderBy('created_at').orderBy('id').execute();
    return rows.map((row) => present(row, defaultModel));
  }

  /**
   * Registers a credential: the URL vetted, the key tried on the catalog, the embedding dimension measured, and
   * only then the row stored (key sealed) with the configuration push. Any failure stores nothing.
   */
  async register(projectId: string, input: ProviderRegistration): Promise<ProviderOut> {
    const models = [...new Set(input.models)];
    const prices = storedPrices(models, input.prices);
    // The key travels in an HTTP header, where anything but visible ASCII (a pasted line break, a typographic
    // quote) cannot go: a fault of the request, named, not a failure of the provider.
    if (!/^[\x21-\x7e]+$/.test(input.values.api_key)) {
      throw invalidArgument('values.api_key must be visible ASCII characters, without spaces or line breaks');
    }
    const baseUrl = (input.values.base_url ?? OPENAI_BASE_URL).replace(/\/+$/, '');
    await checkUrl(baseUrl, this.urlPolicy, 'base_url');
    // Before any provider call: a model is served by exactly one credential, so a turn knows where to send it.
    await this.assertModelsFree(this.db, projectId, models);

    const target: ProviderTarget = { baseUrl, apiKey: input.values.api_key };
    const warnings: string[] = [];
    const catalog = await this.upstream.listModels(target);
    if (catalog.length === 0) {
      warnings.push('the provider lists no models (GET /models answered an empty list), so the model names were not checked');
    } else {
      const offered = new Set(catalog);
      const absent = models.filter((model) => !offered.has(model));
      if (absent.length > 0) throw notOffered(absent, catalog);
    }
    const explicitEmbedding = input.values.embedding_model;
    const embeddingModel = explicitEmbedding ?? DEFAULT_EMBEDDING_MODEL[input.provider];
    const embeddingDim = embeddingModel === undefined ? null : await this.measure(target, embeddingModel, explicitEmbedding !== undefined, warnings);

    const id = randomUUID();
    const { project, result: row } = await this.projects.applyChange(projectId, async (trx, current) => {
      await this.assertModelsFree(trx, projectId, models);
      const inserted = await trx
        .insertInto('providers')
        .values({
          id,
          project_id: projectId,
          provider: input.provider,
          base_url: baseUrl,
          models: JSON.stringify(models),
          embedding_model: embeddingDim === null ? null : embeddingModel!,
          embedding_dim: embeddingDim,
          api_key: this.secrets.seal(input.values.api_key, apiKeyAad(projectId, id)),
          key_last_four: lastFour(input.values.api_key),
          prices: prices === null ? null : JSON.stringify(prices),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      // The first registered model becomes the default only when there is none, or the one there is lost its
      // provider and this one does not serve it: an explicit choice that is served stands.
      const served = current.default_model !== null && (await registeredModels(trx, projectId)).includes(current.default_model);
      return { set: served ? {} : { default_model: models[0]! }, result: inserted };
    });
    return { ...present(row, project.default_model), ...(warnings.length > 0 ? { warnings } : {}) };
  }

  /**
   * Removes a credential and with it its models. A default model it served is kept: the runtime then answers a turn
   * on it 409 `no_provider` (its provider is gone) rather than `no_model` (no model was ever set), and a provider
   * registered again for it (a rotation) serves it at once (docs/decisions/0030).
   */
  async remove(projectId: string, providerId: string): Promise<ProviderOut> {
    const { project, result: row } = await this.projects.applyChange(projectId, async (trx) => {
      const deleted = await trx.deleteFrom('providers').where('id', '=', providerId).where('project_id', '=', projectId).returningAll().executeTakeFirst();
      if (!deleted) throw providerNotFound(providerId);
      return { result: deleted };
    });
    return present(row, project.default_model);
  }

  /**
   * Re-reads the catalog and re-measures the embedding dimension with the stored key. Registered models the
   * catalog no longer lists are reported, not removed; an embedding model now refused is recorded as none.
   */
  async refresh(projectId: string, providerId: string): Promise<ProviderRefreshed> {
    const stored = await this.row(projectId, providerId);
    const target: ProviderTarget = { baseUrl: stored.base_url, apiKey: this.secrets.open(stored.api_key, apiKeyAad(projectId, stored.id)) };
    const warnings: string[] = [];
    const catalog = await this.upstream.listModels(target);
    const offered = new Set(catalog);
    const missing = catalog.length === 0 ? [] : stored.models.filter((model) => !offered.has(model));
    if (catalog.length === 0) warnings.push('the provider lists no models (GET /models answered an empty list), so the registered names were not checked');
    if (missing.length > 0) warnings.push(`the provider no longer lists ${missing.map((m) => `'${m}'`).join(', ')}; turns on them will fail until the provider offers them again or they are removed`);
    const embeddingModel = stored.embedding_model ?? DEFAULT_EMBEDDING_MODEL[stored.provider];
    const embeddingDim = embeddingModel === undefined ? null : await this.measure(target, embeddingModel, false, warnings);

    const { project, result: row } = await this.projects.applyChange(projectId, async (trx) => {
      const updated = await trx
        .updateTable('providers')
        .set({ embedding_model: embeddingDim === null ? null : embeddingModel!, embedding_dim: embeddingDim, refreshed_at: new Date() })
        .where('id', '=', providerId)
        .where('project_id', '=', projectId)
        .returningAll()
        .executeTakeFirst();
      // Removed while the provider was being asked.
      if (!updated) throw providerNotFound(providerId);
      return { result: updated };
    });
    return {
      ...present(row, project.default_model),
      ...(warnings.length > 0 ? { warnings } : {}),
      missing_models: missing,
      prices_note: PRICES_NOTE,
    };
  }

  async defaultModel(projectId: string): Promise<{ model: string | null }> {
    return { model: await this.projects.defaultModel(projectId) };
  }

  /** Sets (or, with null, clears) the default model; it must be one the project registered. */
  async setDefaultModel(projectId: string, model: string | null): Promise<{ model: string | null }> {
    const { project } = await this.projects.applyChange(projectId, async (trx) => {
      if (model !== null) {
        const registered = await registeredModels(trx, projectId);
        if (!registered.includes(model)) throw modelNotRegistered(model, registered);
      }
      return { set: { default_model: model }, result: undefined };
    });
    return { model: project.default_model };
  }

  /**
   * Measures an embedding model's dimension with one of the project's credentials (`POST .../retrieval/probe`): a
   * real embeddings call; a model the provider refuses is a 400 naming it.
   */
  async probeEmbedding(projectId: string, providerId: string, model: string): Promise<{ provider_id: string; model: string; dimensions: number }> {
    const row = await this.row(projectId, providerId);
    const target: ProviderTarget = { baseUrl: row.base_url, apiKey: this.secrets.open(row.api_key, apiKeyAad(projectId, row.id)) };
    const dimensions = (await this.measure(target, model, true, []))!;
    return { provider_id: row.id, model, dimensions };
  }

  /**
   * Chooses the project's embedding model (measured first, so what is pushed is known to work), or with null goes
   * back to the oldest provider's own. Documents already read are embedded again in the background by the runtime,
   * which keeps searching the old index until the new one is complete.
   */
  async setRetrieval(projectId: string, change: RetrievalChange): Promise<RetrievalSettings> {
    const choice = change.embedding;
    // Nothing named: the settings as they are, and no push.
    if (choice === undefined && change.rerank === undefined && change.auto_context === undefined && change.vector_index === undefined) return this.retrieval(projectId);
    const measured = choice ? await this.probeEmbedding(projectId, choice.provider_id, choice.model) : null;
    // The project's own index is tried with its key (and its dimension read) before it is stored.
    let index: StoredVectorIndex | null | undefined;
    if (change.vector_index) {
      const host = change.vector_index.index_host.replace(/\/+$/, '');
      await checkUrl(host, this.urlPolicy, 'vector_index.index_host');
      const apiKey = change.vector_index.api_key;
      const { dimension } = await this.indexes.describe({ host, apiKey });
      index = { provider: 'pinecone', index_host: host, sealed_api_key: this.secrets.seal(apiKey, vectorIndexKeyAad(projectId)), dimension };
    } else if (change.vector_index === null) {
      index = null;
    }
    // A rerank model is tried with a real call before it is stored.
    if (change.rerank) {
      const row = await this.row(projectId, change.rerank.provider_id);
      const target: ProviderTarget = { baseUrl: row.base_url, apiKey: this.secrets.open(row.api_key, apiKeyAad(projectId, row.id)) };
      try {
        await this.upstream.checkRerank(target, change.rerank.model);
      } catch (error) {
        if (error instanceof AppError && error.code === 'provider_rejected') throw invalidArgument(`rerank model '${change.rerank.model}' could not be used: ${error.message}`, { code: 'provider_rejected' });
        throw error;
      }
    }
    await this.projects.applyChange(projectId, async (trx) => {
      // Still registered at the moment of storing (a concurrent removal would leave the choice pointing nowhere);
      // read in the change's own transaction, which holds the embedded store's one connection.
      for (const providerId of [measured?.provider_id, change.rerank?.provider_id]) {
        if (providerId === undefined) continue;
        const still = await trx.selectFrom('providers').select('id').where('id', '=', providerId).where('project_id', '=', projectId).executeTakeFirst();
        if (!still) throw providerNotFound(providerId);
      }
      // The index and the embedding model must agree on the dimension, as they will be after this change.
      const stored = await trx.selectFrom('projects').select(['embedding', 'vector_index']).where('id', '=', projectId).executeTakeFirstOrThrow();
      const indexAfter = index === undefined ? stored.vector_index : index;
      const embeddingAfter = await pushedEmbedding(trx, projectId, choice === undefined ? stored.embedding : measured);
      if (indexAfter && embeddingAfter && indexAfter.dimension !== embeddingAfter.dimensions) {
        throw invalidArgument(
          `the vector index at ${indexAfter.index_host} holds vectors of ${indexAfter.dimension} dimensions, but the embedding model '${embeddingAfter.model}' makes ${embeddingAfter.dimensions}: choose an index and a model of the same dimension`,
          { code: 'dimension_mismatch' },
        );
      }
      return {
        set: {
          ...(index !== undefined ? { vector_index: index ? JSON.stringify(index) : null } : {}),
          ...(choice !== undefined ? { embedding: measured ? JSON.stringify(measured) : null } : {}),
          ...(change.rerank !== undefined ? { rerank: change.rerank ? JSON.stringify({ provider_id: change.rerank.provider_id, model: change.rerank.model }) : null } : {}),
          ...(change.auto_context !== undefined ? { auto_context: change.auto_context } : {}),
        },
        result: undefined,
      };
    });
    return this.retrieval(projectId);
  }

  /** What documents are embedded with now, and whether the project chose it. */
  async retrieval(projectId: string): Promise<RetrievalSettings> {
    const project = await this.db.selectFrom('projects').select(['embedding', 'auto_context', 'rerank', 'vector_index']).where('id', '=', projectId).executeTakeFirst();
    const rerank = project?.rerank
      ? await this.db.selectFrom('providers').select('id').where('project_id', '=', projectId).where('id', '=', project.rerank.provider_id).executeTakeFirst()
      : undefined;
    const effective = await pushedEmbedding(this.db, projectId, project?.embedding ?? null);
    return {
      embedding: effective ? { provider_id: effective.provider, model: effective.model, dimensions: effective.dimensions } : null,
      chosen: project?.embedding != null && effective?.provider === project.embedding.provider_id && effective.model === project.embedding.model,
      rerank: project?.rerank && rerank ? { provider_id: project.rerank.provider_id, model: project.rerank.model } : null,
      auto_context: project?.auto_context ?? false,
      vector_index: project?.vector_index
        ? {
            provider: project.vector_index.provider,
            index_host: project.vector_index.index_host,
            dimension: project.vector_index.dimension,
            key_last_four: lastFour(this.secrets.open(project.vector_index.sealed_api_key, vectorIndexKeyAad(projectId))),
          }
        : null,
    };
  }

  /** The credential's key in clear, for the turn engine's push (never for an HTTP answer). */
  async apiKeyOf(projectId: string, providerId: string): Promise<string> {
    const row = await this.row(projectId, providerId);
    return this.secrets.open(row.api_key, apiKeyAad(projectId, row.id));
  }

  /**
   * Measures the embedding model's dimension. A model the customer named must work (its refusal is theirs to
   * fix); the provider default is tried, and when the provider refuses it there is none (null), not a guess.
   * Provider failures (502, 504) fail the call whichever it is: a measurement that did not happen is no answer.
   */
  private async measure(target: ProviderTarget, model: string, named: boolean, warnings: string[]): Promise<number | null> {
    try {
      return await this.upstream.measureEmbedding(target, model);
    } catch (error) {
      const refused = error instanceof AppError && error.code === 'provider_rejected';
      if (!refused) throw error;
      if (named) throw invalidArgument(`embedding_model '${model}' could not be used: ${error.message}`, { code: 'provider_rejected' });
      warnings.push(`no embedding model: the provider refused '${model}' (${error.message}), so embeddingModel and embeddingDim are null`);
      return null;
    }
  }

  private async assertModelsFree(db: Kysely<ControlSchema> | Transaction<ControlSchema>, projectId: string, models: string[]): Promise<void> {
    const taken = await db.selectFrom('providers').select(['id', 'models']).where('project_id', '=', projectId).execute();
    for (const row of taken) {
      const clash = models.find((model) => row.models.includes(model));
      if (clash !== undefined) throw conflict(`model '${clash}' is already registered by provider ${row.id}; remove it there first`, { code: 'model_registered' });
    }
  }

  private async row(projectId: string, providerId: string): Promise<ProviderRow> {
    const row = await this.db.selectFrom('providers').selectAll().where('id', '=', providerId).where('project_id', '=', projectId).executeTakeFirst();
    if (!row) throw providerNotFound(providerId);
    return row;
  }
}

const providerNotFound = (providerId: string) => notFound(`provider ${providerId} not found`);

export interface RetrievalSettings {
  /** The embedding model documents are embedded with; null: none, and they are searched by their words. */
  embedding: { provider_id: string; model: string; dimensions: number } | null;
  /** Whether that is the project's own choice (PUT .../retrieval) rather than its oldest provider's model. */
  chosen: boolean;
  /** The rerank model searches are ordered with; null: none (or its provider was removed). */
  rerank: { provider_id: string; model: string } | null;
  /** Whether each turn starts with the passages that best match the person's message. */
  auto_context: boolean;
  /** The project's own vector index (never its key); null: the deployment's. */
  vector_index: { provider: 'pinecone'; index_host: string; dimension: number; key_last_four: string | null } | null;
}

export interface RetrievalChange {
  embedding?: { provider_id: string; model: string } | null | undefined;
  rerank?: { provider_id: string; model: string } | null | undefined;
  auto_context?: boolean | undefined;
  /** The project's own Pinecone index, with its key; null: back to the deployment's. */
  vector_index?: { provider: 'pinecone'; index_host: string; api_key: string } | null | undefined;
}

// Four characters of a short key would be much of it.
const lastFour = (key: string) => (key.length >= 12 ? key.slice(-4) : null);

function notOffered(absent: string[], catalog: string[]) {
  const shown = [...catalog].sort().slice(0, CATALOG_SHOWN);
  const more = catalog.length > shown.length ? ` and ${catalog.length - shown.length} more` : '';
  const names = absent.map((model) => `'${model}'`).join(', ');
  return invalidArgument(`the provider does not offer ${names} (not in GET /models). Offered: ${shown.join(', ')}${more}`, { code: 'model_not_offered' });
}

/** Prices in the stored (pushed) names; each must be for one of the registered models (else 400). */
function storedPrices(models: string[], prices: Record<string, ModelPrice> | undefined): Record<string, StoredPrice> | null {
  const entries = Object.entries(prices ?? {});
  const stray = entries.map(([model]) => model).filter((model) => !models.includes(model));
  if (stray.length > 0) {
    throw invalidArgument(`prices name ${stray.map((m) => `'${m}'`).join(', ')}, not among the models registered here: ${models.join(', ')}`);
  }
  if (entries.length === 0) return null;
  return Object.fromEntries(
    entries.map(([model, price]) => [model, { input_per_million_usd: price.inputPerMillionUsd, output_per_million_usd: price.outputPerMillionUsd }]),
  );
}

function shownPrices(prices: Record<string, StoredPrice> | null): Record<string, ModelPrice> | null {
  if (prices === null) return null;
  return Object.fromEntries(
    Object.entries(prices).map(([model, price]) => [model, { inputPerMillionUsd: price.input_per_million_usd, outputPerMillionUsd: price.output_per_million_usd }]),
  );
}

function present(row: ProviderRow, defaultModel: string | null): ProviderOut {
  return {
    id: row.id,
    provider: row.provider,
    models: row.models,
    base_url: row.base_url,
    key_last_four: row.key_last_four,
    prices: shownPrices(row.prices),
    created_at: row.created_at.toISOString(),
    refreshed_at: row.refreshed_at.toISOString(),
    derived: { defaultModel, embeddingModel: row.embedding_model, embeddingDim: row.embedding_dim },
  };
}
