// The log as a person and a machine read it. `npm start` in a terminal writes one readable line per event
// (pino-pretty: time, level, pid, message, its fields on the same line), in colour; into a pipe it writes JSON lines.
// LOG_FORMAT forces either: the image sets `json`, so a container started with a terminal (`docker run -t`) still
// logs JSON, and `pretty` forced into a pipe or a file writes no colour codes.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, makeTempDir } from './harness/process.js';

const root = join(import.meta.dirname, '..');
const UP = /agentplane is up: control plane http:\/\/127\.0\.0\.1:\d+, data plane http:\/\/127\.0\.0\.1:\d+/;
const ESCAPE = '\u001b[';
const TIME = String.raw`\[\d\d:\d\d:\d\d\]`;

interface Started {
  child: ChildProcess;
  /** stdout and stderr as they came, escape codes and carriage returns included. */
  output: () => string;
  exited: Promise<number | null>;
}

const started = new Set<Started>();
const dirs: string[] = [];
/** Program pids read from the log, stopped after each test whatever it asserted. */
const programs = new Set<number>();

/**
 * Runs `command` (a shell command line, from the repository's root) with `env` and only PATH and HOME of ours. On a
 * terminal: inside util-linux `script`, which gives it a pseudo-terminal for stdin, stdout and stderr and copies
 * what it writes to its own stdout.
 */
function start(command: string, env: Record<string, string>, terminal: boolean): Started {
  const environment = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env };
  const child = terminal
    ? spawn('script', ['--quiet', '--flush', '--return', '--command', command, '/dev/null'], { cwd: root, env: environment, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn('sh', ['-c', command], { cwd: root, env: environment, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout!.on('data', (chunk: Buffer) => (text += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const run = { child, output: () => text, exited };
  started.add(run);
  return run;
}

async function allInOneEnv(): Promise<Record<string, string>> {
  const dir = makeTempDir('log-format-');
  dirs.push(dir);
  return { AGENTPLANE_DATA_DIR: dir, CONTROL_PORT: String(await freePort()), DATA_PORT: String(await freePort()) };
}

/** The output's lines once it has a line matching `pattern`, with escape codes and carriage returns left in. */
async function linesUpTo(run: Started, pattern: RegExp, timeoutMs = 90_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = run.output().split('\n').map((line) => line.replace(/\r$/, ''));
    if (lines.some((line) => pattern.test(plain(line)))) return lines;
    if (run.child.exitCode !== null) throw new Error(`exited ${run.child.exitCode} before logging ${pattern}:\n${run.output()}`);
    if (Date.now() > deadline) throw new Error(`no line matching ${pattern}:\n${run.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A line as a person sees it: without its colours. */
const plain = (line: string) => line.replace(/\u001b\[[0-9;]*m/g, '');

function json(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Stops the program that logged `pid` (SIGTERM: it drains and exits), then waits for whatever ran it. */
async function stop(run: Started, pid: number): Promise<void> {
  programs.add(pid);
  process.kill(pid, 'SIGTERM');
  await run.exited;
  programs.delete(pid);
}

const prettyPid = (lines: string[]) => Number(/ \((\d+)\): /.exec(plain(lines.find((line) => UP.test(plain(line)))!))![1]);
const jsonPid = (lines: string[], pattern: RegExp) => Number(lines.map(json).find((entry) => pattern.test(String(entry?.msg)))!.pid);

describe('the log', () => {
  // npm start builds first; built here once, its own build is then a quick no-op.
  beforeAll(async () => {
    const build = start('npm run --silent build', {}, false);
    const code = await build.exited;
    if (code !== 0) throw new Error(`npm run build exited ${code}:\n${build.output()}`);
  }, 900_000);

  afterEach(async () => {
    for (const pid of programs) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    programs.clear();
    for (const run of started) if (run.child.exitCode === null) run.child.kill('SIGKILL');
    started.clear();
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('is one readable, coloured line per event when `npm start` runs in a terminal', async () => {
    const run = start('exec npm start --silent', await allInOneEnv(), true);
    const lines = await linesUpTo(run, UP);
    // Not JSON lines: time, level, pid and message, in colour.
    expect(lines.filter((line) => json(line) !== undefined)).toEqual([]);
    expect(lines.map(plain)).toContainEqual(expect.stringMatching(new RegExp(`^${TIME} INFO \\(\\d+\\): ${UP.source}`)));
    expect(lines.some((line) => line.includes(ESCAPE))).toBe(true);
    // An event's fields are on its own line: the migrations the runtime applied are named where it says so.
    expect(lines.map(plain)).toContainEqual(expect.stringMatching(new RegExp(`^${TIME} INFO \\(\\d+\\): database migrated \\{.*"program":"runtime".*"name":"tenants"`)));
    await stop(run, prettyPid(lines));
  }, 180_000);

  it('is JSON lines when `npm start` writes to a pipe', async () => {
    const run = start('exec npm start --silent', await allInOneEnv(), false);
    const lines = await linesUpTo(run, UP);
    // What the build printed before the program started is not the program's log.
    const log = lines.slice(lines.findIndex((line) => line.startsWith('{'))).filter((line) => line !== '');
    expect(log.length).toBeGreaterThan(2);
    for (const line of log) expect(json(line), line).toMatchObject({ level: expect.any(Number), time: expect.any(Number), msg: expect.any(String) });
    expect(run.output()).not.toContain(ESCAPE);
    await stop(run, jsonPid(lines, UP));
  }, 180_000);

  it('stays JSON on a terminal in the image, which sets LOG_FORMAT=json', async () => {
    const finalStage = readFileSync(join(root, 'Dockerfile'), 'utf8').split(/^FROM /m).at(-1)!;
    expect(finalStage).toMatch(/^\s+LOG_FORMAT=json\b/m);
    // The image's entrypoint and program, on a terminal as `docker run -t` gives it one.
    const run = start('exec hack/entrypoint.sh runtime', { ...(await allInOneEnv()), LOG_FORMAT: 'json' }, true);
    const lines = await linesUpTo(run, /"msg":"data plane listening on /);
    // Everything but the generated admin key's banner, which goes to a person's terminal only (indented).
    const log = lines.filter((line) => line.trim() !== '' && !line.startsWith('  '));
    expect(log.length).toBeGreaterThan(2);
    for (const line of log) expect(json(line), line).toMatchObject({ level: expect.any(Number), time: expect.any(Number), msg: expect.any(String) });
    await stop(run, jsonPid(lines, /^data plane listening on /));
  }, 180_000);

  it('is readable without colour codes when LOG_FORMAT=pretty writes to a pipe', async () => {
    const run = start('exec hack/entrypoint.sh all-in-one', { ...(await allInOneEnv()), LOG_FORMAT: 'pretty' }, false);
    const lines = await linesUpTo(run, UP);
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${TIME} INFO \\(\\d+\\): ${UP.source}`)));
    expect(run.output()).not.toContain(ESCAPE);
    await stop(run, prettyPid(lines));
  }, 180_000);
});
