// Entry point of the control-api on its own: `npm run start:control-api`.
import { createServer } from 'node:http';
import { startHeapRelease } from '@agentplane/lib/heap-release';
import { exitOnSignals } from '@agentplane/lib/http/lifecycle';
import { listen, loadConfigOrExit, loggerFor, startOrExit } from '@agentplane/lib/program';
import { announceGeneratedOwner } from './owner.js';
import { createControlApi } from './app.js';
import { loadControlApiConfig } from './config.js';

const config = loadConfigOrExit(() => loadControlApiConfig());
const logger = loggerFor(config);
const controlApi = await startOrExit(logger, 'the control-api', () => createControlApi({ config, logger }));
if (controlApi.generatedOwner) announceGeneratedOwner(logger, controlApi.generatedOwner);
// V8's emptied pages go back to the system: what starting up left, now, and later what each busy spell leaves
// once it has passed (decision 0067; the pause is kept off a busy process).
startHeapRelease({ logger });
const server = createServer(controlApi.app);
try {
  await listen(server, config.port, config.host);
} catch (error) {
  logger.fatal({ err: error }, 'could not listen');
  process.exit(1);
}
logger.info({ url: config.publicUrl }, `control plane listening on ${config.publicUrl}`);
exitOnSignals({ lifecycle: controlApi.lifecycle, servers: [server], logger, graceMs: config.shutdownGraceSeconds * 1000, close: () => controlApi.close() });
