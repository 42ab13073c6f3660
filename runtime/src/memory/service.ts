// Durable memory and the project wiki (SPEC.md capability `memory`, flag `enable_memory`; docs/decisions/0044).
// A memory item belongs to one subject: only they change or forget it; privileged roles may read anyone's. A wiki
// page is written by the agent for the project and seen by the subtree of the writer's token scope (and by whoever's
// scope covers it), like a document shared with a scope; privileged roles see every page. Both are searched by
// words and, when the project has an embedding model, by meaning, fused by reciprocal rank; both stay beside their
// rows (pgvector) whatever index holds the documents' vectors.
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable } from 'kysely';
import { notFound, permissionDenied } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import { isPrivileged, isWithinScope } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import { within } from '../documents/access.js';
import type { Embed } from '../documents/ingest/embed.js';
import type { MemoryItemsTable, RuntimeSchema, WikiPagesTable } from '../store/schema.js';
import { embeddingFor } from '../tenants/configuration.js';

type MemoryRow = Selectable<MemoryItemsTable>;
type WikiRow = Selectable<WikiPagesTable>;

/** The most a subject may keep: memory is for facts worth keeping, not a transcript. */
export const MAX_MEMORY_ITEMS = 1_000;
export const MAX_MEMORY_CHARS = 2_000;
export const MAX_WIKI_TITLE_CHARS = 200;
export const MAX_WIKI_CHARS = 20_000;
export const MAX_WIKI_PAGES = 1_000;
/** What one recall answers, at most. */
const MAX_RECALL = 20;
const RRF_K = 60;

export interface MemoryItemOutput {
  id: string;
  kind: 'memory';
  subject: string;
  content: string;
  session_id: string | null;
  created_at: string;
}

export interface WikiPageOutput {
  id: string;
  kind: 'wiki';
  title: string;
  content: string;
  scope: string;
  author: string;
  created_at: string;
  updated_at: string;
}

const iso = (value: Date | string) => (value instanceof Date ? value : new Date(value)).toISOString();
const memoryOut = (row: MemoryRow): MemoryItemOutput => ({
  id: row.id,
  kind: 'memory',
  subject: row.subject,
  content: row.content,
  session_id: row.session_id,
  created_at: iso(row.created_at),
});
export const wikiOut = (row: WikiRow): WikiPageOutput => ({
  id: row.id,
  kind: 'wiki',
  title: row.title,
  content: row.content,
  scope: row.scope,
  author: row.author,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export const memoryItemNotFound = (id: string) => notFound(`memory item ${id} not found`);
export const wikiPageNotFound = (id: string) => notFound(`wiki page ${id} not found`);

/** Whether a reader sees a wiki page: the rule of a document shared with a scope (decision 0039), privileged roles aside. */
export function canSeeWikiPage(reader: Pick<Principal['claims'], 'sub' | 'scope' | 'data_scope' | 'roles'>, page: Pick<WikiRow, 'scope'>): boolean {
  if (reader.data_scope !== undefined && !isWithinScope(reader.data_scope, page.scope) && !isWithinScope(page.scope, reader.data_scope)) return false;
  return isPrivileged(reader.roles) || isWithinScope(reader.sub, page.scope) || isWithinScope(page.scope, reader.scope);
}

export interface MemoryServiceOptions {
  logger: Logger;
  /** Embeds what is remembered and what is recalled, with the project's embedding model. */
  embed?: Embed;
}

export class MemoryService {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly options: MemoryServiceOptions,
  ) {}

  requireMemory(principal: Principal): void {
    if (!principal.permission.has('memory')) {
      throw permissionDenied("memory needs capability 'memory', which this token does not hold", { code: 'capability_denied' });
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Memory items

  /** What the caller (or, for a privileged caller, `subject`) remembers, newest first; with the wiki pages they see. */
  async list(principal: Principal, input: { subject?: string | undefined; limit: number; offset: number }): Promise<{ items: MemoryItemOutput[]; wiki: WikiPageOutput[]; has_more: boolean; next_offset: number | null }> {
    const subject = this.readableSubject(principal, input.subject);
    const rows = await this.db
      .selectFrom('memory_items')
      .selectAll()
      .where('tenant_id', '=', principal.tenantId)
      .where('subject', '=', subject)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(input.limit + 1)
      .offset(input.offset)
      .execute();
    const more = rows.length > input.limit;
    const wiki = input.offset === 0 ? await this.visibleWiki(principal, input.limit) : [];
    return { items: rows.slice(0, input.limit).map(memoryOut), wiki: wiki.map(wikiOut), has_more: more, next_offset: more ? input.offset + input.limit : null };
  }

  async remember(principal: Principal, content: string, sessionId: string | null): Promise<MemoryItemOutput> {
    const count = await this.db
      .selectFrom('memory_items')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('tenant_id', '=', principal.tenantId)
      .where('subject', '=', principal.claims.sub)
      .executeTakeFirstOrThrow();
    if (Number(count.n) >= MAX_MEMORY_ITEMS) {
      throw permissionDenied(`this subject already keeps ${MAX_MEMORY_ITEMS} memory items, the most there may be: forget some first`, { code: 'memory_full' });
    }
    const vector = await this.embedOne(principal, content);
    const row = await this.db
      .insertInto('memory_items')
      .values({
        id: randomUUID(),
        tenant_id: principal.tenantId,
        subject: principal.claims.sub,
        content,
        session_id: sessionId,
        space: vector?.space ?? null,
        embedding: vector ? `[${vector.values.join(',')}]` : null,
        created_at: new Date(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return memoryOut(row);
  }

  /** Forgets one of the caller's own items: another subject's, visible to a privileged caller, is 403; unseen is 404. */
  async forget(principal: Principal, id: string): Promise<{ id: string; deleted: true }> {
    const row = await this.db.selectFrom('memory_items').select(['id', 'subject']).where('id', '=', id).where('tenant_id', '=', principal.tenantId).executeTakeFirst();
    if (row && row.subject === principal.claims.sub) {
      await this.db.deleteFrom('memory_items').where('id', '=', id).execute();
      return { id, deleted: true };
    }
    if (row && this.mayRead(principal, row.subject)) {
      throw permissionDenied(`memory item ${id} belongs to another subject: this token may read it but not forget it`, { code: 'not_owner' });
    }
    const page = await this.db.selectFrom('wiki_pages').select('scope').where('id', '=', id).where('tenant_id', '=', principal.tenantId).executeTakeFirst();
    if (page && canSeeWikiPage(principal.claims, page)) {
      throw permissionDenied(`${id} is a page of the project's wiki: manage it on the control plane (/api/projects/:id/wiki)`, { code: 'not_owner' });
    }
    throw memoryItemNotFound(id);
  }

  /** The caller's memory items and the wiki pages they see that best match `query`, best first. */
  async recall(principal: Principal, query: string, k: number): Promise<{ memories: MemoryItemOutput[]; pages: WikiPageOutput[] }> {
    const limit = Math.min(MAX_RECALL, Math.max(1, k));
    const vector = await this.embedOne(principal, query);
    const literal = vector ? `[${vector.values.join(',')}]` : null;
    const candidates = limit * 4;
    const words = sql`websearch_to_tsquery('simple', ${query})`;
    const mine = this.db.selectFrom('memory_items').where('tenant_id', '=', principal.tenantId).where('subject', '=', principal.claims.sub);
    const byWords = await mine.selectAll().where(sql<boolean>`search @@ ${words}`).orderBy(sql`ts_rank(search, ${words})`, 'desc').limit(candidates).execute();
    const byMeaning =
      literal && vector
        ? await mine
            .selectAll()
            .where('space', '=', vector.space)
            .orderBy(sql`embedding <=> ${literal}::vector`)
            .limit(candidates)
            .execute()
        : [];
    const seen = this.visibleWikiPages(principal);
    const pagesByWords = await seen.where(sql<boolean>`search @@ ${words}`).orderBy(sql`ts_rank(search, ${words})`, 'desc').limit(candidates).execute();
    const pagesByMeaning = literal && vector ? await seen.where('space', '=', vector.space).orderBy(sql`embedding <=> ${literal}::vector`).limit(candidates).execute() : [];
    return {
      memories: fuse([byWords, byMeaning], limit).map(memoryOut),
      // The filter and the rule on one page are the same rule; the refusal wins should they ever differ.
      pages: fuse([pagesByWords, pagesByMeaning], limit)
        .filter((page) => canSeeWikiPage(principal.claims, page))
        .map(wikiOut),
    };
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The wiki

  /** Writes (or rewrites, by title) a page for the subtree of the caller's scope. */
  async writeWikiPage(principal: Principal, title: string, content: string): Promise<WikiPageOutput> {
    const scope = principal.claims.scope;
    const existing = await this.db.selectFrom('wiki_pages').select('id').where('tenant_id', '=', principal.tenantId).where('scope', '=', scope).where('title', '=', title).executeTakeFirst();
    if (!existing) {
      const count = await this.db.selectFrom('wiki_pages').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', principal.tenantId).executeTakeFirstOrThrow();
      if (Number(count.n) >= MAX_WIKI_PAGES) throw permissionDenied(`the project's wiki already has ${MAX_WIKI_PAGES} pages, the most there may be`, { code: 'wiki_full' });
    }
    const now = new Date();
    const vector = await this.embedOne(principal, `${title}\n\n${content}`);
    const written = { content, author: principal.claims.sub, updated_at: now, space: vector?.space ?? null, embedding: vector ? `[${vector.values.join(',')}]` : null };
    const row = await this.db
      .insertInto('wiki_pages')
      .values({ id: randomUUID(), tenant_id: principal.tenantId, scope, title, created_at: now, ...written })
      .onConflict((oc) => oc.columns(['tenant_id', 'scope', 'title']).doUpdateSet(written))
      .returningAll()
      .executeTakeFirstOrThrow();
    return wikiOut(row);
  }

  async listWiki(tenantId: string, page: { limit: number; offset: number }): Promise<{ pages: WikiPageOutput[]; has_more: boolean; next_offset: number | null }> {
    const rows = await this.db
      .selectFrom('wiki_pages')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit + 1)
      .offset(page.offset)
      .execute();
    const more = rows.length > page.limit;
    return { pages: rows.slice(0, page.limit).map(wikiOut), has_more: more, next_offset: more ? page.offset + page.limit : null };
  }

  async wikiPage(tenantId: string, id: string): Promise<WikiPageOutput> {
    const row = await this.db.selectFrom('wiki_pages').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (!row) throw wikiPageNotFound(id);
    return wikiOut(row);
  }

  async deleteWikiPage(tenantId: string, id: string): Promise<{ id: string; deleted: true }> {
    const gone = await this.db.deleteFrom('wiki_pages').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (Number(gone.numDeletedRows) === 0) throw wikiPageNotFound(id);
    return { id, deleted: true };
  }

  // ---------------------------------------------------------------------------------------------------------------

  private async visibleWiki(principal: Principal, limit: number): Promise<WikiRow[]> {
    const rows = await this.visibleWikiPages(principal).orderBy('updated_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    // The filter and the rule on one page are the same rule; the refusal wins should they ever differ.
    return rows.filter((row) => canSeeWikiPage(principal.claims, row));
  }

  /** The tenant's wiki pages the caller sees (`canSeeWikiPage` as SQL). */
  private visibleWikiPages(principal: Principal) {
    const { claims } = principal;
    let query = this.db.selectFrom('wiki_pages').selectAll().where('tenant_id', '=', principal.tenantId);
    if (claims.data_scope !== undefined) {
      const dataScope = sql.val(claims.data_scope);
      query = query.where(sql<boolean>`(${within(dataScope, sql.ref('scope'))} or ${within(sql.ref('scope'), dataScope)})`);
    }
    if (!isPrivileged(claims.roles)) query = query.where(sql<boolean>`(${within(sql.val(claims.sub), sql.ref('scope'))} or ${within(sql.ref('scope'), sql.val(claims.scope))})`);
    return query;
  }

  /** Whose memory the caller may read: their own, or (privileged) any subject within their data scope. */
  private readableSubject(principal: Principal, subject: string | undefined): string {
    if (subject === undefined || subject === principal.claims.sub) return principal.claims.sub;
    if (!this.mayRead(principal, subject)) {
      throw permissionDenied("reading another subject's memory needs a privileged role (admin, owner or service)", { code: 'not_privileged' });
    }
    return subject;
  }

  private mayRead(principal: Principal, subject: string): boolean {
    const { claims } = principal;
    return isPrivileged(claims.roles) && (claims.data_scope === undefined || isWithinScope(subject, claims.data_scope));
  }

  /** The text's vector in the project's embedding space; none without a model, or when the provider fails (words still match). */
  private async embedOne(principal: Principal, text: string): Promise<{ space: string; values: number[] } | undefined> {
    const target = embeddingFor(principal.configuration.document);
    if (!target || !this.options.embed) return undefined;
    try {
      const [values] = await this.options.embed(target, [text]);
      // Memory stays beside its rows whatever index holds the documents' vectors: its space is the model's alone.
      return values ? { space: target.modelSpace, values } : undefined;
    } catch (error) {
      this.options.logger.warn({ err: error, tenant_id: principal.tenantId }, 'memory embedding failed; searching by words only');
      return undefined;
    }
  }
}

/** Reciprocal rank fusion of ranked lists of rows, by id. */
function fuse<T extends { id: string }>(lists: T[][], limit: number): T[] {
  const scores = new Map<string, { row: T; score: number }>();
  for (const list of lists) {
    list.forEach((row, rank) => {
      const entry = scores.get(row.id) ?? { row, score: 0 };
      entry.score += 1 / (RRF_K + rank + 1);
      scores.set(row.id, entry);
    });
  }
  return [...scores.values()].sort((a, b) => b.score - a.score).slice(0, limit).map((entry) => entry.row);
}
