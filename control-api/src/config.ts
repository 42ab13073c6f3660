// The control-api's configuration, parsed from the environment once at start. README's table lists every variable.
import { resolve } from 'node:path';
import { EnvReader, type Env } from '../../lib/src/config.js';

export interface ControlApiConfig {
  host: string;
  port: number;
  publicUrl: string;
  dataDir: string;
  bodyLimitBytes: number;
  shutdownGraceSeconds: number;
  logLevel: string;
  logFormat: 'json' | 'pretty' | 'auto';
}

export function loadControlApiConfig(env: Env = process.env): ControlApiConfig {
  const read = new EnvReader(env);
  const host = read.string('HOST', '127.0.0.1');
  const port = read.port('CONTROL_PORT', 8080);
  const config: ControlApiConfig = {
    host,
    port,
    publicUrl: (read.url('CONTROL_PUBLIC_URL', ['http', 'https']) ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`).replace(/\/$/, ''),
    dataDir: resolve(read.string('AGENTPLANE_DATA_DIR', './.agentplane')),
    bodyLimitBytes: read.integer('REQUEST_BODY_LIMIT_BYTES', 1024 * 1024, { min: 1024, max: 100 * 1024 * 1024 }),
    shutdownGraceSeconds: read.integer('SHUTDOWN_GRACE_SECONDS', 30, { min: 0, max: 3600 }),
    logLevel: read.oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], 'info'),
    logFormat: read.oneOf('LOG_FORMAT', ['json', 'pretty', 'auto'], 'auto'),
  };
  read.done();
  return config;
}
