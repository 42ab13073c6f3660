// Documents: records, uploads and who may do what (docs/decisions/0039). Bytes never pass through this process
// except a small inline upload: a client PUTs a file straight to the blob store through a presigned URL (the
// filesystem store serves its own signed URLs), in one piece or in parts, then completes the upload here, which
// checks what arrived against what was declared. A single upload's URL names a staging key of its own, which it may
// only create: complete copies the bytes to the document's key, which no URL writes, and checks them there; a
// tombstone then holds the staging key until the URL has expired (docs/decisions/0073). An upload not completed by
// its deadline is abandoned, and the sweeper removes its record and bytes; abort and delete leave no bytes behind
// either.
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { pageOf } from '@agentplane/lib/db/paging';
import { AppError, conflict, notFound, permissionDenied, ValidationError } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import type { Principal } from '../auth/authenticate.js';
import type { BlobStore } from '../blob/port.js';
import type { DocumentsTable, DocumentVisibility, RuntimeSchema } from '../store/schema.js';
import { canSeeDocument, ownsDocument, readerOf, visibleDocuments, type DocumentReader } from './access.js';
import {
  DEFAULT_PART_SIZE,
  DOWNLOAD_URL_SECONDS,
  MAX_PART_COUNT,
  MAX_SINGLE_UPLOAD_BYTES,
  UPLOAD_DEADLINE_SECONDS,
  UPLOAD_URL_SECONDS,
} from './limits.js';
import { documentBlobKey, uploadStagingKey } from './model.js';
import type { Rerank } from './rerank.js';
import { indexedOf, type VectorIndex } from './vectors/port.js';
import { rerankFor } from '../tenants/configuration.js';
import { contentMismatch, SNIFF_BYTES } from './sniff.js';
import type { RetrieveResult, Retriever } from './retrieval.js';
import type { EmbeddingSpaces } from './spaces.js';
import type { DocumentChunkOutput, DocumentListInput, DocumentOutput, DocumentUpdateInput, PresignUploadInput, RetrieveInput } from './schemas.js';

export type DocumentRow = Selectable<DocumentsTable>;

/** Candidates a rerank model orders, per result wanted, and at most. */
const RERANK_CANDIDATES_PER_RESULT = 4;
const MAX_RERANK_CANDIDATES = 50;

/** What a new document says about itself, whichever way its bytes come. */
export interface NewDocument {
  title?: string | undefined;
  filename?: string | undefined;
  contentType: string;
  visibility: DocumentVisibility;
  allowedRoles: string[];
  allowedGroups: string[];
  metadata: Record<string, unknown>;
}

/**
 * Who a new document belongs to: an end-user (owner, and the scope a `scope` document is shared with), or the
 * project's corpus (no owner, visibility `project`, managed on the control plane).
 */
export interface Uploader {
  tenantId: string;
  owner: string | null;
  scope: string | null;
}

const uploaderOf = (principal: Principal): Uploader => ({ tenantId: principal.tenantId, owner: principal.claims.sub, scope: principal.claims.scope });
const corpusOf = (tenantId: string): Uploader => ({ tenantId, owner: null, scope: null });
/** A document of the project's corpus: no owner, seen by every end-user of the tenant (roles and groups aside). */
export const isCorpus = (row: Pick<DocumentRow, 'owner' | 'visibility'>): boolean => row.owner === null && row.visibility === 'project';

export type PresignedUploadOutput =
  | { document: DocumentOutput; upload: { kind: 'single'; method: 'PUT'; url: string; headers: Record<string, string>; expires_at: string } }
  | { document: DocumentOutput; upload: { kind: 'multipart'; part_size: number; part_count: number; expires_at: string } };

// One wording for "does not exist" and "not visible to you" (STYLE.md 4).
export const documentNotFound = (id: string) => notFound(`document ${id} not found`);
const notOwned = (id: string) => permissionDenied(`document ${id} belongs to another subject: this token may read it but not change it`, { code: 'not_owner' });
const projectCorpus = (id: string) =>
  permissionDenied(`document ${id} is in the project's corpus: manage it on the control plane (/api/projects/:id/documents)`, { code: 'not_owner' });
/** SPEC.md Errors: 422, "an ingest that failed on the document"; the record stays readable with its `failure`. */
const ingestFailed = (document: DocumentOutput) =>
  new ValidationError([{ loc: ['document', document.id], msg: `the ingest of document ${document.id} failed: ${document.failure ?? 'no reason recorded'}` }]);
/** SPEC.md Errors: 409 "upload out of order". */
const outOfOrder = (why: string) => conflict(`upload out of order: ${why}`, { code: 'upload_out_of_order' });

const iso = (value: Date | string) => (value instanceof Date ? value : new Date(value)).toISOString();
const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

export function documentOut(row: DocumentRow): DocumentOutput {
  return {
    id: row.id,
    title: row.title,
    filename: row.filename,
    content_type: row.content_type,
    size_bytes: row.size_bytes === null ? null : Number(row.size_bytes),
    status: row.status,
    failure: row.failure,
    ingest_attempts: row.ingest_attempts,
    corpus: isCorpus(row) ? 'project' : 'tenant',
    visibility: row.visibility,
    owner: row.owner,
    scope: row.scope,
    allowed_roles: row.allowed_roles,
    allowed_groups: row.allowed_groups,
    metadata: row.metadata,
    chunk_count: row.chunk_count,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    uploaded_at: isoOrNull(row.uploaded_at),
    ingested_at: isoOrNull(row.ingested_at),
  };
}

export interface DocumentServiceOptions {
  logger: Logger;
  /** The vector index, told of visibility changes and deletions (pgvector follows the rows by itself). */
  vectors?: VectorIndex;
  /** Searches what a caller sees; with the project's embedding model from its configuration, and its rerank model. */
  retrieval?: { retriever: Retriever; spaces: EmbeddingSpaces; rerank?: Rerank };
  /** Called when a document's bytes are complete and it waits to be read (ingestion). */
  onUploaded?: (document: DocumentRow) => Promise<void>;
  now?: () => Date;
}

export class DocumentService {
  private readonly now: () => Date;

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly blobs: BlobStore,
    private readonly options: DocumentServiceOptions,
  ) {
    this.now = options.now ?? (() => new Date());
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Authorization, in the security order: capability, then the document (not visible: the 404 an unknown id gets),
  // then ownership (visible but another subject's, or the project's corpus: 403).

  async authorizeRead(principal: Principal, id: string): Promise<DocumentRow> {
    requireCapability(principal, 'documents:read');
    return this.visible(readerOf(principal), id);
  }

  async authorizeChange(principal: Principal, id: string): Promise<DocumentRow> {
    requireCapability(principal, 'documents:write');
    const reader = readerOf(principal);
    const row = await this.visible(reader, id);
    if (isCorpus(row)) throw projectCorpus(id);
    if (!ownsDocument(reader, row)) throw notOwned(id);
    return row;
  }

  authorizeCreate(principal: Principal): void {
    requireCapability(principal, 'documents:write');
  }

  authorizeList(principal: Principal): void {
    requireCapability(principal, 'documents:read');
  }

  private async visible(reader: DocumentReader, id: string): Promise<DocumentRow> {
    const row = await this.db.selectFrom('documents').selectAll().where('id', '=', id).where(visibleDocuments(reader)).executeTakeFirst();
    // The SQL filter and the rule on one record are the same rule; a row one admits and the other refuses is a bug,
    // and the refusal wins.
    if (!row || !canSeeDocument(reader, row)) throw documentNotFound(id);
    return row;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Reads

  async list(principal: Principal, input: DocumentListInput): Promise<{ documents: DocumentOutput[]; has_more: boolean; next_offset: number | null }> {
    let query = this.db.selectFrom('documents').selectAll().where(visibleDocuments(readerOf(principal)));
    if (input.status) query = query.where('status', '=', input.status);
    const rows = await query
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(input.limit + 1)
      .offset(input.offset)
      .execute();
    const page = pageOf(rows, input);
    return { documents: page.rows.map(documentOut), has_more: page.has_more, next_offset: page.next_offset };
  }

  async downloadUrl(row: DocumentRow): Promise<{ url: string; expires_at: string }> {
    if (row.status === 'uploading') throw outOfOrder(`document ${row.id} has no bytes until its upload completes`);
    const url = await this.blobs.presignGet(row.blob_key, { expiresInSeconds: DOWNLOAD_URL_SECONDS });
    return { url, expires_at: iso(new Date(this.now().getTime() + DOWNLOAD_URL_SECONDS * 1000)) };
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Uploads

  /** A small document whose bytes came with the request: stored, and waiting to be read. */
  async createInline(principal: Principal, document: NewDocument, bytes: Buffer): Promise<DocumentOutput> {
    return this.storeInline(uploaderOf(principal), document, bytes);
  }

  async presignUpload(principal: Principal, input: PresignUploadInput): Promise<PresignedUploadOutput> {
    return this.presign(uploaderOf(principal), input);
  }

  private async storeInline(uploader: Uploader, document: NewDocument, bytes: Buffer): Promise<DocumentOutput> {
    const mismatch = contentMismatch(document.contentType, bytes.subarray(0, SNIFF_BYTES));
    if (mismatch) throw new ValidationError([{ loc: ['body', 'file'], msg: `the file is not what its media type says: ${mismatch}` }]);
    const id = randomUUID();
    // The record first, as an upload with a deadline: should this process die before the bytes are stored, the
    // sweeper removes both, and nothing is left half made.
    const row = await this.insert(uploader, id, document, { declaredSize: bytes.length, expiresAt: this.deadline(UPLOAD_URL_SECONDS) });
    await this.blobs.put(row.blob_key, bytes, { contentType: document.contentType });
    return documentOut(await this.markUploaded(row, bytes.length));
  }

  private async presign(uploader: Uploader, input: Omit<PresignUploadInput, 'visibility'> & { visibility: DocumentVisibility }): Promise<PresignedUploadOutput> {
    const multipart = input.multipart ?? input.size > MAX_SINGLE_UPLOAD_BYTES;
    if (!multipart && input.size > MAX_SINGLE_UPLOAD_BYTES) {
      throw new ValidationError([{ loc: ['body', 'multipart'], msg: `a single upload takes at most ${MAX_SINGLE_UPLOAD_BYTES} bytes: upload ${input.size} bytes in parts (multipart true)` }]);
    }
    const partSize = input.part_size ?? DEFAULT_PART_SIZE;
    const partCount = Math.ceil(input.size / partSize);
    if (multipart && partCount > MAX_PART_COUNT) {
      throw new ValidationError([{ loc: ['body', 'part_size'], msg: `${input.size} bytes in parts of ${partSize} is ${partCount} parts; at most ${MAX_PART_COUNT}: choose larger parts` }]);
    }
    const document: NewDocument = {
      title: input.title,
      filename: input.filename,
      contentType: input.content_type,
      visibility: input.visibility,
      allowedRoles: input.allowed_roles,
      allowedGroups: input.allowed_groups,
      metadata: input.metadata,
    };
    const id = randomUUID();
    const key = documentBlobKey(uploader.tenantId, id);
    if (!multipart) {
      const expiresAt = this.deadline(2 * UPLOAD_URL_SECONDS);
      const staging = uploadStagingKey(uploader.tenantId, id);
      // The staging key is kept past the deadline, when the URL has long expired (an hour of margin for the store's
      // clock); kept first, so a record whose insert then fails leaves only a reservation the sweep removes.
      await this.db.insertInto('upload_staging').values({ key: staging, tenant_id: uploader.tenantId, sweep_after: expiresAt }).execute();
      const row = await this.insert(uploader, id, document, { declaredSize: input.size, expiresAt });
      // Create-only: once bytes (or the tombstone) are at the staging key, this URL cannot replace them.
      const url = await this.blobs.presignPut(staging, { expiresInSeconds: UPLOAD_URL_SECONDS, contentType: input.content_type, ifNoneMatch: true });
      return {
        document: documentOut(row),
        upload: {
          kind: 'single',
          method: 'PUT',
          url,
          headers: { 'content-type': input.content_type, 'if-none-match': '*' },
          expires_at: iso(this.deadline(UPLOAD_URL_SECONDS)),
        },
      };
    }
    const { uploadId } = await this.blobs.createMultipartUpload(key, { contentType: input.content_type });
    const expiresAt = this.deadline(UPLOAD_DEADLINE_SECONDS);
    try {
      const row = await this.insert(uploader, id, document, { declaredSize: input.size, expiresAt, upload: { id: uploadId, partSize, partCount } });
      return { document: documentOut(row), upload: { kind: 'multipart', part_size: partSize, part_count: partCount, expires_at: iso(expiresAt) } };
    } catch (error) {
      await this.blobs.abortMultipartUpload(key, uploadId).catch(() => {});
      throw error;
    }
  }

  async presignParts(row: DocumentRow, partNumbers: number[]): Promise<{ parts: { part_number: number; method: 'PUT'; url: string; headers: Record<string, string>; expires_at: string }[] }> {
    const upload = this.openUpload(row);
    if (upload.id === null) throw outOfOrder(`document ${row.id} is uploaded in one piece, not in parts: PUT it to the URL presign-upload gave`);
    const outside = partNumbers.filter((number) => number > upload.partCount);
    if (outside.length > 0) throw outOfOrder(`part ${outside[0]} is outside 1 to ${upload.partCount}, the parts of document ${row.id}`);
    const expiresAt = iso(this.deadline(UPLOAD_URL_SECONDS));
    const parts = [];
    for (const partNumber of [...new Set(partNumbers)].sort((a, b) => a - b)) {
      const url = await this.blobs.presignPart(row.blob_key, upload.id, partNumber, { expiresInSeconds: UPLOAD_URL_SECONDS });
      parts.push({ part_number: partNumber, method: 'PUT' as const, url, headers: {}, expires_at: expiresAt });
    }
    return { parts };
  }

  /**
   * Ends an upload: the parts put together (for an upload in parts), then what arrived checked against what was
   * declared. Completing again answers the document as it is.
   */
  async completeUpload(row: DocumentRow, parts: { part_number: number; etag: string }[] | undefined): Promise<DocumentOutput> {
    if (row.status !== 'uploading') {
      if (row.status === 'failed') throw outOfOrder(`document ${row.id} failed: ${row.failure ?? 'see its failure'}; delete it and upload again`);
      return documentOut(row);
    }
    const upload = this.openUpload(row);
    if (upload.id !== null) {
      if (!parts || parts.length === 0) throw outOfOrder(`document ${row.id} is uploaded in ${upload.partCount} parts: list each with its ETag`);
      const listed = new Set(parts.map((part) => part.part_number));
      const outside = parts.find((part) => part.part_number > upload.partCount);
      if (outside) throw outOfOrder(`part ${outside.part_number} is outside 1 to ${upload.partCount}, the parts of document ${row.id}`);
      const missing = Array.from({ length: upload.partCount }, (_, i) => i + 1).filter((number) => !listed.has(number));
      if (missing.length > 0 || listed.size !== parts.length) {
        throw outOfOrder(
          missing.length > 0
            ? `part${missing.length > 1 ? 's' : ''} ${summarize(missing)} of document ${row.id} ${missing.length > 1 ? 'are' : 'is'} not listed; all ${upload.partCount} must have arrived`
            : 'a part is listed more than once',
        );
      }
      const ordered = [...parts].sort((a, b) => a.part_number - b.part_number).map((part) => ({ partNumber: part.part_number, etag: part.etag }));
      try {
        await this.blobs.completeMultipartUpload(row.blob_key, upload.id, ordered);
      } catch (error) {
        // A part that has not arrived, or arrived with another ETag, or is too small: the client's order of work.
        if (error instanceof AppError && ['invalid_argument', 'not_found', 'conflict', 'unprocessable'].includes(error.kind)) throw outOfOrder(error.message);
        throw error;
      }
    } else if (parts && parts.length > 0) {
      throw outOfOrder(`document ${row.id} is uploaded in one piece: complete it without parts`);
    } else {
      const taken = await this.takeStaged(row);
      if (taken === 'changed') {
        // A concurrent complete or abort moved the upload on: answer where it is now.
        const current = await this.db.selectFrom('documents').selectAll().where('id', '=', row.id).executeTakeFirst();
        if (!current) throw documentNotFound(row.id);
        if (current.status !== 'uploading') return documentOut(current);
        throw outOfOrder(`the upload of document ${row.id} changed while it was being completed: complete it again`);
      }
    }
    // From here on the bytes are at the document's own key, which no upload URL writes: what is checked is what stays.
    const stored = await this.blobs.head(row.blob_key);
    if (!stored) throw outOfOrder(`nothing has arrived for document ${row.id} yet: PUT its bytes to the upload URL first`);
    // What arrived is not what was declared: the bytes go and the upload stays open, so the refusal changes no record.
    if (row.declared_size !== null && stored.size !== Number(row.declared_size)) {
      await this.discardArrival(row, upload);
      const again = upload.id === null ? `PUT exactly ${row.declared_size} bytes again` : `upload all ${upload.partCount} parts again (presign-parts)`;
      throw new ValidationError([{ loc: ['body'], msg: `the upload was ${stored.size} bytes, but ${row.declared_size} were declared; the bytes were removed: ${again}` }]);
    }
    if (stored.contentType !== undefined && stored.contentType.split(';')[0]!.trim().toLowerCase() !== row.content_type) {
      await this.discardArrival(row, upload);
      throw new ValidationError([{ loc: ['body', 'content_type'], msg: `the upload was sent as ${stored.contentType}, but ${row.content_type} was declared; PUT it again with Content-Type: ${row.content_type}` }]);
    }
    // What the bytes are, not only what the PUT said they were.
    const mismatch = contentMismatch(row.content_type, await this.headOf(row.blob_key));
    if (mismatch) {
      await this.discardArrival(row, upload);
      throw new ValidationError([{ loc: ['body', 'content_type'], msg: `the upload is not what was declared: ${mismatch}; the bytes were removed` }]);
    }
    const uploaded = await this.markUploaded(row, stored.size).catch(async (error: unknown) => {
      // Aborted or deleted while this complete copied: the copy would be bytes no record points at.
      if (error instanceof AppError && error.kind === 'not_found' && upload.id === null) await this.blobs.delete(row.blob_key);
      throw error;
    });
    if (upload.id === null) await this.sealStaging(row);
    return documentOut(uploaded);
  }

  /**
   * Copies a single upload's bytes from its staging key to the document's own: 'taken', or 'changed' when the staged
   * object was replaced or removed between looking and copying (the copy names its ETag). Nothing staged is 409; a
   * size other than declared is refused before anything is copied.
   */
  private async takeStaged(row: DocumentRow): Promise<'taken' | 'changed'> {
    const staging = uploadStagingKey(row.tenant_id, row.id);
    const staged = await this.blobs.head(staging);
    if (!staged) throw outOfOrder(`nothing has arrived for document ${row.id} yet: PUT its bytes to the upload URL first`);
    if (row.declared_size !== null && staged.size !== Number(row.declared_size)) {
      await this.discardArrival(row, { id: null });
      throw new ValidationError([{ loc: ['body'], msg: `the upload was ${staged.size} bytes, but ${row.declared_size} were declared; the bytes were removed: PUT exactly ${row.declared_size} bytes again` }]);
    }
    try {
      await this.blobs.copy(staging, row.blob_key, { ifMatch: staged.etag });
      return 'taken';
    } catch (error) {
      if (error instanceof AppError && (error.kind === 'precondition_failed' || error.kind === 'not_found')) return 'changed';
      throw error;
    }
  }

  /**
   * Leaves an empty tombstone at a single upload's staging key while its URL may still be used, so the URL, which
   * may only create, refuses every later write; it replaces the staged bytes in one write, never leaving the key
   * empty between. The sweep removes it with the reservation. Best effort once the upload is complete: should it
   * fail, the staged bytes hold the key in its place until the sweep.
   */
  private async sealStaging(row: DocumentRow): Promise<void> {
    const staging = uploadStagingKey(row.tenant_id, row.id);
    const reserved = await this.db.selectFrom('upload_staging').select('key').where('key', '=', staging).where('sweep_after', '>', this.now()).executeTakeFirst();
    if (!reserved) return;
    await this.blobs.put(staging, Buffer.alloc(0)).catch((error: unknown) => {
      this.options.logger.warn({ err: error, document: row.id }, 'could not seal the staging key of an upload; its staged bytes hold it until the sweep');
    });
  }

  /** Gives up an upload: its record and whatever bytes or parts arrived are removed. */
  async abortUpload(row: DocumentRow): Promise<{ id: string; deleted: true }> {
    if (row.status !== 'uploading') throw outOfOrder(`document ${row.id} is ${row.status}, not being uploaded: delete it instead`);
    await this.removeBytes(row);
    await this.db.deleteFrom('documents').where('id', '=', row.id).execute();
    return { id: row.id, deleted: true };
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The project's corpus, managed on the control plane through the runtime's admin surface (docs/decisions/0043):
  // no end-user owns it, and every end-user of the tenant sees it (allowed roles and groups aside).

  /** A corpus document of this tenant; any other document, or none, is the 404 a made-up id gets. */
  async corpusDocument(tenantId: string, id: string): Promise<DocumentRow> {
    const row = await this.db.selectFrom('documents').selectAll().where('id', '=', id).where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!row || !isCorpus(row)) throw documentNotFound(id);
    return row;
  }

  async listCorpus(tenantId: string, input: DocumentListInput): Promise<{ documents: DocumentOutput[]; has_more: boolean; next_offset: number | null }> {
    let query = this.db.selectFrom('documents').selectAll().where('tenant_id', '=', tenantId).where('owner', 'is', null).where('visibility', '=', 'project');
    if (input.status) query = query.where('status', '=', input.status);
    const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(input.limit + 1).offset(input.offset).execute();
    const page = pageOf(rows, input);
    return { documents: page.rows.map(documentOut), has_more: page.has_more, next_offset: page.next_offset };
  }

  async createCorpusInline(tenantId: string, document: Omit<NewDocument, 'visibility'>, bytes: Buffer): Promise<DocumentOutput> {
    return this.storeInline(corpusOf(tenantId), { ...document, visibility: 'project' }, bytes);
  }

  /**
   * A corpus upload straight to the store. The control plane has no presign-parts step of its own, so an upload in
   * parts comes with every part's URL at once (at most 103 parts: 512 MiB in parts of at least 5 MiB).
   */
  async presignCorpus(
    tenantId: string,
    input: Omit<PresignUploadInput, 'visibility'>,
  ): Promise<PresignedUploadOutput & { parts?: Awaited<ReturnType<DocumentService['presignParts']>>['parts'] }> {
    const presigned = await this.presign(corpusOf(tenantId), { ...input, visibility: 'project' });
    if (presigned.upload.kind === 'single') return presigned;
    const row = await this.corpusDocument(tenantId, presigned.document.id);
    const { parts } = await this.presignParts(row, Array.from({ length: presigned.upload.part_count }, (_, i) => i + 1));
    return { ...presigned, parts };
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Changes

  async update(principal: Principal, row: DocumentRow, input: DocumentUpdateInput): Promise<DocumentOutput> {
    const updated = await this.db
      .updateTable('documents')
      .set({
        ...(input.title !== undefined ? { title: input.title } : {}),
        // Shared again with a scope: the owner's scope now, as at upload.
        ...(input.visibility !== undefined ? { visibility: input.visibility, scope: input.visibility === 'scope' ? principal.claims.scope : null } : {}),
        ...(input.allowed_roles !== undefined ? { allowed_roles: input.allowed_roles } : {}),
        ...(input.allowed_groups !== undefined ? { allowed_groups: input.allowed_groups } : {}),
        ...(input.metadata !== undefined ? { metadata: JSON.stringify(input.metadata) } : {}),
        updated_at: this.now(),
      })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirst();
    if (!updated) throw documentNotFound(row.id);
    if (input.visibility !== undefined || input.allowed_roles !== undefined || input.allowed_groups !== undefined) await this.followInIndex(updated);
    return documentOut(updated);
  }

  /** The record and its bytes; the bytes first, so a failure leaves the record to retry the delete from. */
  async delete(row: DocumentRow): Promise<{ id: string; deleted: true }> {
    await this.removeBytes(row);
    await this.db.deleteFrom('documents').where('id', '=', row.id).execute();
    await this.dropFromIndex(row);
    return { id: row.id, deleted: true };
  }

  /**
   * An index outside the database is told of a visibility change. Should it fail, its copy is out of step: retrieval
   * checks every answer against the documents again, so that can hide the document from a new reader for a while,
   * never show it to one who may not see it; the next reingest writes it afresh.
   */
  private async followInIndex(row: DocumentRow): Promise<void> {
    if (!this.options.vectors || row.generation === 0) return;
    await this.options.vectors.updateDocument(indexedOf(row)).catch((error: unknown) => {
      this.options.logger.warn({ err: error, document: row.id }, 'the vector index did not take the visibility change');
    });
  }

  /** A deleted document's vectors outside the database; what is left behind is never answered (its document is gone). */
  private async dropFromIndex(row: DocumentRow): Promise<void> {
    if (!this.options.vectors || row.generation === 0) return;
    await this.options.vectors.removeDocument(row.tenant_id, row.id).catch((error: unknown) => {
      this.options.logger.warn({ err: error, document: row.id }, 'the vector index did not remove a deleted document');
    });
  }

  /** Reads the document again (its processor, its embedding model or the reader changed): a new generation of chunks. */
  async reingest(row: DocumentRow): Promise<DocumentOutput> {
    if (row.status === 'uploading') throw outOfOrder(`document ${row.id} has no bytes to read until its upload completes`);
    const updated = await this.db
      .updateTable('documents')
      // A new reading: an earlier one's failure and attempts no longer say anything about it.
      .set({ status: 'processing', failure: null, ingest_attempts: 0, updated_at: this.now() })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirst();
    if (!updated) throw documentNotFound(row.id);
    await this.options.onUploaded?.(updated);
    return documentOut(updated);
  }

  /**
   * Waits (at most `seconds`) for the document's ingestion to end, polling its record (the job may run on any
   * replica): the document once ready, 422 when the ingest failed (the record stays readable), or the document as
   * it is when the wait ran out.
   */
  async awaitIngest(document: DocumentOutput, seconds: number): Promise<DocumentOutput> {
    const deadline = Date.now() + seconds * 1000;
    let current = document;
    while (current.status === 'uploaded' || current.status === 'processing') {
      if (Date.now() >= deadline) return current;
      await new Promise((resolve) => setTimeout(resolve, 100));
      const row = await this.db.selectFrom('documents').selectAll().where('id', '=', document.id).executeTakeFirst();
      if (!row) throw documentNotFound(document.id);
      current = documentOut(row);
    }
    if (current.status === 'failed') throw ingestFailed(current);
    return current;
  }

  /** A page of the chunks the document serves now, in order; 422 when its ingest failed. */
  async chunks(row: DocumentRow, page: { limit: number; offset: number }): Promise<{ chunks: DocumentChunkOutput[]; has_more: boolean; next_offset: number | null }> {
    if (row.status === 'failed') throw ingestFailed(documentOut(row));
    const rows = await this.db
      .selectFrom('document_chunks')
      .select(['id', 'ordinal', 'content', 'heading_path', 'start_offset', 'end_offset', 'page', 'tokens'])
      .where('document_id', '=', row.id)
      .where('generation', '=', row.generation)
      .orderBy('ordinal')
      .limit(page.limit + 1)
      .offset(page.offset)
      .execute();
    const paged = pageOf(rows, page);
    return {
      chunks: paged.rows.map((chunk) => ({
        id: chunk.id,
        ordinal: chunk.ordinal,
        text: chunk.content,
        heading_path: chunk.heading_path,
        start: chunk.start_offset,
        end: chunk.end_offset,
        page: chunk.page,
        tokens: chunk.tokens,
      })),
      has_more: paged.has_more,
      next_offset: paged.next_offset,
    };
  }

  /** The chunks of the documents this caller sees that best answer the query (docs/decisions/0042). */
  async retrieve(principal: Principal, input: RetrieveInput): Promise<RetrieveResult> {
    const retrieval = this.options.retrieval;
    if (!retrieval) return { results: [], mode: 'keyword', reranked: false };
    // The configuration the caller was authenticated with (already loaded and current): no second read of it.
    const document = principal.configuration.document;
    const target = await retrieval.spaces.forSearch(principal.tenantId, document);
    const reranker = retrieval.rerank ? rerankFor(document) : undefined;
    // With a rerank model, more candidates are fused, and the model picks the best of them.
    const k = reranker ? Math.min(MAX_RERANK_CANDIDATES, input.k * RERANK_CANDIDATES_PER_RESULT) : input.k;
    const found = await retrieval.retriever.retrieve(readerOf(principal), target, { query: input.query, k, documentIds: input.document_ids });
    if (!reranker || found.results.length === 0) return { ...found, results: found.results.slice(0, input.k), reranked: false };
    try {
      const ranked = await retrieval.rerank!(reranker, input.query, found.results.map((result) => result.text), input.k);
      const results = ranked.slice(0, input.k).map(({ index, score }) => ({ ...found.results[index]!, score }));
      return { ...found, results, reranked: true };
    } catch (error) {
      // The fused order is a good answer too: a rerank model that fails never fails the search.
      this.options.logger.warn({ err: error, tenant_id: principal.tenantId }, 'rerank failed; answering in the fused order');
      return { ...found, results: found.results.slice(0, input.k), reranked: false };
    }
  }

  /** Removes uploads abandoned past their deadline, record and bytes; how many. */
  async sweepAbandoned(limit = 100): Promise<number> {
    const abandoned = await this.db
      .selectFrom('documents')
      .selectAll()
      .where('status', '=', 'uploading')
      .where('upload_expires_at', '<', this.now())
      .orderBy('upload_expires_at')
      .limit(limit)
      .execute();
    let removed = 0;
    for (const row of abandoned) {
      await this.removeBytes(row);
      const gone = await this.db.deleteFrom('documents').where('id', '=', row.id).where('status', '=', 'uploading').executeTakeFirst();
      removed += Number(gone.numDeletedRows);
    }
    if (removed > 0) this.options.logger.info({ removed }, 'abandoned document uploads removed');
    await this.sweepStaging(limit);
    return removed;
  }

  /**
   * Removes staging keys whose uploads' URLs have expired (tombstones, and bytes of uploads never completed), each
   * object before its reservation, so a failure leaves the reservation to retry from.
   */
  private async sweepStaging(limit: number): Promise<void> {
    const due = await this.db.selectFrom('upload_staging').select('key').where('sweep_after', '<', this.now()).orderBy('sweep_after').limit(limit).execute();
    for (const { key } of due) {
      await this.blobs.delete(key);
      await this.db.deleteFrom('upload_staging').where('key', '=', key).execute();
    }
  }

  // ---------------------------------------------------------------------------------------------------------------

  private async insert(
    uploader: Uploader,
    id: string,
    document: NewDocument,
    upload: { declaredSize: number; expiresAt: Date; upload?: { id: string; partSize: number; partCount: number } },
  ): Promise<DocumentRow> {
    const now = this.now();
    return this.db
      .insertInto('documents')
      .values({
        id,
        tenant_id: uploader.tenantId,
        owner: uploader.owner,
        visibility: document.visibility,
        scope: document.visibility === 'scope' ? uploader.scope : null,
        allowed_roles: document.allowedRoles,
        allowed_groups: document.allowedGroups,
        title: document.title ?? document.filename ?? 'Untitled document',
        filename: document.filename ?? null,
        content_type: document.contentType,
        declared_size: upload.declaredSize,
        size_bytes: null,
        blob_key: documentBlobKey(uploader.tenantId, id),
        status: 'uploading',
        failure: null,
        upload_id: upload.upload?.id ?? null,
        upload_part_size: upload.upload?.partSize ?? null,
        upload_part_count: upload.upload?.partCount ?? null,
        upload_expires_at: upload.expiresAt,
        metadata: JSON.stringify(document.metadata),
        created_at: now,
        updated_at: now,
        uploaded_at: null,
        ingested_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  private async markUploaded(row: DocumentRow, size: number): Promise<DocumentRow> {
    const now = this.now();
    const updated = await this.db
      .updateTable('documents')
      .set({ status: 'uploaded', size_bytes: size, uploaded_at: now, updated_at: now, upload_id: null, upload_part_size: null, upload_part_count: null, upload_expires_at: null })
      .where('id', '=', row.id)
      .where('status', '=', 'uploading')
      .returningAll()
      .executeTakeFirst();
    if (!updated) {
      // Completed by a concurrent request, or deleted meanwhile: answer what is there now.
      const current = await this.db.selectFrom('documents').selectAll().where('id', '=', row.id).executeTakeFirst();
      if (!current) throw documentNotFound(row.id);
      return current;
    }
    await this.options.onUploaded?.(updated);
    return updated;
  }

  /** The upload in progress on an `uploading` document; 409 when there is none or its deadline passed. */
  private openUpload(row: DocumentRow): { id: string | null; partCount: number } {
    if (row.status !== 'uploading') throw outOfOrder(`document ${row.id} is ${row.status}: its upload is over`);
    if (row.upload_expires_at !== null && new Date(row.upload_expires_at).getTime() <= this.now().getTime()) {
      throw outOfOrder(`the upload of document ${row.id} was abandoned at ${iso(row.upload_expires_at)}: delete it and upload again`);
    }
    return { id: row.upload_id, partCount: row.upload_part_count ?? 1 };
  }

  /**
   * Removes what arrived for an upload that was not what was declared, and leaves the upload open: a single upload's
   * URL can be used again; an upload in parts was used up by completing it, so a new one takes its place.
   */
  private async discardArrival(row: DocumentRow, upload: { id: string | null }): Promise<void> {
    await this.blobs.delete(row.blob_key);
    // The staging key emptied, the single upload's URL (create-only) takes a new PUT.
    if (upload.id === null) return this.blobs.delete(uploadStagingKey(row.tenant_id, row.id));
    const { uploadId } = await this.blobs.createMultipartUpload(row.blob_key, { contentType: row.content_type });
    await this.db.updateTable('documents').set({ upload_id: uploadId, updated_at: this.now() }).where('id', '=', row.id).execute();
  }

  /** The first bytes of a stored file, read and then let go (the rest is never downloaded here). */
  private async headOf(key: string): Promise<Buffer> {
    const blob = await this.blobs.get(key);
    const chunks: Buffer[] = [];
    let length = 0;
    try {
      for await (const chunk of blob.body as AsyncIterable<Buffer>) {
        chunks.push(chunk);
        length += chunk.length;
        if (length >= SNIFF_BYTES) break;
      }
    } finally {
      blob.body.destroy();
    }
    return Buffer.concat(chunks).subarray(0, SNIFF_BYTES);
  }

  private async removeBytes(row: DocumentRow): Promise<void> {
    if (row.upload_id !== null) await this.blobs.abortMultipartUpload(row.blob_key, row.upload_id);
    await this.blobs.delete(row.blob_key);
    // A single upload given up: whatever was staged goes, and its URL can write nothing after. (A completed one was
    // sealed at complete.)
    if (row.status === 'uploading' && row.upload_id === null) await this.sealStaging(row);
  }

  private deadline(seconds: number): Date {
    return new Date(this.now().getTime() + seconds * 1000);
  }
}

function requireCapability(principal: Principal, capability: 'documents:read' | 'documents:write'): void {
  if (!principal.permission.has(capability)) {
    throw permissionDenied(`documents need capability '${capability}', which this token does not hold`, { code: 'capability_denied' });
  }
}

/** `3, 4, 7` or `3, 4, 7 and 12 more`. */
function summarize(numbers: number[]): string {
  return numbers.length <= 5 ? numbers.join(', ') : `${numbers.slice(0, 5).join(', ')} and ${numbers.length - 5} more`;
}
