// Entry point of the operator: `tsx operator/src/main.ts` (the image runs it as `operator`). On SIGTERM it stops
// leading, lets running reconciles finish, releases its lease and exits.
import { startHeapRelease } from '@agentplane/lib/heap-release';
import { loadConfigOrExit, loggerFor, startOrExit } from '@agentplane/lib/program';
import { createOperator } from './app.js';
import { loadOperatorConfig } from './config.js';

const config = loadConfigOrExit(() => loadOperatorConfig());
const logger = loggerFor(config);
const operator = await startOrExit(logger, 'the operator', async () => {
  const built = createOperator({ config, logger });
  await built.start();
  return built;
});
// After a burst of Projects, V8's emptied pages go back to the system. A pause of the operator's event loop delays
// reconciles, which nobody waits on, so it may come while resyncs run.
const heapRelease = startHeapRelease({ logger, maxBusy: 0.5 });

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    heapRelease.stop();
    operator.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'stopping failed');
        process.exit(1);
      },
    );
  });
}
