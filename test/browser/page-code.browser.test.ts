// The code the service sends into pages runs as npm start loads it (tsx), not only as the tests load it: a loader
// that keeps function names wraps named functions in a helper the page lacks, which broke the hand-off's element
// pictures under npm start while every test passed. The fixture runs it under tsx.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { requireChromium } from '../harness/browser.js';
import { typeScriptNodeArgs } from '../harness/process.js';

const fixture = fileURLToPath(new URL('./fixtures/page-code-under-tsx.ts', import.meta.url));

describe.skipIf(requireChromium() === null)('code sent into pages, under npm start\'s loader', () => {
  it('pictures one element, and hides a typed password from what a model reads', async () => {
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [...typeScriptNodeArgs, fixture], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${out}`))));
    });
    const result = JSON.parse(output.trim().split('\n').at(-1)!) as { snapshot: string; frame: { width: number; height: number; selector: string } };
    expect(result.frame).toMatchObject({ width: 300, selector: 'h1' });
    expect(result.frame.height).toBeGreaterThan(0);
    expect(result.snapshot).toContain('textbox "Password"');
    expect(result.snapshot).toContain('(hidden: typed by the person)');
    expect(result.snapshot).not.toContain('typed-under-tsx');
  });
});
