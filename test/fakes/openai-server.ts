// A fake OpenAI-compatible provider at the protocol level: a real HTTP (or HTTPS) server on 127.0.0.1 that speaks
// the wire format the `openai` SDK (and any OpenAI-compatible client) expects, streamed (SSE chunks, tool-call
// deltas, the usage chunk) or not, checks the bearer key, answers scripted chat replies in order, answers embeddings
// in the form asked for or in one form whatever was asked, can be told to fail, hang, drip or cut a stream, and
// records every request, how its connection ended and how many connections it accepted, for the test to read.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RecordedRequest {
  method: string;
  /** Path without the `/v1` prefix and without the query, e.g. `/embeddings`. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body, when there was one. */
  body: unknown;
  /** How the exchange ended, as the fake saw it; `pending` while the connection is open. */
  outcome: RequestOutcome;
  /** SSE events written so far, for a streamed answer. */
  chunksSent: number;
}

/**
 * `answered`: the whole answer was written. `client_closed`: the client went away first (an abort, its timeout).
 * `dropped`: the fake cut the connection itself (`failAfterChunks`, a `drop` answer, or `close()`).
 */
export type RequestOutcome = 'pending' | 'answered' | 'client_closed' | 'dropped';

/** OpenAI's error object: what every non-2xx answer carries under `error`. */
export interface OpenAIErrorBody {
  message: string;
  type?: string;
  param?: string | null;
  code?: string | null;
}

export interface ChatRequest {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown }[];
  [field: string]: unknown;
}

export interface ScriptedToolCall {
  /** Default `call_<n>_<i>`. */
  id?: string;
  name: string;
  /** An object is sent as its JSON text; a string is sent as is (it may be invalid JSON on purpose). */
  arguments: object | string;
}

/** A scripted successful answer. Streamed one word per chunk (`chunkBy: 'char'`: one character per chunk). */
export interface ScriptedAnswer {
  text?: string;
  toolCalls?: ScriptedToolCall[];
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: 'stop' | 'tool_calls' | 'length' | 'content_filter';
  /** Default: counted roughly (words of the messages, words of the answer). */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Streamed: the pause between chunks, so a test can cancel mid-stream. Not streamed: the wait before answering. */
  dripMs?: number;
  chunkBy?: 'word' | 'char';
  /** Streamed: the connection is cut after this many chunks. Not streamed: it is cut without an answer. */
  failAfterChunks?: number;
}

/** A scripted failure: `status` with OpenAI's error body. */
export interface ScriptedError {
  status: number;
  message: string;
  /** Default by status (`invalid_request_error`, `rate_limit_exceeded`'s `requests`, `server_error`). */
  type?: string;
  code?: string | null;
}

/**
 * One scripted chat reply: the assistant's text, an answer, an error, `'hang'` (accepted and never answered; a
 * model that must say "hang" is `{ text: 'hang' }`), or a function of the request returning one of those.
 */
export type ChatReply = string | ScriptedAnswer | ScriptedError | ((request: ChatRequest) => ChatReply);

/** The name earlier tests use for a chat reply. */
export type ChatScript = ChatReply;

export interface FakeOpenAIOptions {
  /** The key callers must send as `Authorization: Bearer <apiKey>`. */
  apiKey: string;
  /** Chat models the catalog lists (default `['gpt-4o-mini']`). */
  chatModels?: string[];
  /** Embedding models the catalog lists, each with the dimension of the vectors it returns (default none). */
  embeddingModels?: Record<string, number>;
  /**
   * Rerank models `POST /rerank` serves (the Cohere and Jina shape that vLLM, LiteLLM and Infinity speak): a
   * document's relevance is the share of the query's words it holds, so an order can be predicted.
   */
  rerankModels?: string[];
  /**
   * Keep every request for assertions (default true). Benchmarks turn it off, so what a long run retains is the
   * runtime's, not the fake's own log of bodies.
   */
  record?: boolean;
  /** Serve HTTPS with this key and certificate (PEM) instead of plain HTTP; the certificate must name 127.0.0.1. */
  tls?: { key: string; cert: string };
  /**
   * What a chat call answers when no reply is queued (default: the last user message, echoed). A fake in its own
   * process (`serve-openai.ts`) cannot be scripted per call, so a benchmark gives it this instead.
   */
  defaultReply?: ScriptedAnswer;
  /**
   * The form embeddings are answered in: `requested` (default) honours `encoding_format` as OpenAI does (float
   * unless base64 is asked for); `float` and `base64` answer that form whatever was asked, as several
   * OpenAI-compatible servers and gateways do.
   */
  embeddingFormat?: EmbeddingFormat;
}

export type EmbeddingFormat = 'requested' | 'float' | 'base64';

/** What a route answers. */
export type FakeAnswer =
  | { status: number; body: unknown; delayMs?: number }
  /** Accepted and never answered. */
  | { hang: true }
  /** The connection is cut without an answer. */
  | { drop: true; delayMs?: number }
  /** 200 `text/event-stream`: each event as a `data:` line, then `data: [DONE]`, unless cut after `failAfterChunks`. */
  | { events: unknown[]; dripMs?: number; failAfterChunks?: number };

/** A request handler of the fake: the recorded request in, what to answer out. */
export type FakeRoute = (request: RecordedRequest, fake: FakeOpenAIServer) => FakeAnswer;

interface Fault {
  path: string | undefined;
  remaining: number;
  answer: FakeAnswer;
}

const ARGUMENT_PIECE = 6;

export class FakeOpenAIServer {
  readonly requests: RecordedRequest[] = [];
  private readonly record: boolean;
  apiKey: string;
  chatModels: string[];
  embeddingModels: Record<string, number>;
  rerankModels: string[];
  embeddingFormat: EmbeddingFormat;
  /** TCP connections accepted so far: how a test or benchmark sees whether its client keeps connections alive. */
  connectionsAccepted = 0;
  /** TLS handshakes completed so far (HTTPS only). */
  handshakes = 0;
  private readonly server: Server;
  private readonly tls: boolean;
  private readonly sockets = new Set<Socket>();
  private readonly routes = new Map<string, FakeRoute>();
  private readonly endings = new WeakMap<RecordedRequest, Promise<RequestOutcome>>();
  // Wakes every dripping answer when the fake closes, so nothing it started outlives it.
  private readonly closing = new AbortController();
  private faults: Fault[] = [];
  private chatScripts: ChatReply[] = [];
  private readonly defaultReply: ScriptedAnswer | undefined;
  private port = 0;

  private constructor(options: FakeOpenAIOptions) {
    this.apiKey = options.apiKey;
    this.record = options.record ?? true;
    this.defaultReply = options.defaultReply;
    this.chatModels = [...(options.chatModels ?? ['gpt-4o-mini'])];
    this.embeddingModels = { ...(options.embeddingModels ?? {}) };
    this.rerankModels = [...(options.rerankModels ?? [])];
    this.embeddingFormat = options.embeddingFormat ?? 'requested';
    // A client that leaves while its body is read rejects the read: nothing to answer then.
    const listener: RequestListener = (req, res) => void this.serve(req, res).catch(() => res.destroy());
    this.tls = options.tls !== undefined;
    this.server = options.tls ? createTlsServer({ key: options.tls.key, cert: options.tls.cert }, listener) : createServer(listener);
    this.server.on('connection', (socket: Socket) => {
      this.connectionsAccepted += 1;
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.server.on('secureConnection', () => (this.handshakes += 1));
    this.route('GET', '/models', () => ({ status: 200, body: this.catalog() }));
    this.route('POST', '/embeddings', (request) => this.embeddings(request.body as Record<string, unknown>));
    this.route('POST', '/rerank', (request) => this.rerank(request.body as Record<string, unknown>));
    this.route('POST', '/chat/completions', (request) => this.chatCompletion((request.body ?? {}) as ChatRequest));
  }

  /** Starts a fake on a free port of 127.0.0.1. */
  static async start(options: FakeOpenAIOptions): Promise<FakeOpenAIServer> {
    const fake = new FakeOpenAIServer(options);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.port = (fake.server.address() as { port: number }).port;
    return fake;
  }

  /** The base URL clients are given, `http://127.0.0.1:<port>/v1` (`https:` when serving TLS). */
  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}/v1`;
  }

  /** Adds or replaces a route (path without `/v1`); how later tests teach the fake new endpoints. */
  route(method: string, path: string, handler: FakeRoute): void {
    this.routes.set(`${method.toUpperCase()} ${path}`, handler);
  }

  /** The handler a route has now, so a test can wrap it (delay some answers) and put it back. */
  routeOf(method: string, path: string): FakeRoute | undefined {
    return this.routes.get(`${method.toUpperCase()} ${path}`);
  }

  /**
   * The next `times` requests (to `path`, or any path) answer `status` with OpenAI's error shape. Checked after
   * the key, so a failing provider still refuses a wrong key first, as a real one does.
   */
  fail(status: number, error: OpenAIErrorBody, options: { path?: string; times?: number } = {}): void {
    this.faults.push({ path: options.path, remaining: options.times ?? Infinity, answer: { status, body: { error: { type: 'server_error', param: null, code: null, ...error } } } });
  }

  /** The next `times` requests (to `path`, or any path) are accepted and never answered. */
  hang(options: { path?: string; times?: number } = {}): void {
    this.faults.push({ path: options.path, remaining: options.times ?? Infinity, answer: { hang: true } });
  }

  /** Back to answering normally. */
  clearFaults(): void {
    this.faults = [];
  }

  /**
   * Queues what the next chat calls answer, used in order (a call the fake refuses, such as an unknown model,
   * uses none). When none is queued the assistant echoes the last user message.
   */
  script(...replies: ChatReply[]): void {
    this.chatScripts.push(...replies);
  }

  /** Drops the replies not used yet (a test that failed half way leaves none for the next). */
  clearScripts(): void {
    this.chatScripts = [];
  }

  /** The earlier name of `script`. */
  scriptChat(...replies: ChatReply[]): void {
    this.script(...replies);
  }

  /** Scripted replies not used yet. */
  get scriptsLeft(): number {
    return this.chatScripts.length;
  }

  /** Requests to one path (without `/v1`), in arrival order. */
  requestsTo(path: string): RecordedRequest[] {
    return this.requests.filter((request) => request.path === path);
  }

  /** The bodies of the chat calls received, in arrival order. */
  chatRequests(): ChatRequest[] {
    return this.requestsTo('/chat/completions').map((request) => request.body as ChatRequest);
  }

  /** Resolves once the request's connection has ended, with how it ended. */
  ended(request: RecordedRequest): Promise<RequestOutcome> {
    return this.endings.get(request) ?? Promise.resolve(request.outcome);
  }

  /** Stops at once: open, hanging and dripping answers are cut. */
  async close(): Promise<void> {
    this.closing.abort();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Every outcome is settled by the time close() returns.
    await Promise.all(this.requests.map((request) => this.ended(request)));
  }

  /** The same as `close()`. */
  stop(): Promise<void> {
    return this.close();
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = url.pathname.replace(/^\/v1(?=\/)/, '');
    let body: unknown;
    try {
      body = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      return send(res, 400, errorBody('We could not parse the JSON body of your request.', 'invalid_request_error'));
    }
    const request: RecordedRequest = { method: req.method ?? 'GET', path, headers: { ...req.headers }, body, outcome: 'pending', chunksSent: 0 };
    if (this.record) {
      this.requests.push(request);
      this.endings.set(
        request,
        new Promise((resolve) => {
          const settle = () => {
            if (request.outcome === 'pending') request.outcome = res.writableFinished ? 'answered' : this.closing.signal.aborted ? 'dropped' : 'client_closed';
            resolve(request.outcome);
          };
          if (res.destroyed) settle();
          else res.once('close', settle);
        }),
      );
    }

    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented !== this.apiKey) {
      // Echoes the key it was given, as careless providers do, so tests prove the caller never passes it on.
      const message = presented === undefined ? "You didn't provide an API key." : `Incorrect API key provided: ${presented}.`;
      return send(res, 401, errorBody(message, 'invalid_request_error', presented === undefined ? null : 'invalid_api_key'));
    }
    const fault = this.faults.find((f) => f.remaining > 0 && (f.path === undefined || f.path === path));
    if (fault) {
      fault.remaining -= 1;
      return this.answer(res, request, fault.answer);
    }
    const handler = this.routes.get(`${request.method} ${path}`);
    if (!handler) return send(res, 404, errorBody(`Invalid URL (${request.method} /v1${path})`, 'invalid_request_error'));
    return this.answer(res, request, handler(request, this));
  }

  private async answer(res: ServerResponse, request: RecordedRequest, answer: FakeAnswer): Promise<void> {
    const signal = this.closing.signal;
    if ('hang' in answer) return;
    if ('drop' in answer) {
      if (answer.delayMs) await sleep(answer.delayMs, undefined, { signal }).catch(() => undefined);
      return drop(res, request);
    }
    if ('status' in answer) {
      if (answer.delayMs) await sleep(answer.delayMs, undefined, { signal }).catch(() => undefined);
      if (!res.destroyed) send(res, answer.status, answer.body);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.flushHeaders();
    for (const [index, event] of answer.events.entries()) {
      if (answer.failAfterChunks !== undefined && index >= answer.failAfterChunks) return drop(res, request);
      if (answer.dripMs && index > 0) await sleep(answer.dripMs, undefined, { signal }).catch(() => undefined);
      if (res.destroyed) return;
      await write(res, `data: ${JSON.stringify(event)}\n\n`);
      request.chunksSent += 1;
    }
    if (answer.failAfterChunks !== undefined && answer.events.length >= answer.failAfterChunks) return drop(res, request);
    await write(res, 'data: [DONE]\n\n');
    res.end();
  }

  private catalog() {
    const ids = [...this.chatModels, ...Object.keys(this.embeddingModels)];
    return { object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })) };
  }

  private rerank(body: Record<string, unknown>): FakeAnswer {
    const model = String(body.model ?? '');
    if (!this.rerankModels.includes(model)) return modelNotFound(model);
    const documents = Array.isArray(body.documents) ? body.documents.map((d) => (typeof d === 'string' ? d : String((d as { text?: unknown })?.text ?? ''))) : undefined;
    if (typeof body.query !== 'string' || !documents) return { status: 400, body: errorBody("'query' and 'documents' are required", 'invalid_request_error') };
    const words = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
    const asked = [...words(body.query)];
    const results = documents
      .map((text, index) => {
        const held = words(text);
        return { index, relevance_score: asked.length === 0 ? 0 : asked.filter((word) => held.has(word)).length / asked.length };
      })
      .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
    const topN = typeof body.top_n === 'number' ? body.top_n : results.length;
    return { status: 200, body: { model, results: results.slice(0, topN), usage: { total_tokens: documents.length } } };
  }

  private embeddings(body: Record<string, unknown>): FakeAnswer {
    const model = String(body.model ?? '');
    const dimension = this.embeddingModels[model];
    if (dimension === undefined) return modelNotFound(model);
    const inputs = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) ? body.input.map(String) : undefined;
    if (!inputs || inputs.length === 0) return { status: 400, body: errorBody("'input' must be a string or a non-empty array", 'invalid_request_error', null, 'input') };
    const data = inputs.map((input, index) => {
      const vector = vectorOf(model, input, dimension);
      // The SDK asks for base64 unless told otherwise: little-endian float32, as OpenAI sends it.
      const base64 = this.embeddingFormat === 'requested' ? body.encoding_format === 'base64' : this.embeddingFormat === 'base64';
      const embedding = base64 ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : [...vector];
      return { object: 'embedding', index, embedding };
    });
    const tokens = inputs.reduce((sum, input) => sum + Math.ceil(input.length / 4), 0);
    return { status: 200, body: { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } } };
  }

  private chatCompletion(body: ChatRequest): FakeAnswer {
    if (!this.chatModels.includes(body.model)) return modelNotFound(body.model);
    const problem = chatRequestProblem(body);
    if (problem) return { status: 400, body: errorBody(problem.message, 'invalid_request_error', null, problem.param) };

    let reply = this.chatScripts.shift() ?? this.defaultReply ?? echo(body);
    while (typeof reply === 'function') reply = reply(body);
    if (reply === 'hang') return { hang: true };
    const scripted: ScriptedAnswer | ScriptedError = typeof reply === 'string' ? { text: reply } : reply;
    if ('status' in scripted) return scriptedError(scripted);

    const n = this.requestsTo('/chat/completions').length;
    const calls = (scripted.toolCalls ?? []).map((call, i) => ({
      id: call.id ?? `call_${n}_${i}`,
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
    }));
    const finishReason = scripted.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop');
    const counted = scripted.usage ?? { prompt_tokens: promptTokens(body), completion_tokens: wordsOf(scripted.text ?? '') + calls.reduce((sum, call) => sum + Math.ceil(call.arguments.length / 4), 0) };
    const usage = { ...counted, total_tokens: counted.prompt_tokens + counted.completion_tokens };
    const head = { id: `chatcmpl-fake-${n}`, created: Math.floor(Date.now() / 1000), model: body.model, system_fingerprint: 'fp_fake' };

    if (body.stream !== true) {
      if (scripted.failAfterChunks !== undefined) return { drop: true, ...(scripted.dripMs ? { delayMs: scripted.dripMs } : {}) };
      const message = {
        role: 'assistant',
        content: scripted.text ?? (calls.length > 0 ? null : ''),
        refusal: null,
        ...(calls.length > 0 ? { tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })) } : {}),
      };
      return {
        status: 200,
        body: { ...head, object: 'chat.completion', choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }], usage },
        ...(scripted.dripMs ? { delayMs: scripted.dripMs } : {}),
      };
    }

    // OpenAI's chunk sequence: the role, the content, each tool call (id and name, then its arguments in pieces),
    // the finish reason on an empty delta, then the usage on a chunk with no choices when it was asked for.
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const chunk = (delta: object, finish: string | null = null) => ({
      ...head,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });
    const by = scripted.chunkBy ?? 'word';
    const events: unknown[] = [chunk({ role: 'assistant', content: scripted.text === undefined && calls.length > 0 ? null : '', refusal: null })];
    for (const piece of textPieces(scripted.text ?? '', by)) events.push(chunk({ content: piece }));
    calls.forEach((call, index) => {
      events.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }));
      for (const piece of fixedPieces(call.arguments, by === 'char' ? 1 : ARGUMENT_PIECE)) events.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    });
    events.push(chunk({}, finishReason));
    if (includeUsage) events.push({ ...head, object: 'chat.completion.chunk', choices: [], usage });
    return { events, ...(scripted.dripMs ? { dripMs: scripted.dripMs } : {}), ...(scripted.failAfterChunks !== undefined ? { failAfterChunks: scripted.failAfterChunks } : {}) };
  }
}

/** A unit vector of `dimension` floats, the same for the same model and input. */
export function vectorOf(model: string, input: string, dimension: number): Float32Array {
  const vector = new Float32Array(dimension);
  let block = Buffer.alloc(0);
  for (let i = 0; i < dimension; i++) {
    if (i % 8 === 0) block = createHash('sha256').update(`${model}\0${input}\0${i / 8}`).digest();
    vector[i] = block.readInt32LE((i % 8) * 4) / 2 ** 31;
  }
  const norm = Math.hypot(...vector) || 1;
  return vector.map((x) => x / norm);
}

/**
 * What OpenAI refuses with 400 before generating anything, so a caller that builds a malformed conversation (a
 * tool result answering no call, a call left unanswered) fails here as it would there.
 */
function chatRequestProblem(body: ChatRequest): { message: string; param: string } | undefined {
  if (!Array.isArray(body.messages) || body.messages.length === 0) return { message: "[] is too short - 'messages'", param: 'messages' };
  if (body.stream_options != null && body.stream !== true) {
    return { message: "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param: 'stream_options' };
  }
  if (body.tools !== undefined) {
    const tools = Array.isArray(body.tools) ? (body.tools as { type?: unknown; function?: { name?: unknown } }[]) : [];
    const bad = tools.findIndex((tool) => tool?.type !== 'function' || typeof tool.function?.name !== 'string');
    if (!Array.isArray(body.tools) || bad >= 0) return { message: `Invalid 'tools[${Math.max(bad, 0)}]': expected a function tool with a name.`, param: `tools[${Math.max(bad, 0)}]` };
  }
  let unanswered: string[] = [];
  for (const [i, message] of body.messages.entries()) {
    if (message.role === 'tool') {
      // Tool messages take text only (an image must come in a user message).
      if (Array.isArray(message.content) && message.content.some((part: { type?: unknown }) => part?.type !== 'text')) {
        return { message: `Invalid 'messages[${i}].content': a tool message's content parts must be text.`, param: `messages.[${i}].content` };
      }
      const answered = unanswered.indexOf(String(message.tool_call_id));
      if (answered < 0) {
        return { message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", param: `messages.[${i}].role` };
      }
      unanswered.splice(answered, 1);
      continue;
    }
    if (unanswered.length > 0) {
      return {
        message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${unanswered.join(', ')}`,
        param: 'messages',
      };
    }
    if (message.role === 'assistant' && Array.isArray(message.tool_calls)) unanswered = (message.tool_calls as { id?: unknown }[]).map((call) => String(call.id));
  }
  return undefined;
}

/** The default reply: the last user message said back, or `ok` when it has no text. */
function echo(body: ChatRequest): string {
  const last = [...body.messages].reverse().find((message) => message.role === 'user');
  return (last && textOf(last.content)) || 'ok';
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: { type?: unknown; text?: unknown }) => (part?.type === 'text' && typeof part.text === 'string' ? part.text : '')).join('');
}

function wordsOf(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

/** Roughly what a tokenizer would count: the words of every message and its tool calls, at least 1. */
function promptTokens(body: ChatRequest): number {
  const words = body.messages.reduce((sum, message) => sum + wordsOf(textOf(message.content)) + (message.tool_calls ? Math.ceil(JSON.stringify(message.tool_calls).length / 4) : 0), 0);
  return Math.max(1, words);
}

/** The text in stream chunks: words with their leading space, as tokens come, or single characters. */
function textPieces(text: string, by: 'word' | 'char'): string[] {
  if (text === '') return [];
  if (by === 'char') return Array.from(text);
  const pieces = text.match(/\s*\S+/g) ?? [text];
  const covered = pieces.join('').length;
  if (covered < text.length) pieces.push(text.slice(covered));
  return pieces;
}

function fixedPieces(text: string, size: number): string[] {
  const chars = Array.from(text);
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += size) pieces.push(chars.slice(i, i + size).join(''));
  return pieces;
}

function scriptedError(error: ScriptedError): FakeAnswer {
  const type = error.type ?? (error.status === 429 ? 'requests' : error.status >= 500 ? 'server_error' : 'invalid_request_error');
  const code = error.code !== undefined ? error.code : error.status === 429 ? 'rate_limit_exceeded' : error.status === 401 ? 'invalid_api_key' : null;
  return { status: error.status, body: errorBody(error.message, type, code) };
}

function errorBody(message: string, type: string, code: string | null = null, param: string | null = null) {
  return { error: { message, type, param, code } };
}

function modelNotFound(model: string): FakeAnswer {
  return { status: 404, body: errorBody(`The model \`${model}\` does not exist or you do not have access to it.`, 'invalid_request_error', 'model_not_found') };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Resolves once the data is handed to the socket (or the response is gone), so a cut that follows keeps it. */
function write(res: ServerResponse, data: string): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) return resolve();
    res.write(data, () => resolve());
  });
}

function drop(res: ServerResponse, request: RecordedRequest): void {
  if (request.outcome === 'pending') request.outcome = 'dropped';
  res.destroy();
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
