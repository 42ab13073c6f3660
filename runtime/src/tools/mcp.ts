// MCP servers' tools (SPEC.md Tools; docs/decisions/0053): a project's servers, and those an end-user with
// `mcp:manage` attached for themselves, reached with `@modelcontextprotocol/sdk` over Streamable HTTP, falling back
// to the older SSE transport, every request through the URL guard with the server's static headers. Stdio servers
// are never started. A server's tool list is kept for a while (and a failure for less), so a turn does not open a
// connection to list them each time; connections are kept while used and closed when idle. One loader serves the
// tool listing, the turns and the probe, so all three say the same of a server.
import { createHash } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { AppError } from '@agentplane/lib/errors';
import { storableText } from '@agentplane/lib/http/text';
import { STDIO_MCP_REFUSED } from '@agentplane/lib/mcp';
import type { Logger } from '@agentplane/lib/logging';
import type { Capability } from '@agentplane/lib/permissions';
import { cappedBody } from '@agentplane/lib/net/capped';
import type { GuardedFetch } from '@agentplane/lib/net/guarded-fetch';
import type { ServerTool } from '../chat/tools.js';

/** What is kept of a tool's answer as the tool result, as for a webhook tool. */
export const MAX_MCP_RESULT_CHARS = 20_000;
/** How long a server's tool list is kept. */
export const TOOL_LIST_TTL_MS = 5 * 60_000;
/** How long a server that could not be listed is left alone before it is tried again. */
const FAILED_LIST_TTL_MS = 30_000;
/** A connection unused this long is closed. */
const IDLE_CLOSE_MS = 60_000;
/** Most tools taken from one server. */
const MAX_TOOLS_PER_SERVER = 128;
/** The most one answer of a server may carry (an event stream's whole life included): past it, the connection is cut. */
export const MAX_MCP_ANSWER_BYTES = 8 * 1024 * 1024;

export type McpTransport = 'auto' | 'streamable_http' | 'sse';

/** A server as a turn, the listing or the probe knows it. */
export interface McpServer {
  id: string;
  /** Prefix of its tools' names (`<name>__<tool>`). */
  name: string;
  url: string;
  transport: McpTransport;
  headers?: Record<string, string> | undefined;
}

export interface McpToolInfo {
  /** The name the model calls it by: `<server>__<tool>`. */
  name: string;
  /** Its name on the server. */
  remote: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** What the loader says of a server: its tools, the transport it answered on, and a verdict when it failed. */
export interface McpLoad {
  tools: McpToolInfo[];
  transport: 'streamable_http' | 'sse' | null;
  /** Null: nothing to say (the server answered and listed its tools). */
  verdict: string | null;
}

export interface McpToolsOptions {
  /** Guarded fetch with the MCP time limit. */
  fetch: GuardedFetch;
  logger: Logger;
  /** Each call's time limit. */
  callTimeoutMs: number;
  now?: () => number;
}

interface Connection {
  client: Client;
  transport: 'streamable_http' | 'sse';
  timer?: NodeJS.Timeout;
}

/** A tool name as the models' APIs take it: letters, digits, _ and -, at most 64. */
export function mcpToolName(server: string, tool: string): string {
  return `${server}__${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);
}


export class McpTools {
  private readonly lists = new Map<string, { at: number; ttl: number; load: McpLoad }>();
  private readonly connections = new Map<string, Promise<Connection>>();

  constructor(private readonly options: McpToolsOptions) {}

  /** A server's tools as the loader finds them, from the kept list while it is fresh. */
  async load(server: McpServer, options: { fresh?: boolean } = {}): Promise<McpLoad> {
    const key = keyOf(server);
    const now = (this.options.now ?? Date.now)();
    const kept = this.lists.get(key);
    if (!options.fresh && kept && now - kept.at < kept.ttl) return kept.load;
    let load: McpLoad;
    try {
      const connection = await this.connection(server);
      const listed = await connection.client.listTools(undefined, { timeout: this.options.callTimeoutMs });
      const seen = new Set<string>();
      const tools: McpToolInfo[] = [];
      for (const tool of listed.tools.slice(0, MAX_TOOLS_PER_SERVER)) {
        const name = mcpToolName(server.name, tool.name);
        if (seen.has(name)) continue;
        seen.add(name);
        tools.push({ name, remote: tool.name, description: storableText(tool.description ?? '').slice(0, 4_096), parameters: tool.inputSchema as Record<string, unknown> });
      }
      load = { tools, transport: connection.transport, verdict: null };
    } catch (error) {
      this.drop(key);
      load = { tools: [], transport: null, verdict: verdictOf(error) };
    }
    this.lists.set(key, { at: now, ttl: load.verdict === null ? TOOL_LIST_TTL_MS : FAILED_LIST_TTL_MS, load });
    return load;
  }

  /**
   * The servers' tools as server tools of a turn, each needing `needs`; a server that cannot be listed offers none
   * (and says why in the log). `caller` (a tenant and subject) gets calls a session of their own: a server that keeps
   * state per MCP session (a login, a browser, a scratch space) never shares one person's with another. The tool list
   * is shared: it is the server's, not a session's.
   */
  async toolsOf(servers: readonly McpServer[], needs: readonly Capability[] = [], caller?: string): Promise<ServerTool[]> {
    const loads = await Promise.all(servers.map(async (server) => ({ server, load: await this.load(server) })));
    return loads.flatMap(({ server, load }) => {
      if (load.verdict !== null) this.options.logger.warn({ mcp_server: server.name, verdict: load.verdict }, 'MCP server offers no tools');
      return load.tools.map((tool) => this.serverTool(server, tool, needs, caller));
    });
  }

  /** Closes every connection (shutdown). */
  async close(): Promise<void> {
    const open = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(open.map(async (pending) => (await pending.catch(() => undefined))?.client.close().catch(() => undefined)));
  }

  /**
   * One server checked without keeping anything (SPEC.md `POST /tools/mcp/probe`): the same loader, and so the same
   * verdict, as the turns and the listing. A loader that fails outright says nothing.
   */
  async probe(server: McpServer): Promise<McpLoad> {
    const probing = { ...server, id: `probe:${server.id}` };
    try {
      return await this.load(probing, { fresh: true });
    } catch {
      return { tools: [], transport: null, verdict: null };
    } finally {
      this.lists.delete(keyOf(probing));
      this.drop(keyOf(probing));
    }
  }

  private serverTool(server: McpServer, tool: McpToolInfo, needs: readonly Capability[], caller: string | undefined): ServerTool {
    return {
      needs,
      origin: 'mcp',
      definition: { name: tool.name, description: tool.description, parameters: tool.parameters },
      run: async (args, signal) => {
        try {
          const connection = await this.connection(server, caller);
          const result = await connection.client.callTool({ name: tool.remote, arguments: args }, undefined, { signal, timeout: this.options.callTimeoutMs });
          const text = resultText(result.content);
          return result.isError ? { ok: false, message: text === '' ? `${tool.name} failed` : text } : { ok: true, text: text === '' ? '(no content)' : text };
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          this.drop(keyOf(server, caller));
          return { ok: false, message: `The MCP server could not answer: ${verdictOf(error)}` };
        }
      },
    };
  }

  /** The server's kept connection, opened (Streamable HTTP, else SSE when `auto`) when there is none. */
  private connection(server: McpServer, caller?: string): Promise<Connection> {
    const key = keyOf(server, caller);
    let pending = this.connections.get(key);
    if (!pending) {
      pending = this.open(server);
      this.connections.set(key, pending);
      pending.catch(() => this.connections.delete(key));
    }
    return pending.then((connection) => {
      clearTimeout(connection.timer);
      connection.timer = setTimeout(() => this.drop(key), IDLE_CLOSE_MS);
      connection.timer.unref();
      return connection;
    });
  }

  private async open(server: McpServer): Promise<Connection> {
    if (/^(stdio|command):/i.test(server.url)) throw new AppError('invalid_argument', STDIO_MCP_REFUSED);
    const url = new URL(server.url);
    const requestInit: RequestInit = { headers: server.headers ?? {} };
    const guarded = this.options.fetch;
    const fetch: GuardedFetch = async (input, init) => cappedBody(await guarded(input, init), MAX_MCP_ANSWER_BYTES, 'the MCP server');
    // Loaded once a project has a server: a runtime whose projects have none starts without the SDK.
    const [{ Client }, { SSEClientTransport }, { StreamableHTTPClientTransport }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/sse.js'),
      import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    ]);
    const attempt = async (kind: 'streamable_http' | 'sse'): Promise<Connection> => {
      const client = new Client({ name: 'agentplane', version: '1' });
      const transport: Transport =
        kind === 'streamable_http' ? new StreamableHTTPClientTransport(url, { requestInit, fetch }) : new SSEClientTransport(url, { requestInit, fetch });
      try {
        await client.connect(transport, { timeout: this.options.callTimeoutMs });
      } catch (error) {
        await client.close().catch(() => undefined);
        throw error;
      }
      return { client, transport: kind };
    };
    if (server.transport === 'sse') return attempt('sse');
    if (server.transport === 'streamable_http') return attempt('streamable_http');
    try {
      return await attempt('streamable_http');
    } catch (error) {
      // A server of the older protocol answers the Streamable HTTP POST with a client error: try its SSE stream. A
      // server not reached at all (refused by the guard, unreachable, silent) is not tried again another way.
      if (error instanceof AppError) throw error;
      return attempt('sse');
    }
  }

  private drop(key: string): void {
    const pending = this.connections.get(key);
    this.connections.delete(key);
    void pending?.then(
      (connection) => {
        clearTimeout(connection.timer);
        return connection.client.close();
      },
      () => undefined,
    ).catch(() => undefined);
  }
}

/** A server's identity for the caches: where it is and what it is sent, never the headers in clear. */
/** A connection's key: the server as configured (a changed header is another connection), and whose session it is. */
function keyOf(server: McpServer, caller?: string): string {
  return createHash('sha256').update(JSON.stringify([server.id, server.url, server.transport, server.headers ?? {}, caller ?? null])).digest('hex');
}

/** What went wrong, in words a person can act on; never a header's value. */
export function verdictOf(error: unknown): string {
  if (error instanceof AppError) {
    if (error.kind === 'upstream_timeout') return `no answer in time: ${error.message}`;
    if (error.kind === 'upstream_failed') return `unreachable: ${error.message}`;
    return `refused: ${error.message}`;
  }
  // A request the client could not even make (a header it refused) says nothing of its values.
  if (error instanceof TypeError && /header/i.test(error.message)) return "refused: the request could not be made with the server's headers";
  const message = error instanceof Error ? error.message : String(error);
  // The SDK wraps what the guarded fetch threw in errors of its own.
  if (/could not reach|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(message)) return `unreachable: ${message.slice(0, 300)}`;
  if (/\b401\b|unauthori[sz]ed/i.test(message)) return 'the server refused our credentials (HTTP 401): check the headers';
  if (/\b40[34]\b/.test(message)) return `the server refused the connection: ${message.slice(0, 300)}`;
  if (/timed? ?out/i.test(message)) return `no answer in time: ${message.slice(0, 300)}`;
  return `the server did not speak MCP as expected: ${message.slice(0, 300)}`;
}

/** A tool result's content as text: its text items, and a note for each item of another kind. */
function resultText(content: unknown): string {
  if (!Array.isArray(content)) return '';
  const parts = content.map((item: { type?: string; text?: string; resource?: { text?: string; uri?: string } }) => {
    if (item.type === 'text') return item.text ?? '';
    if (item.type === 'resource' && typeof item.resource?.text === 'string') return item.resource.text;
    if (item.type === 'resource_link' || item.type === 'resource') return `[resource ${item.resource?.uri ?? ''}]`.trim();
    return `[${item.type ?? 'content'} not shown]`;
  });
  return storableText(parts.join('\n')).slice(0, MAX_MCP_RESULT_CHARS);
}
