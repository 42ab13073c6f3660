// HTTP adapter for conversations (bearer, capability `chat`): parse, call the session service, answer. The events
// stream is the SSE writer over the service's follower.
import { z } from 'zod';
import { ValidationError } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { openSse, sseEventSchema } from '@agentplane/lib/http/sse';
import { principalOf } from '../auth/guard.js';
import {
  FeedbackDeleted,
  FeedbackOut,
  FeedbackParams,
  FeedbackRequest,
  FeedbackSummary,
  DEFAULT_MESSAGE_PAGE,
  MessageOut,
  MessagePageQuery,
  SessionDeleted,
  SessionEventsQuery,
  SessionIdParams,
  SessionListQuery,
  SessionOut,
  SessionPage,
  SessionPathParams,
  SessionUpdate,
} from './schemas.js';
import type { SessionTodos } from './todos.js';
import type { SessionService } from './service.js';

/** A conversation's new messages as server-sent events. */
const SessionStreamEvent = sseEventSchema('SessionStreamEvent', ['message', 'error'], '`message` a MessageOut (its id is the event id); `error` {status, code, message, retryable} before the stream ends');

const forbidden = { description: 'The token lacks capability `chat` (`code` `capability_denied`)' };
const notFound = { description: 'No such conversation, or one this token may not see (the same answer)' };
const notOwned = { description: 'Capability `chat` missing, or the conversation belongs to another subject: this token may read it, not change it (`code` `not_owner`)' };
const uuid = z.uuid();

/** `drainSignal` ends open event streams when the process starts draining (clients reconnect elsewhere). */
const TodoItemOut = z
  .object({
    id: z.string().meta({ description: 'Its place in the plan, from 1' }),
    content: z.string(),
    status: z.enum(['pending', 'in_progress', 'completed']),
  })
  .meta({ id: 'TodoItem' });

export function sessionRoutes(sessions: SessionService, todos: SessionTodos, drainSignal?: AbortSignal): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/chat/sessions/{session_id}/todos',
      operationId: 'listSessionTodos',
      summary: "The agent's plan for a conversation, in order (empty when it kept none)",
      tags: ['chat'],
      security: ['bearer'],
      params: SessionIdParams,
      responses: {
        200: { description: 'The plan as the agent last wrote it', schema: z.array(TodoItemOut) },
        403: forbidden,
        404: { description: 'No such conversation, or not visible' },
      },
      authorize: async ({ params, res }) => void (await sessions.authorizeRead(principalOf(res), params.session_id)),
      async handle({ params, res }) {
        return { body: await todos.of(principalOf(res).tenantId, params.session_id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/sessions',
      operationId: 'listSessions',
      summary: 'List the conversations this token sees, newest first',
      description:
        'A privileged token (role admin, owner or service) sees every conversation of the tenant; any other token sees those whose owner is under its scope. ' +
        'Subagents\' working conversations are left out unless `include_subagents` is true. Page with `offset`: there is no total.',
      tags: ['chat'],
      security: ['bearer'],
      query: SessionListQuery,
      responses: { 200: { description: 'One page', schema: SessionPage }, 403: forbidden, 422: { description: 'A malformed filter, or `limit` above the maximum' } },
      async handle({ query, res }) {
        return { body: await sessions.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/sessions/models',
      operationId: 'listSessionModels',
      summary: 'Models the visible conversations have run on',
      description: 'The rollup model of every visible conversation (subagents\' included) and the model of each assistant message in them; distinct, sorted.',
      tags: ['chat'],
      security: ['bearer'],
      responses: { 200: { description: 'Model names', schema: z.array(z.string()) }, 403: forbidden },
      async handle({ res }) {
        return { body: await sessions.models(principalOf(res)) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/sessions/{session_id}/messages',
      operationId: 'listSessionMessages',
      summary: 'The messages of a conversation, oldest first',
      description:
        'Without `limit`, `before` or `after`: every message. `limit` alone: the newest `limit` messages. `before` (or `after`) a message of the conversation: ' +
        `the \`limit\` (default ${DEFAULT_MESSAGE_PAGE}) messages right before (or after) it. Every page is oldest first; a page shorter than \`limit\` is the last one that way.`,
      tags: ['chat'],
      security: ['bearer'],
      params: SessionIdParams,
      query: MessagePageQuery,
      responses: {
        200: { description: 'The messages, each with the caller\'s own vote', schema: z.array(MessageOut) },
        403: forbidden,
        404: { description: 'No such conversation (or not visible), or the cursor is not a message of it' },
        422: { description: '`limit` out of range, a cursor that is not a UUID, or both cursors' },
      },
      authorize: async ({ params, res }) => void (await sessions.authorizeRead(principalOf(res), params.session_id)),
      async handle({ params, query, res }) {
        return { body: await sessions.messages(principalOf(res), params.session_id, query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/sessions/{session_id}/events',
      operationId: 'followSessionMessages',
      summary: 'Follow the messages appended to a conversation (from scheduled tasks, other devices, running turns)',
      description:
        'Server-sent events. Each message is one frame: `event: message`, `id:` the message id, `data:` a MessageOut. ' +
        'Without `after` (or `Last-Event-ID`, which wins) only messages appended from now on are sent. ' +
        'A comment line keeps an idle connection alive every 15 seconds. The stream ends with one `event: error` frame ' +
        '(`status`, `code`, `message`, `retryable`, `session_id`) when the conversation is deleted or no longer visible (404), ' +
        'or when the token expires (401: reconnect with a fresh token and `after` set to the last id received).',
      tags: ['chat'],
      security: ['bearer'],
      params: SessionIdParams,
      query: SessionEventsQuery,
      responses: {
        200: { description: 'The event stream', contentType: 'text/event-stream', schema: SessionStreamEvent },
        403: forbidden,
        404: { description: 'No such conversation (or not visible), or `after` is not a message of it' },
        422: { description: 'session_id, `after` or `Last-Event-ID` is not a UUID' },
      },
      authorize: async ({ params, res }) => void (await sessions.authorizeRead(principalOf(res), params.session_id)),
      async handle({ params, query, req, res }) {
        const principal = principalOf(res);
        const after = lastEventIdOf(req.get('last-event-id')) ?? query.after;
        const events = await sessions.openEvents(principal, params.session_id, after);
        const writer = openSse(req, res, drainSignal ? { until: drainSignal } : {});
        try {
          for await (const message of events.messages(writer.signal)) {
            if (!(await writer.write({ id: message.id, event: 'message', data: message }))) break;
          }
        } catch (error) {
          await writer.write({ event: 'error', data: events.errorFrame(error) });
        } finally {
          await events.close();
          writer.end();
        }
        return 'handled';
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{id}/fork',
      operationId: 'forkSession',
      summary: 'Copy a conversation into a new one owned by the caller',
      description:
        'Every message is copied in order with new ids (and no run); the title gets ` (fork)` (an empty title stays empty); the model is kept. ' +
        'A pause the original waits on is not copied: the fork is idle, and its next POST /chat starts a fresh turn.',
      tags: ['chat'],
      security: ['bearer'],
      params: SessionPathParams,
      responses: { 201: { description: 'The new conversation', schema: SessionOut }, 403: forbidden, 404: notFound },
      // Forking reads the original (any conversation the caller sees) and writes only a new one the caller owns.
      authorize: async ({ params, res }) => void (await sessions.authorizeRead(principalOf(res), params.id)),
      async handle({ params, res }) {
        return { status: 201, body: await sessions.fork(principalOf(res), params.id) };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/chat/sessions/{id}',
      operationId: 'updateSession',
      summary: 'Set a conversation\'s title',
      description: 'Only the conversation\'s owner may. An empty title clears it (and lets `auto_title` title it again).',
      tags: ['chat'],
      security: ['bearer'],
      params: SessionPathParams,
      body: SessionUpdate,
      responses: { 200: { description: 'The conversation', schema: SessionOut }, 403: notOwned, 404: notFound },
      authorize: async ({ params, res }) => void (await sessions.authorizeChange(principalOf(res), params.id)),
      async handle({ params, body, res }) {
        return { body: await sessions.rename(principalOf(res), params.id, body.title) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/chat/sessions/{id}',
      operationId: 'deleteSession',
      summary: 'Delete a conversation with its messages, runs and votes',
      description:
        'Subagents\' working conversations under it go with it. Usage records stay (they are accounting). ' +
        'Refused while one of its turns is running; a turn whose process died (lease lapsed) does not block.',
      tags: ['chat'],
      security: ['bearer'],
      params: SessionPathParams,
      responses: {
        200: { description: 'Deleted', schema: SessionDeleted },
        403: notOwned,
        404: notFound,
        409: { description: 'A turn is running in it (`code` `turn_running`): cancel it or wait' },
      },
      authorize: async ({ params, res }) => void (await sessions.authorizeChange(principalOf(res), params.id)),
      async handle({ params, res }) {
        return { body: await sessions.delete(principalOf(res), params.id) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/chat/sessions/{id}/messages/{message_id}/feedback',
      operationId: 'putMessageFeedback',
      summary: 'Vote on an assistant message (replaces the caller\'s earlier vote)',
      tags: ['chat'],
      security: ['bearer'],
      params: FeedbackParams,
      body: FeedbackRequest,
      responses: {
        200: { description: 'The caller\'s vote', schema: FeedbackOut },
        400: { description: 'The message is not an assistant message' },
        403: notOwned,
        404: { description: 'No such conversation (or not visible), or the message is not in it' },
      },
      authorize: async ({ params, res }) => void (await sessions.authorizeChange(principalOf(res), params.id)),
      async handle({ params, body, res }) {
        return { body: await sessions.putFeedback(principalOf(res), params.id, params.message_id, body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/chat/sessions/{id}/messages/{message_id}/feedback',
      operationId: 'deleteMessageFeedback',
      summary: 'Withdraw the caller\'s vote on a message',
      tags: ['chat'],
      security: ['bearer'],
      params: FeedbackParams,
      responses: {
        200: { description: 'Withdrawn', schema: FeedbackDeleted },
        403: notOwned,
        404: { description: 'No such conversation (or not visible), the message is not in it, or the caller has no vote on it' },
      },
      authorize: async ({ params, res }) => void (await sessions.authorizeChange(principalOf(res), params.id)),
      async handle({ params, res }) {
        return { body: await sessions.deleteFeedback(principalOf(res), params.id, params.message_id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/feedback',
      operationId: 'getFeedbackSummary',
      summary: 'Votes per model over the tenant (privileged tokens only)',
      description: 'Counts every person\'s votes on messages of the tenant\'s conversations, within the token\'s data scope when it has one.',
      tags: ['chat'],
      security: ['bearer'],
      responses: {
        200: { description: 'Up, down and total votes per model', schema: FeedbackSummary },
        403: { description: 'The token lacks capability `chat`, or carries no privileged role (admin, owner or service)' },
      },
      async handle({ res }) {
        return { body: await sessions.feedbackSummary(principalOf(res)) };
      },
    }),
  ];
}

/** `Last-Event-ID` (what EventSource sends on reconnect) names the last message received; it must be a message id. */
function lastEventIdOf(header: string | undefined): string | undefined {
  const value = header?.trim();
  if (value === undefined || value === '') return undefined;
  if (!uuid.safeParse(value).success) throw new ValidationError([{ loc: ['header', 'last-event-id'], msg: 'Last-Event-ID must be a message id (a UUID)' }]);
  return value;
}
