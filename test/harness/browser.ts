// Debian's Chromium driven by playwright-core, for suites that need a real browser (CORS, and later the console).
// hack/test-deps.sh installs it; Playwright's own browser download cannot be fetched on these machines.
import { existsSync, rmSync } from 'node:fs';
import { chromium, type BrowserContext } from 'playwright-core';
import { makeTempDir, servicesRequired } from './process.js';

export const chromiumPath = '/usr/bin/chromium';

/**
 * Decides whether a browser suite runs: the path when Chromium is installed; otherwise one line naming the install
 * command and null (the suite skips), or, under AGENTPLANE_REQUIRE_SERVICES=1, an error.
 */
export function requireChromium(): string | null {
  if (existsSync(chromiumPath)) return chromiumPath;
  const line = `browser '${chromiumPath}' not found: run 'bash hack/test-deps.sh' to install it`;
  if (servicesRequired) throw new Error(`${line} (AGENTPLANE_REQUIRE_SERVICES=1)`);
  console.warn(`skipping: ${line}`);
  return null;
}

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/**
 * A headless Chromium with a fresh profile. Background networking, component updates, sync and QUIC stay off:
 * this machine's closed network refuses those connections, and a test must not depend on them.
 */
export async function launchChromium(executablePath: string): Promise<TestBrowser> {
  const profile = makeTempDir('chromium');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
