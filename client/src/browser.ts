// The browser hand-off's calls (a page the agent handed to the person): its frame, its screencast as an async
// iterator of pictures, input to it, and the check whether the person is done. The conversation's next message
// (`chat.send` or `chat.stream` with its `session_id`) ends the hand-off and the agent goes on.
import type { Client } from 'openapi-fetch';
import type { components, paths } from './generated/data-plane.js';
import { serverSentEvents } from './stream.js';
import type { Send } from './transport.js';

export type BrowserFrame = components['schemas']['BrowserFrame'];
export type BrowserFrameRequest = components['schemas']['BrowserFrameRequest'];
export type BrowserInput = components['schemas']['BrowserInput'];
export type HandoffCheck = components['schemas']['HandoffCheck'];
export type Handoff = components['schemas']['Handoff'];

/** One picture of the screencast: a JPEG of the page (or of the followed element), base64. */
export interface ScreencastFrame {
  mime_type: 'image/jpeg';
  data: string;
  width: number;
  height: number;
  url: string;
  selector: string | null;
}

/** What the screencast sends: a picture, word that the followed element is gone for now, or the page's end. */
export type ScreencastEvent = { type: 'frame'; frame: ScreencastFrame } | { type: 'missing'; selector: string; url: string } | { type: 'closed'; reason: string };

export class BrowserClient {
  /** @internal Made by createDataPlaneClient. */
  constructor(
    private readonly api: Client<paths>,
    private readonly transport: Send,
    private readonly baseUrl: string,
  ) {}

  /** The conversation's page now, whole or one element of it (`selector`, CSS). */
  async frame(sessionId: string, request: BrowserFrameRequest = {}, options: { signal?: AbortSignal } = {}): Promise<BrowserFrame> {
    const { data } = await this.api.POST('/chat/sessions/{session_id}/browser/frame', { params: { path: { session_id: sessionId } }, body: request, signal: options.signal });
    return data!;
  }

  /** Sends one input to a page handed to you; answers the frame it led to. */
  async input(sessionId: string, input: BrowserInput, options: { signal?: AbortSignal } = {}): Promise<BrowserFrame> {
    const { data } = await this.api.POST('/chat/sessions/{session_id}/browser/input', { params: { path: { session_id: sessionId } }, body: input, signal: options.signal });
    return data!;
  }

  /** Asks whether the person did what the hand-off asked: `done`, `not_done`, `stuck` or `unsure`. */
  async check(sessionId: string, options: { signal?: AbortSignal } = {}): Promise<HandoffCheck> {
    const { data } = await this.api.POST('/chat/sessions/{session_id}/browser/check', { params: { path: { session_id: sessionId } }, signal: options.signal });
    return data!;
  }

  /**
   * The page as it paints, until `signal` aborts or the page closes. Read it as fast as you draw: each picture is
   * acknowledged when you ask for the next one, and the service sends no more than a couple you have not taken, so a
   * slow reader gets fewer pictures, never old ones queued up on the way.
   */
  async *screencast(sessionId: string, options: { selector?: string; signal?: AbortSignal } = {}): AsyncGenerator<ScreencastEvent> {
    const query = new URLSearchParams({ ack: 'true', ...(options.selector ? { selector: options.selector } : {}) });
    const request = new Request(`${this.baseUrl}/chat/sessions/${encodeURIComponent(sessionId)}/browser/stream?${query.toString()}`, {
      headers: { Accept: 'text/event-stream' },
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const response = await this.transport(request, { timeout: 'headers' });
    if (!response.body) return;
    let stream: string | undefined;
    for await (const event of serverSentEvents(response.body)) {
      const data = JSON.parse(event.data) as Record<string, unknown>;
      if (event.event === 'ready') stream = String(data.stream);
      else if (event.event === 'frame' || event.event === 'missing') {
        yield event.event === 'frame' ? { type: 'frame', frame: data as unknown as ScreencastFrame } : { type: 'missing', selector: String(data.selector), url: String(data.url) };
        // Taken: the caller asked for the next one. Not awaited: the next picture is already on its way or coming.
        if (stream !== undefined && event.id) void this.acknowledge(sessionId, stream, Number(event.id), options.signal);
      } else if (event.event === 'closed') {
        yield { type: 'closed', reason: String(data.reason) };
        return;
      }
    }
  }

  private async acknowledge(sessionId: string, stream: string, frame: number, signal: AbortSignal | undefined): Promise<void> {
    await this.api
      .POST('/chat/sessions/{session_id}/browser/stream/ack', { params: { path: { session_id: sessionId } }, body: { stream, frame }, ...(signal ? { signal } : {}) })
      .catch(() => undefined);
  }
}
