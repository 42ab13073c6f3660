// Starts real servers (PostgreSQL, Redis, MinIO, ...) as local child processes on free loopback ports,
// each in its own temp dir, and stops them after. Binaries come from the cache that hack/test-deps.sh fills.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

// Root's home is not readable by the unprivileged user PostgreSQL must run as, so root caches in /var/cache.
// hack/test-deps.sh makes the same choice.
export const cacheDir =
  process.env.AGENTPLANE_CACHE_DIR ??
  (process.getuid?.() === 0 ? '/var/cache/agentplane' : join(homedir(), '.cache', 'agentplane'));
export const binDir = join(cacheDir, 'bin');

/**
 * Node's arguments for running one of the repository's TypeScript entry points in a single process, as `npm start`
 * does: tsx as a loader (its launcher would fork a child a kill could miss), and workspace packages resolved to
 * their sources. tsx is named by its file, so the program may run in any folder (a temp dir of its own).
 */
export const typeScriptNodeArgs = ['--conditions=@agentplane/source', '--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];

/** True when `AGENTPLANE_REQUIRE_SERVICES=1`: a missing service fails the run instead of skipping. */
export const servicesRequired = process.env.AGENTPLANE_REQUIRE_SERVICES === '1';

/** Where a service binary lives in the cache, or null when hack/test-deps.sh has not installed it. */
export function findBinary(name: string): string | null {
  const path = join(binDir, name);
  return existsSync(path) ? path : null;
}

/**
 * Decides whether a suite that needs `binary` runs. Returns the path when present. When absent it prints one
 * line naming the binary and the install command, and returns null (the suite skips); under
 * AGENTPLANE_REQUIRE_SERVICES=1 it throws instead, so CI fails loudly.
 */
export function requireBinary(name: string): string | null {
  const path = findBinary(name);
  if (path) return path;
  const line = `service binary '${name}' not found in ${binDir}: run 'bash hack/test-deps.sh' to install it`;
  if (servicesRequired) throw new Error(`${line} (AGENTPLANE_REQUIRE_SERVICES=1)`);
  console.warn(`skipping: ${line}`);
  return null;
}

/** A free TCP port on 127.0.0.1, found by binding port 0 and releasing it. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') return reject(new Error('no port'));
      server.close(() => resolve(address.port));
    });
  });
}

/**
 * Binds `server` to a port the system picks on 127.0.0.1 and answers it: the port is this server's from the start,
 * where one from `freePort` could be taken by another process between its release and the listen. A server a
 * program's configuration must name its port for is bound first, and given its request handler once that exists.
 */
export async function listenOnAnyPort(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the server has no TCP port');
  return address.port;
}

export function makeTempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `agentplane-${prefix}-`));
}

export interface RunningProcess {
  child: ChildProcess;
  dir: string;
  /** Last lines of the process's output, for error messages when it does not come up. */
  output(): string;
  stop(): Promise<void>;
}

export interface StartOptions {
  name: string;
  command: string;
  args: string[];
  dir: string;
  env?: NodeJS.ProcessEnv;
  /** Resolves once the service answers; called repeatedly until it does or the timeout passes. */
  ready: () => Promise<boolean>;
  readyTimeoutMs?: number;
  /** Signal that stops the service cleanly (SIGINT for PostgreSQL's fast shutdown). */
  stopSignal?: NodeJS.Signals;
  /** For example `{ uid, gid }` to run as an unprivileged user. */
  spawnOptions?: { uid?: number; gid?: number };
}

/** Spawns a server and waits until `ready()` says it answers. The temp dir is removed on stop. */
export async function startProcess(options: StartOptions): Promise<RunningProcess> {
  const child = spawn(options.command, options.args, {
    cwd: options.dir,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options.spawnOptions,
  });
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  // A binary that cannot be started (missing, not executable) reports only 'error', never 'exit'.
  let spawnError: Error | undefined;
  child.once('error', (error) => {
    spawnError = error;
    if (child.pid === undefined) exited = true;
  });

  const stop = async () => {
    if (!exited) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill(options.stopSignal ?? 'SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    }
    rmSync(options.dir, { recursive: true, force: true });
  };

  // Without a pid the spawn failed; its 'error' event is still to come (next tick): wait for it.
  if (child.pid === undefined) await new Promise((resolve) => setImmediate(resolve));
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`${options.name} ${spawnError ? `could not start: ${spawnError.message}` : `exited before it was ready:\n${tail}`}`);
    }
    if (await options.ready().catch(() => false)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${options.name} was not ready within ${options.readyTimeoutMs ?? 60_000} ms:\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, dir: options.dir, output: () => tail, stop };
}

/** Collects a child's stdout and stderr as whole lines, in the order they come (a partial last line waits). */
export function outputLines(child: { stdout: Readable | null; stderr: Readable | null }): string[] {
  const lines: string[] = [];
  let buffer = '';
  const collect = (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    lines.push(...parts);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return lines;
}
