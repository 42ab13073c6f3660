// The data plane's client: every route typed from its OpenAPI document (`api`), called with end-user tokens from the
// application's provider, and the behaviour a chat needs on top: streams, rejoining a run, pauses, pages of sessions.
import createClient, { type Client } from 'openapi-fetch';
import { TokenKeeper, type TokenProvider } from './credentials.js';
import type { ChatResponse, RunAccepted } from './frames.js';
import type { components, paths } from './generated/data-plane.js';
import { paginate } from './pages.js';
import { ChatStream, type ReconnectOptions, type RunCalls } from './stream.js';
import { BrowserClient } from './browser.js';
import { createTransport, type RetryOptions, type Send } from './transport.js';

export type ChatRequest = components['schemas']['ChatRequest'];
export type SessionOut = components['schemas']['SessionOut'];
export type QuestionAnswer = components['schemas']['QuestionAnswer'];
export type ApprovalDecision = components['schemas']['ApprovalDecision'];
export type ToolResult = components['schemas']['ToolResult'];
export type SessionQuery = NonNullable<paths['/chat/sessions']['get']['parameters']['query']>;

export interface ClientOptions {
  /** The service's address, e.g. https://agents.example.com. */
  baseUrl: string;
  /** The fetch to call (default globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** Milliseconds a call may take (default 60 s; a stream's limit covers its first answer only; 0 for none). */
  timeoutMs?: number;
  retry?: RetryOptions;
}

export interface DataPlaneOptions extends ClientOptions {
  /** Gives an end-user token: usually a call to the application's own server, which mints with the project key. */
  token: TokenProvider;
  /** How a dropped stream reconnects. */
  reconnect?: ReconnectOptions;
}

export interface CallOptions {
  signal?: AbortSignal;
}

/** What a request answering a pause carries besides its answers (the conversation is the pause's). */
export type PauseOptions = CallOptions & Omit<ChatRequest, 'session_id' | 'question_answers' | 'approval_decisions' | 'tool_results'>;

/** The answer's body: a call that failed has thrown already (the transport turns failures into errors). */
function body<T>(result: { data?: T }): T {
  return result.data as T;
}

export class ChatClient {
  readonly #calls: RunCalls;

  /** @internal Made by createDataPlaneClient. */
  constructor(
    private readonly api: Client<paths>,
    private readonly transport: Send,
    private readonly baseUrl: string,
    private readonly reconnect: ReconnectOptions | undefined,
  ) {
    this.#calls = {
      resume: (runId, lastEventId, signal) => this.#streamRequest(`/chat/stream/${encodeURIComponent(runId)}`, 'GET', undefined, { 'Last-Event-ID': String(lastEventId) }, signal),
      cancel: (runId) => this.cancel(runId),
      steer: (runId, message) => this.steer(runId, message),
    };
  }

  /** POST /chat: runs a turn and answers when it ends (or pauses). */
  async send(request: ChatRequest, options: CallOptions = {}): Promise<ChatResponse> {
    return body(await this.api.POST('/chat', { body: request, signal: options.signal }));
  }

  /** POST /chat/stream: runs a turn and yields its frames as they come; a dropped connection resumes by itself. */
  stream(request: ChatRequest, options: CallOptions = {}): ChatStream {
    const open = (signal: AbortSignal) => this.#streamRequest('/chat/stream', 'POST', JSON.stringify(request), {}, signal);
    return new ChatStream(open, this.#calls, { signal: options.signal, reconnect: this.reconnect });
  }

  /** Rejoins a run's stream from another tab or process: the frames after `lastEventId` (0: all of them), then live. */
  resume(runId: string, lastEventId = 0, options: CallOptions = {}): ChatStream {
    return new ChatStream((signal) => this.#calls.resume(runId, lastEventId, signal), this.#calls, { runId, lastEventId, signal: options.signal, reconnect: this.reconnect });
  }

  /** POST /chat/stream/{run_id}/cancel: idempotent, 202 even for a run no process holds. */
  async cancel(runId: string, options: CallOptions = {}): Promise<RunAccepted> {
    return body(await this.api.POST('/chat/stream/{run_id}/cancel', { params: { path: { run_id: runId } }, signal: options.signal }));
  }

  /** POST /chat/stream/{run_id}/steer: a message the running turn takes at its next step. */
  async steer(runId: string, message: string, options: CallOptions = {}): Promise<RunAccepted> {
    return body(await this.api.POST('/chat/stream/{run_id}/steer', { params: { path: { run_id: runId } }, body: { message }, signal: options.signal }));
  }

  /** Answers the questions a paused turn asked (`ask_user`); the turn goes on. */
  answer(sessionId: string, answers: QuestionAnswer[], options: PauseOptions = {}): Promise<ChatResponse> {
    return this.#resolve(sessionId, { question_answers: answers }, options);
  }

  /** Decides the approvals a paused turn waits on. */
  decide(sessionId: string, decisions: ApprovalDecision[], options: PauseOptions = {}): Promise<ChatResponse> {
    return this.#resolve(sessionId, { approval_decisions: decisions }, options);
  }

  /** Approves one waiting call; `note` is passed to the agent. */
  approve(sessionId: string, toolCallId: string, note?: string, options: PauseOptions = {}): Promise<ChatResponse> {
    return this.decide(sessionId, [{ tool_call_id: toolCallId, approved: true, ...(note === undefined ? {} : { note }) }], options);
  }

  /** Refuses one waiting call; `note` tells the agent why. */
  refuse(sessionId: string, toolCallId: string, note?: string, options: PauseOptions = {}): Promise<ChatResponse> {
    return this.decide(sessionId, [{ tool_call_id: toolCallId, approved: false, ...(note === undefined ? {} : { note }) }], options);
  }

  /** Returns the results of the client tool calls a paused turn handed out. */
  returnToolResults(sessionId: string, results: ToolResult[], options: PauseOptions = {}): Promise<ChatResponse> {
    return this.#resolve(sessionId, { tool_results: results }, options);
  }

  /** Every conversation the token sees, newest first, fetched a page at a time. */
  sessions(query: Omit<SessionQuery, 'offset'> = {}, options: CallOptions = {}): AsyncGenerator<SessionOut> {
    return paginate(
      async (offset) => body(await this.api.GET('/chat/sessions', { params: { query: { ...query, offset } }, signal: options.signal })),
      (page) => page.sessions,
    );
  }

  #resolve(sessionId: string, answers: Partial<ChatRequest>, options: PauseOptions): Promise<ChatResponse> {
    const { signal, ...rest } = options;
    return this.send({ ...rest, ...answers, session_id: sessionId }, { signal });
  }

  #streamRequest(path: string, method: 'GET' | 'POST', requestBody: string | undefined, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
    const request = new Request(`${this.baseUrl}${path}`, {
      method,
      headers: { Accept: 'text/event-stream', ...(requestBody === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
      ...(requestBody === undefined ? {} : { body: requestBody }),
      signal,
    });
    return this.transport(request, { timeout: 'headers' });
  }
}

export interface DataPlaneClient {
  /** Every data-plane route, typed from its OpenAPI document (openapi-fetch); a failed call throws. */
  api: Client<paths>;
  chat: ChatClient;
  /** A page the agent handed over: its frame, its screencast, input to it, the check. */
  browser: BrowserClient;
}

export function createDataPlaneClient(options: DataPlaneOptions): DataPlaneClient {
  const tokens = new TokenKeeper(options.token);
  const send = createTransport({
    ...options.retry,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    credential: {
      header: async () => ['Authorization', `Bearer ${await tokens.token()}`],
      renew: async (rejected) => void (await tokens.replace(rejected.replace(/^Bearer /, ''))),
    },
  });
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const api = createClient<paths>({ baseUrl, fetch: (request) => send(request) });
  return { api, chat: new ChatClient(api, send, baseUrl, options.reconnect), browser: new BrowserClient(api, send, baseUrl) };
}
