// Entry point of the runtime (data plane) on its own: `npm run start:runtime`.
import { createServer } from 'node:http';
import { ConfigError } from '../../lib/src/config.js';
import { exitOnSignals } from '../../lib/src/http/lifecycle.js';
import { createLogger } from '../../lib/src/logging.js';
import { createRuntime } from './app.js';
import { loadRuntimeConfig } from './config.js';

async function main() {
  let config;
  try {
    config = loadRuntimeConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger({ level: config.logLevel, ...(config.logFormat === 'auto' ? {} : { pretty: config.logFormat === 'pretty' }) });
  const runtime = await createRuntime({ config, logger });
  if (runtime.generatedAdminKey) {
    logger.warn({ admin_key_file: `${config.dataDir}/secrets/runtime-admin-key` }, `generated a runtime admin key (shown once): ${runtime.adminKey}`);
  }
  const server = createServer(runtime.app);
  server.listen(config.port, config.host, () => {
    logger.info({ url: config.publicUrl }, `data plane listening on ${config.publicUrl}`);
  });
  exitOnSignals({ lifecycle: runtime.lifecycle, servers: [server], logger, graceMs: config.shutdownGraceSeconds * 1000, close: () => runtime.close() });
}

await main();
