// HTTP adapters of the chat routes: parse, call ChatService, answer. The stream routes are one SSE writer over the
// run log (STYLE.md 9); the blocking route waits for the same log's terminal frame.
import type { Request, Response } from 'express';
import { AppError, ValidationError } from '@agentplane/lib/errors';
import { describeErrorFrame } from '@agentplane/lib/http/errors';
import { defineRoute, type ResponseSpec, type RouteDefinition } from '@agentplane/lib/http/routes';
import { lastEventIdOf, openSse, sseEventSchema } from '@agentplane/lib/http/sse';
import type { RunLogEvent } from '@agentplane/lib/events/port';
import { principalOf } from '../auth/guard.js';
import type { SessionRow } from '../sessions/conversations.js';
import type { ChatService } from './service.js';
import type { SideGenerations } from './side.js';
import {
  ChatRequest,
  ChatResponse,
  FollowupsOut,
  FollowupsRequest,
  RecapOut,
  ResumeQuery,
  RunAccepted,
  RunIdParams,
  SessionIdParams,
  SteerRequest,
  TERMINAL_FRAMES,
  type Frame,
} from './schemas.js';

/** A run's frames as server-sent events (docs/decisions/0017 has each payload). */
const RunStreamEvent = sseEventSchema(
  'RunStreamEvent',
  ['start', 'token', 'tool_start', 'tool_end', 'done', 'error'],
  '`start` {run_id, session_id, model}; `token` {text}; `tool_start` {tool_call_id, name, arguments}; `tool_end` {tool_call_id, name, ok, result}; `done` the ChatResponse; `error` {status, code, message, retryable, run_id, session_id}',
);

const streamDescription =
  'Server-sent events. Frames, in order: `start` (run_id, session_id, model), then `token` (text), `tool_start` and `tool_end`, then exactly one ' +
  'terminal `done` (the ChatResponse) or `error` (status, code, message, retryable, run_id, session_id). Every frame has an `id:`; the SSE `event:` is the frame type. ' +
  'A failed turn is still HTTP 200: its `error` frame carries the status a blocking POST /chat would answer with.';

const turnErrors = {
  400: {
    description:
      'A model the project did not register, a provider rejection, a malformed tool list, or answers nothing is waiting for: ' +
      '`question_answers`, `approval_decisions` or `tool_results` with no `session_id`, to a conversation not paused (`nothing_pending`), ' +
      'or naming a `tool_call_id` its pause does not wait on (`not_pending`)',
  },
  403: {
    description:
      'Capability `chat` (or `system_prompt` for a per-request system prompt) missing, a model outside the token\'s allow-list, ' +
      'or the session belongs to another subject: it may be read, not posted into (`not_owner`)',
  },
  404: { description: 'The session does not exist or is not visible to this token' },
  409: { description: 'A turn is already running in this session (`turn_running`), or no provider serves the model (`no_provider`)' },
  429: { description: 'The project\'s rpm/tpm limit (`rate_limited`) or spend cap (`budget_exceeded`) is reached; the message says when it resets' },
  502: { description: 'The provider failed with its own error' },
  504: { description: 'The provider did not answer in time' },
};

/** What a side generation (follow-ups, recap) may answer: its own capability, the conversation's model and provider. */
function sideGenerationResponses(capability: string, ok: ResponseSpec): Record<number, ResponseSpec> {
  return {
    200: ok,
    400: { description: 'The conversation\'s model is no longer registered, or the provider rejected the call' },
    403: { description: `Capability \`${capability}\` missing, or the conversation's model is outside the token's allow-list` },
    404: turnErrors[404],
    409: { description: 'No provider serves the conversation\'s model (`no_provider`)' },
    429: turnErrors[429],
    502: turnErrors[502],
    504: turnErrors[504],
  };
}

/**
 * A run's stream follows it to its terminal frame even while the process drains: the run is accepted work, and a
 * run cut off by the end of the grace period ends with a retryable `error` frame (docs/decisions/0028).
 */
export function chatRoutes(chat: ChatService, side: SideGenerations): RouteDefinition[] {
  // The conversation a turn names, found (and its ownership checked) by the authorize step, is handed to the start
  // so it is not looked up twice.
  const authorizeTurn = async ({ req, res }: { req: Request; res: Response }) => {
    res.locals[TURN_SESSION] = await chat.authorizeTurn(principalOf(res), namedSession(req.body));
  };
  return [
    defineRoute({
      method: 'post',
      path: '/chat',
      operationId: 'chat',
      summary: 'Run a turn and wait for its answer',
      description:
        'Starts a turn (or answers a paused one with `tool_results`, `approval_decisions` or `question_answers`) and answers when it ends. ' +
        'The turn runs detached: if the client goes away it goes on, and its frames can be read with GET /chat/stream/{run_id}. ' +
        'Only the owner of a conversation may post into it. Errors carry `run_id` once the run exists, and `session_id` when there is a session.',
      tags: ['chat'],
      security: ['bearer'],
      body: ChatRequest,
      responses: { 200: { description: 'The turn\'s answer, or its pause', schema: ChatResponse }, ...turnErrors },
      authorize: authorizeTurn,
      async handle({ res, body }) {
        const principal = principalOf(res);
        const started = await chat.start(principal, body, turnSessionOf(res), { awaitEnd: true });
        if (started.kind === 'refused') throw withSession(started.error, started.sessionId);
        res.setHeader('X-Run-Id', started.runId);
        return { body: await chat.result(principal.tenantId, started.runId, closedSignal(res), started.ended) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/stream',
      operationId: 'chatStream',
      summary: 'Run a turn and stream it',
      description:
        `${streamDescription} The response header \`X-Run-Id\` names the run. ` +
        'A turn refused before anything was stored (an unregistered model, a limit, a turn already running) has no run: its stream is one `error` frame with `run_id` null, ' +
        'no `X-Run-Id` header, and `session_id` the conversation named (null for a new one). ' +
        'With a `Last-Event-ID` header this call starts nothing: it resumes the run named by the `X-Run-Id` request header, or else the latest run of the conversation ' +
        'named by `session_id` (the re-sent POST of a client that lost its stream), replaying the frames after that id and then following live ones.',
      tags: ['chat'],
      security: ['bearer'],
      body: ChatRequest,
      responses: {
        200: { description: 'The run\'s frames', contentType: 'text/event-stream', schema: RunStreamEvent },
        400: {
          description:
            'A malformed tool list, answers with no `session_id`, or `Last-Event-ID` with neither `X-Run-Id` nor `session_id` (`nothing_to_resume`). ' +
            'Answers to a conversation that names no pause or call waiting for them are a 200 whose one `error` frame has status 400 (`nothing_pending`, `not_pending`)',
        },
        403: turnErrors[403],
        404: { description: 'The session does not exist or is not visible to this token; with `Last-Event-ID`, no such run in it, or it has none' },
        422: { description: 'Invalid body, a `Last-Event-ID` that is not a non-negative integer, or an `X-Run-Id` that is not a run id' },
      },
      authorize: authorizeTurn,
      async handle({ req, res, body }) {
        const principal = principalOf(res);
        const after = lastEventIdOf(req, undefined);
        if (after === 'invalid') throw new ValidationError([{ loc: ['header', 'Last-Event-ID'], msg: 'must be a non-negative integer' }]);
        if (after !== undefined) {
          const runId = await chat.runToResume(principal, body.session_id, namedRun(req.get('x-run-id')));
          const controller = new AbortController();
          const frames = await chat.resume(principal, runId, after, controller.signal);
          const writer = openSse(req, res, { headers: { 'X-Run-Id': runId } });
          writer.signal.addEventListener('abort', () => controller.abort(writer.signal.reason), { once: true });
          await relay(writer, frames);
          return 'handled';
        }
        const started = await chat.start(principal, body, turnSessionOf(res));
        if (started.kind === 'refused') {
          const writer = openSse(req, res);
          await writer.write({ id: 1, event: 'error', data: refusalFrame(started.error, started.sessionId) });
          writer.end();
          return 'handled';
        }
        const writer = openSse(req, res, { headers: { 'X-Run-Id': started.runId } });
        await relay(writer, chat.follow(principal.tenantId, started.runId, writer.signal));
        return 'handled';
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/stream/{run_id}',
      operationId: 'resumeChatStream',
      summary: 'Resume a run\'s stream',
      description:
        `Replays the frames after \`Last-Event-ID\` (header) or \`last_event_id\` (query), then follows live ones until the terminal frame. ${streamDescription} ` +
        'Works on any replica sharing the event store. A finished run whose frames are no longer held answers one terminal `error` frame (code `run_events_expired`) naming its conversation.',
      tags: ['chat'],
      security: ['bearer'],
      params: RunIdParams,
      query: ResumeQuery,
      responses: {
        200: { description: 'The run\'s later frames', contentType: 'text/event-stream', schema: RunStreamEvent },
        403: { description: 'Capability `chat` missing' },
        404: { description: 'No run by that id is known, or its conversation is not visible to this token' },
      },
      authorize: ({ res }) => chat.authorizeResume(principalOf(res)),
      async handle({ req, res, params, query }) {
        const principal = principalOf(res);
        const after = lastEventIdOf(req, query.last_event_id);
        if (after === 'invalid') throw new ValidationError([{ loc: ['header', 'Last-Event-ID'], msg: 'must be a non-negative integer' }]);
        const controller = new AbortController();
        const frames = await chat.resume(principal, params.run_id, after ?? 0, controller.signal);
        const writer = openSse(req, res, { headers: { 'X-Run-Id': params.run_id } });
        writer.signal.addEventListener('abort', () => controller.abort(writer.signal.reason), { once: true });
        await relay(writer, frames);
        return 'handled';
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/stream/{run_id}/steer',
      operationId: 'steerRun',
      summary: 'Send a message into a running turn',
      description:
        'Needs capability `steer`. The message is picked up at the run\'s next step boundary, after any tool in flight, and appended as a normal user message.',
      tags: ['chat'],
      security: ['bearer'],
      params: RunIdParams,
      body: SteerRequest,
      responses: {
        202: { description: 'Queued for the next step boundary', schema: RunAccepted },
        403: { description: 'Capability `steer` missing, or the run\'s conversation belongs to another subject (`not_owner`)' },
        404: { description: 'No such run, or not visible to this token' },
        409: { description: 'The run is not running (`run_not_running`)' },
      },
      authorize: async ({ params, res }) => void (await chat.authorizeSteer(principalOf(res), params.run_id)),
      async handle({ res, params, body }) {
        return { status: 202, body: await chat.steer(principalOf(res), params.run_id, body.message) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/stream/{run_id}/cancel',
      operationId: 'cancelRun',
      summary: 'Cancel a run',
      description:
        'Idempotent, and 202 whether or not any process still holds the run (a run this token cannot see is answered like an unknown one). ' +
        'A running turn stops at once (the provider call is aborted) and ends with a `done` frame whose finish_reason is `cancelled`; what it wrote stays in the session. ' +
        'Only the owner of the run\'s conversation may cancel it.',
      tags: ['chat'],
      security: ['bearer'],
      params: RunIdParams,
      responses: {
        202: { description: 'Accepted', schema: RunAccepted },
        403: { description: 'Capability `chat` missing, or the run\'s conversation belongs to another subject (`not_owner`)' },
      },
      authorize: async ({ params, res }) => void (await chat.authorizeCancel(principalOf(res), params.run_id)),
      async handle({ res, params }) {
        return { status: 202, body: await chat.cancel(principalOf(res), params.run_id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{session_id}/followups',
      operationId: 'suggestFollowups',
      summary: 'Suggested next messages for a conversation',
      description: 'Needs capability `followups`. Generated beside the turn from the conversation; nothing is stored and the agent never sees them.',
      tags: ['chat'],
      security: ['bearer'],
      params: SessionIdParams,
      body: FollowupsRequest,
      responses: sideGenerationResponses('followups', { description: 'The suggestions (empty when the project has no model)', schema: FollowupsOut }),
      authorize: ({ params, res }) => side.authorize(principalOf(res), params.session_id, 'followups'),
      async handle({ res, params, body }) {
        return { body: await side.followups(principalOf(res), params.session_id, body.count) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{session_id}/recap',
      operationId: 'recapSession',
      summary: 'A one-line recap of a conversation, for the person',
      description: 'Needs capability `recap`. Nothing is stored and the agent never sees it.',
      tags: ['chat'],
      security: ['bearer'],
      params: SessionIdParams,
      responses: sideGenerationResponses('recap', { description: 'The recap (empty when the project has no model)', schema: RecapOut }),
      authorize: ({ params, res }) => side.authorize(principalOf(res), params.session_id, 'recap'),
      async handle({ res, params }) {
        return { body: await side.recap(principalOf(res), params.session_id) };
      },
    }),
  ];
}

/** The conversation a turn's raw body names, read before the body is validated (a malformed id is left to validation). */
const TURN_SESSION = 'agentplane.turnSession';

function turnSessionOf(res: Response): SessionRow | undefined {
  return res.locals[TURN_SESSION] as SessionRow | undefined;
}

function namedSession(body: unknown): string | undefined {
  const id = (body as { session_id?: unknown } | null | undefined)?.session_id;
  return typeof id === 'string' && SessionIdParams.shape.session_id.safeParse(id).success ? id : undefined;
}

/** The run an `X-Run-Id` request header names; one that could not be a run id is a 422 naming the header. */
function namedRun(header: string | undefined): string | undefined {
  const value = header?.trim();
  if (value === undefined || value === '') return undefined;
  const parsed = RunIdParams.shape.run_id.safeParse(value);
  if (!parsed.success) throw new ValidationError([{ loc: ['header', 'X-Run-Id'], msg: 'must be a run id (1 to 200 characters)' }]);
  return parsed.data;
}

/** A refusal answered on the blocking path: its error, carrying the conversation the caller named (never a made-up one). */
function withSession(error: unknown, sessionId: string | null): unknown {
  if (!(error instanceof AppError) || error instanceof ValidationError || sessionId === null) return error;
  return new AppError(error.kind, error.message, { code: error.code, extra: { ...error.extra, session_id: sessionId }, cause: error });
}

/** The one frame of a refused stream: what the blocking call would answer, with no run (none exists). */
function refusalFrame(error: unknown, sessionId: string | null): Frame {
  const resetAt = error instanceof AppError ? error.extra?.reset_at : undefined;
  return { type: 'error', ...describeErrorFrame(error), run_id: null, session_id: sessionId, ...(typeof resetAt === 'string' ? { reset_at: resetAt } : {}) };
}

/** Writes frames until the terminal one (or the client leaves), then ends the response. */
async function relay(writer: ReturnType<typeof openSse>, frames: AsyncIterable<RunLogEvent<Frame>>): Promise<void> {
  try {
    for await (const event of frames) {
      if (!(await writer.write({ id: event.id, event: event.data.type, data: event.data }))) break;
      if (TERMINAL_FRAMES.has(event.data.type)) break;
    }
  } catch (error) {
    // The log vanished mid-stream (erased, expired): end the stream; the client's reconnect gets the answer.
    if (!writer.signal.aborted) await writer.write({ event: 'error', data: { status: 404, code: 'run_events_expired', message: String((error as Error).message), retryable: false } });
  } finally {
    writer.end();
  }
}

/**
 * Aborts when the client closes the connection of a blocking call before its answer: the wait stops, the run goes
 * on. A connection closed after the answer aborts nothing (an abort builds an AbortError with a stack, per turn).
 */
function closedSignal(res: Response): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

