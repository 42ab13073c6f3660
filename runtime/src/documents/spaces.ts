// Which embedding space a tenant's documents are searched in (docs/decisions/0041). A space is noted the first
// time the tenant's configuration names it (at an ingest or a search); if documents were already read by then,
// each gets an embedding job that adds its chunks' vectors in the new space, and the space is ready once none is
// left. Until then searches use the newest ready space, with the model that made it, so a change of embedding
// model never leaves retrieval without an index. A space in the project's own Pinecone index (docs/decisions/0047)
// keeps that index's host and sealed key: a move to another index is a new space built the same way, and the old
// one can still be searched meanwhile, and its vectors followed and erased, after the configuration stops naming it.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import type { EmbeddingSpacesTable, RuntimeSchema } from '../store/schema.js';
import { embeddingFor, embeddingTargetOf, type EmbeddingTarget, type ProjectIndex } from '../tenants/configuration.js';
import type { TenantConfigurationDocument } from '../tenants/schemas.js';

/** A project index with its key sealed to the tenant and host. */
export interface SealedIndex {
  host: string;
  sealed_key: string;
}

export class EmbeddingSpaces {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    /** Seals the keys of project indexes at rest. */
    private readonly secrets: SecretBox,
  ) {}

  /** Every project index that holds (or held) vectors of the tenant's spaces, keys in clear. */
  async projectIndexes(tenantId: string): Promise<ProjectIndex[]> {
    return this.openIndexes(tenantId, await this.sealedIndexes(tenantId));
  }

  /** The same, keys still sealed: what the erase keeps once the spaces' rows are gone (./feature.ts). */
  async sealedIndexes(tenantId: string, db: Kysely<RuntimeSchema> | Transaction<RuntimeSchema> = this.db): Promise<SealedIndex[]> {
    const rows = await db
      .selectFrom('embedding_spaces')
      .select(['index_host', 'sealed_index_key'])
      .where('tenant_id', '=', tenantId)
      .where('index_host', 'is not', null)
      .where('sealed_index_key', 'is not', null)
      .execute();
    const byHost = new Map(rows.map((row) => [row.index_host!, { host: row.index_host!, sealed_key: row.sealed_index_key! }]));
    return [...byHost.values()];
  }

  openIndexes(tenantId: string, sealed: SealedIndex[]): ProjectIndex[] {
    return sealed.map((index) => ({ host: index.host, apiKey: this.secrets.open(index.sealed_key, indexKeyAad(tenantId, index.host)) }));
  }

  private indexOf(tenantId: string, row: Pick<Selectable<EmbeddingSpacesTable>, 'index_host' | 'sealed_index_key'>): ProjectIndex | undefined {
    if (row.index_host === null || row.sealed_index_key === null) return undefined;
    return { host: row.index_host, apiKey: this.secrets.open(row.sealed_index_key, indexKeyAad(tenantId, row.index_host)) };
  }

  /**
   * Records the space the configuration names, if it is new: documents already read get embedding jobs, and with
   * none the space is ready at once. Answers whether it is ready.
   */
  async note(tenantId: string, target: EmbeddingTarget): Promise<boolean> {
    const known = await this.db
      .selectFrom('embedding_spaces')
      .select(['ready_at', 'index_host', 'sealed_index_key'])
      .where('tenant_id', '=', tenantId)
      .where('space', '=', target.space)
      .executeTakeFirst();
    if (known) {
      // A rotated key of the same index: the space keeps the one the configuration has now.
      if (target.index && this.indexOf(tenantId, known)?.apiKey !== target.index.apiKey) {
        await this.db.updateTable('embedding_spaces').set({ sealed_index_key: this.sealedKey(tenantId, target.index) }).where('tenant_id', '=', tenantId).where('space', '=', target.space).execute();
      }
      return known.ready_at !== null;
    }
    const inserted = await this.db
      .insertInto('embedding_spaces')
      .values({
        tenant_id: tenantId,
        space: target.space,
        provider: target.providerId,
        model: target.model,
        dimensions: target.dimensions,
        ready_at: null,
        index_host: target.index?.host ?? null,
        sealed_index_key: target.index ? this.sealedKey(tenantId, target.index) : null,
      })
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
      const target = embeddingTargetOf(document, { provider: space.provider, model: space.model, dimensions: space.dimensions }, this.indexOf(tenantId, space));
      if (target && target.space === space.space) return target;
    }
    // No complete space that can still be queried: the new one, as far as it goes.
    return configured;
  }

  /** A space's target, from its record and the configuration's providers; undefined when its provider is gone. */
  async target(tenantId: string, space: string, document: TenantConfigurationDocument): Promise<EmbeddingTarget | undefined> {
    const row = await this.db.selectFrom('embedding_spaces').selectAll().where('tenant_id', '=', tenantId).where('space', '=', space).executeTakeFirst();
    if (!row) return undefined;
    const target = embeddingTargetOf(document, { provider: row.provider, model: row.model, dimensions: row.dimensions }, this.indexOf(tenantId, row));
    return target?.space === space ? target : undefined;
  }

  private sealedKey(tenantId: string, index: ProjectIndex): string {
    return this.secrets.seal(index.apiKey, indexKeyAad(tenantId, index.host));
  }
}

/** Binds a sealed index key to its tenant and index host, so it cannot be copied onto another. */
const indexKeyAad = (tenantId: string, host: string) => `tenant:${tenantId}:embedding-space-index:${host}:api-key`;
