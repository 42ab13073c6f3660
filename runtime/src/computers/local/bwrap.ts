// The command lines of a local sandbox, built here and nowhere else (pure: tested without running anything).
//
// A sandbox is one long-lived bubblewrap process tree: new user, mount, PID, IPC, UTS, network and cgroup namespaces;
// this machine's /usr read-only (and the few /etc files programs need), a fresh /proc, /dev and /tmp, and the
// sandbox's own /workspace; nothing else of the host. Its PID 1 is bubblewrap's reaper, its one program `sleep
// infinity`; each exec joins those namespaces with nsenter, as the sandbox's user, with no new privileges.
//
// Started as root, the runtime first becomes the sandbox's host user (setpriv) so nothing in the sandbox is root on
// the host even through its user namespace; the sandbox's own /etc files are opened before that, as root, and
// handed over as file descriptors, so the runtime's data dir may stay closed to that user.

/** The sandbox's user, inside: what `id` says and what owns /workspace. */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;

/** The /etc files a program commonly needs, read-only from the host when it has them; nothing with secrets. */
export const HOST_ETC = ['ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives', 'localtime', 'nsswitch.conf', 'mime.types', 'ssl/certs', 'ca-certificates.conf', 'bash.bashrc', 'profile', 'inputrc'];

export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';

export interface SandboxLayout {
  hostname: string;
  /** /tmp is memory: its size is held apart from the memory limit. */
  tmpMiB: number;
  /** The host's /etc entries that exist here (from HOST_ETC). */
  etc: string[];
  /** The host's top-level directories that are links into /usr on a merged-/usr system (`bin` → `usr/bin`...). */
  usrLinks: Array<{ name: string; target: string }>;
}

/** File descriptors the launcher opens before it hands over: passwd, group, hosts; and bwrap's report. */
export const FD = { passwd: 6, group: 7, hosts: 8, info: 9 } as const;

/** bubblewrap's arguments for the sandbox's long-lived tree (after `bwrap`); `workspace` is bound at /workspace. */
export function sandboxArgs(layout: SandboxLayout, workspace: string): string[] {
  const args = [
    '--unshare-all',
    '--unshare-user',
    // Processes inside cannot make namespaces of their own (the kernel's most common escalation surface).
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--uid', String(SANDBOX_UID),
    '--gid', String(SANDBOX_GID),
    '--hostname', layout.hostname,
    '--ro-bind', '/usr', '/usr',
  ];
  for (const link of layout.usrLinks) args.push('--symlink', link.target, `/${link.name}`);
  for (const entry of layout.etc) args.push('--ro-bind', `/etc/${entry}`, `/etc/${entry}`);
  args.push(
    '--ro-bind-data', String(FD.passwd), '/etc/passwd',
    '--ro-bind-data', String(FD.group), '/etc/group',
    '--ro-bind-data', String(FD.hosts), '/etc/hosts',
    '--proc', '/proc',
    '--dev', '/dev',
    '--size', String(layout.tmpMiB * 1024 * 1024), '--tmpfs', '/tmp',
    '--perms', '1777', '--size', String(64 * 1024 * 1024), '--tmpfs', '/var/tmp',
    '--perms', '1777', '--size', String(64 * 1024 * 1024), '--tmpfs', '/dev/shm',
    '--bind', workspace, '/workspace',
    '--chdir', '/workspace',
    // The root bubblewrap built is memory nobody limited: read-only once it is made.
    '--remount-ro', '/',
    '--info-fd', String(FD.info),
    '--',
    'sleep', 'infinity',
  );
  return args;
}

/** The sandbox's own passwd, group and hosts: its user, and nothing of the host's accounts. */
export function sandboxFiles(hostname: string): { passwd: string; group: string; hosts: string } {
  return {
    passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:${SANDBOX_UID}:${SANDBOX_GID}:sandbox:/workspace:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\nsandbox:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`,
    hosts: `127.0.0.1 localhost ${hostname}\n::1 localhost ip6-localhost ip6-loopback\n`,
  };
}

/** The environment a command starts with before its own: PATH, HOME and the like, never the runtime's. */
export function baseEnvironment(): Record<string, string> {
  return { PATH: SANDBOX_PATH, HOME: '/workspace', USER: 'sandbox', LOGNAME: 'sandbox', LANG: 'C.UTF-8', SHELL: '/bin/bash', TERM: 'dumb' };
}

/**
 * The command that runs one exec inside the sandbox whose PID 1 is `initPid` (after `nsenter`): every namespace of
 * that process, its root, the sandbox's user, then `env -i` with the command's whole environment and its working
 * directory. No new privileges and no inheritable capabilities come from the spawner, which every program of the
 * host descends from (spawner.ts). The environment travels as arguments to that last step, inside the sandbox: the
 * programs before it (the launcher, nsenter, as root on the host) run in a fixed one, so nothing a caller sends
 * (`LD_PRELOAD`, `AP_HOME`...) ever reaches them.
 */
export function execArgs(initPid: number, cwd: string, argv: string[], env: Record<string, string>): string[] {
  return [
    '--target', String(initPid),
    '--user', '--mount', '--ipc', '--uts', '--net', '--pid', '--cgroup',
    '--root', '--wd',
    `--setuid=${SANDBOX_UID}`, `--setgid=${SANDBOX_GID}`,
    '--',
    '/usr/bin/env', '-i', '--chdir', cwd, '--', ...Object.entries(env).map(([name, value]) => `${name}=${value}`),
    ...argv,
  ];
}

/** The launcher's own environment: nothing but what it and nsenter need, never a caller's. */
export function launcherEnvironment(procs: string[]): Record<string, string> {
  return { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', AP_PROCS: procs.join('\n') };
}

/**
 * The launcher, a POSIX shell line run as root (or as the runtime's user): joins the cgroups (each file in
 * $AP_PROCS, newline-separated), opens the sandbox's /etc files as fds, drops to the sandbox's host user when
 * it is root, and execs the rest of its arguments. An exec's launcher skips the fds.
 */
export const LAUNCHER = [
  'set -e',
  // The files are named by ids: no blank in them, so the shell's own splitting reads the list without a fork.
  'for f in $AP_PROCS; do echo $$ > "$f"; done',
  'if [ -n "$AP_HOME" ]; then',
  `  exec ${FD.passwd}<"$AP_HOME/etc/passwd" ${FD.group}<"$AP_HOME/etc/group" ${FD.hosts}<"$AP_HOME/etc/hosts"`,
  'fi',
  'unset AP_PROCS AP_HOME',
  'if [ -n "$AP_AS" ]; then u="$AP_AS"; unset AP_AS; exec /usr/bin/setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"; fi',
  'exec "$@"',
].join('\n');
