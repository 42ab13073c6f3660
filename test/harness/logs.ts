// A logger whose every line is kept, for tests that check what a program writes to its logs (a secret never is).
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '@agentplane/lib/logging';

export interface CapturedLogs {
  logger: Logger;
  /** Everything written so far, one JSON line per entry. */
  text(): string;
}

/** Logs at `level` (trace unless told: the most that is ever written) into memory. */
export function captureLogs(level = 'trace'): CapturedLogs {
  let text = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  return { logger: pino({ level }, sink), text: () => text };
}
