// The browser server's configuration (docs/decisions/0092), read from the environment once at start. The operator
// sets it on the browser Pod; the README's table lists every variable.
import { EnvReader, type Env } from '@agentplane/lib/config';
import { BROWSER_TOKEN_RULE, isBrowserToken } from '@agentplane/lib/browser';
import { readAllowedDestinations } from '@agentplane/lib/net/egress-proxy';

export interface BrowserServerConfig {
  host: string;
  port: number;
  /** What the runtime sends (`Authorization: Bearer`) to pass the gate: its only way in. */
  token: string;
  executablePath: string;
  /**
   * Chromium's own sandbox: `auto` asks for it and, where the kernel refuses the user namespaces it needs (a
   * container runtime's default seccomp profile may), runs without it and says so; `true` refuses to run without it.
   */
  sandbox: 'auto' | 'true' | 'false';
  allowPrivate: boolean;
  allowedDestinations: string[];
  logLevel: string;
  logFormat: 'json' | 'pretty' | 'auto';
}

export const BROWSER_SERVER_DEFAULT_PORT = 8083;

export function loadBrowserServerConfig(env: Env): BrowserServerConfig {
  const read = new EnvReader(env);
  const token = read.raw('BROWSER_TOKEN');
  if (token === undefined || !isBrowserToken(token)) read.problem(`BROWSER_TOKEN is required: ${BROWSER_TOKEN_RULE}`);
  const config: BrowserServerConfig = {
    host: read.string('HOST', '0.0.0.0'),
    port: read.port('BROWSER_SERVER_PORT', BROWSER_SERVER_DEFAULT_PORT),
    token: token ?? '',
    executablePath: read.string('BROWSER_EXECUTABLE', '/usr/bin/chromium'),
    sandbox: read.oneOf('BROWSER_SANDBOX', ['auto', 'true', 'false'], 'auto'),
    allowPrivate: read.boolean('BROWSER_ALLOW_PRIVATE_URLS', false),
    allowedDestinations: readAllowedDestinations(read),
    logLevel: read.oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], 'info'),
    logFormat: read.oneOf('LOG_FORMAT', ['json', 'pretty', 'auto'], 'auto'),
  };
  read.done();
  return config;
}
