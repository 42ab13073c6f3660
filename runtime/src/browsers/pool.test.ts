// The pool's arithmetic over a stand-in browser (the real Chromium is the browser suites'): one context per
// conversation, held and released; a full pool closes the longest-idle context nobody holds, waits a bounded time when
// every one is held, then refuses with browser_busy; idle contexts close after their time; a memory limit counts as
// full; a tenant's contexts close together; a context the browser lost is opened again.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { silentLogger } from '@agentplane/lib/logging';
import { AppError } from '@agentplane/lib/errors';
import { BrowserPool, type BrowserPoolLimits, type BrowserSource } from './pool.js';

class FakeContext extends EventEmitter {
  closed = false;
  private readonly open: object[] = [];
  pages() {
    return this.open;
  }
  async newPage() {
    const page = {};
    this.open.push(page);
    return page;
  }
  async close() {
    this.closed = true;
    this.emit('close');
  }
}

function fakeSource(memory: { bytes: number } = { bytes: 0 }) {
  const contexts: FakeContext[] = [];
  const source: BrowserSource = {
    browser: async () =>
      ({
        newContext: async () => {
          const context = new FakeContext();
          contexts.push(context);
          return context;
        },
      }) as unknown as Browser,
    memoryBytes: async () => memory.bytes,
  };
  return { source, contexts, memory };
}

const limits = (changes: Partial<BrowserPoolLimits> = {}): BrowserPoolLimits => ({ maxContexts: 2, maxPagesPerContext: 3, maxMemoryBytes: null, idleMs: 1000, waitMs: 200, spare: 0, ...changes });

describe('the browser pool', () => {
  it('gives a conversation its own context, the same one each time, and another conversation another', async () => {
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits(), silentLogger());
    const first = await pool.hold('t1/alice/s1');
    pool.release(first);
    const again = await pool.hold('t1/alice/s1');
    expect(again.context).toBe(first.context);
    const other = await pool.hold('t1/bob/s2');
    expect(other.context).not.toBe(first.context);
    expect(contexts).toHaveLength(2);
    expect(await first.page()).toBe(await again.page());
  });

  it('closes the longest-idle context nobody holds to make room, and never one that is held', async () => {
    let now = 0;
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits(), silentLogger(), () => now);
    const older = await pool.hold('t/a/1');
    const held = await pool.hold('t/a/2');
    now = 10;
    pool.release(older);
    const third = await pool.hold('t/a/3');
    expect(contexts[0]!.closed).toBe(true);
    expect(contexts[1]!.closed).toBe(false);
    expect(pool.size).toBe(2);
    pool.release(third);
    pool.release(held);
  });

  it('waits a bounded time when every context is held, then refuses with browser_busy; a release lets the waiter in', async () => {
    const { source } = fakeSource();
    const pool = new BrowserPool(source, limits({ waitMs: 150 }), silentLogger());
    const a = await pool.hold('t/a/1');
    await pool.hold('t/a/2');
    const refused = await pool.hold('t/a/3').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe('browser_busy');
    const waiting = pool.hold('t/a/4');
    setTimeout(() => pool.release(a), 30);
    const got = await waiting;
    expect(got.key).toBe('t/a/4');
  });

  it('opens no more than its limit when many conversations ask at once, while the memory is read', async () => {
    const { source, contexts } = fakeSource();
    const slow: BrowserSource = { ...source, memoryBytes: () => new Promise((resolve) => setTimeout(() => resolve(0), 20)) };
    const pool = new BrowserPool(slow, limits({ maxContexts: 2, maxMemoryBytes: 1 << 30, waitMs: 100 }), silentLogger());
    await pool.hold('t/a/0');
    const asked = await Promise.all(['t/a/1', 't/a/2', 't/a/3', 't/a/4'].map((key) => pool.hold(key).then(() => 'held', (error: AppError) => error.code)));
    expect(asked.filter((outcome) => outcome === 'held')).toHaveLength(1);
    expect(pool.size).toBe(2);
    expect(contexts).toHaveLength(2);
  });

  it('counts the browser at its memory limit as full', async () => {
    const { source, memory } = fakeSource();
    const pool = new BrowserPool(source, limits({ maxContexts: 10, maxMemoryBytes: 1000, waitMs: 50 }), silentLogger());
    await pool.hold('t/a/1');
    memory.bytes = 1000;
    expect(await pool.hold('t/a/2').catch((error: AppError) => error.code)).toBe('browser_busy');
    memory.bytes = 10;
    expect((await pool.hold('t/a/2')).key).toBe('t/a/2');
  });

  it('closes contexts idle past their time, and only those', async () => {
    let now = 0;
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits(), silentLogger(), () => now);
    pool.release(await pool.hold('t/a/1'));
    await pool.hold('t/a/2');
    now = 1001;
    expect(await pool.sweep()).toBe(1);
    expect(contexts.map((context) => context.closed)).toEqual([true, false]);
  });

  it('keeps a page handed to a person past the idle time and through a full pool, until the keep ends or is dropped', async () => {
    let now = 0;
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits({ waitMs: 50 }), silentLogger(), () => now);
    pool.release(await pool.hold('t/a/handed'));
    expect(pool.keep('t/a/handed', 5_000)).toBe(true);
    expect(pool.keep('t/a/never-opened', 5_000)).toBe(false);
    pool.release(await pool.hold('t/a/other'));
    now = 2_000;
    // Idle past idleMs, yet kept: the sweep closes only the other.
    expect(await pool.sweep()).toBe(1);
    expect(contexts.map((context) => context.closed)).toEqual([false, true]);
    // Full (2 of 2) with nothing else idle: a new conversation waits rather than close the kept page, then is refused.
    await pool.hold('t/a/busy');
    const refused = pool.hold('t/a/new').catch((error: AppError) => error.code);
    now = 2_100;
    expect(await refused).toBe('browser_busy');
    // The keep dropped (the agent acts again), the page is idle like any other and makes room.
    pool.keep('t/a/handed', 0);
    expect((await pool.hold('t/a/new')).key).toBe('t/a/new');
    expect(contexts[0]!.closed).toBe(true);
  });

  it("keeps no more than a tenant's half of the pool and a person's two pages handed over", async () => {
    const { source } = fakeSource();
    const pool = new BrowserPool(source, limits({ maxContexts: 6 }), silentLogger());
    for (const key of ['t1/ann/1', 't1/ann/2', 't1/ann/3', 't1/bob/1', 't1/cy/1', 't2/ann/1']) pool.release(await pool.hold(key));
    expect(pool.keep('t1/ann/1', 5_000)).toBe(true);
    expect(pool.keep('t1/ann/2', 5_000)).toBe(true);
    // A person's third waits for one of theirs to end; another person of the tenant takes the tenant's last place.
    expect(pool.keep('t1/ann/3', 5_000)).toBe(false);
    expect(pool.keep('t1/bob/1', 5_000)).toBe(true);
    expect(pool.keep('t1/cy/1', 5_000)).toBe(false);
    // Another tenant has its own half; a keep renewed or dropped is no new place.
    expect(pool.keep('t2/ann/1', 5_000)).toBe(true);
    expect(pool.keep('t1/ann/1', 5_000)).toBe(true);
    pool.keep('t1/ann/1', 0);
    expect(pool.keep('t1/ann/3', 5_000)).toBe(true);
  });

  it("closes a tenant's contexts, held or not, and no other tenant's", async () => {
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits({ maxContexts: 5 }), silentLogger());
    await pool.hold('t1/a/1');
    pool.release(await pool.hold('t1/b/2'));
    await pool.hold('t2/a/3');
    expect(await pool.closeMatching('t1/')).toBe(2);
    expect(contexts.map((context) => context.closed)).toEqual([true, true, false]);
  });

  it('opens a new context for a conversation whose context the browser lost', async () => {
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits(), silentLogger());
    const first = await pool.hold('t/a/1');
    pool.release(first);
    await contexts[0]!.close();
    const second = await pool.hold('t/a/1');
    expect(second.context).not.toBe(first.context);
  });

  it('hands a new conversation a context made ahead, with its page, and makes the next one; closing drops the spares', async () => {
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits({ spare: 1, maxContexts: 5 }), silentLogger());
    const first = await pool.hold('t/a/1');
    // The first use made its own; a spare is being made for the next.
    await expect.poll(() => contexts.length).toBe(2);
    const spare = contexts[1]!;
    expect(spare.pages()).toHaveLength(1);
    const second = await pool.hold('t/b/2');
    expect(second.context).toBe(spare);
    expect(second.context).not.toBe(first.context);
    await expect.poll(() => contexts.length).toBe(3);
    await pool.closeAll();
    expect(contexts.every((context) => context.closed)).toBe(true);
  });

  it('closes the popups past a context’s page limit as they open', async () => {
    const { source, contexts } = fakeSource();
    const pool = new BrowserPool(source, limits({ maxPagesPerContext: 1 }), silentLogger());
    await pool.hold('t/a/1');
    const context = contexts[0]!;
    let closed = false;
    const popup = { close: async () => void (closed = true) };
    context.pages().push(popup);
    context.emit('page', popup);
    expect(closed).toBe(true);
  });
});
