// Starts a control-api in this process on a free loopback port, in its own temp data dir (unless the env names
// one), for suites that drive it through HTTP.
import { createServer } from 'node:http';
import { rmSync } from 'node:fs';
import { silentLogger } from '@agentplane/lib/logging';
import { createControlApi, type ControlApi, type ControlApiDeps } from '@agentplane/control-api/app';
import { loadControlApiConfig } from '@agentplane/control-api/config';
import { listenOnAnyPort, makeTempDir } from './process.js';

export interface TestControl {
  url: string;
  control: ControlApi;
  dataDir: string;
  /** fetch against it: `key` goes in X-API-Key, `token` (a session or any bearer) in Authorization; a body is JSON. */
  call(path: string, init?: RequestInit & { key?: string; token?: string }): Promise<Response>;
  stop(): Promise<void>;
}

export async function startTestControl(
  env: Record<string, string> = {},
  deps: Partial<Pick<ControlApiDeps, 'provisioner' | 'readiness' | 'logger'>> = {},
): Promise<TestControl> {
  const ownDir = env.AGENTPLANE_DATA_DIR === undefined ? makeTempDir('control') : undefined;
  const dataDir = env.AGENTPLANE_DATA_DIR ?? ownDir!;
  // Bound first: the configuration names the port, and no other process can take it since.
  const server = createServer();
  const port = await listenOnAnyPort(server);
  const control = await createControlApi({
    config: loadControlApiConfig({ CONTROL_PORT: String(port), AGENTPLANE_DATA_DIR: dataDir, ...env }),
    ...deps,
    logger: deps.logger ?? silentLogger(),
  }).catch((error: unknown) => {
    server.close();
    throw error;
  });
  server.on('request', control.app);
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    control,
    dataDir,
    call(path, init = {}) {
      const headers = new Headers(init.headers);
      if (init.key) headers.set('x-api-key', init.key);
      if (init.token) headers.set('authorization', `Bearer ${init.token}`);
      if (typeof init.body === 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${url}${path}`, { ...init, headers });
    },
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await control.close();
      if (ownDir) rmSync(ownDir, { recursive: true, force: true });
    },
  };
}
