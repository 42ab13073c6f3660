// The browser Pod's Chromium as this runtime's browser (docs/decisions/0092): on Kubernetes pages never run in the
// runtime's Pod. The runtime connects to the browser server the operator runs in the project's namespace, with the
// token in a header the server's gate checks, once, and again on the next use after the connection or the Pod goes
// away. The contexts it made close with the connection (Playwright's browser server closes a client's contexts when
// it leaves).
import { chromium, type Browser } from 'playwright-core';
import { unavailable } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import type { BrowserSource } from './pool.js';

export interface RemoteBrowserOptions {
  /** `ws://host:port` of the browser server. */
  endpoint: string;
  /** The server's token: never logged, and taken out of every error that could carry it. */
  token: string;
  logger: Logger;
  /** How long a connection may take to open. Default 15 s. */
  connectTimeoutMs?: number;
}

export class RemoteBrowserSource implements BrowserSource {
  private connecting: Promise<Browser> | undefined;

  constructor(private readonly options: RemoteBrowserOptions) {}

  browser(): Promise<Browser> {
    this.connecting ??= this.connect();
    return this.connecting;
  }

  private async connect(): Promise<Browser> {
    const { endpoint, token, logger } = this.options;
    try {
      const browser = await chromium.connect(endpoint, { headers: { authorization: `Bearer ${token}` }, timeout: this.options.connectTimeoutMs ?? 15_000 });
      browser.on('disconnected', () => {
        logger.warn({ endpoint }, 'the connection to the browser server closed; the next use connects again');
        this.connecting = undefined;
      });
      return browser;
    } catch (error) {
      this.connecting = undefined;
      const reason = (error instanceof Error ? error.message : String(error)).split(token).join('***').split('\n')[0]!.slice(0, 300);
      logger.warn({ endpoint, reason }, 'the browser server could not be reached');
      throw unavailable(`the browser service cannot be reached at the moment; try again shortly`, { code: 'browser_unavailable' });
    }
  }

  /** The browser Pod's memory is bounded by its own limit; this runtime cannot read it. */
  async memoryBytes(): Promise<number | undefined> {
    return undefined;
  }

  async close(): Promise<void> {
    const connected = await this.connecting?.catch(() => undefined);
    this.connecting = undefined;
    await connected?.close().catch(() => undefined);
  }
}
