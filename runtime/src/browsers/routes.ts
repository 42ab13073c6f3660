// HTTP adapters for the browser hand-off (SPEC.md Browser hand-off; docs/decisions/0090): watch the conversation's
// page (a frame, a screencast), act on it while it is handed over, and ask whether the person is done.
import type { Response } from 'express';
import { z } from 'zod';
import { HANDOFF_CHECK_RESULTS } from '@agentplane/lib/browser';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { openSse, sseEventSchema } from '@agentplane/lib/http/sse';
import { principalOf } from '../auth/guard.js';
import { HandoffOut, SessionIdParams } from '../chat/schemas.js';
import type { SessionRow } from '../sessions/conversations.js';
import type { PendingHandoff } from '../store/schema.js';
import { MAX_INPUT_TEXT, STREAM_WINDOW, type BrowserHandoffs } from './handoff.js';
import { VIEWPORT } from './pool.js';

const selector = z.string().min(1).max(1_000).meta({ description: 'A CSS selector: the picture is of the first element it matches' });
const BrowserFrameRequest = z
  .strictObject({
    selector: selector.optional(),
    format: z.enum(['jpeg', 'png']).default('jpeg'),
    quality: z.int().min(1).max(100).default(70).meta({ description: 'JPEG quality (ignored for png)' }),
  })
  .meta({ id: 'BrowserFrameRequest' });

const BrowserFrame = z
  .object({
    mime_type: z.enum(['image/jpeg', 'image/png']),
    data: z.string().meta({ description: 'The picture, base64', contentEncoding: 'base64' }),
    width: z.int().meta({ description: 'In CSS pixels: the viewport, or the element' }),
    height: z.int(),
    url: z.string(),
    title: z.string(),
    selector: z.string().nullable(),
    handoff: HandoffOut.nullable().meta({ description: 'The hand-off open in the conversation; null when the agent holds the page' }),
    taken_at: z.iso.datetime(),
  })
  .meta({ id: 'BrowserFrame' });

const x = z.number().min(0).max(VIEWPORT.width - 1).meta({ description: `From the page's left edge, in CSS pixels (0 to ${VIEWPORT.width - 1})` });
const y = z.number().min(0).max(VIEWPORT.height - 1).meta({ description: `From the page's top edge, in CSS pixels (0 to ${VIEWPORT.height - 1})` });
const button = z.enum(['left', 'right', 'middle']).default('left');
const BrowserInput = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('click'), x, y, button, click_count: z.int().min(1).max(3).default(1) }),
    z.strictObject({ type: z.literal('move'), x, y }),
    z.strictObject({ type: z.literal('mouse_down'), x, y, button }),
    z.strictObject({ type: z.literal('mouse_up'), x, y, button }),
    z.strictObject({
      type: z.literal('wheel'),
      x,
      y,
      delta_x: z.number().min(-10_000).max(10_000).default(0),
      delta_y: z.number().min(-10_000).max(10_000).default(0),
    }),
    z.strictObject({
      type: z.literal('key'),
      key: z
        .string()
        .min(1)
        .max(64)
        .regex(/^[\x21-\x7e]+$|^ $/, 'key is a key name (Enter, Tab, ArrowLeft, a, Shift+Tab...)')
        .meta({ description: 'A key, or keys held together: Enter, Backspace, Tab, ArrowDown, a, Shift+Tab, Control+A' }),
    }),
    z.strictObject({ type: z.literal('text'), text: z.string().min(1).max(MAX_INPUT_TEXT).meta({ description: 'Typed as keystrokes into what has the focus' }) }),
  ])
  .meta({ id: 'BrowserInput', description: 'One input to the page: mouse, wheel, a key or text' });

const HandoffCheckOut = z
  .object({
    result: z.enum(HANDOFF_CHECK_RESULTS).meta({
      description: '`done`: the task looks finished (the hand-off is marked ended; send the next POST /chat); `not_done`: still under way; `stuck`: the page shows they cannot go on; `unsure`',
    }),
    model: z.string().meta({ description: 'The model that answered' }),
    url: z.string(),
    checked_at: z.iso.datetime(),
  })
  .meta({ id: 'HandoffCheck' });

const StreamQuery = z.object({
  selector: z.string().max(1_000).default('').meta({ description: 'Follow one element (CSS); empty: the whole page' }),
  ack: z.enum(['true', 'false']).default('false').meta({
    description: `\`true\`: the viewer acknowledges the frames it took (POST .../browser/stream/ack with the \`ready\` event's stream id and the frame's event id), and no more than ${STREAM_WINDOW} go unacknowledged, so frames never queue for a viewer that fell behind`,
  }),
});
const BrowserStreamEvent = sseEventSchema(
  'BrowserStreamEvent',
  ['ready', 'frame', 'missing', 'closed'],
  '`ready` (with `ack=true`, first): {stream, window}; `frame`: {mime_type, data (base64 JPEG), width, height, url, selector}; `missing`: the selector matches nothing now; `closed`: the page closed, the stream ends. Each event\'s `id` is its number in the stream',
);
const StreamAck = z
  .strictObject({
    stream: z.uuid().meta({ description: "The `ready` event's stream id" }),
    frame: z.int().min(1).max(Number.MAX_SAFE_INTEGER).meta({ description: 'The id of the last event the viewer took' }),
  })
  .meta({ id: 'BrowserStreamAck' });
const StreamAckOut = z.object({ taken: z.int().meta({ description: 'The last event taken, as the stream counts it' }) }).meta({ id: 'BrowserStreamAcked' });

const unauthenticated = { description: 'Missing, invalid or expired token' };
const notFound = { description: 'The session does not exist or is not visible to this token (the same answer)' };
const noPage = { description: 'The conversation has no open browser page (`no_browser_page`)' };
const pictureFailed = { description: 'The page could not be pictured just now, even after its next document loaded (`browser_frame_failed`); ask again' };
const badSelector = { description: 'The selector is not CSS the page reads (`invalid_selector`), or matches nothing (`selector_not_found`)' };

export function handoffRoutes(handoffs: BrowserHandoffs): RouteDefinition[] {
  const watch = async ({ params, res }: { params: { session_id: string }; res: Response }) => {
    res.locals.handoffSession = await handoffs.authorizeWatch(principalOf(res), params.session_id);
  };
  const act = (action: 'input' | 'check') => async ({ params, res }: { params: { session_id: string }; res: Response }) => {
    const { session, handoff } = await handoffs.authorizeAct(principalOf(res), params.session_id, action);
    res.locals.handoffSession = session;
    res.locals.handoff = handoff;
  };
  const sessionOf = (res: Response) => res.locals.handoffSession as SessionRow;
  return [
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{session_id}/browser/frame',
      operationId: 'getBrowserFrame',
      summary: "The conversation's browser page as it is now, whole or one element of it",
      tags: ['browser'],
      security: ['bearer'],
      params: SessionIdParams,
      body: BrowserFrameRequest,
      responses: {
        200: { description: 'The picture', schema: BrowserFrame },
        400: badSelector,
        401: unauthenticated,
        403: { description: 'No capability `chat`' },
        404: notFound,
        409: noPage,
        503: pictureFailed,
      },
      authorize: watch,
      async handle({ body, res }) {
        return { body: await handoffs.frame(sessionOf(res), body) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/chat/sessions/{session_id}/browser/stream',
      operationId: 'streamBrowser',
      summary: "The conversation's browser page as a screencast: a frame each time it paints, as fast as the viewer takes them",
      tags: ['browser'],
      security: ['bearer'],
      params: SessionIdParams,
      query: StreamQuery,
      responses: {
        200: { description: 'Frames until the viewer leaves or the page closes', contentType: 'text/event-stream', schema: BrowserStreamEvent },
        400: badSelector,
        401: unauthenticated,
        403: { description: 'No capability `chat`' },
        404: notFound,
        409: noPage,
        429: { description: 'The conversation already has its most screencasts open (`too_many_streams`); Retry-After says when to try again' },
      },
      authorize: watch,
      async handle({ query, req, res }) {
        const session = sessionOf(res);
        await handoffs.prepareStream(session, query.selector);
        await handoffs.stream(session, query.selector, () => openSse(req, res), { acknowledged: query.ack === 'true' });
        return 'handled';
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{session_id}/browser/stream/ack',
      operationId: 'acknowledgeBrowserFrames',
      summary: 'A viewer of the screencast (opened with `ack=true`) took the frames up to one: the next ones may come',
      tags: ['browser'],
      security: ['bearer'],
      params: SessionIdParams,
      body: StreamAck,
      responses: {
        200: { description: 'Taken', schema: StreamAckOut },
        400: { description: 'A frame the stream has not sent yet (`frame_not_sent`)' },
        401: unauthenticated,
        403: { description: 'No capability `chat`' },
        404: { description: 'The session, or the stream in it, does not exist or is not visible to this token (the same answer; a stream is known to the replica that serves it)' },
      },
      authorize: watch,
      async handle({ body, res }) {
        return { body: handoffs.acknowledge(sessionOf(res), body.stream, body.frame) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{session_id}/browser/input',
      operationId: 'sendBrowserInput',
      summary: 'Act on a page the agent handed over: a click, a key, text or the wheel; answers the frame it led to',
      tags: ['browser'],
      security: ['bearer'],
      params: SessionIdParams,
      body: BrowserInput,
      responses: {
        200: { description: 'The new frame', schema: BrowserFrame },
        400: { description: 'A key name the browser does not know (`unknown_key`)' },
        401: unauthenticated,
        403: { description: 'No capability `chat`; the conversation is another subject\'s (`not_owner`); or the hand-off is read-only (`handoff_read_only`): you can see but may not act' },
        404: notFound,
        409: { description: 'Nothing is handed over (`no_handoff`), or no page is open (`no_browser_page`)' },
        503: pictureFailed,
      },
      authorize: act('input'),
      async handle({ body, res }) {
        return { body: await handoffs.input(sessionOf(res), body) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/chat/sessions/{session_id}/browser/check',
      operationId: 'checkBrowserHandoff',
      summary: 'Ask a small model whether the person finished what the hand-off asked: done, not_done, stuck or unsure',
      tags: ['browser'],
      security: ['bearer'],
      params: SessionIdParams,
      responses: {
        200: { description: 'The answer', schema: HandoffCheckOut },
        401: unauthenticated,
        403: { description: 'No capability `chat`, or the conversation is another subject\'s (`not_owner`)' },
        404: notFound,
        409: { description: 'Nothing is handed over (`no_handoff`), no page is open (`no_browser_page`), or the project has no model for it (`no_model`)' },
        429: { description: "Past the project's checks a minute for this conversation (`handoff_check_rate_limited`); Retry-After says when to ask again" },
      },
      authorize: act('check'),
      async handle({ res }) {
        return { body: await handoffs.check(principalOf(res), sessionOf(res), res.locals.handoff as PendingHandoff) };
      },
    }),
  ];
}
