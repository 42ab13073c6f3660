// Keep-alive connections for the guarded fetch, pooled without loosening the URL guard: one agent per origin and
// vetted address set, whose sockets connect only to those addresses. A request is handed the agent of exactly the
// set its own fresh check vetted, so it reuses a connection only when that check allowed the connection's address;
// when the host resolves elsewhere, the new set gets a new agent and the old one's idle sockets time out unused.

import http from 'node:http';
import https from 'node:https';
import { pinnedLookup, type CheckedUrl } from './url-guard.js';

export interface ConnectionPoolOptions {
  /**
   * How long an idle connection is kept (default 4 s). Below the 5 s after which uvicorn (vLLM, LiteLLM), Node and
   * llama.cpp servers close theirs unannounced, so a request rarely races the server's close; a server that
   * announces `Keep-Alive: timeout=N` is held to N - 1 s if that is shorter.
   */
  idleTimeoutMs?: number;
  /** Idle connections kept per origin and address set (default 16); more are closed when their request ends. */
  maxIdlePerAgent?: number;
  /** Agents kept (default 128); past this the least recently used is retired. */
  maxAgents?: number;
}

export const DEFAULT_IDLE_TIMEOUT_MS = 4_000;

/** Pooled connections to vetted addresses, shared by every guarded fetch a program makes; closed on shutdown. */
export class ConnectionPool {
  private readonly agents = new Map<string, http.Agent>();
  private readonly idleTimeoutMs: number;
  private readonly maxIdlePerAgent: number;
  private readonly maxAgents: number;

  constructor(options: ConnectionPoolOptions = {}) {
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.maxIdlePerAgent = options.maxIdlePerAgent ?? 16;
    this.maxAgents = options.maxAgents ?? 128;
  }

  /** The agent for a checked URL: its connections go only to `target.addresses`, and only such requests get it. */
  agentFor({ url, addresses }: CheckedUrl): http.Agent {
    const tls = url.protocol === 'https:';
    const pinned = addresses.map(({ address, family }) => `${family}/${address}`).sort();
    const key = `${url.protocol}//${url.hostname}:${url.port || (tls ? 443 : 80)} ${pinned.join(' ')}`;
    let agent = this.agents.get(key);
    if (agent) {
      // Re-inserted so the map's order stays least recently used first.
      this.agents.delete(key);
    } else {
      const options = {
        keepAlive: true,
        // Active connections are not capped: each is a call in flight (a stream may last minutes), and a cap would
        // queue calls behind them until their deadline. Idle ones are.
        maxFreeSockets: this.maxIdlePerAgent,
        timeout: this.idleTimeoutMs,
        lookup: pinnedLookup(addresses),
      };
      agent = tls ? new https.Agent(options) : new http.Agent(options);
    }
    this.agents.set(key, agent);
    if (this.agents.size > this.maxAgents) {
      const [oldest, retired] = this.agents.entries().next().value!;
      this.agents.delete(oldest);
      retire(retired);
    }
    return agent;
  }

  /** Idle connections and agents held, for tests and benchmarks. */
  get size(): { agents: number; idle: number } {
    let idle = 0;
    for (const agent of this.agents.values()) for (const sockets of Object.values(agent.freeSockets)) idle += sockets?.length ?? 0;
    return { agents: this.agents.size, idle };
  }

  /** Closes every connection, idle or not; for shutdown, after the calls that matter have ended. */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

// An agent no request is handed any more: its idle sockets close now and its busy ones when their request ends, so
// calls in flight finish undisturbed.
function retire(agent: http.Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}
