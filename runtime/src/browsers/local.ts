// The embedded browser (docs/decisions/0088): Debian's Chromium as a child process of the runtime, started on first
// use, its every connection through the egress proxy (decision 0087). A browser that dies is started again on the
// next use. Its memory is read from /proc: the proportional set size of the Chromium processes under this one.
import { readdir, readFile } from 'node:fs/promises';
import type { Browser } from 'playwright-core';
import { startEgressProxy, type EgressProxy, type EgressProxyOptions } from '@agentplane/lib/net/egress-proxy';
import type { Logger } from '@agentplane/lib/logging';
import { launchGuardedChromium } from './chromium.js';
import type { BrowserSource } from './pool.js';

export interface LocalBrowserOptions {
  executablePath: string;
  /** Chromium's own sandbox (off where the kernel cannot give it, e.g. running as root without user namespaces). */
  sandbox: boolean;
  egress: EgressProxyOptions;
  logger: Logger;
}

/** How long a reading of the browser's memory is used before /proc is read again. */
const MEMORY_READING_MS = 1_000;

export class LocalBrowserSource implements BrowserSource {
  private starting: Promise<{ browser: Browser; proxy: EgressProxy }> | undefined;

  constructor(private readonly options: LocalBrowserOptions) {}

  browser(): Promise<Browser> {
    return this.started().then(({ browser }) => browser);
  }

  private started(): Promise<{ browser: Browser; proxy: EgressProxy }> {
    this.starting ??= (async () => {
      const proxy = await startEgressProxy({
        ...this.options.egress,
        onRefused: (destination, reason) => {
          this.options.logger.info({ destination, reason }, 'the browser egress guard refused a connection');
          this.options.egress.onRefused?.(destination, reason);
        },
      });
      try {
        const browser = await launchGuardedChromium({ executablePath: this.options.executablePath, proxy, sandbox: this.options.sandbox });
        browser.on('disconnected', () => {
          this.options.logger.warn('the browser went away; the next use starts it again');
          this.starting = undefined;
          void proxy.close();
        });
        return { browser, proxy };
      } catch (error) {
        await proxy.close();
        throw error;
      }
    })();
    this.starting.catch(() => (this.starting = undefined));
    return this.starting;
  }

  /** The last reading and when it was taken: walking /proc costs a few ms, and contexts open in bursts. */
  private memory: { bytes: Promise<number | undefined>; at: number } | undefined;

  async memoryBytes(): Promise<number | undefined> {
    if (!this.starting) return 0;
    const now = Date.now();
    if (!this.memory || now - this.memory.at > MEMORY_READING_MS) this.memory = { bytes: descendantsMemory(process.pid), at: now };
    return this.memory.bytes;
  }

  async close(): Promise<void> {
    const running = await this.starting?.catch(() => undefined);
    this.starting = undefined;
    await running?.browser.close().catch(() => undefined);
    await running?.proxy.close();
  }
}

/** The proportional set size, in bytes, of the Chromium processes under `root`; undefined off Linux. */
export async function descendantsMemory(root: number): Promise<number | undefined> {
  let entries: string[];
  try {
    entries = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  const parents = new Map<number, number>();
  const chromium = new Set<number>();
  await Promise.all(
    entries.map(async (pid) => {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      // The command name may hold spaces and parentheses: the fields after its closing one are fixed.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[1]) parents.set(Number(pid), Number(fields[1]));
      // Sandboxes and other children of the runtime are not the browser's.
      if (/chrom/i.test(stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')))) chromium.add(Number(pid));
    }),
  );
  const under = new Set<number>([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, parent] of parents) {
      if (!under.has(pid) && under.has(parent)) {
        under.add(pid);
        grew = true;
      }
    }
  }
  under.delete(root);
  let total = 0;
  for (const pid of under) {
    if (!chromium.has(pid)) continue;
    const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
    const pss = /^Pss:\s+(\d+) kB/m.exec(rollup);
    if (pss) total += Number(pss[1]) * 1024;
  }
  return total;
}
