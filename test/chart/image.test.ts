// The container image's contract, short of building it (no container engine here): the entrypoint runs the compiled
// program its first argument names, the Dockerfile copies only files that exist and that .dockerignore lets through,
// and what the final stage installs holds no TypeScript tooling.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/process.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const entrypoint = join(root, 'hack', 'entrypoint.sh');

/** Runs the entrypoint with nothing of the caller's environment but PATH, plus `env`. */
function run(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(entrypoint, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, stderr: result.stderr };
}

describe('the image entrypoint', () => {
  // The image runs what `npm run build` compiles; so does the entrypoint here.
  beforeAll(() => {
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', timeout: 300_000 });
  }, 300_000);

  // A bad setting stops each program at its configuration step (exit 2, the variable named): proof the entrypoint
  // reached that program's main module, without starting a server.
  it.each([
    ['control-api', 'CONTROL_PORT'],
    ['runtime', 'DATA_PORT'],
    ['operator', 'OPERATOR_PORT'],
    ['all-in-one', 'DATA_PORT'],
    ['browser', 'BROWSER_SERVER_PORT'],
  ])('runs %s, named by the first argument', (program, portVariable) => {
    const result = run([program], { [portVariable]: 'not-a-port' });
    expect(result.stderr).toContain(`${portVariable}="not-a-port" is not valid`);
    expect(result.code).toBe(2);
  });

  // The allocator the runtime runs on, read from its own memory map once the entrypoint has exec'd node, and the
  // V8 flags it was given.
  async function runtimeProcessOf(env: Record<string, string>, program = 'runtime'): Promise<{ allocator: 'jemalloc' | 'glibc'; argv: string[] }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'entrypoint-malloc-'));
    const child = spawn(entrypoint, [program], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        AGENTPLANE_DATA_DIR: dataDir,
        DATA_PORT: String(await freePort()),
        CONTROL_PORT: String(await freePort()),
        ...env,
      },
      stdio: 'ignore',
    });
    try {
      for (let tries = 0; tries < 500; tries++) {
        const exe = (() => {
          try {
            return readlinkSync(`/proc/${child.pid}/exe`);
          } catch {
            return '';
          }
        })();
        // Right after exec the loader is still mapping libraries: a preloaded one comes before libc, so once libc
        // is mapped the allocator can be told.
        const maps = basename(exe) === 'node' ? readFileSync(`/proc/${child.pid}/maps`, 'utf8') : '';
        if (maps.includes('libc.so')) {
          return { allocator: maps.includes('libjemalloc') ? 'jemalloc' : 'glibc', argv: readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0') };
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error('the entrypoint never ran node');
    } finally {
      child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }

  it('runs the runtime on jemalloc where the system has it (glibc malloc when told to), with 8 MiB semi-spaces', async () => {
    expect(existsSync('/usr/lib/x86_64-linux-gnu/libjemalloc.so.2') || existsSync('/usr/local/lib/libjemalloc.so.2')).toBe(true);
    const runtime = await runtimeProcessOf({});
    expect(runtime.allocator).toBe('jemalloc');
    expect(runtime.argv).toContain('--max-semi-space-size=8');
    expect((await runtimeProcessOf({ AGENTPLANE_MALLOC: 'glibc' })).allocator).toBe('glibc');
  });

  it('runs `npm start`\'s all-in-one process the same way', async () => {
    expect(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts.start).toContain('hack/entrypoint.sh all-in-one');
    const allInOne = await runtimeProcessOf({}, 'all-in-one');
    expect(allInOne.allocator).toBe('jemalloc');
    expect(allInOne.argv).toContain('--max-semi-space-size=8');
  });

  it('refuses an unknown or missing program with its usage (exit 64)', () => {
    for (const args of [['shell'], []]) {
      const result = run(args);
      expect(result.code).toBe(64);
      expect(result.stderr).toContain('usage: entrypoint.sh control-api|runtime|operator|migrate');
    }
  });
});

describe('the Dockerfile', () => {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  const ignore = readFileSync(join(root, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));

  it('copies from the build context only paths that exist and that .dockerignore lets through', () => {
    const sources = [...dockerfile.matchAll(/^COPY (?!--from)(?:--\S+ )*(.+) \S+$/gm)].flatMap((match) => match[1]!.split(/\s+/));
    expect(sources).toEqual(expect.arrayContaining(['lib/src', 'runtime/src', 'control-api/src', 'operator/src', 'hack/entrypoint.sh']));
    // The context is deny-all, then re-included path by path (a folder brings what is under it).
    expect(ignore[0]).toBe('*');
    for (const source of sources) {
      expect(existsSync(join(root, source)), source).toBe(true);
      const parts = source.split('/');
      const reincluded = parts.some((_, i) => ignore.includes(`!${parts.slice(0, i + 1).join('/')}`));
      expect(reincluded, source).toBe(true);
    }
  });

  it('brings every workspace into both install stages, and the sources of every package the build compiles', () => {
    const workspaces = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { workspaces: string[] }).workspaces;
    const stage = (name: string) => dockerfile.slice(dockerfile.indexOf(` AS ${name}`), dockerfile.indexOf('\nFROM ', dockerfile.indexOf(` AS ${name}`)));
    // npm ci refuses a lockfile whose workspaces it cannot find.
    for (const name of ['build', 'deps']) {
      for (const workspace of workspaces) expect(stage(name), `${workspace} in the ${name} stage`).toMatch(new RegExp(`^COPY ${workspace}/package\\.json`, 'm'));
    }
    const compiled = (JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8').replace(/^\s*\/\/.*$/gm, '')) as { references: { path: string }[] }).references;
    for (const { path } of compiled) expect(stage('build'), `${path}/src`).toMatch(new RegExp(`^COPY ${path}/src `, 'm'));
    expect(stage('build')).toMatch(/npm run build:console/);
  });

  it('runs the final stage as a non-root numeric user through the executable entrypoint', () => {
    const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(finalStage).toMatch(/^USER 10001:10001$/m);
    expect(finalStage).toContain('ENTRYPOINT ["/app/hack/entrypoint.sh"]');
    expect(finalStage).not.toMatch(/npm (ci|install)|apt-get install/);
    accessSync(entrypoint, constants.X_OK);
  });

  it('installs production dependencies only, none of them TypeScript tooling', () => {
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    const tooling = ['tsx', 'typescript', 'vitest'];
    for (const manifest of ['package.json', 'lib/package.json', 'runtime/package.json', 'control-api/package.json', 'operator/package.json']) {
      const pkg = JSON.parse(readFileSync(join(root, manifest), 'utf8')) as { dependencies?: Record<string, string> };
      for (const name of tooling) expect(Object.keys(pkg.dependencies ?? {}), manifest).not.toContain(name);
    }
  });
});
