// Benchmarks that measure a process's memory or file descriptors run the measured work in a child process of its
// own: a probe that prints one JSON line as its last output, and the fake provider served from another process.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { FakeOpenAIOptions } from '../fakes/openai-server.js';
import { freePort, typeScriptNodeArgs } from '../harness/process.js';

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

export interface RuntimeProcess {
  url: string;
  pid: number;
  /** The runtime's admin and end-user calls, the tenant configured with `provider` as its only provider. */
  admin(path: string, init?: RequestInit): Promise<Response>;
  /** How it exited, once it has; undefined while it runs. */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** The last lines it wrote to stderr. */
  stderr(): string;
  /** CPU time (user + system) the process has used so far, in ms, from /proc. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/**
 * The compiled runtime (`runtime/dist/main.js`, what the image and `npm start` run) as a process of its own, on the
 * embedded defaults unless `env` says otherwise, answering /health. `shellPrefix` is a shell command run run before node (the
 * soak joins a cgroup there).
 */
export async function startRuntimeProcess(options: {
  env?: Record<string, string>;
  dataDir: string;
  shellPrefix?: string;
  /** Another build's checkout (hack/bench-build-at.sh) to run instead of this one's. */
  build?: string;
}): Promise<RuntimeProcess> {
  const entry = join(options.build ?? REPO, 'runtime', 'dist', 'main.js');
  if (!existsSync(entry)) throw new Error('the benchmark runs the compiled runtime: run `npm run build` first');
  const port = await freePort();
  const adminKey = `bench-admin-key-${randomBytes(8).toString('hex')}`;
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    LOG_LEVEL: 'warn',
    AGENTPLANE_DATA_DIR: options.dataDir,
    DATA_PORT: String(port),
    AGENTPLANE_ADMIN_KEY: adminKey,
    AGENTPLANE_ALLOW_PRIVATE_URLS: 'true',
    PROVIDER_TIMEOUT_MS: '60000',
    ...options.env,
  };
  const child = spawn('sh', ['-c', `${options.shellPrefix ?? ''}exec "$0" "$@"`, process.execPath, entry], { cwd: REPO, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  let exitState: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exitState = { code, signal };
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (exitState) throw new Error(`the runtime exited ${exitState.code ?? exitState.signal}:\n${stderr}`);
    if ((await fetch(`${url}/health`).catch(() => undefined))?.status === 200) break;
    if (i > 600) {
      child.kill('SIGKILL');
      throw new Error(`the runtime did not answer /health within 60 s:\n${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const pid = child.pid!;
  return {
    url,
    pid,
    admin: (path, init = {}) => fetch(`${url}${path}`, { ...init, headers: { 'content-type': 'application/json', 'x-admin-key': adminKey, ...init.headers } }),
    exit: () => exitState,
    stderr: () => stderr,
    cpuMs: () => processCpuMs(pid),
    async stop() {
      if (!exitState) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** CPU time (user + system, all threads) a process has used so far, in ms: fields 14 and 15 of /proc/<pid>/stat. */
export function processCpuMs(pid: number): number {
  // Clock ticks of 10 ms (USER_HZ); the command name before ") " may hold spaces.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
