// Server-sent events: one small writer over a sequence of frames (STYLE.md 9: streams are data). It sets the
// headers, writes `id:`/`event:`/`data:` lines, keeps idle connections alive with comments, respects
// backpressure, and aborts its signal when the client goes away so whatever feeds it stops reading.
import type { Request, Response } from 'express';
import { z } from 'zod';

export interface SseFrame {
  /** The SSE `id:` a client sends back as Last-Event-ID. */
  id?: number | string;
  /** The SSE `event:` name (the frame type). */
  event?: string;
  /** Serialised as JSON on one `data:` line. */
  data: unknown;
}

export interface SseOptions {
  /** A comment line this often while nothing else is written, so proxies keep the connection (default 15 s). */
  keepAliveMs?: number;
  /** Extra response headers (for example `X-Run-Id`). */
  headers?: Record<string, string>;
  /** Tells clients how soon to reconnect after a lost connection (the SSE `retry:` field; default 1000 ms). */
  retryMs?: number;
  /** Ends the stream when it aborts (the process is draining: the client reconnects elsewhere). */
  until?: AbortSignal;
}

export interface SseWriter {
  /** Aborts when the client disconnects (or `end` is called). */
  readonly signal: AbortSignal;
  /** Writes one frame; resolves once the socket takes more (backpressure). False when the client is gone. */
  write(frame: SseFrame): Promise<boolean>;
  end(): void;
}

/**
 * Why a writer's signal aborts (the client left, or the stream ended): one shared reason, because the default, an
 * AbortError, captures a stack trace on every stream and nobody reads it.
 */
const WRITER_CLOSED = Object.freeze(new Error('the event stream is closed'));

/** Starts an event stream on `res` (status 200) and returns its writer. */
export function openSse(req: Request, res: Response, options: SseOptions = {}): SseWriter {
  const controller = new AbortController();
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('Connection', 'keep-alive');
  // nginx and some ingress controllers buffer responses unless told not to.
  res.setHeader('X-Accel-Buffering', 'no');
  for (const [name, value] of Object.entries(options.headers ?? {})) res.setHeader(name, value);
  res.flushHeaders();
  res.write(`retry: ${options.retryMs ?? 1000}\n\n`);
  // Frames are small and latency matters more than packet count.
  req.socket.setNoDelay(true);

  let ended = false;
  const abort = () => {
    clearInterval(keepAlive);
    if (!controller.signal.aborted) controller.abort(WRITER_CLOSED);
  };
  res.on('close', abort);
  // A client that left before the stream opened (while the route authorized it or waited on a page): its `close`
  // came before anyone listened, and a destroyed response still says it is writable.
  const gone = () => res.destroyed || req.socket.destroyed;
  const keepAlive = setInterval(() => {
    if (!ended && res.writable) res.write(': keep-alive\n\n');
  }, options.keepAliveMs ?? 15_000);
  keepAlive.unref();

  const writer: SseWriter = {
    signal: controller.signal,
    async write(frame) {
      if (ended || controller.signal.aborted || !res.writable || gone()) return false;
      if (res.write(serialise(frame))) return true;
      return new Promise<boolean>((resolve) => {
        const settle = (ok: boolean) => {
          res.off('drain', onDrain);
          controller.signal.removeEventListener('abort', onAbort);
          resolve(ok);
        };
        const onDrain = () => settle(true);
        const onAbort = () => settle(false);
        res.once('drain', onDrain);
        controller.signal.addEventListener('abort', onAbort, { once: true });
      });
    },
    end() {
      if (ended) return;
      ended = true;
      clearInterval(keepAlive);
      res.end();
      abort();
    },
  };
  if (options.until?.aborted) writer.end();
  else options.until?.addEventListener('abort', () => writer.end(), { once: true, signal: controller.signal });
  if (gone()) abort();
  return writer;
}

/** The text of one frame. Data is JSON, so it never contains a raw newline that would split the frame. */
export function serialise(frame: SseFrame): string {
  let text = '';
  if (frame.id !== undefined) text += `id: ${String(frame.id).replace(/[\r\n]/g, '')}\n`;
  if (frame.event !== undefined) text += `event: ${frame.event.replace(/[\r\n]/g, '')}\n`;
  return `${text}data: ${JSON.stringify(frame.data)}\n\n`;
}

/**
 * The id after which a resuming client wants frames: the `Last-Event-ID` header (what EventSource sends on
 * reconnect) or a `last_event_id` query value, the header winning. Undefined when neither is sent; a value that
 * is not a non-negative integer is the caller's 422 to give.
 */
export function lastEventIdOf(req: Request, queryValue: number | undefined): number | undefined | 'invalid' {
  const header = req.get('last-event-id');
  if (header !== undefined && header.trim() !== '') {
    const trimmed = header.trim();
    return /^\d{1,15}$/.test(trimmed) ? Number(trimmed) : 'invalid';
  }
  return queryValue;
}

/**
 * The document's schema of one event of a stream, as SSE clients (and schema-driven fuzzers) read it: the `event:`
 * name, the `id:` when the stream is resumable, and the `data:` line, which is JSON text.
 */
export function sseEventSchema(id: string, events: readonly [string, ...string[]], data: string) {
  return z
    .object({
      event: z.enum(events).meta({ description: 'The frame type (the `event:` field)' }),
      id: z.string().regex(/^\d+$|^[0-9a-f-]{36}$/).optional().meta({ description: 'What `Last-Event-ID` (or the stream\'s resume parameter) takes to continue after this event' }),
      data: z.string().meta({ description: `JSON text: ${data}`, contentMediaType: 'application/json' }),
      retry: z.int().min(0).optional().meta({ description: 'How soon to reconnect after a lost connection, in milliseconds' }),
    })
    .meta({ id, description: 'One server-sent event of the stream' });
}
