// The providers' part of what a project's runtime is told: each credential with its key opened for the push, and
// the registered models the customer set no price for (which a spend cap then counts as free).
import type { Kysely, Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import type { PushedProvider } from '../provisioning/provisioner.js';
import type { ControlSchema } from '../store/schema.js';

/** Binds a sealed key to its project and credential: moved to another row, it does not open. */
export const apiKeyAad = (projectId: string, providerId: string) => `project:${projectId}:provider:${providerId}:api-key`;
/** Binds the sealed key of the project's own vector index to its project. */
export const vectorIndexKeyAad = (projectId: string) => `project:${projectId}:vector-index:api-key`;

/** The project's credentials as the runtime receives them, oldest first, keys in clear. */
export async function pushedProviders(db: Kysely<ControlSchema> | Transaction<ControlSchema>, secrets: SecretBox, projectId: string): Promise<PushedProvider[]> {
  const rows = await db.selectFrom('providers').selectAll().where('project_id', '=', projectId).orderBy('created_at').orderBy('id').execute();
  return rows.map((row) => ({
    id: row.id,
    kind: row.provider,
    base_url: row.base_url,
    api_key: secrets.open(row.api_key, apiKeyAad(projectId, row.id)),
    models: [...row.models],
    ...(row.prices ? { prices: row.prices } : {}),
  }));
}

/**
 * The embedding model documents are embedded with: the measured one of the project's oldest provider that has one
 * (its dimension measured by a real call when the provider was registered or refreshed); null when none has.
 */
export async function pushedEmbedding(
  db: Kysely<ControlSchema> | Transaction<ControlSchema>,
  projectId: string,
  chosen: { provider_id: string; model: string; dimensions: number } | null = null,
): Promise<{ provider: string; model: string; dimensions: number } | null> {
  // The project's own choice, while its provider is registered; else the oldest provider's measured model.
  if (chosen) {
    const provider = await db.selectFrom('providers').select('id').where('project_id', '=', projectId).where('id', '=', chosen.provider_id).executeTakeFirst();
    if (provider) return { provider: chosen.provider_id, model: chosen.model, dimensions: chosen.dimensions };
  }
  const row = await db
    .selectFrom('providers')
    .select(['id', 'embedding_model', 'embedding_dim'])
    .where('project_id', '=', projectId)
    .where('embedding_model', 'is not', null)
    .where('embedding_dim', 'is not', null)
    .orderBy('created_at')
    .orderBy('id')
    .executeTakeFirst();
  return row ? { provider: row.id, model: row.embedding_model!, dimensions: row.embedding_dim! } : null;
}

/** Registered models without a price, sorted: a budget counts their calls as costing nothing. */
export async function unpricedModels(db: Kysely<ControlSchema> | Transaction<ControlSchema>, projectId: string): Promise<string[]> {
  const rows = await db.selectFrom('providers').select(['models', 'prices']).where('project_id', '=', projectId).execute();
  return rows.flatMap((row) => row.models.filter((model) => row.prices?.[model] === undefined)).sort();
}
