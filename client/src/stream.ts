// A chat run's stream as an async iterator of frames. A connection that drops before the terminal frame is resumed
// by itself from the last frame's id (`Last-Event-ID`, GET /chat/stream/{run_id}) with backoff; an `error` frame ends
// it with a terminal StreamError, a stream that cannot be brought back with a non-terminal one (SPEC.md Errors 9).
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { AgentplaneError, StreamError } from './errors.js';
import type { ChatResponse, DoneFrame, ErrorFrame, Frame, RunAccepted, StreamFrame } from './frames.js';
import { backoffMs, sleep } from './transport.js';

export interface ReconnectOptions {
  /** Reconnects in a row that bring no frame before the stream fails (default 5). */
  maxReconnects?: number;
  /** The first wait before reconnecting, doubled each time, with jitter (default 250 ms). */
  baseDelayMs?: number;
  /** The longest wait between reconnects (default 5 s). */
  maxDelayMs?: number;
}

/** What a stream asks of its client. */
export interface RunCalls {
  /** GET /chat/stream/{run_id} with `Last-Event-ID`. */
  resume(runId: string, lastEventId: number, signal: AbortSignal): Promise<Response>;
  cancel(runId: string): Promise<RunAccepted>;
  steer(runId: string, message: string): Promise<RunAccepted>;
}

/** The SSE events of a response body, parsed as they arrive. */
export async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => queue.push(event) });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length > 0) yield queue.shift()!;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function streamErrorOf(frame: ErrorFrame): StreamError {
  return new StreamError(frame.message, {
    terminal: true,
    status: frame.status,
    code: frame.code,
    detail: frame.message,
    retryable: frame.retryable,
    run_id: frame.run_id,
    session_id: frame.session_id,
    body: frame,
  });
}

export class ChatStream implements AsyncIterable<StreamFrame> {
  #runId: string | null;
  #sessionId: string | null = null;
  #lastEventId: number;
  #started = false;
  readonly #controller = new AbortController();
  readonly #open: (signal: AbortSignal) => Promise<Response>;
  readonly #calls: RunCalls;
  readonly #reconnect: Required<ReconnectOptions>;
  readonly #signal: AbortSignal;

  /**
   * `open` makes the first request (POST /chat/stream, or the resume of a known run). `runId` and `lastEventId` are
   * known up front when rejoining a run. Made by ChatClient.stream and ChatClient.resume.
   * @internal
   */
  constructor(
    open: (signal: AbortSignal) => Promise<Response>,
    calls: RunCalls,
    options: { runId?: string; lastEventId?: number; signal?: AbortSignal | undefined; reconnect?: ReconnectOptions | undefined } = {},
  ) {
    this.#open = open;
    this.#calls = calls;
    this.#runId = options.runId ?? null;
    this.#lastEventId = options.lastEventId ?? 0;
    this.#signal = options.signal ? AbortSignal.any([options.signal, this.#controller.signal]) : this.#controller.signal;
    this.#reconnect = { maxReconnects: 5, baseDelayMs: 250, maxDelayMs: 5_000, ...options.reconnect };
  }

  /** The run, once the service named it (the `X-Run-Id` header or the `start` frame). */
  get runId(): string | null {
    return this.#runId;
  }

  get sessionId(): string | null {
    return this.#sessionId;
  }

  /** The id of the last frame read: what `resume(runId, lastEventId)` takes to continue after it elsewhere. */
  get lastEventId(): number {
    return this.#lastEventId;
  }

  [Symbol.asyncIterator](): AsyncIterator<StreamFrame> {
    if (this.#started) throw new Error('a chat stream is read once');
    this.#started = true;
    return this.#frames();
  }

  /** Reads the stream to its end and answers its `done` frame (the ChatResponse). */
  async finalResponse(): Promise<ChatResponse> {
    let done: DoneFrame | undefined;
    for await (const frame of this) if (frame.type === 'done') done = frame;
    if (!done) throw new StreamError('the stream ended without a done frame', { terminal: false, run_id: this.#runId, session_id: this.#sessionId });
    const { type: _type, ...response } = done;
    return response;
  }

  /** POST /chat/stream/{run_id}/cancel: the run stops and its stream ends with `done` (finish_reason `cancelled`). */
  cancel(): Promise<RunAccepted> {
    return this.#calls.cancel(this.#knownRun('cancel'));
  }

  /** POST /chat/stream/{run_id}/steer: a message the run takes at its next step (capability `steer`). */
  steer(message: string): Promise<RunAccepted> {
    return this.#calls.steer(this.#knownRun('steer'), message);
  }

  /** Stops reading; the run goes on server-side (cancel() stops it). */
  close(): void {
    this.#controller.abort();
  }

  #knownRun(action: string): string {
    if (this.#runId === null) throw new Error(`no run to ${action} yet: read the stream until its start frame`);
    return this.#runId;
  }

  async *#frames(): AsyncGenerator<StreamFrame> {
    const signal = this.#signal;
    let response: Response | undefined = await this.#open(signal);
    let reconnects = 0;
    try {
      for (;;) {
        if (response) {
          this.#runId = response.headers.get('x-run-id') ?? this.#runId;
          try {
            for await (const event of serverSentEvents(response.body!)) {
              const frame = { type: event.event, ...(JSON.parse(event.data) as object) } as Frame;
              if (event.id !== undefined && event.id !== '') this.#lastEventId = Number(event.id);
              reconnects = 0;
              if (frame.type === 'start') {
                this.#runId = frame.run_id;
                this.#sessionId = frame.session_id;
              }
              if (frame.type === 'error') throw streamErrorOf(frame);
              if (frame.type === 'done') this.#sessionId = frame.session_id;
              yield frame;
              if (frame.type === 'done') return;
            }
          } catch (error) {
            if (error instanceof StreamError || signal.aborted) throw error;
            // The connection broke mid-stream: reconnect below.
          }
        }
        // The stream stopped before its terminal frame.
        if (this.#runId === null) throw new StreamError('the stream stopped before the run started', { terminal: false, session_id: this.#sessionId });
        if (reconnects >= this.#reconnect.maxReconnects) {
          throw new StreamError(`the stream stopped and ${reconnects} reconnects did not bring it back`, { terminal: false, run_id: this.#runId, session_id: this.#sessionId });
        }
        reconnects += 1;
        await sleep(backoffMs(reconnects, this.#reconnect.baseDelayMs, this.#reconnect.maxDelayMs), signal);
        try {
          response = await this.#calls.resume(this.#runId, this.#lastEventId, signal);
        } catch (error) {
          if (signal.aborted) throw error;
          // An answer that says the run cannot be rejoined (not found, not allowed) ends the stream; a failure to connect
          // or a retryable status is tried again.
          if (error instanceof AgentplaneError && error.status !== undefined && !error.retryable) {
            throw new StreamError(error.message, { terminal: false, status: error.status, code: error.code, detail: error.detail, request_id: error.request_id, retryable: false, run_id: this.#runId, session_id: this.#sessionId, body: error.body, cause: error });
          }
          response = undefined;
        }
      }
    } finally {
      this.#controller.abort();
    }
  }
}
