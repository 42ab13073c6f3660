// Entry point of the control-api on its own: `npm run start:control-api`.
import { createServer } from 'node:http';
import { ConfigError } from '../../lib/src/config.js';
import { exitOnSignals } from '../../lib/src/http/lifecycle.js';
import { createLogger } from '../../lib/src/logging.js';
import { createControlApi } from './app.js';
import { loadControlApiConfig } from './config.js';

let config;
try {
  config = loadControlApiConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(error.message);
  process.exit(2);
}
const logger = createLogger({ level: config.logLevel, ...(config.logFormat === 'auto' ? {} : { pretty: config.logFormat === 'pretty' }) });
const controlApi = await createControlApi({ config, logger });
const server = createServer(controlApi.app);
server.listen(config.port, config.host, () => logger.info({ url: config.publicUrl }, `control plane listening on ${config.publicUrl}`));
exitOnSignals({ lifecycle: controlApi.lifecycle, servers: [server], logger, graceMs: config.shutdownGraceSeconds * 1000, close: () => controlApi.close() });
