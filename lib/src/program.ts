// Start-up steps every program's entry point shares: read config or exit 2 with the problems, build the logger
// the config asks for, and listen.
import type { Server } from 'node:http';
import { ConfigError } from './config.js';
import { createLogger, type Logger } from './logging.js';

/** Runs `load`; on a configuration problem prints every problem and exits with status 2. */
export function loadConfigOrExit<T>(load: () => T): T {
  return loadConfigsOrExit({ config: load }).config;
}

/**
 * Runs every loader, also after one has failed, so a process that hosts several programs (the all-in-one) reports
 * every bad variable of all of them at once; a variable both read (HOST, ...) is named once. Exits with status 2
 * when any problem was found.
 */
export function loadConfigsOrExit<T extends Record<string, unknown>>(loaders: { [K in keyof T]: () => T[K] }): T {
  const problems = new Set<string>();
  const loaded: Partial<T> = {};
  for (const key of Object.keys(loaders) as (keyof T)[]) {
    try {
      loaded[key] = loaders[key]();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      for (const problem of error.problems) problems.add(problem);
    }
  }
  if (problems.size > 0) {
    console.error(new ConfigError([...problems]).message);
    process.exit(2);
  }
  return loaded as T;
}

export function loggerFor(config: { logLevel: string; logFormat: 'json' | 'pretty' | 'auto' }): Logger {
  return createLogger({ level: config.logLevel, ...(config.logFormat === 'auto' ? {} : { pretty: config.logFormat === 'pretty' }) });
}

/** Resolves once the server listens; rejects (for example EADDRINUSE) instead of crashing later. */
export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Tells about a secret generated on first start. Its value is shown once, and only to a person at a terminal:
 * anything written to a pipe (containers, log collectors ship stdout and stderr alike) gets only the path.
 */
export function announceGeneratedSecret(logger: Logger, what: string, file: string, value: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\n  generated ${what} (shown once, kept in ${file}):\n  ${value}\n\n`);
  logger.warn({ file }, `generated ${what}; read it from ${file}`);
}

/** Runs a start-up step; when it fails, logs why in one line and exits 1 instead of dumping a rejection. */
export async function startOrExit<T>(logger: Logger, what: string, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    logger.fatal({ err: error }, `${what} failed to start: ${(error as Error).message}`);
    process.exit(1);
  }
}
