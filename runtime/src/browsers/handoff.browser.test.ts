// The hand-off's screencast against a real Chromium: a viewer that does not take frames holds the stream back (a
// frame is acknowledged only once written, and Chromium sends the next only then), so nothing queues for a slow
// viewer; once it reads again, frames flow. And the check's parsing of the model's word.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@agentplane/lib/logging';
import type { SseFrame, SseWriter } from '@agentplane/lib/http/sse';
import { eventually } from '@agentplane/test/harness/eventually';
import { chromiumPath, requireChromium } from '@agentplane/test/harness/browser';
import type { SessionRow } from '../sessions/conversations.js';
import { BrowserHandoffs, checkWord, STREAM_WINDOW } from './handoff.js';
import { LocalBrowserSource } from './local.js';
import { BrowserPool } from './pool.js';
import { conversationKey } from './tools.js';

const logger = createLogger({ level: 'silent' });

describe('checkWord', () => {
  it('reads one of the four words and nothing else', () => {
    expect(checkWord('done')).toBe('done');
    expect(checkWord(' Done.\n')).toBe('done');
    expect(checkWord('not done')).toBe('not_done');
    expect(checkWord('NOT_DONE')).toBe('not_done');
    expect(checkWord('stuck: the page says the password is wrong')).toBe('stuck');
    expect(checkWord('Yes, they are done')).toBe('unsure');
    expect(checkWord('')).toBe('unsure');
    expect(checkWord('doneish')).toBe('unsure');
  });
});

describe.skipIf(requireChromium() === null)('the hand-off screencast', () => {
  let site: Server;
  let source: LocalBrowserSource;
  let pool: BrowserPool;
  const session = { id: '5b0f7c8e-0000-4000-8000-000000000001', tenant_id: 't1', owner: 'acme:alice', pending: null } as unknown as SessionRow;

  beforeAll(async () => {
    // A page that paints every frame.
    site = createServer((_req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end('<!doctype html><title>Ticker</title><h1 id="n">0</h1><script>let n = 0; const tick = () => { document.getElementById("n").textContent = String(++n); requestAnimationFrame(tick) }; tick()</script>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;
    source = new LocalBrowserSource({ executablePath: chromiumPath, sandbox: false, egress: { policy: { allowPrivate: false, allowHttp: true }, ownPorts: [], allow: [new URL(url).host] }, logger });
    pool = new BrowserPool(source, { maxContexts: 2, maxPagesPerContext: 3, maxMemoryBytes: null, idleMs: 600_000, waitMs: 10_000, spare: 0 }, logger);
    const browser = await pool.hold(conversationKey(session.tenant_id, session.owner, session.id));
    await (await browser.page()).goto(url);
    pool.release(browser);
  });
  afterAll(async () => {
    await pool?.closeAll();
    await source?.close();
    site?.close();
  });

  it('sends no more than the few frames in flight until the viewer takes them, then goes on', async () => {
    const handoffs = new BrowserHandoffs({ pool, db: undefined as never, sessions: undefined as never, side: undefined as never, counters: undefined as never, pubsub: { subscribe: async () => async () => undefined } as never, logger });
    const controller = new AbortController();
    const written: SseFrame[] = [];
    let take: (() => void) | undefined;
    let taking = new Promise<void>((resolve) => (take = resolve));
    // A viewer whose socket takes nothing until told: each write waits, as a full socket's does.
    const writer: SseWriter = {
      signal: controller.signal,
      async write(frame) {
        written.push(frame);
        await taking;
        return !controller.signal.aborted;
      },
      end: () => controller.abort(),
    };
    const streaming = handoffs.stream(session, '', () => writer);
    await eventually(async () => written.length >= 1, { what: 'the first frame' });
    // The page paints ~60 times a second; held back, the stream stops at Chromium's few frames in flight (it sends
    // a next one only once one is acknowledged) and sends nothing more however long the viewer takes.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const heldAt = written.length;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(written.length).toBe(heldAt);
    expect(heldAt).toBeLessThanOrEqual(3);
    // The viewer takes frames again: they flow.
    take!();
    taking = Promise.resolve();
    await eventually(async () => written.length >= 10, { what: 'frames flowing again' });
    expect(new Set(written.map((frame) => (frame.data as { data: string }).data)).size).toBeGreaterThan(1);
    controller.abort();
    await streaming;
    // The viewer gone, the stream let the conversation's browser go.
    expect(pool.peek(conversationKey(session.tenant_id, session.owner, session.id))).toBeDefined();
  });

  it('with the viewer acknowledging, sends no more than the window of frames it has not taken, however fast its socket', { timeout: 30_000 }, async () => {
    const handoffs = new BrowserHandoffs({ pool, db: undefined as never, sessions: undefined as never, side: undefined as never, counters: undefined as never, pubsub: { subscribe: async () => async () => undefined } as never, logger });
    const controller = new AbortController();
    const written: SseFrame[] = [];
    // A socket that takes everything at once (as kernel buffers do, megabytes of them): only the viewer's
    // acknowledgements hold the stream back.
    const writer: SseWriter = {
      signal: controller.signal,
      async write(frame) {
        written.push(frame);
        return !controller.signal.aborted;
      },
      end: () => controller.abort(),
    };
    const streaming = handoffs.stream(session, '', () => writer, { acknowledged: true });
    await eventually(async () => written.length >= 1, { what: 'the ready event' });
    expect(written[0]).toMatchObject({ event: 'ready', data: { window: STREAM_WINDOW } });
    const stream = (written[0]!.data as { stream: string }).stream;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(written.slice(1).map((frame) => frame.event)).toEqual(Array(STREAM_WINDOW).fill('frame'));
    // Another conversation's stream id, or a frame not sent: refused.
    const other = { ...session, id: '5b0f7c8e-0000-4000-8000-000000000002' } as SessionRow;
    expect(() => handoffs.acknowledge(other, stream, 2)).toThrow(/not found/);
    expect(() => handoffs.acknowledge(session, stream, written.length + 1)).toThrow(/not sent yet/);
    // The viewer takes them: the next come, and stop again at the window.
    expect(handoffs.acknowledge(session, stream, Number(written.at(-1)!.id))).toEqual({ taken: written.length });
    await eventually(async () => written.length === 1 + 2 * STREAM_WINDOW, { what: 'the next frames' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(written.length).toBe(1 + 2 * STREAM_WINDOW);
    // Acknowledgements lost on the way (a deploy, another replica): the newest frame still comes after a while, and
    // its acknowledgement would catch the stream up.
    await eventually(async () => written.length === 2 + 2 * STREAM_WINDOW, { what: 'a frame despite the lost acknowledgements', timeoutMs: 8_000 });
    controller.abort();
    await streaming;
    // Ended: its id is nobody's any more.
    expect(() => handoffs.acknowledge(session, stream, 1)).toThrow(/not found/);
  });
});
