// The heap releaser in a process of its own (memory is per process): after a burst, an idle process hands the pages
// back and keeps what is live; a busy one is left alone; nothing is asked twice for the same pages.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** Runs `body` (an async function body with `startHeapRelease`, `burst`, `rssMiB` and `spin` in scope); answers its JSON. */
function inChild(body: string): Record<string, unknown> {
  const script = `
    import { startHeapRelease } from '@agentplane/lib/heap-release';
    const MiB = 1024 * 1024;
    const rssMiB = () => process.memoryUsage().rss / MiB;
    const logger = { info() {}, warn() {}, error() {}, debug() {} };
    // About 150 MiB of small objects, of which every tenth stays reachable; the rest is collected by the regular GC.
    const burst = () => {
      const live = [];
      let all = [];
      for (let i = 0; i < 250_000; i++) {
        const object = { name: 'object-' + i, values: new Array(60).fill(i), nested: { i } };
        all.push(object);
        if (i % 10 === 0) live.push(object);
      }
      all = null;
      globalThis.gc();
      globalThis.gc();
      return live;
    };
    const spin = (ms) => { const until = performance.now() + ms; while (performance.now() < until); };
    const idle = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    // As in a program, the event loop is running before the releaser starts (it measures the loop's busy share).
    await idle(20);
    const result = await (async () => { ${body} })();
    process.stdout.write(JSON.stringify(result) + '\\n');
  `;
  const child = spawnSync(process.execPath, ['--expose-gc', '--max-semi-space-size=2', '--conditions=@agentplane/source', '--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: REPO,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (child.status !== 0) throw new Error(`the child exited ${child.status}: ${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
}

describe('handing idle heap pages back', () => {
  it('gives back what a burst left once the process is idle, keeps the live objects, and does not ask twice', () => {
    const result = inChild(`
      const release = startHeapRelease({ logger, intervalMs: 3_600_000, maxBusy: 1 });
      const start = rssMiB();
      const live = burst();
      const afterBurst = rssMiB();
      await idle(200);
      const released = release.check();
      const afterRelease = rssMiB();
      await idle(200);
      const again = release.check();
      const sum = live.reduce((total, object) => total + object.values[59] + object.nested.i, 0);
      release.stop();
      return { start, afterBurst, released, afterRelease, again, releases: release.releases, live: live.length, sum };
    `);
    expect(result.released).toBe(true);
    expect(result.releases).toBe(1);
    // The burst's pages were resident after the regular GC; most of them are gone now.
    expect((result.afterBurst as number) - (result.afterRelease as number)).toBeGreaterThan(60);
    expect(result.afterRelease as number).toBeLessThan((result.start as number) + 60);
    // Live objects are untouched: 25,000 of them, each still holding its numbers.
    expect(result.live).toBe(25_000);
    const expected = 2 * Array.from({ length: 25_000 }, (_, k) => k * 10).reduce((a, b) => a + b, 0);
    expect(result.sum).toBe(expected);
    // What is left is in use: not asked for again.
    expect(result.again).toBe(false);
  });

  it('leaves a busy process alone, and gives back once it has gone quiet', () => {
    const result = inChild(`
      const release = startHeapRelease({ logger, intervalMs: 3_600_000, maxBusy: 0.1 });
      const live = burst();
      spin(400);
      const whileBusy = release.check();
      await idle(300);
      const whenQuiet = release.check();
      return { whileBusy, whenQuiet, live: live.length };
    `);
    expect(result.whileBusy).toBe(false);
    expect(result.whenQuiet).toBe(true);
  });
});
