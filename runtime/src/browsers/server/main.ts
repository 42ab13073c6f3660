// The browser server (`entrypoint.sh browser`; docs/decisions/0092): the program of the browser Pod the operator
// runs in each project namespace on Kubernetes, so that pages, a stranger's code, never run in the runtime's Pod.
// Chromium is launched as the embedded browser is (decision 0087: every connection through the egress proxy, which
// runs here too), behind Playwright's browser server on loopback; the Pod's port is a gate that lets through only a
// WebSocket that carries the token (gate.ts), which the project's runtime sends.
// The Pod's NetworkPolicy allows public egress only, so the guard holds twice. Exits when Chromium does, so the
// kubelet starts it again; on SIGTERM it closes the browser (every context with it) and exits.
import { createServer, type AddressInfo } from 'node:net';
import { loadConfigOrExit, loggerFor, startOrExit } from '@agentplane/lib/program';
import { startEgressProxy, type EgressProxy } from '@agentplane/lib/net/egress-proxy';
import type { Logger } from '@agentplane/lib/logging';
import type { BrowserServer } from 'playwright-core';
import { launchGuardedChromiumServer } from '../chromium.js';
import { loadBrowserServerConfig, type BrowserServerConfig } from './config.js';
import { startBrowserGate } from './gate.js';

/** A free TCP port on loopback, found by binding port 0 and releasing it. */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Chromium's words when it cannot have its own sandbox (no user namespaces, no setuid helper, or running as root). */
const NO_SANDBOX = /sandbox/i;

async function launch(config: BrowserServerConfig, proxy: EgressProxy, internalPort: number, logger: Logger): Promise<{ server: BrowserServer; sandbox: boolean }> {
  const withSandbox = (sandbox: boolean) => launchGuardedChromiumServer({ executablePath: config.executablePath, proxy, sandbox }, internalPort);
  // Chromium refuses to sandbox itself as root.
  const asRoot = process.getuid?.() === 0;
  if (config.sandbox === 'false' || (config.sandbox === 'auto' && asRoot)) return { server: await withSandbox(false), sandbox: false };
  try {
    return { server: await withSandbox(true), sandbox: true };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (config.sandbox === 'true' || !NO_SANDBOX.test(message)) throw error;
    logger.warn(
      { reason: message.split('\n').find((line) => NO_SANDBOX.test(line))?.trim().slice(0, 300) },
      "Chromium's own sandbox is not available here (the kernel or the container runtime refuses the user namespaces it needs); running without it, behind the egress guard and the Pod's fences",
    );
    return { server: await withSandbox(false), sandbox: false };
  }
}

async function main(): Promise<void> {
  const config = loadConfigOrExit(() => loadBrowserServerConfig(process.env));
  const logger = loggerFor(config).child({ component: 'browser-server' });
  // Playwright's server listens on a loopback port of its own, picked now so the egress proxy refuses it too.
  const internalPort = await startOrExit(logger, 'finding a free port', freeLoopbackPort);
  const proxy = await startOrExit(logger, 'the egress proxy', () =>
    startEgressProxy({
      policy: { allowPrivate: config.allowPrivate, allowHttp: true },
      // The server's own ports are refused to pages on every local address, as the runtime's are to the embedded browser.
      ownPorts: [config.port, internalPort],
      allow: config.allowedDestinations,
      onRefused: (destination, reason) => logger.info({ destination, reason }, 'the browser egress guard refused a connection'),
    }),
  );
  const { server, sandbox } = await startOrExit(logger, 'the browser', () => launch(config, proxy, internalPort, logger));
  const upstream = new URL(server.wsEndpoint());
  const gate = await startOrExit(logger, 'the gate', () =>
    startBrowserGate({ host: config.host, port: config.port, token: config.token, upstream: { port: Number(upstream.port), path: upstream.pathname }, logger }),
  );
  // Never an endpoint: Playwright's path is as good as the token.
  logger.info({ port: config.port, sandbox, executable: config.executablePath }, 'serving the browser');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'closing the browser');
    await gate.close().catch(() => undefined);
    await server.close().catch(() => undefined);
    await proxy.close().catch(() => undefined);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  server.process().once('exit', (code, signal) => {
    if (stopping) return;
    logger.error({ code, signal }, 'Chromium exited; exiting so the browser is started again');
    process.exit(1);
  });
}

await main();
