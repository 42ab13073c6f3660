// The wire shapes of the session routes (docs/decisions/0019): what SPEC.md leaves "not shown" is decided here,
// once, and the same schemas validate requests and feed /openapi.json.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { SESSION_STATUSES } from './conversations.js';

/** Largest page `GET /chat/sessions` answers; a larger `limit` is a 422, not silently clamped. */
export const MAX_SESSION_PAGE = 500;
export const DEFAULT_SESSION_PAGE = 100;
export const MAX_FEEDBACK_COMMENT = 2000;
/** Largest page of `GET /chat/sessions/{session_id}/messages`; a larger `limit` is a 422. */
export const MAX_MESSAGE_PAGE = 500;
/** Page size of the messages route when a cursor is sent without `limit`. */
export const DEFAULT_MESSAGE_PAGE = 100;
export const MAX_TITLE_LENGTH = 200;

// Years 1 to 9999: what a timestamp column and a JavaScript Date both hold without surprise (year 0 is neither).
const isoDateTime = z.iso
  .datetime({ offset: true })
  .refine((value) => {
    const year = new Date(value).getUTCFullYear();
    return year >= 1 && year <= 9999;
  }, 'must be an instant from the year 1 to 9999');

export const SessionListQuery = z.object({
  user_ref: z.string().min(1).max(512).optional().meta({ description: 'Only conversations owned by exactly this subject' }),
  q: z
    .string()
    .max(512)
    .optional()
    .meta({
      description:
        'Matches a conversation whose id starts with it (a whole UUID is an exact match), whose title contains it, or whose owner contains it; case-insensitive. Empty: no filter',
    }),
  model: z.string().min(1).max(256).optional().meta({ description: 'Only conversations whose rollup model is exactly this' }),
  status: z.enum(SESSION_STATUSES).optional().meta({ description: 'Only conversations whose rollup status is this' }),
  since: isoDateTime.optional().meta({ description: 'Only conversations updated at or after this instant' }),
  until: isoDateTime.optional().meta({ description: 'Only conversations updated before this instant' }),
  include_subagents: z
    .enum(['true', 'false'])
    .default('false')
    .meta({ description: 'Also list subagents\' working conversations (rows with a parent_session_id)' })
    .transform((value) => value === 'true'),
  limit: queryNumber((n) => n.int().min(1).max(MAX_SESSION_PAGE)).default(DEFAULT_SESSION_PAGE).meta({ description: `Page size, at most ${MAX_SESSION_PAGE}` }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0).meta({ description: 'How many rows to skip: the previous page\'s next_offset' }),
});
export type SessionListInput = z.infer<typeof SessionListQuery>;

export const SessionIdParams = z.object({ session_id: z.uuid({ error: 'session_id must be a UUID' }) });
export const SessionPathParams = z.object({ id: z.uuid({ error: 'id must be a UUID' }) });
export const FeedbackParams = z.object({
  id: z.uuid({ error: 'id must be a UUID' }),
  message_id: z.uuid({ error: 'message_id must be a UUID' }),
});

export const MessagePageQuery = z
  .object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(MAX_MESSAGE_PAGE)
      .optional()
      .meta({ description: `Page size, at most ${MAX_MESSAGE_PAGE}. Alone: the newest \`limit\` messages. With a cursor it defaults to ${DEFAULT_MESSAGE_PAGE}` }),
    before: z
      .uuid({ error: 'before must be a message id (a UUID)' })
      .optional()
      .meta({ description: 'The messages right before this one (a message of the conversation): the previous page is `before` the first message of this one' }),
    after: z
      .uuid({ error: 'after must be a message id (a UUID)' })
      .optional()
      .meta({ description: 'The messages right after this one (a message of the conversation): the next page is `after` the last message of this one' }),
  });
export type MessagePageInput = z.infer<typeof MessagePageQuery>;

export const SessionUpdate = z
  .strictObject({
    title: z.string().max(MAX_TITLE_LENGTH)
      .transform((title) => title.trim())
      .meta({ description: `The conversation's title, at most ${MAX_TITLE_LENGTH} characters; surrounding blanks are dropped; empty clears it` }),
  })
  .meta({ id: 'SessionUpdate' });
export type SessionUpdateInput = z.infer<typeof SessionUpdate>;

export const SessionEventsQuery = z.object({
  after: z
    .uuid({ error: 'after must be a message id (a UUID)' })
    .optional()
    .meta({ description: 'Messages appended after this one (it must belong to the session). Omitted: only messages appended from now on. The `Last-Event-ID` header wins when both are sent' }),
});

export const SessionOut = z
  .object({
    id: z.uuid(),
    title: z.string().meta({ description: 'May be empty' }),
    user_ref: z.string().meta({ description: 'The subject that owns the conversation' }),
    model: z.string().nullable().meta({ description: 'Rollup: the model of the latest turn; null before the first' }),
    status: z.enum(SESSION_STATUSES).meta({ description: 'Rollup of the latest turn' }),
    parent_session_id: z.uuid().nullable().meta({ description: 'Set on a subagent\'s working conversation; null otherwise' }),
    requires_action: z.boolean().meta({ description: 'The latest turn paused on approvals, questions, client tool calls or a browser hand-off that the next POST /chat must answer or end' }),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'SessionOut' });
export type SessionOutput = z.infer<typeof SessionOut>;

export const SessionPage = z
  .object({
    sessions: z.array(SessionOut).meta({ description: 'Newest updated_at first, ties broken by id (descending)' }),
    has_more: z.boolean(),
    next_offset: z.int().nullable().meta({ description: 'The offset of the next page; null when has_more is false' }),
  })
  .meta({ id: 'SessionPage' });
export type SessionPageOutput = z.infer<typeof SessionPage>;

export const FEEDBACK_RATINGS = ['up', 'down'] as const;

export const MessageFeedbackOut = z
  .object({ rating: z.enum(FEEDBACK_RATINGS), comment: z.string().nullable() })
  .meta({ id: 'MessageFeedback' });

export const MessageToolCallOut = z
  .object({
    id: z.string(),
    name: z.string(),
    arguments: z
      .union([z.record(z.string(), z.unknown()), z.string()])
      .meta({ description: 'The arguments as an object when the model wrote a JSON object; otherwise the text it wrote' }),
  })
  .meta({ id: 'MessageToolCall' });

export const MessageOut = z
  .object({
    id: z.uuid(),
    session_id: z.uuid(),
    run_id: z.string().nullable().meta({ description: 'The turn that wrote it; null for copies made by a fork' }),
    subject: z.string().meta({
      description: 'Who wrote it: the sender of a user message or answer, the subject whose turn wrote an assistant or tool message (a fork copy keeps the original\'s)',
    }),
    role: z.enum(['user', 'assistant', 'tool']),
    content: z.string(),
    tool_calls: z.array(MessageToolCallOut).nullable().meta({ description: 'On an assistant message that called tools' }),
    tool_call_id: z.string().nullable().meta({ description: 'On a tool message: the call it answers' }),
    name: z.string().nullable().meta({ description: 'On a tool message: the tool\'s name' }),
    model: z.string().nullable().meta({ description: 'On an assistant message: the model that wrote it' }),
    created_at: z.iso.datetime(),
    feedback: MessageFeedbackOut.nullable().meta({ description: 'The caller\'s own vote on this message; null when none' }),
  })
  .meta({ id: 'MessageOut' });
export type MessageOutput = z.infer<typeof MessageOut>;

export const SessionDeleted = z
  .object({ id: z.uuid(), deleted: z.literal(true) })
  .meta({ id: 'SessionDeleted' });

export const FeedbackRequest = z
  .strictObject({
    rating: z.enum(FEEDBACK_RATINGS),
    comment: z.string().max(MAX_FEEDBACK_COMMENT).optional().meta({ description: `At most ${MAX_FEEDBACK_COMMENT} characters; omitted clears an earlier comment` }),
  })
  .meta({ id: 'FeedbackRequest' });
export type FeedbackInput = z.infer<typeof FeedbackRequest>;

export const FeedbackOut = z
  .object({
    message_id: z.uuid(),
    rating: z.enum(FEEDBACK_RATINGS),
    comment: z.string().nullable(),
    model: z.string().nullable().meta({ description: 'The model that wrote the message' }),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'FeedbackOut' });
export type FeedbackOutput = z.infer<typeof FeedbackOut>;

export const FeedbackDeleted = z
  .object({ message_id: z.uuid(), deleted: z.literal(true) })
  .meta({ id: 'FeedbackDeleted' });

export const FeedbackSummary = z
  .object({
    models: z
      .array(
        z.object({
          model: z.string().nullable().meta({ description: 'null: messages written without a recorded model' }),
          up: z.int(),
          down: z.int(),
          total: z.int(),
        }),
      )
      .meta({ description: 'Sorted by model; the null model last' }),
  })
  .meta({ id: 'FeedbackSummary' });
export type FeedbackSummaryOutput = z.infer<typeof FeedbackSummary>;

/** The `data` of an `error` frame on the session events stream: what a request would have answered, then the end. */
export interface SessionEventsError {
  status: number;
  code: string;
  message: string;
  retryable: boolean;
  session_id: string;
}
