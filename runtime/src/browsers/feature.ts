// What the agent's browser brings to the composition root (docs/decisions/0088, 0092): the pool over the embedded
// Chromium when this runtime has one, or over the browser Pod's (`BROWSER_HOST=remote`, on Kubernetes), its part of
// a tenant's erase and a subject's forget (their contexts closed, cookies and storage with them), a deleted
// conversation's context closed, the sweep that closes idle contexts, and closing the browser at shutdown.
import { existsSync } from 'node:fs';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeConfig } from '../config.js';
import type { FeatureHost } from '../features.js';
import { LocalBrowserSource } from './local.js';
import { BrowserPool, type BrowserSource } from './pool.js';
import { RemoteBrowserSource } from './remote.js';
import { conversationKey, subjectPrefix, tenantPrefix } from './tools.js';
import type { SessionService } from '../sessions/service.js';

/** How often idle contexts are looked for. */
const SWEEP_MS = 15_000;

export function createBrowserPool(host: FeatureHost, config: RuntimeConfig, logger: Logger, ownPorts: number[], sessions: SessionService): BrowserPool | undefined {
  const { browser } = config;
  const source = browserSource(config, logger.child({ component: 'browser' }), ownPorts);
  if (!source) return undefined;
  const pool = new BrowserPool(source, browser, logger.child({ component: 'browser' }));
  host.eraseStep({ name: 'browser contexts', phase: 'stop_work', run: async (tenantId) => ({ items: await pool.closeMatching(tenantPrefix(tenantId)) }) });
  host.forgetStep({ name: 'browser contexts', run: async (tenantId, subject) => ({ items: await pool.closeMatching(subjectPrefix(tenantId, subject)) }) });
  host.every('browser sweep', SWEEP_MS, () => pool.sweep());
  // A deleted conversation's page goes with it, a page handed over included.
  sessions.whenDeleted(async (tenantId, owner, sessionIds) => Promise.all(sessionIds.map((id) => pool.closeMatching(conversationKey(tenantId, owner, id)))));
  host.onShutdown(async () => {
    await pool.closeAll();
    await source.close();
  });
  return pool;
}

function browserSource(config: RuntimeConfig, logger: Logger, ownPorts: number[]): (BrowserSource & { close(): Promise<void> }) | undefined {
  const { browser, browserHost } = config;
  // The egress guard and the browser's settings are the browser server's there (decision 0092).
  if (browserHost === 'remote' && browser.remote) return new RemoteBrowserSource({ ...browser.remote, logger });
  const local = browserHost === 'local' || (browserHost === 'auto' && existsSync(browser.executablePath));
  if (!local) return undefined;
  return new LocalBrowserSource({
    executablePath: browser.executablePath,
    sandbox: browser.sandbox,
    egress: { policy: { allowPrivate: browser.allowPrivate, allowHttp: true }, ownPorts, allow: browser.allowedDestinations },
    logger,
  });
}
