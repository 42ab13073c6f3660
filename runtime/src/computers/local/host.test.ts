// The local sandbox host on the real bubblewrap, cgroups and loop mounts of this machine: what a sandbox can reach
// and what it cannot, its limits, pause and the timeout, from inside, as a hostile command would try them.
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@agentplane/lib/logging';
import { eventually } from '@agentplane/test/harness/eventually';
import { SandboxNotRunningError, type ExecSpec, type SandboxStart } from '../host.js';
import { LocalSandboxHost } from './host.js';
import { mountRootFor } from './workspaces.js';

const logger = createLogger({ level: 'silent' });
const dataDir = mkdtempSync(join(tmpdir(), 'sandbox-host-'));
const secretFile = join(dataDir, 'secrets', 'master-key');
const limits = { cpus: 1, memoryMiB: 128, processes: 64, diskMiB: 32 };
const sandboxesRoot = join(dataDir, 'runtime', 'sandboxes');
// A range apart from the default one other suites' sandboxes take at the same time.
const users = { hostUid: 61_100, hostUidCount: 40 };
const sandbox = (id: string, overrides: Partial<SandboxStart['limits']> = {}): SandboxStart => ({ id, tenantId: 't1', limits: { ...limits, ...overrides } });

let host: LocalSandboxHost;
let server: Server;
let port = 0;

/** The host user that owns what sandbox `id` writes in its /workspace. */
const hostOwner = async (id: string) => {
  await text(id, 'touch .owner');
  return (await stat(join(mountRootFor(sandboxesRoot), id, '.owner'))).uid;
};
const INOTIFY_HOG = "import ctypes, time; l = ctypes.CDLL(None); n = 0\nwhile n < 100000 and l.inotify_init() >= 0: n += 1\nprint(n, flush=True); time.sleep(60)";
const INOTIFY_ONE = 'import ctypes; print(ctypes.CDLL(None).inotify_init())';

const exec = (id: string, command: string, options: Partial<ExecSpec> = {}) =>
  host.exec(id, { argv: ['/bin/bash', '-c', command], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 1 << 20, ...options });
const text = async (id: string, command: string, options: Partial<ExecSpec> = {}) => {
  const outcome = await exec(id, command, options);
  return { ...outcome, out: outcome.stdout.toString(), err: outcome.stderr.toString() };
};

beforeAll(async () => {
  await mkdir(join(dataDir, 'secrets'), { recursive: true });
  writeFileSync(secretFile, 'the-master-key');
  process.env.AGENTPLANE_TEST_SECRET = 'must-not-leak';
  server = createServer((_req, res) => res.end('host service')).listen(0, '0.0.0.0');
  await new Promise((resolve) => server.once('listening', resolve));
  port = (server.address() as { port: number }).port;
  host = await LocalSandboxHost.create({ root: sandboxesRoot, logger, ...users });
  await host.start(sandbox('s1'));
  await host.start(sandbox('s2'));
});

afterAll(async () => {
  await host?.close();
  for (const id of ['s1', 's2', 's3', 's4', 's5', 's6', 'bomb']) await host?.remove(id).catch(() => undefined);
  server?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe('LocalSandboxHost', () => {
  it('holds every limit with the kernel on this machine: cgroups, an ext4 image, the freezer', () => {
    // This machine runs the tests as root with cgroup v1: the strong path is the one under test here.
    expect(host.describe()).toMatchObject({
      kind: 'local',
      network: 'none',
      enforcement: { cpu: 'cgroup v1', memory: 'cgroup v1', processes: 'cgroup v1', disk: "ext4 image of the sandbox's size", pause: 'cgroup v1 freezer' },
    });
  });

  it('runs a command as the sandbox user in /workspace, with its input, environment and directory, and none of the runtime\'s environment', async () => {
    const outcome = await text('s1', 'id -u; pwd; cat; echo "$GREETING"; env | grep -c AGENTPLANE_ || true; mkdir -p sub; cd sub && pwd', {
      stdin: Buffer.from('from stdin\n'),
      env: { GREETING: 'hello' },
    });
    expect(outcome.out).toBe('1000\n/workspace\nfrom stdin\nhello\n0\n/workspace/sub\n');
    expect(outcome).toMatchObject({ exitCode: 0, timedOut: false, stdoutTruncated: false });
    expect((await text('s1', 'pwd', { cwd: '/workspace/sub' })).out).toBe('/workspace/sub\n');
    expect((await text('s1', 'exit 3')).exitCode).toBe(3);
  });

  it('runs every command with no new privileges and no capabilities, none to pass on either', async () => {
    const status = (await text('s1', 'grep -E "^(NoNewPrivs|CapInh|CapPrm|CapEff|CapAmb):" /proc/self/status')).out;
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapAmb']) expect(status, set).toMatch(new RegExp(`^${set}:\\s+0{16}$`, 'm'));
  });

  it('gives the caller\'s environment to the command alone: nothing of it reaches the host programs that run as root', async () => {
    // A preload that cannot load is named on stderr by every program started with it: the command's own, once.
    const outcome = await text('s1', 'cat <&6 2>&1 | head -c 40; echo; echo "$AP_HOME"', { env: { LD_PRELOAD: '/nonexistent-preload.so', AP_HOME: '/', AP_PROCS: `${dataDir}/planted` } });
    expect(outcome.exitCode).toBe(0);
    expect(outcome.err.match(/nonexistent-preload\.so/g)?.length ?? 0).toBeLessThanOrEqual(2);
    expect(outcome.err).not.toMatch(/nsenter|setpriv|launcher/);
    // The launcher never opened a host file for it (fd 6 is closed), and wrote no host file it named.
    expect(outcome.err).toMatch(/6: Bad file descriptor/);
    expect(outcome.out.trim()).toBe('/');
    const { existsSync } = await import('node:fs');
    expect(existsSync(`${dataDir}/planted`)).toBe(false);
  });

  it('keeps its root and its memory file systems from growing past their sizes', async () => {
    // One at a time, each removed after: tmpfs is memory, counted against the sandbox's 128 MiB.
    const outcome = await text('s2', 'touch /x 2>&1; touch /usr/y 2>&1; for d in /dev/shm /var/tmp; do head -c 70000000 /dev/zero 2>&1 > $d/big; rm -f $d/big; done; echo alive');
    expect(outcome.out).toContain("touch: cannot touch '/x': Read-only file system");
    expect(outcome.out.match(/No space left on device/g)?.length).toBe(2);
    expect(outcome.out.trim().split('\n').at(-1)).toBe('alive');
  });

  it('sees the host\'s programs read-only and nothing else of the host: not the data dir, its secrets, /root or the host\'s accounts', async () => {
    const outcome = await text('s1', `ls /; cat ${secretFile} 2>&1; ls ${dataDir} 2>&1; ls /root 2>&1; grep -c . /etc/passwd; cat /etc/shadow 2>&1; touch /usr/x 2>&1; ls /proc | grep -cE '^[0-9]+$'`);
    const lines = outcome.out.trim().split('\n');
    expect(lines.slice(0, 11)).toEqual(['bin', 'dev', 'etc', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr', 'var', 'workspace']);
    expect(outcome.out).toContain(`cat: ${secretFile}: No such file or directory`);
    expect(outcome.out).toContain(`ls: cannot access '${dataDir}': No such file or directory`);
    expect(outcome.out).toContain("ls: cannot access '/root': No such file or directory");
    expect(outcome.out).toContain('cat: /etc/shadow: No such file or directory');
    expect(outcome.out).toContain("touch: cannot touch '/usr/x': Read-only file system");
    // Its own passwd: three accounts. Its own processes: PID 1, its sleep, this shell and ls (and grep).
    expect(lines).toContain('3');
    expect(Number(lines.at(-1))).toBeLessThanOrEqual(6);
  });

  it('reaches no network: not the host\'s loopback, not its own address, not the metadata address, not another sandbox', async () => {
    const hostAddress = Object.values(networkInterfaces()).flat().find((address) => address && address.family === 'IPv4' && !address.internal)!.address;
    const probe = (address: string) =>
      `python3 -c "import socket; s=socket.socket(); s.settimeout(2); s.connect(('${address}', ${port})); print('reached')" 2>&1 | tail -1`;
    for (const address of ['127.0.0.1', hostAddress, '169.254.169.254']) {
      const outcome = await text('s1', probe(address));
      expect(outcome.out).not.toContain('reached');
      expect(outcome.out).toMatch(/Connection refused|Network is unreachable|timed out/);
    }
    // Only the loopback interface exists.
    expect((await text('s1', "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")).out.trim()).toBe('lo');
    // A server in one sandbox is not reachable from the other: each loopback is its own.
    void exec('s2', `python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 0.5; echo up`);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const across = await text('s1', `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000', timeout=2).status)" 2>&1 | tail -1`);
    expect(across.out).not.toMatch(/^200/);
  });

  it('contains a fork bomb at its process limit, stops it, and the host and the other sandbox carry on', async () => {
    await host.start(sandbox('bomb'));
    // The bomb goes on in the background after the command returns.
    const bomb = await text('bomb', 'bomb() { bomb | bomb & }; bomb; sleep 1; echo returned', { timeoutMs: 4_000 });
    expect(bomb.timedOut || bomb.exitCode !== null).toBe(true);
    const usage = await host.usage('bomb');
    expect(usage.processes).toBeGreaterThan(limits.processes / 2);
    expect(usage.processes).toBeLessThanOrEqual(limits.processes);
    // The other sandbox runs at once, whatever the first is doing.
    expect((await text('s2', 'echo fine')).out).toBe('fine\n');
    // And the bombed one can be stopped, every process of it.
    await host.remove('bomb');
    expect(await host.state('bomb')).toBe('absent');
  });

  it('ends a command past the memory limit, not the host', async () => {
    const outcome = await text('s2', 'python3 -c "b = bytearray(512 * 1024 * 1024); print(len(b))"');
    expect(outcome.exitCode === 137 || outcome.signal === 'SIGKILL' || /MemoryError/.test(outcome.err)).toBe(true);
    expect(outcome.out).toBe('');
    expect((await text('s2', 'echo still here')).out).toBe('still here\n');
  });

  it('fills its own disk and no more: the write fails with ENOSPC at the sandbox\'s size', async () => {
    const outcome = await text('s2', 'dd if=/dev/zero of=big bs=1M count=100 2>&1; df -k /workspace | tail -1 | tr -s " " | cut -d" " -f2; rm -f big');
    expect(outcome.out).toContain('No space left on device');
    const sizeKiB = Number(outcome.out.trim().split('\n').at(-1));
    expect(sizeKiB).toBeLessThanOrEqual(limits.diskMiB * 1024);
  });

  it('cuts each output at the stated size and says so, reading the rest away', async () => {
    const outcome = await exec('s1', 'head -c 5000000 /dev/zero; head -c 10 /dev/zero >&2', { outputLimitBytes: 1000 });
    expect(outcome.stdout.length).toBe(1000);
    expect(outcome).toMatchObject({ stdoutTruncated: true, stderrTruncated: false, exitCode: 0 });
    expect(outcome.stderr.length).toBe(10);
  });

  it('holds a command\'s output back while its reader is behind, and lets it go on when the reader catches up', async () => {
    let received = 0;
    let release!: () => void;
    const behind = new Promise<void>((resolve) => (release = resolve));
    const running = exec('s1', 'head -c 40000000 /dev/zero', {
      keep: false,
      outputLimitBytes: 64 << 20,
      onOutput: (_stream, chunk) => {
        received += chunk.length;
        return behind;
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    // Held: what arrives is what was already on its way (a pipe's and a channel's worth), not the 40 MB written.
    const whileHeld = received;
    expect(whileHeld).toBeGreaterThan(0);
    expect(whileHeld).toBeLessThan(4 << 20);
    release();
    const outcome = await running;
    expect(outcome).toMatchObject({ exitCode: 0, stdoutTruncated: false });
    expect(received).toBe(40_000_000);
  });

  it('a timeout ends the whole process tree, what left the session or the group included, and says so', async () => {
    const outcome = await text('s1', 'setsid sleep 1001 & (sleep 1002 &) ; nohup sleep 1003 >/dev/null 2>&1 & sleep 1004', { timeoutMs: 500 });
    expect(outcome).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGKILL' });
    expect(outcome.durationMs).toBeLessThan(5_000);
    const left = await text('s1', 'pgrep -fc "[s]leep 100[1-4]" || true');
    expect(left.out.trim()).toBe('0');
  });

  it('leaves what a finished command started in the background running for the next one', async () => {
    await text('s1', 'nohup sleep 300 >/dev/null 2>&1 & echo started');
    expect((await text('s1', 'pgrep -fc "[s]leep 300"')).out.trim()).toBe('1');
    await text('s1', 'pkill -f "[s]leep 300"');
  });

  it('pause freezes every process and keeps its memory; resume carries on; exec while paused is refused', async () => {
    await host.start(sandbox('s3'));
    // A process counting in memory, and writing the count down every 20 ms (whole: a reader never meets it half-written).
    await exec('s3', 'cat > counter.py', { stdin: Buffer.from('import os, time\nn = 0\nwhile True:\n    n += 1\n    open("/workspace/count.next", "w").write(str(n))\n    os.replace("/workspace/count.next", "/workspace/count")\n    time.sleep(0.02)\n') });
    await exec('s3', 'nohup python3 counter.py >/dev/null 2>&1 & echo $! > pid');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const pidBefore = (await text('s3', 'cat pid')).out;
    await host.pause('s3');
    expect(await host.state('s3')).toBe('paused');
    await expect(exec('s3', 'true')).rejects.toBeInstanceOf(SandboxNotRunningError);
    const cpuAtPause = (await host.usage('s3')).cpuSeconds;
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await host.usage('s3')).cpuSeconds).toBe(cpuAtPause);
    await host.resume(sandbox('s3'));
    const first = Number((await text('s3', 'cat count')).out);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = Number((await text('s3', 'cat count')).out);
    expect(second).toBeGreaterThan(first);
    // The same process: its memory (the count) went on from where it was.
    expect((await text('s3', `kill -0 $(cat pid) && echo alive`)).out).toBe('alive\n');
    expect((await text('s3', 'cat pid')).out).toBe(pidBefore);
  });

  it('runs each sandbox as a host user of its own, so what the kernel counts per user is never used up for another', async () => {
    const s1 = await hostOwner('s1');
    const s2 = await hostOwner('s2');
    expect(s1).not.toBe(s2);
    for (const uid of [s1, s2]) expect(uid).toBeGreaterThanOrEqual(users.hostUid), expect(uid).toBeLessThan(users.hostUid + users.hostUidCount);
    // s1 takes every inotify instance its user may have, and holds them in the background.
    const hold = await text('s1', `nohup python3 -c "${INOTIFY_HOG}" > /tmp/held 2>&1 &
      for i in $(seq 100); do [ -s /tmp/held ] && break; sleep 0.1; done; cat /tmp/held`);
    expect(Number(hold.out.trim())).toBeGreaterThan(0);
    // The kernel's count is the user's: s1 has none left, and s2, another user, has its own.
    expect((await text('s1', `python3 -c "${INOTIFY_ONE}"`)).out.trim()).toBe('-1');
    expect(Number((await text('s2', `python3 -c "${INOTIFY_ONE}"`)).out.trim())).toBeGreaterThanOrEqual(0);
    await text('s1', 'pkill -f inotify_init; true');
  });

  it('gives a sandbox another user when the one its workspace belongs to runs another sandbox, and its files with it', async () => {
    await host.start(sandbox('s5'));
    await text('s5', 'echo first > note; mkdir -p deep/er; echo x > deep/er/file; ln -s /etc/passwd link');
    const before = await hostOwner('s5');
    await host.stop('s5');
    // Its user is free while it is stopped: the next sandbox takes it.
    await host.start(sandbox('s6'));
    expect(await hostOwner('s6')).toBe(before);
    await host.start(sandbox('s5'));
    const after = await hostOwner('s5');
    expect(after).not.toBe(before);
    const inside = await text('s5', 'echo more >> note && cat note && echo y >> deep/er/file && stat -c %U note deep/er/file deep link');
    expect(inside.out).toBe('first\nmore\nsandbox\nsandbox\nsandbox\nsandbox\n');
    // The link was given over itself, never what it points at.
    expect((await stat('/etc/passwd')).uid).toBe(0);
    for (const id of ['s5', 's6']) await host.remove(id);
  });

  it('keeps /workspace through a stop and a restart of the runtime, and removes it with the sandbox', async () => {
    await host.start(sandbox('s4'));
    await text('s4', 'echo kept > note');
    await host.close();
    expect(await host.state('s4')).toBe('stopped');
    // A new host on the same data dir: the runtime started again.
    host = await LocalSandboxHost.create({ root: sandboxesRoot, logger, ...users });
    expect(await host.state('s4')).toBe('stopped');
    await expect(exec('s4', 'true')).rejects.toBeInstanceOf(SandboxNotRunningError);
    await host.start(sandbox('s4'));
    expect((await text('s4', 'cat note')).out).toBe('kept\n');
    await host.remove('s4');
    expect(await host.state('s4')).toBe('absent');
    for (const id of ['s1', 's2']) await host.start(sandbox(id));
  });
});

describe('LocalSandboxHost without cgroups (rlimits and signals)', () => {
  it('says what holds, runs commands, pauses by SIGSTOP and ends a command at its timeout', async () => {
    const plain = await LocalSandboxHost.create({ root: join(dataDir, 'runtime', 'plain'), logger, cgroups: false });
    try {
      expect(plain.describe().enforcement).toMatchObject({ cpu: expect.stringContaining('not enforced'), pause: 'SIGSTOP of every process' });
      await plain.start(sandbox('p1'));
      const run = (command: string, timeoutMs = 10_000) => plain.exec('p1', { argv: ['/bin/bash', '-c', command], cwd: '/workspace', env: {}, timeoutMs, outputLimitBytes: 1 << 20 });
      expect((await run('echo ok')).stdout.toString()).toBe('ok\n');
      await run('nohup sleep 300 >/dev/null 2>&1 &');
      await plain.pause('p1');
      expect(await plain.state('p1')).toBe('paused');
      await plain.resume(sandbox('p1'));
      expect((await run('pgrep -fc "[s]leep 300"')).stdout.toString().trim()).toBe('1');
      const timedOut = await run('sleep 100', 300);
      expect(timedOut.timedOut).toBe(true);
    } finally {
      await plain.remove('p1');
      await plain.close();
    }
  });
});

describe('LocalSandboxHost with sandboxes started ahead', () => {
  it('hands a new sandbox one started ahead, renamed and given its own limits, and keeps nothing of it once closed', async () => {
    const root = join(dataDir, 'runtime', 'pooled');
    let pooled = await LocalSandboxHost.create({ root, logger, pool: 1 });
    const ahead = async () => (await readdir(root)).filter((name) => name.startsWith('pool-'));
    const memoryLimit = (id: string) => readFile(`/sys/fs/cgroup/memory/agentplane-sandboxes/${id}/memory.limit_in_bytes`, 'utf8');
    try {
      await pooled.start(sandbox('q1'));
      // The first of its size starts one ahead, in the background.
      await eventually(async () => pooled.startedAhead() === 1, { what: 'one sandbox started ahead' });
      const [slot] = await ahead();
      await pooled.start(sandbox('q2', { memoryMiB: 96 }));
      // q2 is the one started ahead, under q2's id with q2's limits; another is started ahead in its place.
      expect(await ahead()).not.toContain(slot);
      expect(await memoryLimit('q2')).toBe(`${96 * 1024 * 1024}\n`);
      expect(existsSync(`/sys/fs/cgroup/memory/agentplane-sandboxes/${slot}`)).toBe(false);
      const run = (id: string, command: string) => pooled.exec(id, { argv: ['/bin/bash', '-c', command], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 1 << 20 });
      expect((await run('q2', 'id -u; ls -A /workspace | wc -l; echo mine > note; cat note')).stdout.toString()).toBe('1000\n0\nmine\n');
      expect((await pooled.usage('q2')).diskBytes).toEqual(expect.any(Number));
      // Its workspace is q2's: kept through a stop and mounted again by its id, apart from q1's.
      expect((await run('q1', 'ls -A /workspace | wc -l')).stdout.toString()).toBe('0\n');
      await pooled.stop('q2');
      await pooled.start(sandbox('q2', { memoryMiB: 96 }));
      expect((await run('q2', 'cat note')).stdout.toString()).toBe('mine\n');
      await eventually(async () => pooled.startedAhead() === 1, { what: 'another started ahead' });
      expect(await ahead()).toHaveLength(1);
      await pooled.close();
      expect(await ahead()).toEqual([]);
      // A new life finds the sandboxes as they were, and none of what was started ahead.
      pooled = await LocalSandboxHost.create({ root, logger, pool: 0 });
      await pooled.start(sandbox('q2'));
      expect((await run('q2', 'cat note')).stdout.toString()).toBe('mine\n');
    } finally {
      for (const id of ['q1', 'q2']) await pooled.remove(id).catch(() => undefined);
      await pooled.close();
    }
  });

  it('keeps sandboxes ahead for the four disk sizes asked for last, and no more', async () => {
    const root = join(dataDir, 'runtime', 'pooled-sizes');
    const pooled = await LocalSandboxHost.create({ root, logger, pool: 1 });
    const ids = [16, 17, 18, 19, 20].map((diskMiB) => ({ id: `d${diskMiB}`, diskMiB }));
    try {
      for (const { id, diskMiB } of ids) {
        await pooled.start(sandbox(id, { diskMiB }));
        await eventually(async () => pooled.startedAhead() === Math.min(4, diskMiB - 15), { what: `one ahead for ${diskMiB} MiB` });
      }
      // The size asked for first is no longer kept ahead: its sandbox went, group and workspace.
      await eventually(async () => (await readdir(root)).filter((name) => name.startsWith('pool-')).length === 4, { what: 'four kept ahead' });
      await pooled.start(sandbox('again', { diskMiB: 20 }));
      expect((await pooled.exec('again', { argv: ['/bin/true'], cwd: '/workspace', env: {}, timeoutMs: 10_000, outputLimitBytes: 64 })).exitCode).toBe(0);
    } finally {
      for (const { id } of [...ids, { id: 'again' }]) await pooled.remove(id).catch(() => undefined);
      await pooled.close();
    }
    expect((await readdir(root)).filter((name) => name.startsWith('pool-'))).toEqual([]);
  });
});
