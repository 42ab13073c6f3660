// HTTP adapter for a project's providers and default model (admin key or signed-in session).
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { isRedacted, redactedSecretMessage } from '@agentplane/lib/schemas/redaction';
import { authorizeAdmin, mintKeyOnAdminRoute, ProjectParams, projectHidden } from '../keys/routes.js';
import type { ProjectKeyService } from '../keys/service.js';
import { DEFAULT_EMBEDDING_MODEL, OPENAI_BASE_URL, PRICES_NOTE, PROVIDER_KINDS, type ProviderService } from './service.js';

const modelName = z.string().trim().min(1).max(256);

const usdPerMillion = z.number().min(0).max(1_000_000);

const ModelPriceSchema = z
  .strictObject({
    inputPerMillionUsd: usdPerMillion.meta({ description: 'USD per million input (prompt) tokens' }),
    outputPerMillionUsd: usdPerMillion.meta({ description: 'USD per million output (completion) tokens' }),
  })
  .meta({ id: 'ModelPrice' });

const ProviderRegister = z
  .strictObject({
    provider: z.enum(PROVIDER_KINDS).meta({ description: `\`openai\` (base_url defaults to ${OPENAI_BASE_URL}) or \`openai_compatible\` (any server speaking the OpenAI API; base_url required)` }),
    models: z.array(modelName).min(1).max(100).meta({ description: 'Chat models to register; each must be in the provider\'s catalog (GET /models). The first becomes the default when the project has none' }),
    values: z
      .strictObject({
        api_key: z
          .string()
          .trim()
          .min(1)
          .max(4096)
          .refine((key) => !isRedacted(key), `api_key ${redactedSecretMessage}`)
          .meta({ description: 'The provider key: sealed at rest, never returned or logged; a redacted one (`****...`) is refused' }),
        base_url: z.string().trim().min(1).max(2048).optional().meta({ description: 'The API root, such as https://api.openai.com/v1; checked by the URL guard' }),
        embedding_model: modelName.optional().meta({
          description: `Embedding model whose dimension is measured; default for openai: ${DEFAULT_EMBEDDING_MODEL.openai}, none for openai_compatible`,
        }),
      })
      .meta({ id: 'ProviderValues' }),
    prices: z
      .record(modelName, ModelPriceSchema)
      .optional()
      .meta({
        description:
          'Your prices for some or all of `models` (a price for another model is 400), counted by the spend cap (`PUT limits`); a model without one counts no cost. Providers publish none',
      }),
  })
  .superRefine((body, ctx) => {
    if (body.provider === 'openai_compatible' && body.values.base_url === undefined) {
      ctx.addIssue({ code: 'custom', path: ['values', 'base_url'], message: 'base_url is required for provider openai_compatible' });
    }
  })
  .meta({ id: 'ProviderRegister' });

const Derived = z
  .object({
    defaultModel: z.string().nullable().meta({ description: "The project's default model after this call; null: none (no shared fallback)" }),
    embeddingModel: z.string().nullable().meta({ description: 'null when the provider has no embedding model' }),
    embeddingDim: z.number().int().nullable().meta({ description: 'Measured by an embeddings call, not assumed' }),
  })
  .meta({ id: 'ProviderDerived' });

const ProviderOut = z
  .object({
    id: z.uuid(),
    provider: z.enum(PROVIDER_KINDS),
    models: z.array(z.string()),
    base_url: z.string(),
    key_last_four: z.string().nullable().meta({ description: 'null for a key shorter than 12 characters; the key itself is never returned' }),
    prices: z.record(z.string(), ModelPriceSchema).nullable().meta({ description: 'The prices set at registration; null: none' }),
    created_at: z.iso.datetime(),
    refreshed_at: z.iso.datetime().meta({ description: 'When the catalog was last read and the embedding dimension measured' }),
    derived: Derived,
    warnings: z.array(z.string()).optional().meta({ description: 'Accepted with a caveat: an empty catalog, an embedding model the provider refused' }),
  })
  .meta({ id: 'Provider' });

const ProviderRefreshed = ProviderOut.extend({
  missing_models: z.array(z.string()).meta({ description: 'Registered models the catalog no longer lists (still registered)' }),
  prices_note: z.string().meta({ description: PRICES_NOTE }),
}).meta({ id: 'ProviderRefreshed' });

const DefaultModel = z
  .object({ model: z.string().nullable().meta({ description: 'A registered model; null: none (turns end with `no_model`)' }) })
  .meta({ id: 'DefaultModel' });

const DefaultModelSet = z
  .strictObject({ model: modelName.nullable().meta({ description: 'A registered model, or null to clear the default' }) })
  .meta({ id: 'DefaultModelSet' });

const ProviderParams = ProjectParams.extend({ credId: z.uuid({ error: 'credId must be a UUID' }).overwrite((id) => id.toLowerCase()) });

const forbidden = mintKeyOnAdminRoute;
const hidden = projectHidden;
const upstream = {
  502: { description: 'The provider failed with its own error, or could not be reached' },
  504: { description: 'The provider did not answer in time (the upstream request timed out)' },
};

const EmbeddingChoice = z.strictObject({
  provider_id: z.uuid().meta({ description: 'One of the project\'s provider credentials (GET providers)' }),
  model: modelName.meta({ description: 'An embedding model that credential serves' }),
});

const RetrievalSettingsOut = z
  .object({
    embedding: z
      .object({ provider_id: z.uuid(), model: z.string(), dimensions: z.int() })
      .nullable()
      .meta({ description: 'What documents are embedded with; null: nothing, and they are searched by their words only' }),
    chosen: z.boolean().meta({ description: 'true: the project\'s own choice; false: the measured model of its oldest provider that has one' }),
    rerank: z
      .object({ provider_id: z.uuid(), model: z.string() })
      .nullable()
      .meta({ description: 'The rerank model that orders the search\'s best candidates; null: none, the fused order' }),
    auto_context: z.boolean().meta({ description: 'true: each turn starts with the passages of the documents the person may read that best match their message' }),
    vector_index: z
      .object({
        provider: z.literal('pinecone'),
        index_host: z.string(),
        dimension: z.int().meta({ description: 'The dimension the index answered when it was tried' }),
        key_last_four: z.string().nullable().meta({ description: "The key's last four characters (null for keys too short to show any of); the key is never returned" }),
      })
      .nullable()
      .meta({ description: "The project's own Pinecone index; null: the deployment's (pgvector, or the deployment's Pinecone index)" }),
  })
  .meta({ id: 'RetrievalSettings' });

export function providerRoutes(providers: ProviderService, keys: ProjectKeyService): RouteDefinition[] {
  const admin = authorizeAdmin(keys);
  return [
    defineRoute({
      method: 'put',
      path: '/api/projects/{id}/retrieval',
      operationId: 'setRetrieval',
      summary: "Choose the project's embedding model (null: its oldest provider's own), and whether turns start with document context",
      description:
        'Each field sent is changed; one left out stays as it is. The model is measured with a real embeddings call before it is stored, and pushed to the runtime, which embeds the documents already read again in the background and keeps searching the old index until the new one is complete. ' +
        '`auto_context` true: before the model answers, each turn searches the documents the person may read for their message and hands the model the best passages, cited as the search tool\'s are (tokens with `documents:read`, unless the request sends `enable_rag: false`).',
      tags: ['retrieval'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: z
        .strictObject({
          embedding: EmbeddingChoice.nullable().optional().meta({ description: 'The embedding model; null: the oldest provider\'s own' }),
          rerank: z
            .strictObject({
              provider_id: z.uuid().meta({ description: 'One of the project\'s provider credentials (GET providers)' }),
              model: modelName.meta({ description: 'A rerank model that credential serves' }),
            })
            .nullable()
            .optional()
            .meta({ description: 'A rerank model (`POST /rerank` on the provider, the Cohere and Jina shape), tried with a real call before it is stored; null: none' }),
          auto_context: z.boolean().optional().meta({ description: 'Start each turn with the best-matching passages (default false)' }),
          vector_index: z
            .strictObject({
              provider: z.literal('pinecone').meta({ description: 'The only index a project may bring: Pinecone' }),
              index_host: z
                .string()
                .min(1)
                .max(2048)
                .meta({ description: "The index's data-plane host (describe_index or the console), such as https://docs-abc123.svc.us-east-1.pinecone.io; vetted like a provider's base_url" }),
              api_key: z
                .string()
                .min(1)
                .max(4096)
                .regex(/^[\x21-\x7e]+$/, 'api_key must be visible ASCII characters, without spaces or line breaks')
                .meta({ description: 'A Pinecone key that may read and write the index; sealed at rest, never returned' }),
            })
            .nullable()
            .optional()
            .meta({
              description:
                "The project's own Pinecone index, tried with one describe_index_stats call (its dimension must be the embedding model's) before it is stored; null: the deployment's index. " +
                'The documents already read are embedded into the new index in the background, and searches use the old one until that is complete. The tenant\'s vectors live in its own namespace there',
            }),
        })
        .meta({ id: 'RetrievalSettingsSet' }),
      responses: {
        200: { description: 'The settings in force', schema: RetrievalSettingsOut },
        400: {
          description:
            'The provider refused the model, or the index its key (`code` `provider_rejected`); the index and the model differ in dimension (`dimension_mismatch`); the index host is not allowed (`url_not_allowed`)',
        },
        403: forbidden,
        404: hidden,
        ...upstream,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await providers.setRetrieval(params.id, body) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/retrieval/probe',
      operationId: 'probeEmbedding',
      summary: "Measure an embedding model's dimension with one of the project's credentials (nothing is stored)",
      tags: ['retrieval'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: EmbeddingChoice.meta({ id: 'EmbeddingProbe' }),
      responses: {
        200: { description: 'The measured dimension', schema: z.object({ provider_id: z.uuid(), model: z.string(), dimensions: z.int() }).meta({ id: 'EmbeddingProbed' }) },
        400: { description: 'The provider refused the model (`code` `provider_rejected`)' },
        403: forbidden,
        404: hidden,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await providers.probeEmbedding(params.id, body.provider_id, body.model) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/providers',
      operationId: 'listProviders',
      summary: "The project's provider credentials (never their keys)",
      tags: ['providers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'Oldest first', schema: z.object({ providers: z.array(ProviderOut) }).meta({ id: 'ProviderList' }) }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        return { body: { providers: await providers.list(params.id) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/providers',
      operationId: 'registerProvider',
      summary: 'Register a provider key: the URL is vetted, the key tried on the catalog and the embedding dimension measured before anything is stored',
      tags: ['providers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: ProviderRegister,
      responses: {
        201: { description: 'Registered; `derived` holds what was measured', schema: ProviderOut },
        400: { description: 'base_url refused by the URL guard, the key refused by the provider, a model the provider does not offer, or a price for a model not in `models`' },
        403: forbidden,
        404: hidden,
        409: { description: 'A model is already registered by another provider of the project' },
        ...upstream,
      },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { status: 201, body: await providers.register(params.id, body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/{id}/providers/{credId}',
      operationId: 'removeProvider',
      summary: 'Remove a provider key and its models; a default model it served is cleared, not replaced',
      tags: ['providers'],
      security: ['apiKey', 'session'],
      params: ProviderParams,
      responses: { 200: { description: 'The removed provider; `derived.defaultModel` is the default after removal', schema: ProviderOut }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        return { body: await providers.remove(params.id, params.credId) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/providers/{credId}/refresh',
      operationId: 'refreshProvider',
      summary: 'Re-read the catalog and re-measure the embedding dimension (prices are not re-read: the provider publishes none)',
      tags: ['providers'],
      security: ['apiKey', 'session'],
      params: ProviderParams,
      responses: { 200: { description: 'Refreshed', schema: ProviderRefreshed }, 400: { description: 'The provider now refuses the key' }, 403: forbidden, 404: hidden, ...upstream },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        return { body: await providers.refresh(params.id, params.credId) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/projects/{id}/default-model',
      operationId: 'getDefaultModel',
      summary: "The project's default model (null: none; there is no shared fallback)",
      tags: ['providers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      responses: { 200: { description: 'The default model', schema: DefaultModel }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, res }) {
        return { body: await providers.defaultModel(params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/{id}/default-model',
      operationId: 'setDefaultModel',
      summary: 'Set the default model (a registered one) or clear it with null',
      tags: ['providers'],
      security: ['apiKey', 'session'],
      params: ProjectParams,
      body: DefaultModelSet,
      responses: { 200: { description: 'The default model', schema: DefaultModel }, 400: { description: 'The model is not registered by the project' }, 403: forbidden, 404: hidden },
      authorize: ({ params, res }) => admin(res.locals, params.id),
      async handle({ params, body, res }) {
        return { body: await providers.setDefaultModel(params.id, body.model) };
      },
    }),
  ];
}
