// Reading configuration from the environment, once, at start. Each program has its own typed config module
// built from these readers; nothing deeper in the code reads process.env. Every failure names the variable,
// what was wrong and what is allowed, and all failures are reported together.
import { resolve } from 'node:path';

export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Collects problems while a config object is read, so one start reports every bad variable at once. */
export class EnvReader {
  private readonly problems: string[] = [];

  constructor(private readonly env: Env) {}

  /** A trimmed value, or undefined when unset or blank. */
  raw(name: string): string | undefined {
    const value = this.env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }

  string(name: string, fallback: string): string;
  string(name: string): string | undefined;
  string(name: string, fallback?: string): string | undefined {
    return this.raw(name) ?? fallback;
  }

  integer(name: string, fallback: number, bounds: { min?: number; max?: number } = {}): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    const min = bounds.min ?? Number.MIN_SAFE_INTEGER;
    const max = bounds.max ?? Number.MAX_SAFE_INTEGER;
    if (!/^-?\d+$/.test(value)) {
      this.fail(name, value, `an integer from ${min} to ${max}`);
      return fallback;
    }
    const parsed = Number(value);
    if (parsed < min || parsed > max) {
      this.fail(name, value, `an integer from ${min} to ${max}`);
      return fallback;
    }
    return parsed;
  }

  port(name: string, fallback: number): number {
    return this.integer(name, fallback, { min: 0, max: 65535 });
  }

  boolean(name: string, fallback: boolean): boolean {
    const value = this.raw(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    this.fail(name, value, 'one of true, false, 1, 0, yes, no, on, off');
    return fallback;
  }

  oneOf<const T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if ((allowed as readonly string[]).includes(value)) return value as T;
    this.fail(name, value, `one of ${allowed.join(', ')}`);
    return fallback;
  }

  /** A URL whose scheme is one of `protocols` (without the colon), e.g. ['postgres', 'postgresql']. */
  url(name: string, protocols: string[]): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    try {
      const parsed = new URL(value);
      if (!protocols.includes(parsed.protocol.replace(/:$/, ''))) throw new Error('scheme');
      return value;
    } catch {
      this.fail(name, redactUrl(value), `a URL with scheme ${protocols.map((p) => `${p}://`).join(' or ')}`);
      return undefined;
    }
  }

  /** Records a problem found by a check outside the readers above (for example a cross-variable rule). */
  problem(message: string): void {
    this.problems.push(message);
  }

  /** Throws one ConfigError listing every problem, if any were found. */
  done(): void {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
  }

  private fail(name: string, value: string, allowed: string): void {
    this.problems.push(`${name}=${JSON.stringify(value)} is not valid: expected ${allowed}`);
  }
}

/** Hides credentials in a URL so it can be printed in an error or a log line. */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    if (!url.password) return value;
    url.password = '***';
    return url.toString();
  } catch {
    return value.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/** What every program's HTTP service reads the same way. */
export interface ServiceBasics {
  host: string;
  port: number;
  /** Where clients reach this program; derived from host and port unless set. */
  publicUrl: string;
  dataDir: string;
  bodyLimitBytes: number;
  shutdownGraceSeconds: number;
  logLevel: string;
  logFormat: 'json' | 'pretty' | 'auto';
}

export function readServiceBasics(read: EnvReader, names: { port: string; defaultPort: number; publicUrl: string }): ServiceBasics {
  const host = read.string('HOST', '127.0.0.1');
  const port = read.port(names.port, names.defaultPort);
  const derived = `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`;
  return {
    host,
    port,
    publicUrl: (read.url(names.publicUrl, ['http', 'https']) ?? derived).replace(/\/$/, ''),
    dataDir: resolve(read.string('AGENTPLANE_DATA_DIR', './.agentplane')),
    bodyLimitBytes: read.integer('REQUEST_BODY_LIMIT_BYTES', 1024 * 1024, { min: 1024, max: 100 * 1024 * 1024 }),
    shutdownGraceSeconds: read.integer('SHUTDOWN_GRACE_SECONDS', 30, { min: 0, max: 3600 }),
    logLevel: read.oneOf('LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], 'info'),
    logFormat: read.oneOf('LOG_FORMAT', ['json', 'pretty', 'auto'], 'auto'),
  };
}
