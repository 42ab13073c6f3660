// A customer's webhook-tool handler on loopback, as a test needs one: it keeps every request it was sent (headers
// and raw body) and answers from a script (status, body, headers, a delay), the last reply repeating.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HandlerReply {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  delayMs?: number;
  /** The body sent a character at a time, this many ms apart. */
  dripMs?: number;
}

export interface HandlerRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export class WebhookHandler {
  readonly requests: HandlerRequest[] = [];
  private replies: HandlerReply[] = [{ status: 200, body: 'ok' }];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<WebhookHandler> {
    let handler!: WebhookHandler;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        handler.requests.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        const reply = handler.replies.length > 1 ? handler.replies.shift()! : handler.replies[0]!;
        setTimeout(() => {
          if (res.destroyed) return;
          res.writeHead(reply.status ?? 200, { 'content-type': 'text/plain; charset=utf-8', ...reply.headers });
          if (!reply.dripMs) return void res.end(reply.body ?? '');
          const characters = Array.from(reply.body ?? '');
          const drip = setInterval(() => {
            if (res.destroyed || characters.length === 0) {
              clearInterval(drip);
              res.end();
              return;
            }
            res.write(characters.shift()!);
          }, reply.dripMs);
        }, reply.delayMs ?? 0);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    handler = new WebhookHandler(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return handler;
  }

  /** The replies to the next requests, in order; the last one answers every request after. */
  reply(...replies: HandlerReply[]): void {
    this.replies = replies.length > 0 ? replies : [{ status: 200, body: 'ok' }];
  }

  /** The request's body as JSON. */
  static json(request: HandlerRequest): Record<string, unknown> {
    return JSON.parse(request.body) as Record<string, unknown>;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
