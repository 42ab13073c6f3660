// Ingestion as durable jobs (docs/decisions/0041): one `ingest_jobs` row per document waiting to be read, claimed
// with a lease as runs are, so a job survives a restart, and a crash mid-document only delays it until the lease
// lapses. A job reads the bytes, parses, chunks and embeds them outside any transaction, then writes the next
// generation of chunks and vectors, swaps the document to it and ends the job in one transaction: a retry finds
// either nothing written or everything, and never writes twice. A document that cannot be read fails with the
// reason at once; a provider or store that fails is retried with backoff, the document showing the last error and
// its attempts meanwhile, and after the last attempt the document fails with the last error. No failure touches
// another document.
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { errorMessage } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import type { BlobStore } from '../../blob/port.js';
import type { RuntimeSchema } from '../../store/schema.js';
import { embeddingFor, type EmbeddingTarget, type TenantConfigurationService } from '../../tenants/configuration.js';
import type { EmbeddingSpaces } from '../spaces.js';
import { indexedOf, type VectorIndex } from '../vectors/port.js';
import type { DocumentContentType } from '../limits.js';
import { MAX_DOCUMENT_BYTES } from '../limits.js';
import type { Chunk } from './chunk.js';
import type { Embed } from './embed.js';
import { UnreadableDocument } from './unreadable.js';

/** The readers and the chunker (PDF.js, mammoth, the tokenizer) load with the first document, not at start. */
const readers = () => Promise.all([import('./parse.js'), import('./chunk.js')]);

/** Attempts before a document fails for good on errors that may pass (a provider down, a store unreachable). */
export const MAX_INGEST_ATTEMPTS = 5;
/** The first retry's delay, by default. */
const RETRY_BASE_MS = 5_000;

export interface IngestWorkerOptions {
  db: Kysely<RuntimeSchema>;
  blobs: BlobStore;
  configurations: Pick<TenantConfigurationService, 'load'>;
  embed: Embed;
  logger: Logger;
  /** Who holds a lease: this process. */
  owner: string;
  /** How long a claimed job is this process's before another may take it up; renewed while it runs. */
  leaseSeconds: number;
  /** Jobs run at once in this process. */
  concurrency: number;
  /** Attempts before a document fails for good (default `MAX_INGEST_ATTEMPTS`). */
  maxAttempts?: number;
  /** The first retry's delay; each next one doubles it. */
  retryBaseMs?: number;
  /** Where vectors are written (./vectors): pgvector inside the chunks' transaction, Pinecone beside it. */
  vectors: VectorIndex;
  /** The tenants' embedding spaces: a new one gets the documents already read embedded into it. */
  spaces?: EmbeddingSpaces;
}

interface ClaimedJob {
  document_id: string;
  attempts: number;
}

interface EmbeddingJob {
  document_id: string;
  space: string;
  tenant_id: string;
  attempts: number;
}

/** Enqueues a document's ingestion (again): a job waiting to run now, its attempts counted from zero. */
export async function enqueueIngest(db: Kysely<RuntimeSchema>, document: { id: string; tenant_id: string }): Promise<void> {
  await db
    .insertInto('ingest_jobs')
    .values({ document_id: document.id, tenant_id: document.tenant_id, run_after: new Date(), lease_owner: null, lease_expires_at: null, last_error: null })
    .onConflict((oc) => oc.column('document_id').doUpdateSet({ attempts: 0, run_after: new Date(), last_error: null }))
    .execute();
}

export class IngestWorker {
  private running = 0;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private readonly abort = new AbortController();

  private readonly maxAttempts: number;
  private readonly retryBaseMs: number;

  constructor(private readonly options: IngestWorkerOptions) {
    this.maxAttempts = options.maxAttempts ?? MAX_INGEST_ATTEMPTS;
    this.retryBaseMs = options.retryBaseMs ?? RETRY_BASE_MS;
  }

  /** Looks for work every `pollMs`, and at once when woken. */
  start(pollMs = 1_000): void {
    this.stopped = false;
    this.timer = setInterval(() => this.wake(), pollMs);
    this.timer.unref();
    this.wake();
  }

  /** Claims jobs while there is room; a job enqueued in this process calls it so it starts without waiting. */
  wake(): void {
    // One claim per wake: when a claim finds nothing, another would find nothing either; one that found a job
    // wakes the worker again when it ends.
    if (this.stopped || this.running >= this.options.concurrency) return;
    this.running += 1;
    const work: Promise<void> = this.runOne()
      .catch((error: unknown) => {
        this.options.logger.warn({ err: errorMessage(error) }, 'ingest job failed to run');
        return false;
      })
      .then((ran) => {
        this.running -= 1;
        this.inFlight.delete(work);
        if (ran) this.wake();
      });
    this.inFlight.add(work);
  }

  /** Stops claiming, gives the running jobs `graceMs`, then abandons them to their leases. */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    const settled = () => Promise.allSettled([...this.inFlight]);
    const within = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
    await Promise.race([settled(), within(graceMs)]);
    // What still runs is cut off; its job waits for its lease to lapse, and is taken up again.
    this.abort.abort();
    await Promise.race([settled(), within(1_000)]);
  }

  /** Claims one due job (documents to read first, then documents to embed into a new space) and runs it; false when none was due. */
  async runOne(): Promise<boolean> {
    const job = await this.claim();
    if (job) {
      const renew = setInterval(() => void this.renew(job).catch(() => {}), (this.options.leaseSeconds * 1000) / 3);
      renew.unref();
      try {
        await this.ingest(job);
      } finally {
        clearInterval(renew);
      }
      return true;
    }
    const embedding = await this.claimEmbedding();
    if (!embedding) return false;
    await this.embedInto(embedding);
    return true;
  }

  private claimEmbedding(): Promise<EmbeddingJob | undefined> {
    return this.claimFrom<EmbeddingJob>('embedding_jobs', ['document_id', 'space'], ['document_id', 'space', 'tenant_id', 'attempts']);
  }

  /**
   * Leases the job due first in `table`, one no other process holds (a lapsed lease is free again), counting the
   * attempt; rows another process is claiming at the same moment are skipped, not waited for. The table and columns
   * are this module's own names, never input.
   */
  private async claimFrom<T>(table: 'ingest_jobs' | 'embedding_jobs', key: string[], returning: string[]): Promise<T | undefined> {
    const { owner, leaseSeconds } = this.options;
    const keys = sql.raw(key.join(', '));
    const { rows } = await sql<T>`
      update ${sql.table(table)} set lease_owner = ${owner}, lease_expires_at = now() + make_interval(secs => ${leaseSeconds}), attempts = attempts + 1
      where (${keys}) = (
        select ${keys} from ${sql.table(table)}
        where run_after <= now() and (lease_expires_at is null or lease_expires_at < now())
        order by run_after
        limit 1
        for update skip locked
      )
      returning ${sql.raw(returning.join(', '))}`.execute(this.options.db);
    return rows[0];
  }

  /**
   * Adds a document's vectors in a space it has none in yet (the tenant changed embedding model): the chunks it
   * serves are left as they are, so searches in the old space go on finding it meanwhile.
   */
  private async embedInto(job: EmbeddingJob): Promise<void> {
    const { db, logger, owner } = this.options;
    const held = () => db.deleteFrom('embedding_jobs').where('document_id', '=', job.document_id).where('space', '=', job.space).where('lease_owner', '=', owner);
    try {
      const configuration = await this.options.configurations.load(job.tenant_id);
      const target = configuration && this.options.spaces ? await this.options.spaces.target(job.tenant_id, job.space, configuration.document) : undefined;
      if (!target) {
        logger.warn({ document: job.document_id, space: job.space }, 'embedding space no longer configured; its job is dropped');
        await held().execute();
      } else {
        const chunks = await db
          .selectFrom('document_chunks as c')
          .innerJoin('documents', (join) => join.onRef('documents.id', '=', 'c.document_id').onRef('documents.generation', '=', 'c.generation'))
          .select(['c.id', 'c.content', 'c.ordinal'])
          .where('c.document_id', '=', job.document_id)
          .where((eb) => eb.not(eb.exists(eb.selectFrom('chunk_embeddings as e').select('e.chunk_id').whereRef('e.chunk_id', '=', 'c.id').where('e.space', '=', job.space))))
          .orderBy('c.ordinal')
          .execute();
        const values = chunks.length > 0 ? await this.options.embed(target, chunks.map((chunk) => chunk.content), this.abort.signal) : [];
        if (values.length > 0) await this.options.vectors.prepare(target);
        await db.transaction().execute(async (trx) => {
          // The document first, then its job and chunks: a delete's order (see write).
          const document = await trx.selectFrom('documents').selectAll().where('id', '=', job.document_id).forUpdate().executeTakeFirst();
          const deleted = await trx.deleteFrom('embedding_jobs').where('document_id', '=', job.document_id).where('space', '=', job.space).where('lease_owner', '=', owner).executeTakeFirst();
          if (Number(deleted.numDeletedRows) === 0) return;
          if (!document || values.length === 0) return;
          await this.options.vectors.write(target, indexedOf(document), chunks.map((chunk, i) => ({ chunkId: chunk.id, ordinal: chunk.ordinal, values: values[i]! })), trx);
        });
      }
    } catch (error) {
      if (job.attempts >= this.maxAttempts) {
        // The space is finished without this document's vectors (its words still find it), rather than never.
        logger.warn({ document: job.document_id, space: job.space, err: errorMessage(error) }, 'embedding into a new space failed for good');
        await held().execute();
      } else {
        const delayMs = this.retryDelayMs(job.attempts);
        await db
          .updateTable('embedding_jobs')
          .set({ run_after: new Date(Date.now() + delayMs), lease_owner: null, lease_expires_at: null, last_error: errorMessage(error).slice(0, 2000) })
          .where('document_id', '=', job.document_id)
          .where('space', '=', job.space)
          .where('lease_owner', '=', owner)
          .execute();
        return;
      }
    }
    await this.options.spaces?.markReadyIfDone(job.tenant_id, job.space);
  }

  private claim(): Promise<ClaimedJob | undefined> {
    return this.claimFrom<ClaimedJob>('ingest_jobs', ['document_id'], ['document_id', 'attempts']);
  }

  private async renew(job: ClaimedJob): Promise<void> {
    await sql`update ingest_jobs set lease_expires_at = now() + make_interval(secs => ${this.options.leaseSeconds})
      where document_id = ${job.document_id} and lease_owner = ${this.options.owner}`.execute(this.options.db);
  }

  private async ingest(job: ClaimedJob): Promise<void> {
    const { db } = this.options;
    const document = await db.selectFrom('documents').selectAll().where('id', '=', job.document_id).executeTakeFirst();
    // Deleted meanwhile (its job went with it) or not uploaded yet: nothing to read.
    if (!document || document.status === 'uploading') {
      await this.endJob(job);
      return;
    }
    // The attempt is counted on the record as it starts; an earlier attempt's error stays in `failure` until this
    // one ends, so a reader always sees the last error of a document that is being retried.
    await db.updateTable('documents').set({ status: 'processing', ingest_attempts: job.attempts, updated_at: new Date() }).where('id', '=', document.id).execute();
    let chunks: Chunk[];
    let vectors: { target: EmbeddingTarget; values: number[][] } | undefined;
    try {
      const bytes = await this.read(document.blob_key);
      const [{ parseDocument }, { chunkDocument, DEFAULT_CHUNKING }] = await readers();
      const configuration = await this.options.configurations.load(document.tenant_id);
      const processor = configuration?.document.retrieval?.processor;
      const chunking = processor ? { maxTokens: processor.chunk_tokens, overlapTokens: processor.overlap_tokens } : DEFAULT_CHUNKING;
      chunks = chunkDocument(await parseDocument(document.content_type as DocumentContentType, bytes), chunking);
      const target = configuration ? embeddingFor(configuration.document) : undefined;
      if (target) await this.options.spaces?.note(document.tenant_id, target);
      if (target && chunks.length > 0) {
        vectors = { target, values: await this.options.embed(target, chunks.map((chunk) => chunk.text), this.abort.signal) };
        await this.options.vectors.prepare(target);
      }
    } catch (error) {
      if (error instanceof UnreadableDocument) return this.fail(job, document.id, error.message);
      if (job.attempts >= this.maxAttempts) return this.fail(job, document.id, `gave up after ${job.attempts} attempts: ${errorMessage(error)}`);
      return this.retryLater(job, errorMessage(error));
    }
    await this.write(job, document.id, document.tenant_id, chunks, vectors);
  }

  private retryDelayMs(attempts: number): number {
    return this.retryBaseMs * 2 ** (attempts - 1);
  }

  /**
   * Puts the job back to run after its backoff, and writes the error on the document, which stays `processing`:
   * whoever reads it sees why it is taking long and how many attempts were made (docs/decisions/0072).
   */
  private async retryLater(job: ClaimedJob, error: string): Promise<void> {
    const delayMs = this.retryDelayMs(job.attempts);
    this.options.logger.warn({ document: job.document_id, attempt: job.attempts, of: this.maxAttempts, retryInMs: delayMs, err: error }, 'document ingestion failed; retrying');
    await this.options.db.transaction().execute(async (trx) => {
      // The document first, then its job (see write).
      const document = await trx.selectFrom('documents').select(['id']).where('id', '=', job.document_id).forUpdate().executeTakeFirst();
      if (!document) return;
      const held = await trx
        .updateTable('ingest_jobs')
        .set({ run_after: new Date(Date.now() + delayMs), lease_owner: null, lease_expires_at: null, last_error: error.slice(0, 2000) })
        .where('document_id', '=', job.document_id)
        .where('lease_owner', '=', this.options.owner)
        .executeTakeFirst();
      // A job taken up elsewhere meanwhile is that process's to report.
      if (Number(held.numUpdatedRows) === 0) return;
      await trx
        .updateTable('documents')
        .set({ failure: `attempt ${job.attempts} of ${this.maxAttempts} failed, retrying: ${error}`.slice(0, 2000), ingest_attempts: job.attempts, updated_at: new Date() })
        .where('id', '=', job.document_id)
        .execute();
    });
  }

  /** The next generation of chunks and vectors, the document swapped to it, the job ended: one transaction. */
  private async write(job: ClaimedJob, documentId: string, tenantId: string, chunks: Chunk[], vectors: { target: EmbeddingTarget; values: number[][] } | undefined): Promise<void> {
    const written = await this.options.db.transaction().execute(async (trx) => {
      // The document first, then its job: the order a document's delete takes them in (its row, then the rows that
      // cascade from it), so the two never wait on each other.
      const document = await trx.selectFrom('documents').selectAll().where('id', '=', documentId).forUpdate().executeTakeFirst();
      if (!document) return undefined;
      // Still ours: a job whose lease lapsed and was taken up elsewhere leaves the writing to that one.
      const held = await trx.deleteFrom('ingest_jobs').where('document_id', '=', job.document_id).where('lease_owner', '=', this.options.owner).executeTakeFirst();
      if (Number(held.numDeletedRows) === 0) return undefined;
      const generation = document.generation + 1;
      const ids = chunks.map(() => randomUUID());
      for (let i = 0; i < chunks.length; i += 500) {
        await trx
          .insertInto('document_chunks')
          .values(
            chunks.slice(i, i + 500).map((chunk, j) => ({
              id: ids[i + j]!,
              document_id: documentId,
              tenant_id: tenantId,
              generation,
              ordinal: chunk.ordinal,
              content: chunk.text,
              heading_path: chunk.headingPath,
              start_offset: chunk.start,
              end_offset: chunk.end,
              page: chunk.page,
              tokens: chunk.tokens,
            })),
          )
          .execute();
      }
      if (vectors) {
        const next = indexedOf({ ...document, generation });
        await this.options.vectors.write(vectors.target, next, ids.map((id, i) => ({ chunkId: id, ordinal: chunks[i]!.ordinal, values: vectors.values[i]! })), trx);
      }
      await trx
        .updateTable('documents')
        .set({ status: 'ready', failure: null, ingest_attempts: job.attempts, generation, chunk_count: chunks.length, ingested_at: new Date(), updated_at: new Date() })
        .where('id', '=', documentId)
        .execute();
      await trx.deleteFrom('document_chunks').where('document_id', '=', documentId).where('generation', '<>', generation).execute();
      // A space still being built for the tenant (its model changed) needs this generation's vectors too.
      if (chunks.length > 0) {
        await trx
          .insertInto('embedding_jobs')
          .columns(['document_id', 'space', 'tenant_id', 'run_after'])
          .expression((eb) =>
            eb
              .selectFrom('embedding_spaces')
              .select((inner) => [inner.val(documentId).as('document_id'), 'embedding_spaces.space', 'embedding_spaces.tenant_id', inner.fn<Date>('now').as('run_after')])
              .where('embedding_spaces.tenant_id', '=', tenantId)
              .where('embedding_spaces.ready_at', 'is', null)
              .$if(vectors !== undefined, (query) => query.where('embedding_spaces.space', '<>', vectors!.target.space)),
          )
          .onConflict((oc) => oc.columns(['document_id', 'space']).doNothing())
          .execute();
      }
      return generation;
    });
    // An index outside the database drops the generations the document no longer serves (pgvector did, in the
    // transaction). Best effort: what is left behind is never answered, since retrieval checks the generation.
    if (written !== undefined) {
      await this.options.vectors.removeDocument(tenantId, documentId, written).catch((error: unknown) => {
        this.options.logger.warn({ document: documentId, err: errorMessage(error) }, 'vectors of earlier generations were not removed');
      });
    }
    this.options.logger.info({ document: documentId, chunks: chunks.length, embedded: vectors !== undefined }, 'document ingested');
  }

  private async fail(job: ClaimedJob, documentId: string, reason: string): Promise<void> {
    await this.options.db.transaction().execute(async (trx) => {
      // The document first, then its job (see write).
      const document = await trx.selectFrom('documents').select(['generation']).where('id', '=', documentId).forUpdate().executeTakeFirst();
      if (!document) return;
      const held = await trx.deleteFrom('ingest_jobs').where('document_id', '=', job.document_id).where('lease_owner', '=', this.options.owner).executeTakeFirst();
      if (Number(held.numDeletedRows) === 0) return;
      // A reingest that failed leaves the chunks of the last one that succeeded answering, and says why it failed.
      const served = document.generation > 0;
      await trx
        .updateTable('documents')
        .set({ status: served ? 'ready' : 'failed', failure: (served ? `reingest failed: ${reason}` : reason).slice(0, 2000), ingest_attempts: job.attempts, updated_at: new Date() })
        .where('id', '=', documentId)
        .execute();
    });
    this.options.logger.info({ document: documentId, reason }, 'document ingestion failed');
  }

  private async endJob(job: ClaimedJob): Promise<void> {
    await this.options.db.deleteFrom('ingest_jobs').where('document_id', '=', job.document_id).where('lease_owner', '=', this.options.owner).execute();
  }


  private async read(key: string): Promise<Buffer> {
    const blob = await this.options.blobs.get(key);
    if (blob.size > MAX_DOCUMENT_BYTES) {
      blob.body.destroy();
      throw new UnreadableDocument(`the document is ${blob.size} bytes; at most ${MAX_DOCUMENT_BYTES} are read`);
    }
    const chunks: Buffer[] = [];
    for await (const chunk of blob.body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
}
