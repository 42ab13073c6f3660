// The harness must fail clearly and leave nothing behind when a server binary cannot start.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { makeTempDir, startProcess } from './process.js';

describe('startProcess', () => {
  it('rejects with the cause and removes its temp dir when the binary cannot be spawned', async () => {
    const dir = makeTempDir('missing-binary');
    await expect(
      startProcess({ name: 'ghost', command: `${dir}/no-such-binary`, args: [], dir, ready: async () => true, readyTimeoutMs: 2000 }),
    ).rejects.toThrow(/ghost could not start: spawn .*ENOENT/);
    expect(existsSync(dir)).toBe(false);
  });

  it('rejects with the output when the server exits before it is ready', async () => {
    const dir = makeTempDir('early-exit');
    await expect(
      startProcess({ name: 'quitter', command: 'sh', args: ['-c', 'echo cannot bind >&2; exit 3'], dir, ready: async () => false }),
    ).rejects.toThrow(/quitter exited before it was ready:\s+cannot bind/);
    expect(existsSync(dir)).toBe(false);
  });
});
