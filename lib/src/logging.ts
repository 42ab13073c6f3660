// The one logger factory: JSON lines (pino) in production, pretty when writing to a terminal.
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export interface LoggingOptions {
  level?: string;
  /** Pretty output; defaults to whether stdout is a terminal. */
  pretty?: boolean;
  name?: string;
}

/** Paths never written to a log line, wherever they occur. */
const redactPaths = [
  'req.headers.authorization',
  'req.headers["x-admin-key"]',
  'req.headers["x-fire-key"]',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  '*.password',
  '*.api_key',
  '*.apiKey',
  '*.secret',
  '*.admin_key',
];

export function createLogger(options: LoggingOptions = {}): Logger {
  const pretty = options.pretty ?? Boolean(process.stdout.isTTY);
  const base: LoggerOptions = {
    level: options.level ?? 'info',
    redact: { paths: redactPaths, censor: '[redacted]' },
    ...(options.name ? { name: options.name } : {}),
  };
  if (pretty) {
    // One line per event (its fields on that line; an error's stack under it), coloured only for a terminal: a
    // forced LOG_FORMAT=pretty into a file or a pipe gets no escape codes.
    const options = { colorize: Boolean(process.stdout.isTTY), translateTime: 'SYS:HH:MM:ss', singleLine: true };
    return pino({ ...base, transport: { target: 'pino-pretty', options } });
  }
  return pino(base);
}

/** A logger that writes nothing, for tests that do not read logs. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
