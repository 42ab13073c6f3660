// The read side of conversations and what a person does to their own: list, history, models, fork, delete,
// feedback, and following a conversation's new messages. Every read goes through the one visibility rule
// (access.ts), so a conversation the caller may not see answers exactly like one that does not exist.
import { sql, type Kysely } from 'kysely';
import { pageOf } from '@agentplane/lib/db/paging';
import { AppError, invalidArgument, notFound, permissionDenied, unauthenticated } from '@agentplane/lib/errors';
import { ChangeNotice, type PubSub } from '@agentplane/lib/events/port';
import { describeErrorFrame } from '@agentplane/lib/http/errors';
import type { Logger } from '@agentplane/lib/logging';
import { isPrivileged } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import type { RuntimeSchema } from '../store/schema.js';
import { ownsConversation, visibleSessions } from './access.js';
import { sessionMessagesChannel, type Conversations, type MessageRow, type SessionRow, type SessionStatus } from './conversations.js';
import {
  DEFAULT_MESSAGE_PAGE,
  type FeedbackInput,
  type FeedbackOutput,
  type FeedbackSummaryOutput,
  type MessageOutput,
  type MessagePageInput,
  type SessionEventsError,
  type SessionListInput,
  type SessionOutput,
  type SessionPageOutput,
} from './schemas.js';

/** How often a followed conversation is re-read without a notice, so a lost notice never stalls a stream. */
export const DEFAULT_EVENTS_POLL_MS = 5_000;
/** At most this many messages per read of the events stream; a full page is followed by the next at once. */
const EVENTS_PAGE = 500;

export interface SessionServiceOptions {
  logger?: Logger;
  /** Fallback re-read interval of the events stream (default 5 s). */
  eventsPollMs?: number;
}

/** `seq` as the driver hands it back (a number with both drivers; typed as text because it is a bigint). */
type Seq = MessageRow['seq'];

interface SequencedMessage {
  seq: Seq;
  message: MessageOutput;
}

// One wording for "does not exist" and "not yours" (STYLE.md 4).
export const sessionNotFound = (sessionId: string) => notFound(`session ${sessionId} not found`);
/** A conversation the caller sees but does not own (SPEC.md Errors: 403, "can see the thing but may not do this to it"). */
export const sessionNotOwned = (sessionId: string) =>
  permissionDenied(`session ${sessionId} belongs to another subject: this token may read it but not change it`, { code: 'not_owner' });
const messageNotFound = (sessionId: string, messageId: string) => notFound(`message ${messageId} not found in session ${sessionId}`);

const isForeignKeyViolation = (error: unknown) => (error as { code?: string } | null)?.code === '23503';

export class SessionService {
  private readonly eventsPollMs: number;

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly pubsub: PubSub,
    private readonly conversations: Conversations,
    private readonly options: SessionServiceOptions = {},
  ) {
    this.eventsPollMs = options.eventsPollMs ?? DEFAULT_EVENTS_POLL_MS;
  }

  private readonly deletedListeners: Array<(tenantId: string, owner: string, sessionIds: string[]) => Promise<unknown>> = [];

  /** Work to do once conversations are deleted (their browser contexts closed); best effort, after the deletion. */
  whenDeleted(listener: (tenantId: string, owner: string, sessionIds: string[]) => Promise<unknown>): void {
    this.deletedListeners.push(listener);
  }

  /** One page of the conversations the caller sees, newest `updated_at` first, ties broken by id. */
  async list(principal: Principal, input: SessionListInput): Promise<SessionPageOutput> {
    requireChat(principal);
    let query = this.db.selectFrom('sessions').selectAll().where(visibleSessions(principal));
    if (!input.include_subagents) query = query.where('parent_session_id', 'is', null);
    if (input.user_ref !== undefined) query = query.where('owner', '=', input.user_ref);
    if (input.model !== undefined) query = query.where('model', '=', input.model);
    if (input.status !== undefined) query = query.where('status', '=', input.status);
    if (input.since !== undefined) query = query.where('updated_at', '>=', new Date(input.since));
    if (input.until !== undefined) query = query.where('updated_at', '<', new Date(input.until));
    if (input.q !== undefined && input.q !== '') {
      const q = input.q;
      // strpos and starts_with, not LIKE: no character of the search text acts as a wildcard.
      query = query.where(({ or }) =>
        or([
          sql<boolean>`starts_with(sessions.id::text, lower(${q}))`,
          sql<boolean>`strpos(lower(sessions.title), lower(${q})) > 0`,
          sql<boolean>`strpos(lower(sessions.owner), lower(${q})) > 0`,
        ]),
      );
    }
    const rows = await query
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .limit(input.limit + 1)
      .offset(input.offset)
      .execute();
    const page = pageOf(rows, input);
    return { sessions: page.rows.map(sessionOut), has_more: page.has_more, next_offset: page.next_offset };
  }

  /** Models the caller's visible conversations ran on: their rollup model and every assistant message's, sorted. */
  async models(principal: Principal): Promise<string[]> {
    requireChat(principal);
    const [fromSessions, fromMessages] = await Promise.all([
      this.db.selectFrom('sessions').select('model').distinct().where(visibleSessions(principal)).where('model', 'is not', null).execute(),
      this.db
        .selectFrom('messages')
        .select('model')
        .distinct()
        .where('tenant_id', '=', principal.tenantId)
        .where('role', '=', 'assistant')
        .where('model', 'is not', null)
        .where('session_id', 'in', (qb) => qb.selectFrom('sessions').select('id').where(visibleSessions(principal)))
        .execute(),
    ]);
    const models = new Set<string>();
    for (const { model } of [...fromSessions, ...fromMessages]) if (model !== null) models.add(model);
    return [...models].sort(byCodePoint);
  }

  /**
   * Messages of a conversation, oldest first, with the caller's own vote on each. Without a page the whole
   * conversation; with `limit` alone its newest `limit`; with `before` or `after` (a message of it) the `limit`
   * messages right before or after that one; with both, the first `limit` strictly between them
   * (docs/decisions/0026).
   */
  async messages(principal: Principal, sessionId: string, page: MessagePageInput = {}): Promise<MessageOutput[]> {
    requireChat(principal);
    await this.visibleSession(principal, sessionId);
    if (page.before === undefined && page.after === undefined && page.limit === undefined) {
      return (await this.readMessages(principal, sessionId, null)).map(({ message }) => message);
    }
    const limit = page.limit ?? DEFAULT_MESSAGE_PAGE;
    let query = this.messagesQuery(principal, sessionId);
    if (page.after !== undefined) query = query.where('messages.seq', '>', await this.seqOf(principal, sessionId, page.after));
    if (page.before !== undefined) query = query.where('messages.seq', '<', await this.seqOf(principal, sessionId, page.before));
    // `after` pages forwards from the cursor; `before` and a bare `limit` page backwards from the newest end.
    const forwards = page.after !== undefined;
    const rows = await query
      .clearOrderBy()
      .orderBy('messages.seq', forwards ? 'asc' : 'desc')
      .limit(limit)
      .execute();
    if (!forwards) rows.reverse();
    return rows.map(withFeedback);
  }

  /** Sets the title of a conversation the caller owns (docs/decisions/0026). */
  async rename(principal: Principal, sessionId: string, title: string): Promise<SessionOutput> {
    await this.authorizeChange(principal, sessionId);
    const row = await this.conversations.setTitle(this.db, sessionId, title);
    if (!row) throw sessionNotFound(sessionId);
    return sessionOut(row);
  }

  /**
   * A new conversation of the caller's with a copy of every message (new ids, same order, no run), the same title
   * marked as a fork and the same model. The pause the original waits on is not copied: the fork starts idle.
   */
  async fork(principal: Principal, sessionId: string): Promise<SessionOutput> {
    requireChat(principal);
    const original = await this.visibleSession(principal, sessionId);
    const { tenantId } = principal;
    const forked = await this.db.transaction().execute(async (trx) => {
      const messages = await trx
        .selectFrom('messages')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('session_id', '=', sessionId)
        .orderBy('seq')
        .execute();
      const session = await this.conversations.createSession(trx, {
        tenantId,
        owner: principal.claims.sub,
        title: original.title === '' ? '' : `${original.title} (fork)`,
        model: original.model,
      });
      await this.conversations.append(
        tenantId,
        session.id,
        messages.map((message) => ({
          role: message.role as 'user' | 'assistant' | 'tool',
          content: message.content,
          runId: null,
          // A copy keeps who wrote the original.
          subject: message.subject,
          toolCalls: message.tool_calls,
          toolCallId: message.tool_call_id,
          name: message.name,
          model: message.model,
          metadata: message.metadata,
        })),
        trx,
      );
      return trx.selectFrom('sessions').selectAll().where('id', '=', session.id).executeTakeFirstOrThrow();
    });
    return sessionOut(forked);
  }

  /**
   * Deletes a conversation with its messages, runs, steers and votes, and the working conversations of its
   * subagents (at any depth), in one transaction. Refused while a turn of any of them holds a live lease. Usage
   * records stay: they are accounting.
   */
  async delete(principal: Principal, sessionId: string): Promise<{ id: string; deleted: true }> {
    requireChat(principal);
    const { tenantId } = principal;
    let owner = principal.claims.sub;
    const deleted = await this.db.transaction().execute(async (trx) => {
      // The row lock orders this against a turn starting (its run insert takes a key-share lock on the session), so
      // a turn either started before and is seen below, or fails to start on the deleted session.
      const session = await trx
        .selectFrom('sessions')
        .select(['id', 'owner'])
        .where('id', '=', sessionId)
        .where(visibleSessions(principal))
        .forUpdate()
        .executeTakeFirst();
      if (!session) throw sessionNotFound(sessionId);
      if (!ownsConversation(principal, session.owner)) throw sessionNotOwned(sessionId);
      owner = session.owner;
      const ids = [sessionId];
      for (let frontier = ids; frontier.length > 0; ) {
        const children = await trx
          .selectFrom('sessions')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('parent_session_id', 'in', frontier)
          .forUpdate()
          .execute();
        frontier = children.map(({ id }) => id).filter((id) => !ids.includes(id));
        ids.push(...frontier);
      }
      const running = await trx
        .selectFrom('runs')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .where('session_id', 'in', ids)
        .where('status', '=', 'running')
        .where('lease_expires_at', '>', sql<Date>`now()`)
        .executeTakeFirst();
      if (running) {
        throw new AppError('conflict', 'a turn is running in this session; cancel it first or wait', { code: 'turn_running' });
      }
      await trx
        .deleteFrom('message_feedback')
        .where('tenant_id', '=', tenantId)
        .where('message_id', 'in', (qb) => qb.selectFrom('messages').select('id').where('session_id', 'in', ids))
        .execute();
      await trx
        .deleteFrom('run_steers')
        .where('tenant_id', '=', tenantId)
        .where('run_id', 'in', (qb) => qb.selectFrom('runs').select('id').where('session_id', 'in', ids))
        .execute();
      await trx.deleteFrom('messages').where('tenant_id', '=', tenantId).where('session_id', 'in', ids).execute();
      await trx.deleteFrom('runs').where('tenant_id', '=', tenantId).where('session_id', 'in', ids).execute();
      await trx.deleteFrom('sessions').where('tenant_id', '=', tenantId).where('id', 'in', ids).execute();
      return ids;
    });
    // Followers of the deleted conversations re-check at once and end their streams, instead of at the next poll.
    await Promise.all(deleted.map((id) => this.pubsub.publish(sessionMessagesChannel(tenantId, id), { deleted: true }).catch(() => undefined)));
    await Promise.all(
      this.deletedListeners.map((listener) => listener(tenantId, owner, deleted).catch((error: unknown) => this.options.logger?.warn({ err: error }, 'work after a conversation was deleted failed'))),
    );
    return { id: sessionId, deleted: true };
  }

  /** Records (or replaces) the caller's vote on an assistant message; the vote keeps the message's model. */
  async putFeedback(principal: Principal, sessionId: string, messageId: string, input: FeedbackInput): Promise<FeedbackOutput> {
    requireChat(principal);
    const message = await this.messageOf(principal, sessionId, messageId);
    if (message.role !== 'assistant') throw invalidArgument('feedback is only taken on assistant messages');
    const vote = { rating: input.rating, comment: input.comment ?? null, model: message.model, updated_at: new Date() };
    try {
      const row = await this.db
        .insertInto('message_feedback')
        .values({ tenant_id: principal.tenantId, message_id: messageId, subject: principal.claims.sub, ...vote })
        .onConflict((oc) => oc.columns(['message_id', 'subject']).doUpdateSet(vote))
        .returningAll()
        .executeTakeFirstOrThrow();
      return {
        message_id: row.message_id,
        rating: row.rating as FeedbackOutput['rating'],
        comment: row.comment,
        model: row.model,
        updated_at: iso(row.updated_at),
      };
    } catch (error) {
      // The conversation was deleted between the read and the write.
      if (isForeignKeyViolation(error)) throw messageNotFound(sessionId, messageId);
      throw error;
    }
  }

  async deleteFeedback(principal: Principal, sessionId: string, messageId: string): Promise<{ message_id: string; deleted: true }> {
    requireChat(principal);
    await this.messageOf(principal, sessionId, messageId);
    const result = await this.db
      .deleteFrom('message_feedback')
      .where('tenant_id', '=', principal.tenantId)
      .where('message_id', '=', messageId)
      .where('subject', '=', principal.claims.sub)
      .executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw notFound(`you have no feedback on message ${messageId}`);
    return { message_id: messageId, deleted: true };
  }

  /** Votes per model over the tenant (within the token's data scope, if any): for privileged tokens only. */
  async feedbackSummary(principal: Principal): Promise<FeedbackSummaryOutput> {
    requireChat(principal);
    if (!isPrivileged(principal.claims.roles)) {
      throw permissionDenied('feedback totals need a privileged token (role admin, owner or service)');
    }
    const rows = await this.db
      .selectFrom('message_feedback')
      .select(({ fn }) => [
        'message_feedback.model',
        fn.countAll<number>().filterWhere('rating', '=', 'up').as('up'),
        fn.countAll<number>().filterWhere('rating', '=', 'down').as('down'),
        fn.countAll<number>().as('total'),
      ])
      .where('message_feedback.tenant_id', '=', principal.tenantId)
      .where('message_feedback.message_id', 'in', (qb) =>
        qb
          .selectFrom('messages')
          .select('messages.id')
          .where('messages.session_id', 'in', (inner) => inner.selectFrom('sessions').select('sessions.id').where(visibleSessions(principal))),
      )
      .groupBy('message_feedback.model')
      .execute();
    const models = rows.map((row) => ({ model: row.model, up: Number(row.up), down: Number(row.down), total: Number(row.total) }));
    models.sort((a, b) => (a.model === null ? 1 : b.model === null ? -1 : byCodePoint(a.model, b.model)));
    return { models };
  }

  /**
   * Starts following a conversation: checks what would be a 404 before any byte of the stream (the session, and
   * `after` belonging to it), subscribes to its notices, and fixes where the stream starts. Without `after` it
   * starts at the newest message now, so nothing appended once this resolves can be missed.
   */
  async openEvents(principal: Principal, sessionId: string, after: string | undefined): Promise<SessionEvents> {
    requireChat(principal);
    await this.visibleSession(principal, sessionId);
    let start: Seq | null = null;
    if (after !== undefined) start = await this.seqOf(principal, sessionId, after);
    const wake = new ChangeNotice();
    const unsubscribe = await this.pubsub.subscribe(sessionMessagesChannel(principal.tenantId, sessionId), wake.fire);
    try {
      if (start === null) {
        const newest = await this.db
          .selectFrom('messages')
          .select('seq')
          .where('tenant_id', '=', principal.tenantId)
          .where('session_id', '=', sessionId)
          .orderBy('seq', 'desc')
          .limit(1)
          .executeTakeFirst();
        start = newest?.seq ?? null;
      }
    } catch (error) {
      await unsubscribe().catch(() => undefined);
      throw error;
    }
    return new SessionEvents(this, principal, sessionId, start, wake, unsubscribe, this.eventsPollMs, this.options.logger);
  }

  /**
   * What every change to a conversation checks first, in the security order: capability `chat`, then the session
   * (not visible: the 404 an unknown id gets), then ownership (visible but another subject's: 403).
   */
  async authorizeChange(principal: Principal, sessionId: string): Promise<SessionRow> {
    requireChat(principal);
    return this.ownedSession(principal, sessionId);
  }

  /** What a read of one conversation checks first: capability `chat`, then the session (not visible: 404). */
  async authorizeRead(principal: Principal, sessionId: string): Promise<SessionRow> {
    requireChat(principal);
    return this.visibleSession(principal, sessionId);
  }

  /** The session if the caller owns it; 404 when it may not see it, 403 when it sees but does not own it. */
  async ownedSession(principal: Principal, sessionId: string): Promise<SessionRow> {
    const row = await this.visibleSession(principal, sessionId);
    if (!ownsConversation(principal, row.owner)) throw sessionNotOwned(sessionId);
    return row;
  }

  /** The session if the caller may see it; otherwise the 404 an unknown id gets. */
  async visibleSession(principal: Principal, sessionId: string): Promise<SessionRow> {
    const row = await this.db
      .selectFrom('sessions')
      .selectAll()
      .where('id', '=', sessionId)
      .where(visibleSessions(principal))
      .executeTakeFirst();
    if (!row) throw sessionNotFound(sessionId);
    return row;
  }

  /**
   * Messages of a conversation after `afterSeq` (all when null), oldest first, each with the caller's own vote.
   * The visibility rule is part of the read itself, so no message is answered from a conversation the caller stopped
   * seeing a moment before; history and the events stream both read here, so they cannot differ.
   */
  async readMessages(principal: Principal, sessionId: string, afterSeq: Seq | null, limit?: number, options: { settledOnly?: boolean } = {}): Promise<SequencedMessage[]> {
    let query = this.messagesQuery(principal, sessionId);
    if (afterSeq !== null) query = query.where('messages.seq', '>', afterSeq);
    // A draft is rewritten as its turn goes; followers get the message once it settles (with a newer seq).
    if (options.settledOnly) query = query.where(sql<boolean>`not coalesce((messages.metadata->>'draft')::boolean, false)`);
    if (limit !== undefined) query = query.limit(limit);
    const rows = await query.execute();
    return rows.map((row) => ({ seq: row.seq, message: withFeedback(row) }));
  }

  /** Messages of a visible conversation with the caller's own vote, oldest first; the visibility rule is part of the read. */
  private messagesQuery(principal: Principal, sessionId: string) {
    return this.db
      .selectFrom('messages')
      .leftJoin('message_feedback', (join) =>
        join.onRef('message_feedback.message_id', '=', 'messages.id').on('message_feedback.subject', '=', principal.claims.sub),
      )
      .selectAll('messages')
      .select(['message_feedback.rating as feedback_rating', 'message_feedback.comment as feedback_comment'])
      .where('messages.tenant_id', '=', principal.tenantId)
      .where('messages.session_id', 'in', (qb) =>
        qb.selectFrom('sessions').select('sessions.id').where('sessions.id', '=', sessionId).where(visibleSessions(principal)),
      )
      .orderBy('messages.seq');
  }

  /** The position of a message of the conversation (a page cursor); 404 when it is not one of its messages. */
  private async seqOf(principal: Principal, sessionId: string, messageId: string): Promise<Seq> {
    const row = await this.db
      .selectFrom('messages')
      .select('seq')
      .where('tenant_id', '=', principal.tenantId)
      .where('session_id', '=', sessionId)
      .where('id', '=', messageId)
      .executeTakeFirst();
    if (!row) throw messageNotFound(sessionId, messageId);
    return row.seq;
  }

  /** A message of a conversation the caller owns; 404 for an unknown conversation or a message of another one. */
  private async messageOf(principal: Principal, sessionId: string, messageId: string) {
    await this.ownedSession(principal, sessionId);
    const message = await this.db
      .selectFrom('messages')
      .select(['id', 'role', 'model'])
      .where('tenant_id', '=', principal.tenantId)
      .where('session_id', '=', sessionId)
      .where('id', '=', messageId)
      .executeTakeFirst();
    if (!message) throw messageNotFound(sessionId, messageId);
    return message;
  }
}

/**
 * One follower of a conversation's new messages. Each round reads what came after the last message yielded, through
 * the visibility rule, then re-checks that the caller still sees the conversation (a deleted one ends the stream with
 * `not_found`). A round runs on every notice and at least every `pollMs`. The stream also ends when the caller's
 * token expires.
 */
export class SessionEvents {
  private closed = false;

  constructor(
    private readonly service: SessionService,
    private readonly principal: Principal,
    readonly sessionId: string,
    private last: Seq | null,
    private readonly wake: ChangeNotice,
    private readonly unsubscribe: () => Promise<void>,
    private readonly pollMs: number,
    private readonly logger: Logger | undefined,
  ) {}

  async *messages(signal: AbortSignal): AsyncGenerator<MessageOutput> {
    const expiresAt = this.principal.claims.exp * 1000;
    while (!signal.aborted && !this.closed) {
      this.wake.clear();
      if (Date.now() >= expiresAt) throw unauthenticated('token expired; reconnect with a fresh token', { code: 'invalid_token' });
      // The read only answers messages of a conversation the caller still sees; the check after it tells "nothing
      // new" from "gone" (deleted, or moved out of the caller's sight) and ends the stream with the 404.
      const page = await this.service.readMessages(this.principal, this.sessionId, this.last, EVENTS_PAGE, { settledOnly: true });
      for (const { seq, message } of page) {
        if (signal.aborted) return;
        this.last = seq;
        yield message;
      }
      if (page.length === EVENTS_PAGE) continue;
      await this.service.visibleSession(this.principal, this.sessionId);
      await this.wake.wait(signal, Math.max(0, Math.min(this.pollMs, expiresAt - Date.now())));
    }
  }

  /** The `error` frame that ends the stream: the status, code and message a request would have answered with. */
  errorFrame(error: unknown): SessionEventsError {
    const frame = describeErrorFrame(error);
    if (frame.status >= 500) this.logger?.error({ err: error, session_id: this.sessionId }, 'session events stream failed');
    return { ...frame, session_id: this.sessionId };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Ending the stream must not wait on (or fail because of) an event backend that went away.
    void this.unsubscribe().catch(() => undefined);
  }
}

function requireChat(principal: Principal): void {
  if (!principal.permission.has('chat')) {
    throw permissionDenied("conversations need capability 'chat', which this token does not hold", { code: 'capability_denied' });
  }
}

const withFeedback = (row: MessageRow & { feedback_rating: string | null; feedback_comment: string | null }) =>
  messageOut(row, row.feedback_rating === null ? null : { rating: row.feedback_rating, comment: row.feedback_comment });

const iso = (value: Date | string) => (value instanceof Date ? value : new Date(value)).toISOString();

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function sessionOut(row: SessionRow): SessionOutput {
  return {
    id: row.id,
    title: row.title,
    user_ref: row.owner,
    model: row.model,
    status: row.status as SessionStatus,
    parent_session_id: row.parent_session_id,
    requires_action: row.pending !== null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function messageOut(row: MessageRow, feedback: { rating: string; comment: string | null } | null): MessageOutput {
  return {
    id: row.id,
    session_id: row.session_id,
    run_id: row.run_id,
    subject: row.subject,
    role: row.role as MessageOutput['role'],
    content: row.content,
    tool_calls: row.tool_calls?.map((call) => ({ id: call.id, name: call.name, arguments: argumentsOf(call.arguments) })) ?? null,
    tool_call_id: row.tool_call_id,
    name: row.name,
    model: row.model,
    created_at: iso(row.created_at),
    feedback: feedback === null ? null : { rating: feedback.rating as 'up' | 'down', comment: feedback.comment },
  };
}

/** Tool-call arguments as the object the model meant when it wrote a JSON object; its text otherwise. */
export function argumentsOf(text: unknown): Record<string, unknown> | string {
  if (typeof text !== 'string') return typeof text === 'object' && text !== null && !Array.isArray(text) ? (text as Record<string, unknown>) : (JSON.stringify(text) ?? '');
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // Not JSON: the client sees what the model wrote.
  }
  return text;
}
