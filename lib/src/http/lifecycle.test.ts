// What a stop signal does, on a clock the test moves: copies of one signal (a process group's Ctrl-C or systemd stop,
// delivered directly and again by npm) are one request to drain; only a signal sent again later forces the exit.
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../logging.js';
import { Lifecycle, REPEATED_SIGNAL_SECONDS, stopOnSignal } from './lifecycle.js';

function stopping() {
  const lifecycle = new Lifecycle();
  const exits: number[] = [];
  let clock = 0;
  const onSignal = stopOnSignal({ lifecycle, servers: [], logger: silentLogger(), graceMs: 60_000, close: async () => {}, exit: (code) => exits.push(code), now: () => clock });
  return { lifecycle, exits, onSignal, advance: (ms: number) => (clock += ms) };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 10));

describe('stop signals', () => {
  it('takes copies of the first signal, SIGTERM or SIGINT, as the same request: the drain finishes and exits 0', async () => {
    const { lifecycle, exits, onSignal, advance } = stopping();
    const run = lifecycle.beginWork();
    onSignal('SIGINT');
    advance(5);
    onSignal('SIGINT');
    advance(REPEATED_SIGNAL_SECONDS * 1000 - 10);
    onSignal('SIGTERM');
    await settled();
    expect(exits).toEqual([]);
    expect(lifecycle.draining).toBe(true);
    run();
    await settled();
    expect(exits).toEqual([0]);
  });

  it('exits at once with 1 on a signal sent again once the first is old enough', async () => {
    const { lifecycle, exits, onSignal, advance } = stopping();
    lifecycle.beginWork();
    onSignal('SIGTERM');
    advance(REPEATED_SIGNAL_SECONDS * 1000);
    onSignal('SIGTERM');
    expect(exits).toEqual([1]);
  });
});
