// Benchmarks that measure a process's memory or file descriptors run the measured work in a child process of its
// own: a probe that prints one JSON line as its last output, and the fake provider served from another process.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { FakeOpenAIOptions } from '../fakes/openai-server.js';
import { typeScriptNodeArgs } from '../harness/process.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const SERVE_FAKE = fileURLToPath(new URL('../fakes/serve-openai.ts', import.meta.url));

/**
 * Runs `node [nodeArgs] --import tsx <script> ...args` from the repository root and resolves with the JSON its last
 * stdout line holds; rejects with the tail of its stderr when it exits otherwise.
 */
export function runJsonChild<T>(script: string, args: string[], options: { nodeArgs?: string[]; what: string }): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...typeScriptNodeArgs, script, ...args], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-8_000)));
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      const last = stdout.trim().split('\n').pop() ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as T);
      else reject(new Error(`${options.what} exited ${code ?? signal}:\n${stderr.slice(-2000)}`));
    });
  });
}

export interface ProviderProcess {
  url: string;
  apiKey: string;
  pid: number;
  stop(): Promise<void>;
}

/** The fake provider (`test/fakes/serve-openai.ts`) in its own process; stopped by `stop()` or when this process exits. */
export async function startProviderProcess(options: FakeOpenAIOptions): Promise<ProviderProcess> {
  const child = spawn(process.execPath, [...typeScriptNodeArgs, SERVE_FAKE, JSON.stringify(options)], {
    cwd: REPO,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the fake provider process exited ${code} before it listened`)));
  });
  const { url, apiKey } = JSON.parse(first) as { url: string; apiKey: string };
  return {
    url,
    apiKey,
    pid: child.pid!,
    async stop() {
      child.stdin.end();
      child.kill('SIGTERM');
      await exited;
    },
  };
}
