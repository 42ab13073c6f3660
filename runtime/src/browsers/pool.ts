// The browser contexts of this process (docs/decisions/0088): one per conversation, with its own cookies and storage,
// never shared between conversations, people or tenants. The pool bounds how many are open and how much memory the
// browser may hold; a conversation's context stays while it is used and closes after it has been idle a while. A
// turn that needs a new context while the pool is full first closes the longest-idle one nobody holds; if every one
// is held, it waits a bounded time, then gets a clear error.
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { unavailable } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';

export interface BrowserPoolLimits {
  /** Contexts open at once in this process. */
  maxContexts: number;
  /** Pages (tabs) one context may have; a page's popups past it are closed as they open. */
  maxPagesPerContext: number;
  /** Bytes the browser's processes may hold before no new context opens (null: no limit). */
  maxMemoryBytes: number | null;
  /** A context nobody holds closes after this long. */
  idleMs: number;
  /** How long a turn waits for room before it is refused. */
  waitMs: number;
  /**
   * Contexts made ahead, each with its page, that a conversation's first use takes instead of waiting for Chromium
   * (a context and page take ~350 ms here; a spare is handed over at once). A fresh context holds nothing, so which
   * conversation takes it does not matter. Default 1; 0 makes every context on demand.
   */
  spare?: number;
}

/** Where the pool gets its browser, and how much memory that browser holds now. */
export interface BrowserSource {
  browser(): Promise<Browser>;
  /** Bytes held by the browser's processes; undefined when it cannot be read (the limit is then not applied). */
  memoryBytes(): Promise<number | undefined>;
}

/** One conversation's browser: its context and its page, and whether a person holds it (a hand-off). */
export interface ConversationBrowser {
  readonly key: string;
  readonly context: BrowserContext;
  /** The page the agent drives: the context's first, opened again if it was closed. */
  page(): Promise<Page>;
}

interface Entry extends ConversationBrowser {
  holders: number;
  idleSince: number;
  /** Kept open until then though nobody holds it: a page handed to a person, who may take a while. */
  keptUntil: number;
  closing?: Promise<void>;
}

export const VIEWPORT = { width: 1280, height: 800 } as const;
/** Pages one person may have handed to them at once. */
export const KEPT_PER_SUBJECT = 2;

export class BrowserPool {
  private readonly entries = new Map<string, Entry>();
  private readonly opening = new Map<string, Promise<Entry>>();
  private readonly waiters = new Set<() => void>();
  /** Contexts made ahead, none yet a conversation's. */
  private readonly spares: BrowserContext[] = [];
  private making = 0;
  private closed = false;
  /** Places promised by roomForOne to calls about to open a context. */
  private reserved = 0;

  constructor(
    private readonly source: BrowserSource,
    private readonly limits: BrowserPoolLimits,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Contexts open now. */
  get size(): number {
    return this.entries.size;
  }

  /** Contexts made ahead and not yet taken. */
  get spareCount(): number {
    return this.spares.length;
  }

  /**
   * The conversation's browser, opened if it has none, held until `release`. `key` names the conversation within its
   * tenant (`<tenant>/<session>`); nothing else ever gets its context.
   */
  async hold(key: string, signal?: AbortSignal): Promise<ConversationBrowser> {
    const deadline = this.now() + this.limits.waitMs;
    for (;;) {
      signal?.throwIfAborted();
      const open = this.entries.get(key);
      if (open && !open.closing) {
        open.holders++;
        return open;
      }
      const pending = this.opening.get(key);
      if (pending) {
        await pending.catch(() => undefined);
        continue;
      }
      if (await this.roomForOne()) {
        this.reserved--;
        // Another call for this conversation may have opened it while room was being made.
        if (this.entries.has(key) || this.opening.has(key)) continue;
        const opened = this.open(key);
        this.opening.set(key, opened);
        try {
          const entry = await opened;
          entry.holders++;
          return entry;
        } finally {
          this.opening.delete(key);
        }
      }
      const left = deadline - this.now();
      if (left <= 0) {
        throw unavailable(`every browser of this process is in use (${this.limits.maxContexts} at most); try again in a moment`, { code: 'browser_busy' });
      }
      await this.waitForRoom(left, signal);
    }
  }

  /** The holder is done for now: the context stays for the conversation's next use, until it has been idle `idleMs`. */
  release(browser: ConversationBrowser): void {
    const entry = this.entries.get(browser.key);
    if (entry !== browser) return;
    entry.holders = Math.max(0, entry.holders - 1);
    entry.idleSince = this.now();
    if (entry.holders === 0) this.wake();
  }

  /** Whether the conversation has an open context (a hand-off can only show a page that exists). */
  has(key: string): boolean {
    return this.entries.has(key) && !this.entries.get(key)!.closing;
  }

  /** The open context of a conversation, without holding it (the hand-off's screencast and input). */
  peek(key: string): ConversationBrowser | undefined {
    const entry = this.entries.get(key);
    return entry && !entry.closing ? entry : undefined;
  }

  /**
   * Keeps the conversation's context open for `ms` though nobody holds it (a page handed to a person): neither the
   * idle sweep nor a full pool closes it meanwhile. A tenant's erase or a forget still does.
   */
  keep(key: string, ms: number): boolean {
    const entry = this.entries.get(key);
    if (!entry || entry.closing) return false;
    const now = this.now();
    if (ms > 0 && entry.keptUntil <= now) {
      // A share of the pool each: kept pages are closed by nothing but their end, so one tenant (half the pool) or
      // one person (KEPT_PER_SUBJECT) cannot hold the rest of the pool's users out.
      const [tenant, subject] = key.split('/');
      const kept = [...this.entries.values()].filter((other) => other.keptUntil > now && !other.closing).map((other) => other.key.split('/'));
      if (kept.filter(([otherTenant]) => otherTenant === tenant).length >= Math.max(1, Math.floor(this.limits.maxContexts / 2))) return false;
      if (kept.filter(([otherTenant, otherSubject]) => otherTenant === tenant && otherSubject === subject).length >= KEPT_PER_SUBJECT) return false;
    }
    entry.keptUntil = ms > 0 ? now + ms : 0;
    return true;
  }

  /** The conversation's open context, held until `release`; undefined when it has none (nothing is opened). */
  holdOpen(key: string): ConversationBrowser | undefined {
    const entry = this.entries.get(key);
    if (!entry || entry.closing) return undefined;
    entry.holders++;
    return entry;
  }

  /** Closes the contexts idle past `idleMs`. */
  async sweep(): Promise<number> {
    const now = this.now();
    const cutoff = now - this.limits.idleMs;
    const idle = [...this.entries.values()].filter((entry) => entry.holders === 0 && entry.idleSince <= cutoff && entry.keptUntil <= now);
    await Promise.all(idle.map((entry) => this.close(entry)));
    return idle.length;
  }

  /** Closes every context whose key starts with `prefix` (a tenant's erase, a conversation deleted), held or not. */
  async closeMatching(prefix: string): Promise<number> {
    // Contexts being opened for it are waited for, so none appears just after.
    await Promise.all([...this.opening].filter(([key]) => key.startsWith(prefix)).map(([, opened]) => opened.catch(() => undefined)));
    const matching = [...this.entries.values()].filter((entry) => entry.key.startsWith(prefix));
    await Promise.all(matching.map((entry) => this.close(entry)));
    return matching.length;
  }

  async closeAll(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.entries.values()].map((entry) => this.close(entry)));
    await Promise.all(this.spares.splice(0).map((context) => context.close().catch(() => undefined)));
  }

  /** A fresh context with its page: the browser's settings for every conversation. */
  private async fresh(): Promise<BrowserContext> {
    const browser = await this.source.browser();
    const context = await browser.newContext({
      viewport: VIEWPORT,
      acceptDownloads: false,
      serviceWorkers: 'block',
      // Permissions a page may ask for are all refused: no geolocation, camera, microphone or notifications.
      permissions: [],
    });
    await context.newPage();
    return context;
  }

  /** Makes spares up to the number wanted, in the background; one that fails is logged and not retried until the next use. */
  private replenish(): void {
    const wanted = this.limits.spare ?? 1;
    while (!this.closed && this.spares.length + this.making < wanted) {
      this.making++;
      this.fresh().then(
        (context) => {
          this.making--;
          if (this.closed) return void context.close().catch(() => undefined);
          this.spares.push(context);
          // A spare the browser lost is dropped; the next use makes another.
          context.on('close', () => {
            const at = this.spares.indexOf(context);
            if (at >= 0) this.spares.splice(at, 1);
          });
        },
        (error: unknown) => {
          this.making--;
          this.logger.warn({ err: error }, 'a spare browser context could not be made');
        },
      );
    }
  }

  private async open(key: string): Promise<Entry> {
    const context = this.spares.shift() ?? (await this.fresh());
    this.replenish();
    // A page's popups count as its pages; past the limit they are closed as they open.
    context.on('page', (page) => {
      if (context.pages().length > this.limits.maxPagesPerContext) void page.close().catch(() => undefined);
    });
    const entry: Entry = {
      key,
      context,
      holders: 0,
      idleSince: this.now(),
      keptUntil: 0,
      page: async () => context.pages()[0] ?? (await context.newPage()),
    };
    // The browser going away (a crash, a kill) takes the context with it: the next use opens a new one.
    context.on('close', () => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
      this.wake();
    });
    this.entries.set(key, entry);
    return entry;
  }

  private close(entry: Entry): Promise<void> {
    entry.closing ??= (async () => {
      if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
      await entry.context.close().catch((error: unknown) => this.logger.warn({ err: error }, 'a browser context did not close cleanly'));
      this.wake();
    })();
    return entry.closing;
  }

  /**
   * Whether one more context fits, closing the longest-idle one nobody holds when it would not. A yes reserves the
   * place (`reserved`, given back by the caller as it starts opening) in the same step as the count, so calls that
   * ask at once cannot all be told yes for one place.
   */
  private async roomForOne(): Promise<boolean> {
    const count = () => this.entries.size + this.opening.size + this.reserved;
    if (count() < this.limits.maxContexts && !(await this.overMemory()) && count() < this.limits.maxContexts) {
      this.reserved++;
      return true;
    }
    const now = this.now();
    const idle = [...this.entries.values()].filter((entry) => entry.holders === 0 && !entry.closing && entry.keptUntil <= now).sort((a, b) => a.idleSince - b.idleSince)[0];
    if (!idle) return false;
    await this.close(idle);
    if (count() < this.limits.maxContexts && !(await this.overMemory()) && count() < this.limits.maxContexts) {
      this.reserved++;
      return true;
    }
    return false;
  }

  private async overMemory(): Promise<boolean> {
    if (this.limits.maxMemoryBytes === null || this.entries.size === 0) return false;
    const held = await this.source.memoryBytes();
    return held !== undefined && held >= this.limits.maxMemoryBytes;
  }

  private waitForRoom(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal?.addEventListener('abort', done);
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
