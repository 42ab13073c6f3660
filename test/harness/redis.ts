// A real redis-server for integration suites: loopback only, no persistence, in its own temp dir.
import { rmSync } from 'node:fs';
import { connect } from 'node:net';
import { freePort, makeTempDir, requireBinary, startProcess } from './process.js';

export interface RedisServer {
  url: string;
  stop(): Promise<void>;
}

/**
 * The redis-server binary, or null when it is not installed (the suite skips: `describe.skipIf(!binary)`).
 * Throws instead under AGENTPLANE_REQUIRE_SERVICES=1.
 */
export function redisServerBinary(): string | null {
  return requireBinary('redis-server');
}

export async function startRedis(binary: string): Promise<RedisServer> {
  const port = await freePort();
  const dir = makeTempDir('redis');
  const server = await startProcess({
    name: 'redis-server',
    command: binary,
    args: ['--port', `${port}`, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    dir,
    ready: () => answersPing(port),
    readyTimeoutMs: 20_000,
  }).catch((err: unknown) => {
    // startProcess removes the dir when the server exits early or never answers, but not when spawn throws.
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return { url: `redis://127.0.0.1:${port}`, stop: server.stop };
}

/** One PING over a raw socket, so the harness does not depend on the client under test. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (chunk) => finish(chunk.toString().startsWith('+PONG')));
  });
}
