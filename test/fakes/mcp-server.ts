// A real MCP server for the tests: the SDK's own McpServer over HTTP, as a customer would run one. It serves
// Streamable HTTP at /mcp (stateless: a server per request) and, when asked, only the older SSE transport (GET /sse
// opens the stream, POST /messages carries the client's messages). Its tools: `add`, `whoami` (the Authorization
// header the request carried) and `fail` (an error result). It keeps each request's path and headers.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

function toolServer(headers: IncomingHttpHeaders): McpServer {
  const server = new McpServer({ name: 'test-tools', version: '1.0.0' });
  server.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
    content: [{ type: 'text', text: String(a + b) }],
  }));
  server.registerTool('whoami', { description: 'The credential this request carried' }, async () => ({
    content: [{ type: 'text', text: `authorization: ${headers.authorization ?? '(none)'}` }],
  }));
  server.registerTool('fail', { description: 'Always fails' }, async () => ({ content: [{ type: 'text', text: 'the tool broke' }], isError: true }));
  return server;
}

async function bodyOf(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

export class TestMcpServer {
  readonly requests: { method: string; path: string; headers: IncomingHttpHeaders }[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** `transport`: which protocol it speaks; `sse` answers the Streamable HTTP POST with 405, as an older server does. */
  static async start(options: { transport?: 'streamable_http' | 'sse'; requireAuthorization?: string } = {}): Promise<TestMcpServer> {
    const sessions = new Map<string, SSEServerTransport>();
    let self!: TestMcpServer;
    const server = createServer((req, res) => {
      void (async () => {
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        self.requests.push({ method: req.method ?? '', path, headers: req.headers });
        if (options.requireAuthorization && req.headers.authorization !== options.requireAuthorization) {
          res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
          return;
        }
        if (options.transport !== 'sse' && path === '/mcp' && req.method === 'POST') {
          const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
          const mcp = toolServer(req.headers);
          res.on('close', () => void transport.close().then(() => mcp.close()));
          await mcp.connect(transport);
          await transport.handleRequest(req, res, await bodyOf(req));
          return;
        }
        if (options.transport === 'sse' && path === '/sse' && req.method === 'GET') {
          const transport = new SSEServerTransport('/messages', res);
          sessions.set(transport.sessionId, transport);
          res.on('close', () => sessions.delete(transport.sessionId));
          await toolServer(req.headers).connect(transport);
          return;
        }
        if (options.transport === 'sse' && path === '/messages' && req.method === 'POST') {
          const transport = sessions.get(new URL(req.url ?? '/', 'http://x').searchParams.get('sessionId') ?? '');
          if (!transport) return void res.writeHead(404).end('no such session');
          await transport.handlePostMessage(req, res, await bodyOf(req));
          return;
        }
        res.writeHead(req.method === 'POST' || req.method === 'GET' ? 405 : 404).end();
      })().catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(error));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    self = new TestMcpServer(server, `${base}${options.transport === 'sse' ? '/sse' : '/mcp'}`);
    return self;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
