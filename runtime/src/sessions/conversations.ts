// The write side of conversations, shared by the turn engine and the session routes: creating a session,
// appending messages (each append also notifies the session's event stream on every replica), and the rollup a
// turn leaves on its session. Reads and visibility live beside it (service.ts, access.ts).
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { PubSub } from '@agentplane/lib/events/port';
import type { RuntimeSchema, SessionPending } from '../store/schema.js';
import { tenantEventPrefix } from '../tenants/keys.js';

export type SessionRow = Selectable<RuntimeSchema['sessions']>;
export type MessageRow = Selectable<RuntimeSchema['messages']>;

/** The rollup statuses a session can show (filterable with `status`). */
export const SESSION_STATUSES = ['idle', 'running', 'requires_action', 'completed', 'failed', 'cancelled'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

export interface NewMessage {
  role: 'user' | 'assistant' | 'tool';
  /**
   * The subject that wrote it: the person who sent a user message or answer, the subject whose turn wrote an
   * assistant or tool message. Omitted: the conversation's owner.
   */
  subject?: string;
  content: string;
  runId?: string | null;
  toolCalls?: { id: string; name: string; arguments: string }[] | null;
  toolCallId?: string | null;
  name?: string | null;
  model?: string | null;
  metadata?: Record<string, unknown> | null;
}

/**
 * The pub/sub channel that says "this session changed": messages were appended (payload `{ seq }`) or it was deleted
 * (`{ deleted: true }`). Followers take any message as a cue to re-read.
 */
export const sessionMessagesChannel = (tenantId: string, sessionId: string) => `${tenantEventPrefix(tenantId)}session:${sessionId}:messages`;

type Db = Kysely<RuntimeSchema> | Transaction<RuntimeSchema>;

export class Conversations {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly pubsub: PubSub,
  ) {}

  async createSession(
    db: Db,
    input: { id?: string; tenantId: string; owner: string; title?: string; model?: string | null; parentSessionId?: string | null },
  ): Promise<SessionRow> {
    return db
      .insertInto('sessions')
      .values({
        id: input.id ?? randomUUID(),
        tenant_id: input.tenantId,
        owner: input.owner,
        title: input.title ?? '',
        model: input.model ?? null,
        parent_session_id: input.parentSessionId ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /**
   * Appends messages in order and returns them. Inside a transaction (`db`) the caller must call `notify` after
   * commit; outside one the notice is sent here.
   */
  async append(tenantId: string, sessionId: string, messages: NewMessage[], db: Db = this.db, options: { notify?: boolean } = {}): Promise<MessageRow[]> {
    if (messages.length === 0) return [];
    const rows: MessageRow[] = [];
    // One insert per message keeps `seq` in the order given (a multi-row insert does too in practice, but not by contract).
    for (const message of messages) {
      rows.push(
        await db
          .insertInto('messages')
          .values({
            id: randomUUID(),
            tenant_id: tenantId,
            session_id: sessionId,
            run_id: message.runId ?? null,
            subject: message.subject ?? sql<string>`(select owner from sessions where id = ${sessionId})`,
            role: message.role,
            content: message.content,
            tool_calls: message.toolCalls ? JSON.stringify(message.toolCalls) : null,
            tool_call_id: message.toolCallId ?? null,
            name: message.name ?? null,
            model: message.model ?? null,
            metadata: message.metadata ? JSON.stringify(message.metadata) : null,
          })
          .returningAll()
          .executeTakeFirstOrThrow(),
      );
    }
    await db.updateTable('sessions').set({ updated_at: new Date() }).where('id', '=', sessionId).execute();
    if (db === this.db && options.notify !== false) await this.notify(tenantId, sessionId, rows);
    return rows;
  }

  /**
   * Turns a draft into the final message: its content, calls and metadata, and a new `seq`, so a follower of the
   * event stream (which skips drafts) receives it now, after anything it has already seen.
   */
  async settleDraft(tenantId: string, sessionId: string, draftId: string, message: NewMessage): Promise<MessageRow> {
    const row = await this.db
      .updateTable('messages')
      .set({
        seq: sql`default`,
        content: message.content,
        tool_calls: message.toolCalls ? JSON.stringify(message.toolCalls) : null,
        metadata: message.metadata ? JSON.stringify(message.metadata) : null,
      })
      .where('id', '=', draftId)
      .returningAll()
      .executeTakeFirstOrThrow();
    await this.db.updateTable('sessions').set({ updated_at: new Date() }).where('id', '=', sessionId).execute();
    await this.notify(tenantId, sessionId, [row]);
    return row;
  }

  /** Settles the drafts a run left behind (its process died or was cut off), keeping their text, marked incomplete. */
  async settleDraftsOf(tenantId: string, sessionId: string, runId: string): Promise<void> {
    const drafts = await this.db
      .selectFrom('messages')
      .select(['id', 'content'])
      .where('run_id', '=', runId)
      .where(sql<boolean>`coalesce((metadata->>'draft')::boolean, false)`)
      .orderBy('seq')
      .execute();
    for (const draft of drafts) {
      await this.settleDraft(tenantId, sessionId, draft.id, { role: 'assistant', content: draft.content, metadata: { incomplete: true } });
    }
  }

  /** Tells followers of the session's event stream that messages arrived. Best effort: followers also re-read periodically. */
  async notify(tenantId: string, sessionId: string, rows: MessageRow[]): Promise<void> {
    const last = rows.at(-1);
    if (!last) return;
    await this.pubsub.publish(sessionMessagesChannel(tenantId, sessionId), { seq: last.seq }).catch(() => undefined);
  }

  /** A session by id, whatever its tenant (callers check the tenant and visibility); undefined when none. */
  async session(sessionId: string): Promise<SessionRow | undefined> {
    return this.db.selectFrom('sessions').selectAll().where('id', '=', sessionId).executeTakeFirst();
  }

  /** Every message of a session, oldest first (drafts included): what a turn's prompt is built from. */
  async messagesOf(sessionId: string, db: Db = this.db): Promise<MessageRow[]> {
    return db.selectFrom('messages').selectAll().where('session_id', '=', sessionId).orderBy('seq').execute();
  }

  /** The rollup of a session whose run was lost (its process died): failed, so it takes a new turn. */
  async markFailed(sessionId: string): Promise<void> {
    await this.setRollup(this.db, sessionId, { status: 'failed' });
  }

  /** Sets the title and returns the session; undefined when it no longer exists. */
  async setTitle(db: Db, sessionId: string, title: string): Promise<SessionRow | undefined> {
    return db.updateTable('sessions').set({ title, updated_at: new Date() }).where('id', '=', sessionId).returningAll().executeTakeFirst();
  }

  /** The rollup the latest turn leaves on its session, and the pause it waits on (null clears it). */
  async setRollup(
    db: Db,
    sessionId: string,
    rollup: { status: SessionStatus; model?: string | null; pending?: SessionPending | null },
  ): Promise<void> {
    await db
      .updateTable('sessions')
      .set({
        status: rollup.status,
        ...(rollup.model === undefined ? {} : { model: rollup.model }),
        ...(rollup.pending === undefined ? {} : { pending: rollup.pending === null ? null : JSON.stringify(rollup.pending) }),
        updated_at: new Date(),
      })
      .where('id', '=', sessionId)
      .execute();
  }
}
