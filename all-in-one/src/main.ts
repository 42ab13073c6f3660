// `npm start`: the control-api and the runtime in one process on embedded defaults (PGlite, local files,
// in-process events), state kept in AGENTPLANE_DATA_DIR. Both share one lifecycle, so SIGTERM drains both.
import { createServer } from 'node:http';
import { startHeapRelease } from '@agentplane/lib/heap-release';
import { exitOnSignals, Lifecycle } from '@agentplane/lib/http/lifecycle';
import { announceGeneratedSecret, listen, loadConfigsOrExit, loggerFor, startOrExit } from '@agentplane/lib/program';
import { announceGeneratedOwner } from '@agentplane/control-api/owner';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { createControlApi } from '@agentplane/control-api/app';
import { loadControlApiConfig } from '@agentplane/control-api/config';
import { createRuntime } from '@agentplane/runtime/app';
import { loadRuntimeConfig } from '@agentplane/runtime/config';

/** Where this process reaches its own data plane, whatever public URL customers are given. */
const loopbackUrl = (host: string, port: number) => `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host}:${port}`;

// Every problem of both programs is reported at once. Customers are handed the data plane this process serves
// (DATA_PORT, PUBLIC_URL), unless DATA_PLANE_URL names another.
const configs = loadConfigsOrExit({
  runtime: () => loadRuntimeConfig(),
  control: () => loadControlApiConfig(process.env, { dataPlaneUrl: servedDataPlaneUrl() }),
});

function servedDataPlaneUrl(): string | undefined {
  try {
    return loadRuntimeConfig().publicUrl;
  } catch {
    return undefined; // the runtime's loader reports why
  }
}
const logger = loggerFor(configs.runtime);
const lifecycle = new Lifecycle();
const runtime = await startOrExit(logger, 'the runtime', () =>
  // A page the agent's browser opens may reach neither plane of this process.
  createRuntime({ config: configs.runtime, logger: logger.child({ program: 'runtime' }), lifecycle, ownPorts: [configs.control.port] }),
);
// One embedded database for both: the control-api keeps its tables in schema `control` beside the runtime's.
const control = await startOrExit(logger, 'the control-api', () =>
  createControlApi({
    config: configs.control,
    logger: logger.child({ program: 'control-api' }),
    lifecycle,
    database: runtime.database,
    // The runtime's own admin surface, over loopback: the same calls a separate runtime would get.
    provisioner: new LocalProvisioner({ runtimeUrl: loopbackUrl(configs.runtime.host, configs.runtime.port), adminKey: runtime.adminKey }),
    readiness: { runtime: () => runtime.database.ping() },
  }),
);
if (runtime.generatedAdminKey) announceGeneratedSecret(logger, 'a runtime admin key', runtime.adminKeyFile, runtime.adminKey);
if (control.generatedOwner) announceGeneratedOwner(logger, control.generatedOwner);

// V8's emptied pages go back to the system: what starting up left, now, and later what each busy spell leaves
// once it has passed (decision 0067; the pause is kept off a busy process).
startHeapRelease({ logger });
const dataServer = createServer(runtime.app);
const controlServer = createServer(control.app);
try {
  await listen(dataServer, configs.runtime.port, configs.runtime.host);
  await listen(controlServer, configs.control.port, configs.control.host);
} catch (error) {
  logger.fatal({ err: error }, 'could not listen');
  await control.close();
  await runtime.close();
  process.exit(1);
}
logger.info(
  { control_url: configs.control.publicUrl, data_url: configs.runtime.publicUrl, data_dir: configs.runtime.dataDir },
  `agentplane is up: control plane ${configs.control.publicUrl}, data plane ${configs.runtime.publicUrl}`,
);
exitOnSignals({
  lifecycle,
  servers: [dataServer, controlServer],
  logger,
  graceMs: configs.runtime.shutdownGraceSeconds * 1000,
  close: async () => {
    await control.close();
    await runtime.close();
  },
});
