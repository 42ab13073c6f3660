// The event stream's writer over a real express server: a client that left before the stream opened (while the
// route authorized it, or waited on a page) must not leave the writer waiting for ever; one that reads gets frames.
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'node:http';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSse, type SseWriter } from './sse.js';

describe('openSse', () => {
  let url: string;
  let close: () => Promise<void>;
  const opened: Array<{ writer: SseWriter; wrote: Promise<boolean> }> = [];
  let release: () => void = () => {};
  let routeWaits = new Promise<void>((resolve) => (release = resolve));

  beforeAll(async () => {
    const app = express();
    app.get('/late', async (req, res) => {
      // The route's own work before the stream opens; the client may leave meanwhile.
      await routeWaits;
      const writer = openSse(req, res);
      opened.push({ writer, wrote: writer.write({ id: 1, event: 'frame', data: { n: 1 } }) });
    });
    app.get('/now', (req, res) => {
      const writer = openSse(req, res);
      void writer.write({ id: 1, event: 'frame', data: { n: 1 } }).then(() => writer.end());
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  });
  afterAll(async () => close());

  it('ends at once for a client that left before it opened: aborted, and writes answer false instead of waiting', async () => {
    const gone = new Promise<void>((resolve) => {
      const req = httpRequest(`${url}/late`);
      req.on('error', () => resolve());
      req.on('socket', (socket) => socket.on('connect', () => setTimeout(() => (req.destroy(), resolve()), 50)));
      req.end();
    });
    await gone;
    await new Promise((resolve) => setTimeout(resolve, 100));
    release();
    await expect.poll(() => opened.length).toBe(1);
    expect(opened[0]!.writer.signal.aborted).toBe(true);
    await expect(opened[0]!.wrote).resolves.toBe(false);
    routeWaits = new Promise<void>((resolve) => (release = resolve));
  });

  it('writes frames to a client that reads', async () => {
    const text = await (await fetch(`${url}/now`)).text();
    expect(text).toContain('id: 1\nevent: frame\ndata: {"n":1}\n\n');
  });
});
