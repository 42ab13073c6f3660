// A fake OpenAI-compatible provider at the protocol level: a real HTTP server on 127.0.0.1 that speaks the wire
// format the `openai` SDK (and any OpenAI-compatible client) expects, checks the bearer key, can be told to fail
// or hang, and records every request for the test to read. Routes live in one table so later issues can add
// streaming and tool calls without reshaping it.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path without the `/v1` prefix and without the query, e.g. `/embeddings`. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body, when there was one. */
  body: unknown;
}

/** OpenAI's error object: what every non-2xx answer carries under `error`. */
export interface OpenAIErrorBody {
  message: string;
  type?: string;
  param?: string | null;
  code?: string | null;
}

export interface ChatRequest {
  model: string;
  messages: { role: string; content?: unknown }[];
  [field: string]: unknown;
}

/** A scripted chat answer: the assistant text, or a function of the request. */
export type ChatScript = string | ((request: ChatRequest) => string);

export interface FakeOpenAIOptions {
  /** The key callers must send as `Authorization: Bearer <apiKey>`. */
  apiKey: string;
  /** Chat models the catalog lists (default `['gpt-4o-mini']`). */
  chatModels?: string[];
  /** Embedding models the catalog lists, each with the dimension of the vectors it returns (default none). */
  embeddingModels?: Record<string, number>;
}

/** A request handler of the fake: the recorded request in, a status and JSON body out. */
export type FakeRoute = (request: RecordedRequest, fake: FakeOpenAIServer) => { status: number; body: unknown };

interface Fault {
  path: string | undefined;
  remaining: number;
  answer: { status: number; body: unknown } | 'hang';
}

export class FakeOpenAIServer {
  readonly requests: RecordedRequest[] = [];
  apiKey: string;
  chatModels: string[];
  embeddingModels: Record<string, number>;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly routes = new Map<string, FakeRoute>();
  private faults: Fault[] = [];
  private chatScripts: ChatScript[] = [];
  private port = 0;

  private constructor(options: FakeOpenAIOptions) {
    this.apiKey = options.apiKey;
    this.chatModels = [...(options.chatModels ?? ['gpt-4o-mini'])];
    this.embeddingModels = { ...(options.embeddingModels ?? {}) };
    this.server = createServer((req, res) => void this.serve(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.route('GET', '/models', () => ({ status: 200, body: this.catalog() }));
    this.route('POST', '/embeddings', (request) => this.embeddings(request.body as Record<string, unknown>));
    this.route('POST', '/chat/completions', (request) => this.chatCompletion(request.body as ChatRequest));
  }

  /** Starts a fake on a free port of 127.0.0.1. */
  static async start(options: FakeOpenAIOptions): Promise<FakeOpenAIServer> {
    const fake = new FakeOpenAIServer(options);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.port = (fake.server.address() as { port: number }).port;
    return fake;
  }

  /** The base URL clients are given, `http://127.0.0.1:<port>/v1`. */
  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Adds or replaces a route (path without `/v1`); how later tests teach the fake new endpoints. */
  route(method: string, path: string, handler: FakeRoute): void {
    this.routes.set(`${method.toUpperCase()} ${path}`, handler);
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
    this.faults.push({ path: options.path, remaining: options.times ?? Infinity, answer: 'hang' });
  }

  /** Back to answering normally. */
  clearFaults(): void {
    this.faults = [];
  }

  /** Queues chat answers, used in order; when none is queued the assistant answers `ok`. */
  scriptChat(...scripts: ChatScript[]): void {
    this.chatScripts.push(...scripts);
  }

  /** Requests to one path (without `/v1`), in arrival order. */
  requestsTo(path: string): RecordedRequest[] {
    return this.requests.filter((request) => request.path === path);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
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
    const request: RecordedRequest = { method: req.method ?? 'GET', path, headers: { ...req.headers }, body };
    this.requests.push(request);

    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented !== this.apiKey) {
      // Echoes the key it was given, as careless providers do, so tests prove the caller never passes it on.
      const message = presented === undefined ? "You didn't provide an API key." : `Incorrect API key provided: ${presented}.`;
      return send(res, 401, errorBody(message, 'invalid_request_error', presented === undefined ? null : 'invalid_api_key'));
    }
    const fault = this.faults.find((f) => f.remaining > 0 && (f.path === undefined || f.path === path));
    if (fault) {
      fault.remaining -= 1;
      if (fault.answer === 'hang') return;
      return send(res, fault.answer.status, fault.answer.body);
    }
    const handler = this.routes.get(`${request.method} ${path}`);
    if (!handler) return send(res, 404, errorBody(`Invalid URL (${request.method} /v1${path})`, 'invalid_request_error'));
    const answer = handler(request, this);
    send(res, answer.status, answer.body);
  }

  private catalog() {
    const ids = [...this.chatModels, ...Object.keys(this.embeddingModels)];
    return { object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })) };
  }

  private embeddings(body: Record<string, unknown>) {
    const model = String(body.model ?? '');
    const dimension = this.embeddingModels[model];
    if (dimension === undefined) return modelNotFound(model);
    const inputs = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) ? body.input.map(String) : undefined;
    if (!inputs || inputs.length === 0) return { status: 400, body: errorBody("'input' must be a string or a non-empty array", 'invalid_request_error', null, 'input') };
    const data = inputs.map((input, index) => {
      const vector = vectorOf(model, input, dimension);
      // The SDK asks for base64 unless told otherwise: little-endian float32, as OpenAI sends it.
      const embedding = body.encoding_format === 'base64' ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : [...vector];
      return { object: 'embedding', index, embedding };
    });
    const tokens = inputs.reduce((sum, input) => sum + Math.ceil(input.length / 4), 0);
    return { status: 200, body: { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } } };
  }

  private chatCompletion(body: ChatRequest) {
    if (!this.chatModels.includes(body.model)) return modelNotFound(body.model);
    if (body.stream === true) return { status: 400, body: errorBody('this fake does not stream yet', 'invalid_request_error', null, 'stream') };
    const script = this.chatScripts.shift() ?? 'ok';
    const content = typeof script === 'function' ? script(body) : script;
    const completion = this.requestsTo('/chat/completions').length;
    return {
      status: 200,
      body: {
        id: `chatcmpl-fake-${completion}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: Math.ceil(content.length / 4), total_tokens: 1 + Math.ceil(content.length / 4) },
      },
    };
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

function errorBody(message: string, type: string, code: string | null = null, param: string | null = null) {
  return { error: { message, type, param, code } };
}

function modelNotFound(model: string) {
  return { status: 404, body: errorBody(`The model \`${model}\` does not exist or you do not have access to it.`, 'invalid_request_error', 'model_not_found') };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
