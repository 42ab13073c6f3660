// Which embedding space a tenant's documents are searched in (docs/decisions/0041). A space is noted the first
// time the tenant's configuration names it (at an ingest or a search); if documents were already read by then,
// each gets an embedding job that adds its chunks' vectors in the new space, and the space is ready once none is
// left. Until then searches use the newest ready space, with the model that made it, so a change of embedding
// model never leaves retrieval without an index.
import type { Kysely } from 'kysely';
import type { RuntimeSchema } from '../store/schema.js';
import { embeddingFor, embeddingTargetOf, type EmbeddingTarget } from '../tenants/configuration.js';
import type { TenantConfigurationDocument } from '../tenants/schemas.js';

export class EmbeddingSpaces {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  /**
   * Records the space the configuration names, if it is new: documents already read get embedding jobs, and with
   * none the space is ready at once. Answers whether it is ready.
   */
  async note(tenantId: string, target: EmbeddingTarget): Promise<boolean> {
    const known = await this.db.selectFrom('embedding_spaces').select('ready_at').where('tenant_id', '=', tenantId).where('space', '=', target.space).executeTakeFirst();
    if (known) return known.ready_at !== null;
    const inserted = await this.db
      .insertInto('embedding_spaces')
      .values({ tenant_id: tenantId, space: target.space, provider: target.providerId, model: target.model, dimensions: target.dimensions, ready_at: null })
      .onConflict((oc) => oc.columns(['tenant_id', 'space']).doNothing())
      .returning('space')
      .executeTakeFirst();
    if (inserted) {
      await this.db
        .insertInto('embedding_jobs')
        .columns(['document_id', 'space', 'tenant_id', 'run_after'])
        .expression((eb) =>
          eb
            .selectFrom('documents')
            .select((inner) => ['documents.id', inner.val(target.space).as('space'), 'documents.tenant_id', inner.fn<Date>('now').as('run_after')])
            .where('documents.tenant_id', '=', tenantId)
            .where('documents.generation', '>', 0)
            .where('documents.chunk_count', '>', 0),
        )
        .onConflict((oc) => oc.columns(['document_id', 'space']).doNothing())
        .execute();
    }
    return this.markReadyIfDone(tenantId, target.space);
  }

  /** Marks the space ready when no embedding job is left for it; answers whether it is ready. */
  async markReadyIfDone(tenantId: string, space: string): Promise<boolean> {
    const left = await this.db.selectFrom('embedding_jobs').select('document_id').where('tenant_id', '=', tenantId).where('space', '=', space).limit(1).executeTakeFirst();
    if (left) return false;
    await this.db.updateTable('embedding_spaces').set({ ready_at: new Date() }).where('tenant_id', '=', tenantId).where('space', '=', space).where('ready_at', 'is', null).execute();
    return true;
  }

  /** The space to search: the configured one once ready, else the newest ready one whose provider is still configured. */
  async forSearch(tenantId: string, document: TenantConfigurationDocument): Promise<EmbeddingTarget | undefined> {
    const configured = embeddingFor(document);
    if (!configured) return undefined;
    if (await this.note(tenantId, configured)) return configured;
    const ready = await this.db
      .selectFrom('embedding_spaces')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('ready_at', 'is not', null)
      .orderBy('ready_at', 'desc')
      .execute();
    for (const space of ready) {
      const target = embeddingTargetOf(document, { provider: space.provider, model: space.model, dimensions: space.dimensions });
      if (target && target.space === space.space) return target;
    }
    // No complete space that can still be queried: the new one, as far as it goes.
    return configured;
  }

  /** A space's target, from its record and the configuration's providers; undefined when its provider is gone. */
  async target(tenantId: string, space: string, document: TenantConfigurationDocument): Promise<EmbeddingTarget | undefined> {
    const row = await this.db.selectFrom('embedding_spaces').selectAll().where('tenant_id', '=', tenantId).where('space', '=', space).executeTakeFirst();
    if (!row) return undefined;
    const target = embeddingTargetOf(document, { provider: row.provider, model: row.model, dimensions: row.dimensions });
    return target?.space === space ? target : undefined;
  }
}
