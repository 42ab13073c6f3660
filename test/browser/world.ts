// What the browser suites share: a site on loopback (which the runtime's browser reaches only when the operator names
// it), a server no page may reach that records every request, and one streamed turn with its frames.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { allEvents } from '../harness/sse.js';

export interface LoopbackSite {
  server: Server;
  url: string;
  port: number;
}

/** An HTTP server on 127.0.0.1, on a port of its own. */
export async function onLoopback(handler: RequestListener): Promise<LoopbackSite> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { server, url: `http://127.0.0.1:${port}`, port };
}

/** A server on loopback that no page may reach: the paths asked of it are in `hits`, which must stay empty. */
export async function forbiddenSite(): Promise<LoopbackSite & { hits: string[] }> {
  const hits: string[] = [];
  const site = await onLoopback((req, res) => {
    hits.push(req.url ?? '');
    res.end('secret');
  });
  return { ...site, hits };
}

/** One turn by `POST /chat/stream`: its frames, and its `done` frame (the turn failing otherwise). */
export async function streamTurn<F extends { type: string }, D = F & { session_id: string }>(runtimeUrl: string, token: string, message: string, sessionId?: string) {
  const response = await fetch(`${runtimeUrl}/chat/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ message, ...(sessionId ? { session_id: sessionId } : {}) }),
  });
  expect(response.status).toBe(200);
  const frames = (await allEvents(response)).map((event) => event.data as F);
  const done = frames.find((frame) => frame.type === 'done') as (D & { session_id: string }) | undefined;
  if (!done) throw new Error(`the turn did not end with done: ${JSON.stringify(frames.at(-1))}`);
  return { frames, done, sessionId: done.session_id };
}
