// Retries against a small upstream that answers as told: 429 honours Retry-After, 5xx back off (500 once), and a
// call that is not safe to repeat is not sent again once it reached the server.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConflictError, InternalServerError, RateLimitError, TimeoutError, createDataPlaneClient } from '../src/index.js';

interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** Milliseconds before answering. */
  delayMs?: number;
}

describe('retries', () => {
  let server: Server;
  let url: string;
  let answers: Answer[];
  let seen: { method: string; path: string; at: number }[];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ method: req.method!, path: req.url!, at: Date.now() });
      const answer = answers.shift() ?? { status: 200, body: { has_more: false, next_offset: null, sessions: [] } };
      setTimeout(() => {
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        res.end(JSON.stringify(answer.body ?? { detail: `status ${answer.status}`, code: 'test', request_id: 'req-1' }));
      }, answer.delayMs ?? 0);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    answers = [];
    seen = [];
  });

  const client = (timeoutMs?: number) =>
    createDataPlaneClient({ baseUrl: url, token: async () => 'a.b.c', retry: { baseDelayMs: 10, maxRetries: 3 }, ...(timeoutMs === undefined ? {} : { timeoutMs }) });

  it('waits as long as a 429\'s Retry-After asks, then succeeds', async () => {
    answers = [{ status: 429, headers: { 'retry-after': '1' }, body: { detail: 'rate limit reached; resets soon', code: 'rate_limited', request_id: 'r' } }];
    const { data } = await client().api.GET('/chat/sessions');
    expect(data).toMatchObject({ sessions: [] });
    expect(seen).toHaveLength(2);
    // The backoff alone would wait 5 to 10 ms.
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it('retries a POST /chat refused with 429: nothing was done', async () => {
    answers = [{ status: 429, headers: { 'retry-after': '0' } }];
    await client().api.POST('/chat', { body: { message: 'hi' } });
    expect(seen.map((request) => request.method)).toEqual(['POST', 'POST']);
  });

  it('gives up after its retries and throws RateLimitError', async () => {
    answers = [429, 429, 429, 429, 429].map((status) => ({ status, headers: { 'retry-after': '0' } }));
    await expect(client().api.GET('/chat/sessions')).rejects.toBeInstanceOf(RateLimitError);
    expect(seen).toHaveLength(4);
  });

  it('backs off on 502, 503 and 504 for a GET', async () => {
    answers = [{ status: 502 }, { status: 503 }, { status: 504 }];
    await client().api.GET('/chat/sessions');
    expect(seen).toHaveLength(4);
  });

  it('retries a 500 once only', async () => {
    answers = [{ status: 500 }, { status: 500 }, { status: 500 }];
    await expect(client().api.GET('/chat/sessions')).rejects.toBeInstanceOf(InternalServerError);
    expect(seen).toHaveLength(2);
  });

  it('never retries a POST that reached the server and failed with 5xx', async () => {
    answers = [{ status: 502 }];
    await expect(client().api.POST('/chat', { body: { message: 'hi' } })).rejects.toMatchObject({ status: 502, retryable: true });
    expect(seen).toHaveLength(1);
  });

  it('retries a trigger fire that carries its idempotency key', async () => {
    answers = [{ status: 503 }];
    await client().api.POST('/triggers/{trigger}', { params: { path: { trigger: 'tr_1' }, header: { 'Idempotency-Key': 'event-1' } as never }, body: {} as never });
    expect(seen).toHaveLength(2);
  });

  it('never retries no_provider', async () => {
    answers = [{ status: 409, body: { detail: 'no provider serves this model', code: 'no_provider', request_id: 'r' } }];
    const error = await client().api.GET('/chat/sessions').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConflictError);
    expect(error).toMatchObject({ code: 'no_provider', retryable: false });
    expect(seen).toHaveLength(1);
  });

  it('times out, and stops at once when the caller aborts', async () => {
    answers = [{ status: 200, delayMs: 500, body: {} }, { status: 200, delayMs: 500, body: {} }, { status: 200, delayMs: 500, body: {} }, { status: 200, delayMs: 500, body: {} }];
    await expect(client(100).api.GET('/chat/sessions')).rejects.toBeInstanceOf(TimeoutError);
    const controller = new AbortController();
    const call = client().api.GET('/chat/sessions', { signal: controller.signal });
    controller.abort(new Error('the person left'));
    await expect(call).rejects.toThrow('the person left');
  });
});
