// Entry point of the runtime (data plane) on its own: `npm run start:runtime`.
import { createServer } from 'node:http';
import { startHeapRelease } from '@agentplane/lib/heap-release';
import { exitOnSignals } from '@agentplane/lib/http/lifecycle';
import { announceGeneratedSecret, listen, loadConfigOrExit, loggerFor, startOrExit } from '@agentplane/lib/program';
import { createRuntime } from './app.js';
import { loadRuntimeConfig } from './config.js';

const config = loadConfigOrExit(() => loadRuntimeConfig());
const logger = loggerFor(config);
const runtime = await startOrExit(logger, 'the runtime', () => createRuntime({ config, logger }));
if (runtime.generatedAdminKey) announceGeneratedSecret(logger, 'a runtime admin key', runtime.adminKeyFile, runtime.adminKey);
// V8's emptied pages go back to the system: what starting up left, now, and later what each busy spell leaves
// once it has passed (decision 0067; the pause is kept off a busy process).
startHeapRelease({ logger });
const server = createServer(runtime.app);
try {
  await listen(server, config.port, config.host);
} catch (error) {
  logger.fatal({ err: error }, 'could not listen');
  await runtime.close();
  process.exit(1);
}
logger.info({ url: config.publicUrl }, `data plane listening on ${config.publicUrl}`);
exitOnSignals({ lifecycle: runtime.lifecycle, servers: [server], logger, graceMs: config.shutdownGraceSeconds * 1000, close: () => runtime.close() });
