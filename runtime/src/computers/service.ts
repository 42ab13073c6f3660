// Sandboxes for a caller (SPEC.md `/computers/*`; docs/decisions/0079): made, listed, read, paused, resumed,
// deleted; commands run and files moved in them. The rows are here, the processes and /workspace are the host's.
// Seeing is not owning: a privileged reader lists and reads others' sandboxes, but only the subject that made one
// runs commands in it, moves its files, pauses, resumes or deletes it (403 `not_owner` for one seen; 404 for one
// not seen, worded as for a made-up id).
import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import { computerSettingsOf, type ComputerSettings } from '@agentplane/lib/computer';
import { AppError, conflict, invalidArgument, notFound, permissionDenied, unavailable } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import { requireCapability } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import type { AuditEntry } from '../governance/audit.js';
import { canSeeOwner, visibleOwnerCondition } from '../sessions/access.js';
import { packagePath, unpackArchive, type ArchiveLimits } from '../skills/archive.js';
import type { RuntimeSchema, SandboxesTable, SandboxState } from '../store/schema.js';
import { SandboxCapacityError, SandboxNotRunningError, type ExecOutcome, type OutputStream, type SandboxHost, type SandboxLimits, type SandboxStart } from './host.js';

/** Each of stdout and stderr is kept up to this much for an answer; a streamed exec sends as much. */
export const EXEC_OUTPUT_LIMIT_BYTES = 1024 * 1024;
export const MAX_STDIN_BYTES = 1024 * 1024;
export const MAX_COMMAND_BYTES = 64 * 1024;
export const MAX_ENV_VARIABLES = 100;
/** One upload request: a file, several, or an archive to unpack. */
export const UPLOAD_LIMITS: ArchiveLimits = { what: 'upload', archiveBytes: 64 * 1024 * 1024, files: 10_000, fileBytes: 64 * 1024 * 1024, unpackedBytes: 256 * 1024 * 1024 };
export const MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024;
/** What a command may be given to run, each way: a shell line, or a program and its arguments. */
export const MAX_ARGV = 1_000;
export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 100;
export const WORKSPACE = '/workspace';

export type SandboxRow = Selectable<SandboxesTable>;

export interface SandboxOut {
  id: string;
  name: string | null;
  state: SandboxState;
  owner: string;
  session_id: string | null;
  host: 'local' | 'kubernetes';
  limits: { cpus: number; memory_mib: number; processes: number; disk_mib: number };
  usage: { memory_bytes: number | null; cpu_seconds: number | null; disk_bytes: number | null; processes: number | null } | null;
  exec_count: number;
  failure: string | null;
  created_at: string;
  updated_at: string;
  last_active_at: string;
  expires_at: string;
  paused_at: string | null;
  stopped_at: string | null;
  deleted_at: string | null;
}

export interface ExecRequest {
  /** A shell line (run by /bin/bash -c) or a program and its arguments. */
  command: string | string[];
  cwd?: string | undefined;
  env?: Record<string, string> | undefined;
  stdin?: string | undefined;
  timeout_seconds?: number | undefined;
}

export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  duration_ms: number;
}

export interface ComputerDeps {
  db: Kysely<RuntimeSchema>;
  /** Undefined when this runtime has no sandbox host: every route then answers 503. */
  host: SandboxHost | undefined;
  /** This process, as a local sandbox's holder. */
  holder: string;
  logger: Logger;
  /** Every exec is an audit entry: who, which sandbox, the command, its exit code and duration; never its output. */
  audit: (entries: AuditEntry[]) => void;
  now?: () => Date;
}

const sandboxNotFound = (id: string) => notFound(`sandbox ${id} not found`);
const sandboxNotOwned = (id: string) =>
  permissionDenied(`sandbox ${id} belongs to another subject: this token may read it but not use or change it`, { code: 'not_owner' });
const LIVE: SandboxState[] = ['creating', 'running', 'paused'];

export class ComputerService {
  private readonly now: () => Date;

  constructor(private readonly deps: ComputerDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  get host(): SandboxHost | undefined {
    return this.deps.host;
  }

  /** Every sandbox route needs `computer`, reading as much as changing; and a host to serve it. */
  authorize(principal: Principal): SandboxHost {
    requireCapability(principal.permission, 'computer', 'sandboxes');
    const host = this.deps.host;
    if (!host) throw unavailable('this runtime has no sandbox host (COMPUTER_HOST=none, or bubblewrap is not installed)', { code: 'no_sandbox_host' });
    return host;
  }

  settingsOf(principal: Principal): ComputerSettings {
    return computerSettingsOf(principal.configuration.document.computer);
  }

  describeHost(principal: Principal) {
    const host = this.authorize(principal);
    const settings = this.settingsOf(principal);
    return {
      ...host.describe(),
      settings,
      limits: {
        exec_output_bytes: EXEC_OUTPUT_LIMIT_BYTES,
        stdin_bytes: MAX_STDIN_BYTES,
        upload_bytes: UPLOAD_LIMITS.archiveBytes,
        upload_files: UPLOAD_LIMITS.files,
        upload_unpacked_bytes: UPLOAD_LIMITS.unpackedBytes,
        download_bytes: MAX_DOWNLOAD_BYTES,
      },
      workspace: WORKSPACE,
    };
  }

  /**
   * Makes a sandbox for the caller: 409 `too_many_sandboxes` past the project's count (made, running or paused),
   * counted under a lock on the tenant so two at once cannot both take the last one.
   */
  async create(principal: Principal, options: { name?: string | undefined; sessionId?: string } = {}): Promise<SandboxOut> {
    const host = this.authorize(principal);
    const settings = this.settingsOf(principal);
    const id = randomUUID();
    const limits: SandboxLimits = { cpus: settings.cpus, memoryMiB: settings.memory_mib, processes: settings.processes, diskMiB: settings.disk_mib };
    const now = this.now();
    await this.deps.db.transaction().execute(async (trx) => {
      await lockTenant(trx, principal.tenantId);
      const live = await trx
        .selectFrom('sandboxes')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('tenant_id', '=', principal.tenantId)
        .where('state', 'in', LIVE)
        .executeTakeFirstOrThrow();
      if (Number(live.count) >= settings.max_sandboxes) {
        throw conflict(
          settings.max_sandboxes === 0
            ? "the project's computer holds no sandboxes (max_sandboxes is 0)"
            : `the project holds ${settings.max_sandboxes} sandboxes at most: delete or pause one you no longer need (paused ones count too)`,
          { code: 'too_many_sandboxes' },
        );
      }
      await trx
        .insertInto('sandboxes')
        .values({
          id,
          tenant_id: principal.tenantId,
          owner: principal.claims.sub,
          session_id: options.sessionId ?? null,
          name: options.name ?? null,
          host: host.kind,
          holder: this.deps.holder,
          state: 'creating',
          limits: JSON.stringify(limits),
          image: settings.image ?? null,
          expires_at: new Date(now.getTime() + settings.max_lifetime_seconds * 1000),
        })
        .execute();
    });
    try {
      await host.start(this.startOf({ id, tenant_id: principal.tenantId, limits, image: settings.image ?? null }));
    } catch (error) {
      if (error instanceof SandboxCapacityError) {
        // Nothing was made: the place it took in the count is given back.
        await host.remove(id).catch(() => undefined);
        await this.deps.db.deleteFrom('sandboxes').where('id', '=', id).execute();
        throw conflict(`the project holds no more sandboxes here: ${error.reason}; delete or pause one you no longer need`, { code: 'too_many_sandboxes' });
      }
      this.deps.logger.error({ err: error, sandbox_id: id }, 'a sandbox could not be made');
      await this.setState(id, 'failed', { failure: errorText(error) });
      throw new AppError('unavailable', `the sandbox could not be made: ${errorText(error)}`, { code: 'sandbox_failed', extra: { sandbox_id: id } });
    }
    await this.setState(id, 'running');
    return this.out(await this.row(id), null);
  }

  async list(principal: Principal, query: { limit: number; offset: number; state?: SandboxState | undefined; owner?: string | undefined }) {
    this.authorize(principal);
    return this.page(principal.tenantId, query, principal);
  }

  /** One the caller sees, with what it uses now. */
  async get(principal: Principal, id: string): Promise<SandboxOut> {
    const host = this.authorize(principal);
    const row = await this.visible(principal, id);
    const settled = await this.settle(row);
    const usage = settled.state === 'running' || settled.state === 'paused' ? await host.usage(id).catch(() => null) : null;
    return this.out(settled, usage && { memory_bytes: usage.memoryBytes, cpu_seconds: usage.cpuSeconds, disk_bytes: usage.diskBytes, processes: usage.processes });
  }

  /** Found and owned by the caller; the order is find (404), then own (403). */
  async owned(principal: Principal, id: string): Promise<SandboxRow> {
    this.authorize(principal);
    const row = await this.visible(principal, id);
    if (row.owner !== principal.claims.sub) throw sandboxNotOwned(id);
    return row;
  }

  async delete(principal: Principal, id: string): Promise<SandboxOut> {
    const row = await this.owned(principal, id);
    return this.deleteRow(row);
  }

  async deleteRow(row: SandboxRow): Promise<SandboxOut> {
    if (row.state === 'deleted') return this.out(row, null);
    await this.deps.host!.remove(row.id);
    await this.setState(row.id, 'deleted');
    return this.out(await this.row(row.id), null);
  }

  async pause(principal: Principal, id: string): Promise<SandboxOut> {
    return this.pauseRow(await this.owned(principal, id));
  }

  async pauseRow(row: SandboxRow): Promise<SandboxOut> {
    const settled = await this.settle(row);
    if (settled.state === 'paused') return this.out(settled, null);
    if (settled.state !== 'running') throw this.notRunning(settled, 'paused');
    await this.deps.host!.pause(row.id);
    await this.setState(row.id, 'paused');
    return this.out(await this.row(row.id), null);
  }

  async resume(principal: Principal, id: string): Promise<SandboxOut> {
    return this.resumeRow(await this.owned(principal, id));
  }

  async resumeRow(row: SandboxRow): Promise<SandboxOut> {
    const settled = await this.settle(row);
    if (settled.state === 'running') return this.out(settled, null);
    if (settled.state === 'deleted' || settled.state === 'failed' || settled.state === 'creating') throw this.notRunning(settled, 'resumed');
    if (settled.expires_at.getTime() <= this.now().getTime()) {
      throw conflict(`sandbox ${row.id} reached its lifetime: its files can still be downloaded; make a new sandbox to run commands`, { code: 'sandbox_expired' });
    }
    await this.deps.host!.resume(this.startOf(settled));
    await this.setState(row.id, 'running');
    return this.out(await this.row(row.id), null);
  }

  /** Runs a command in a sandbox of the caller's; `onOutput` hears each chunk as it comes (a streamed exec). */
  async exec(
    principal: Principal,
    id: string,
    request: ExecRequest,
    onOutput?: (stream: OutputStream, chunk: Buffer) => void,
    signal?: AbortSignal,
    /** The row the route's authorize step found and checked, for this same caller. */
    authorized?: SandboxRow,
  ): Promise<ExecResult> {
    const row = authorized?.id === id ? authorized : await this.owned(principal, id);
    return this.execRow(principal, row, request, { actor: principal.claims.sub, actorKind: 'end_user' }, onOutput, signal);
  }

  /** The validation a route does before it finds the sandbox runs here too, for the agent's calls. */
  execSpecOf(principal: Principal, request: ExecRequest) {
    const settings = this.settingsOf(principal);
    const argv = typeof request.command === 'string' ? ['/bin/bash', '-c', request.command] : request.command;
    if (argv.length === 0 || argv[0] === '') throw invalidArgument('command: give a shell line, or a program and its arguments');
    const cwd = request.cwd === undefined ? WORKSPACE : workspacePath(request.cwd, 'cwd', { allowRoot: true });
    const timeoutSeconds = request.timeout_seconds ?? settings.command_timeout_seconds;
    if (timeoutSeconds > settings.command_timeout_seconds) {
      throw invalidArgument(`timeout_seconds: at most ${settings.command_timeout_seconds}, the project's command timeout`, { code: 'timeout_too_long' });
    }
    return { argv, cwd, env: request.env ?? {}, stdin: request.stdin === undefined ? undefined : Buffer.from(request.stdin), timeoutMs: timeoutSeconds * 1000 };
  }

  async execRow(
    principal: Principal,
    row: SandboxRow,
    request: ExecRequest,
    who: Pick<AuditEntry, 'actor' | 'actorKind'>,
    onOutput?: (stream: OutputStream, chunk: Buffer) => void,
    signal?: AbortSignal,
  ): Promise<ExecResult> {
    const spec = this.execSpecOf(principal, request);
    const settled = await this.settle(row);
    if (settled.state !== 'running') throw this.notRunning(settled, 'used');
    await this.touch(row.id, true);
    let outcome: ExecOutcome;
    try {
      outcome = await this.deps.host!.exec(row.id, { ...spec, outputLimitBytes: EXEC_OUTPUT_LIMIT_BYTES, ...(onOutput ? { onOutput } : {}), ...(signal ? { signal } : {}) });
    } catch (error) {
      await this.touch(row.id, false);
      if (error instanceof SandboxNotRunningError) throw this.notRunning(await this.settle(await this.row(row.id)), 'used');
      throw error;
    }
    await this.touch(row.id, false, true);
    this.deps.audit([
      {
        tenantId: row.tenant_id,
        ...who,
        action: 'sandbox.exec',
        resource: {
          sandbox_id: row.id,
          command: commandText(spec.argv).slice(0, 2_000),
          exit_code: outcome.exitCode,
          timed_out: outcome.timedOut,
          duration_ms: Math.round(outcome.durationMs),
        },
        outcome: outcome.exitCode === 0 ? 'ok' : 'failed',
      },
    ]);
    return {
      exit_code: outcome.exitCode,
      signal: outcome.signal,
      timed_out: outcome.timedOut,
      stdout: outcome.stdout.toString('utf8'),
      stderr: outcome.stderr.toString('utf8'),
      stdout_truncated: outcome.stdoutTruncated,
      stderr_truncated: outcome.stderrTruncated,
      duration_ms: Math.round(outcome.durationMs),
    };
  }

  /**
   * Writes files into a running sandbox of the caller's: `files` each at its path under /workspace, or an archive
   * unpacked under `path`. Everything is written inside the sandbox, as its user, so a symlink it made resolves in
   * its own root; a target whose real path leaves /workspace is refused, and nothing is written.
   */
  async upload(principal: Principal, id: string, upload: { files?: Array<{ path: string; bytes: Buffer }>; archive?: { bytes: Buffer; under: string } }) {
    const row = await this.owned(principal, id);
    return this.uploadRow(row, upload);
  }

  async uploadRow(row: SandboxRow, upload: { files?: Array<{ path: string; bytes: Buffer }>; archive?: { bytes: Buffer; under: string } }) {
    const entries = new Map<string, Buffer>();
    if (upload.archive) {
      const under = workspacePath(upload.archive.under, 'path', { allowRoot: true });
      for (const [path, bytes] of await unpackArchive(upload.archive.bytes, UPLOAD_LIMITS)) entries.set(posix.join(under, path), bytes);
    } else {
      let total = 0;
      for (const file of upload.files ?? []) {
        total += file.bytes.length;
        if (total > UPLOAD_LIMITS.unpackedBytes) throw invalidArgument(`an upload is at most ${UPLOAD_LIMITS.unpackedBytes / 1024 / 1024} MiB`, { code: 'upload_too_large' });
        entries.set(workspacePath(file.path, 'path'), file.bytes);
      }
    }
    if (entries.size === 0) throw invalidArgument('files: nothing to write (send a `file` part with `path`, or `files` parts named by path)');
    const paths = [...entries.keys()];
    // The paths go to the check inside as arguments: bounded well under the kernel's limit on them.
    if (paths.reduce((sum, path) => sum + Buffer.byteLength(path) + 1, 0) > 1024 * 1024) {
      throw invalidArgument('files: their paths come to more than 1 MiB together; send fewer at a time', { code: 'upload_too_large' });
    }
    const settled = await this.settle(row);
    if (settled.state !== 'running') throw this.notRunning(settled, 'written to');
    const { pack } = await import('tar-stream');
    const tar = pack();
    for (const [path, bytes] of entries) tar.entry({ name: path.slice(WORKSPACE.length + 1), size: bytes.length, mode: 0o644 }, bytes);
    tar.finalize();
    // Each target's real parent must stay inside /workspace (a symlink the sandbox made may point anywhere); then
    // tar writes them as the sandbox's user, owning nothing it unpacks to anyone else.
    const script = [
      'for p in "$@"; do',
      '  d=$(realpath -m -- "$(dirname -- "$p")") || exit 90',
      '  case "$d/" in /workspace/*) ;; *) printf "%s\\n" "$p" >&2; exit 91;; esac',
      '  if [ -L "$p" ] || [ -d "$p" ]; then printf "%s\\n" "$p" >&2; exit 92; fi',
      'done',
      'exec tar -x --no-same-owner --no-same-permissions --no-overwrite-dir -C /workspace -f -',
    ].join('\n');
    const chunks: Buffer[] = [];
    for await (const chunk of tar) chunks.push(chunk as Buffer);
    await this.touch(row.id, true);
    let outcome: ExecOutcome;
    try {
      outcome = await this.deps.host!.exec(row.id, {
        argv: ['/bin/sh', '-c', script, 'upload', ...paths],
        cwd: WORKSPACE,
        env: {},
        stdin: Buffer.concat(chunks),
        timeoutMs: 120_000,
        outputLimitBytes: 64 * 1024,
      });
    } finally {
      await this.touch(row.id, false);
    }
    const culprit = outcome.stderr.toString().trim().split('\n')[0] ?? '';
    if (outcome.exitCode === 91) throw invalidArgument(`path: ${culprit} leads outside /workspace (through a symbolic link)`, { code: 'unsafe_path' });
    if (outcome.exitCode === 92) throw invalidArgument(`path: ${culprit} is a directory or a symbolic link; a file is written only over a file`, { code: 'unsafe_path' });
    if (outcome.exitCode !== 0) {
      if (/No space left on device/.test(outcome.stderr.toString())) throw conflict(`the sandbox's disk is full: ${culprit}`, { code: 'sandbox_disk_full' });
      throw new AppError('unavailable', `the files could not be written: ${culprit || `exit ${outcome.exitCode}`}`, { code: 'upload_failed' });
    }
    return { files: paths.map((path) => ({ path, size: entries.get(path)!.length })) };
  }

  /**
   * A file of a sandbox the caller sees (reading is not owning: a privileged reader may download), streamed to
   * `write`; or, for a directory, its entries. A paused or stopped sandbox is woken for the read and left as it was.
   */
  async download(
    principal: Principal,
    id: string,
    rawPath: string,
    /** Takes each chunk; a promise says the reader is behind, and the file is read no further until it settles. */
    write: (chunk: Buffer) => void | Promise<void>,
    /** The reader went away: the read ends. */
    signal?: AbortSignal,
  ): Promise<{ kind: 'file'; path: string } | { kind: 'directory'; path: string; entries: Array<{ name: string; type: 'file' | 'directory' | 'link' | 'other'; size: number }> }> {
    this.authorize(principal);
    const row = await this.visible(principal, id);
    const path = workspacePath(rawPath, 'path', { allowRoot: true });
    return this.withProcesses(row, async () => {
      const probe = await this.deps.host!.exec(row.id, {
        argv: ['/bin/sh', '-c', 'r=$(realpath -m -- "$1") || exit 93; case "$r/" in /workspace/*) ;; *) exit 91;; esac; [ -e "$r" ] || exit 93; if [ -d "$r" ]; then echo d; elif [ -f "$r" ]; then echo "f $(stat -c %s -- "$r")"; else exit 94; fi', 'probe', path],
        cwd: WORKSPACE,
        env: {},
        timeoutMs: 10_000,
        outputLimitBytes: 64,
      });
      if (probe.exitCode === 93) throw notFound(`path: ${path} does not exist in sandbox ${id}`, { code: 'file_not_found' });
      if (probe.exitCode === 91) throw invalidArgument(`path: ${path} leads outside /workspace (through a symbolic link)`, { code: 'unsafe_path' });
      if (probe.exitCode === 94) throw invalidArgument(`path: ${path} is neither a file nor a directory`, { code: 'not_a_file' });
      const [kind, size] = probe.stdout.toString().trim().split(' ');
      if (kind === 'f' && Number(size) > MAX_DOWNLOAD_BYTES) {
        throw new AppError('payload_too_large', `path: ${path} is ${size} bytes; a download is at most ${MAX_DOWNLOAD_BYTES} (run a command to split or compress it)`, { code: 'file_too_large' });
      }
      if (kind === 'd') {
        const listing = await this.deps.host!.exec(row.id, {
          argv: ['/usr/bin/find', path, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y\t%s\t%P\n'],
          cwd: WORKSPACE,
          env: {},
          timeoutMs: 10_000,
          outputLimitBytes: 4 * 1024 * 1024,
        });
        const types = { f: 'file', d: 'directory', l: 'link' } as const;
        const entries = listing.stdout
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((line) => {
            const [type, size, ...name] = line.split('\t');
            return { name: name.join('\t'), type: types[type as keyof typeof types] ?? ('other' as const), size: Number(size) };
          })
          .sort((a, b) => a.name.localeCompare(b.name));
        return { kind: 'directory' as const, path, entries };
      }
      const read = await this.deps.host!.exec(row.id, {
        argv: ['/bin/cat', '--', path],
        cwd: WORKSPACE,
        env: {},
        timeoutMs: 120_000,
        outputLimitBytes: MAX_DOWNLOAD_BYTES,
        onOutput: (stream, chunk) => (stream === 'stdout' ? write(chunk) : undefined),
        keep: false,
        ...(signal ? { signal } : {}),
      });
      if (read.stdoutTruncated) this.deps.logger.warn({ sandbox_id: id }, `a download was cut at ${MAX_DOWNLOAD_BYTES} bytes`);
      return { kind: 'file' as const, path };
    });
  }

  /** Runs `work` with the sandbox's processes up: a paused or stopped one is woken for it and put back after. */
  private async withProcesses<T>(row: SandboxRow, work: () => Promise<T>): Promise<T> {
    const settled = await this.settle(row);
    const host = this.deps.host!;
    if (settled.state === 'running') return work();
    if (settled.state === 'paused') {
      await host.resume(this.startOf(settled));
      try {
        return await work();
      } finally {
        await host.pause(row.id);
      }
    }
    if (settled.state === 'stopped') {
      await host.start(this.startOf(settled));
      try {
        return await work();
      } finally {
        await host.stop(row.id);
      }
    }
    throw this.notRunning(settled, 'read');
  }

  /** The conversation's sandbox for the agent, made on its first call and woken when paused or stopped. */
  async forConversation(principal: Principal, sessionId: string): Promise<SandboxRow> {
    const existing = await this.deps.db
      .selectFrom('sandboxes')
      .selectAll()
      .where('tenant_id', '=', principal.tenantId)
      .where('session_id', '=', sessionId)
      .where('state', 'not in', ['deleted', 'failed'])
      .executeTakeFirst();
    if (!existing) {
      const made = await this.create(principal, { name: 'agent', sessionId });
      return this.row(made.id);
    }
    const row = existing as SandboxRow;
    if (row.owner !== principal.claims.sub) throw sandboxNotOwned(row.id);
    const settled = await this.settle(row);
    if (settled.state === 'running') return settled;
    if (settled.state === 'stopped' && settled.expires_at.getTime() <= this.now().getTime()) {
      // Its lifetime ended: the conversation gets a new one; the old one's files stay for download.
      await this.deps.db.updateTable('sandboxes').set({ session_id: null }).where('id', '=', row.id).execute();
      const made = await this.create(principal, { name: 'agent', sessionId });
      return this.row(made.id);
    }
    await this.resumeRow(settled);
    return this.row(row.id);
  }

  /** The conversation's sandbox paused (the turn that used it ended); one already paused or gone is left. */
  async pauseConversation(tenantId: string, sessionId: string): Promise<void> {
    const row = await this.deps.db
      .selectFrom('sandboxes')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('session_id', '=', sessionId)
      .where('state', '=', 'running')
      .executeTakeFirst();
    if (row) await this.pauseRow(row as SandboxRow);
  }

  /** Pauses sandboxes idle past their project's time and stops those past their lifetime. */
  async sweep(settingsOf: (tenantId: string) => Promise<ComputerSettings>): Promise<{ paused: number; stopped: number }> {
    const host = this.deps.host;
    if (!host) return { paused: 0, stopped: 0 };
    // A local host that holds no processes has nothing to pause or stop: no statement every tick of an idle runtime.
    if (host.heldIds()?.length === 0) return { paused: 0, stopped: 0 };
    const now = this.now();
    let paused = 0;
    let stopped = 0;
    const rows = (await this.deps.db.selectFrom('sandboxes').selectAll().where('state', 'in', ['running', 'paused']).where('host', '=', host.kind).execute()) as SandboxRow[];
    for (const row of rows) {
      if (host.kind === 'local' && row.holder !== this.deps.holder) continue;
      try {
        if (row.expires_at.getTime() <= now.getTime()) {
          await host.stop(row.id);
          await this.setState(row.id, 'stopped');
          stopped++;
          continue;
        }
        const settings = await settingsOf(row.tenant_id);
        if (row.state === 'running' && now.getTime() - row.last_active_at.getTime() >= settings.idle_pause_seconds * 1000 && !this.busy.has(row.id)) {
          await host.pause(row.id);
          await this.setState(row.id, 'paused');
          paused++;
        }
      } catch (error) {
        this.deps.logger.warn({ err: error, sandbox_id: row.id }, 'could not pause or stop a sandbox');
      }
    }
    return { paused, stopped };
  }

  /** Every sandbox of a tenant (or of one subject) removed: processes, volumes, directories. What failed is named. */
  async removeAll(tenantId: string, owner?: string): Promise<{ items: number; failed: string[] }> {
    let select = this.deps.db.selectFrom('sandboxes').selectAll().where('tenant_id', '=', tenantId).where('state', '<>', 'deleted');
    if (owner !== undefined) select = select.where('owner', '=', owner);
    const rows = (await select.execute()) as SandboxRow[];
    const failed: string[] = [];
    for (const row of rows) {
      try {
        if (this.deps.host && this.deps.host.kind === row.host) await this.deps.host.remove(row.id);
        else throw new Error(`its host (${row.host}) is not this runtime's`);
        await this.setState(row.id, 'deleted');
      } catch (error) {
        failed.push(`${row.id}: ${errorText(error)}`);
      }
    }
    return { items: rows.length - failed.length, failed };
  }

  /** On the embedded store, sandboxes an earlier life of this process held lost their processes with it. */
  async settleAfterRestart(): Promise<number> {
    const result = await this.deps.db
      .updateTable('sandboxes')
      .set({ state: 'stopped', stopped_at: this.now(), updated_at: this.now(), holder: this.deps.holder })
      .where('host', '=', 'local')
      .where('state', 'in', LIVE)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** Execs under way, by sandbox: an idle sweep leaves those alone. */
  private readonly busy = new Map<string, number>();

  /**
   * A command or a transfer starts (the sweep leaves the sandbox alone meanwhile) or ends: its end is written, with
   * the count of commands, in one statement after it, none before.
   */
  private async touch(id: string, starting: boolean, counted = false): Promise<void> {
    const count = (this.busy.get(id) ?? 0) + (starting ? 1 : -1);
    if (count > 0) this.busy.set(id, count);
    else this.busy.delete(id);
    if (starting) return;
    await this.deps.db
      .updateTable('sandboxes')
      .set({ last_active_at: this.now(), ...(counted ? { exec_count: sql<number>`exec_count + 1` } : {}) })
      .where('id', '=', id)
      .execute();
  }

  /** The row, its state brought in line with what the host holds (processes gone with a restart: stopped). */
  private async settle(row: SandboxRow): Promise<SandboxRow> {
    if (!LIVE.includes(row.state) || row.state === 'creating') return row;
    const held = await this.deps.host!.state(row.id);
    const state: SandboxState | undefined = held === 'running' || held === 'paused' ? held : held === 'stopped' ? 'stopped' : 'failed';
    if (state === row.state) return row;
    await this.setState(row.id, state, state === 'failed' ? { failure: 'its processes and /workspace are gone from the host' } : {});
    return this.row(row.id);
  }

  private notRunning(row: SandboxRow, doing: string): AppError {
    const id = row.id;
    switch (row.state) {
      case 'paused':
        return conflict(`sandbox ${id} is paused and cannot be ${doing}: resume it (POST /computers/sessions/${id}/resume) and try again`, { code: 'sandbox_paused' });
      case 'stopped':
        return conflict(`sandbox ${id} is stopped and cannot be ${doing}: resume it (POST /computers/sessions/${id}/resume), which starts it again with its /workspace`, {
          code: 'sandbox_stopped',
        });
      case 'creating':
        return conflict(`sandbox ${id} is still being made: try again in a moment`, { code: 'sandbox_creating' });
      case 'deleted':
        return conflict(`sandbox ${id} was deleted`, { code: 'sandbox_deleted' });
      default:
        return conflict(`sandbox ${id} failed${row.failure ? `: ${row.failure}` : ''}; delete it and make a new one`, { code: 'sandbox_failed' });
    }
  }

  private async visible(principal: Principal, id: string): Promise<SandboxRow> {
    const row = await this.deps.db.selectFrom('sandboxes').selectAll().where('id', '=', id).where('tenant_id', '=', principal.tenantId).executeTakeFirst();
    if (!row || !canSeeOwner(principal, row.owner)) throw sandboxNotFound(id);
    return row as SandboxRow;
  }

  async row(id: string): Promise<SandboxRow> {
    return (await this.deps.db.selectFrom('sandboxes').selectAll().where('id', '=', id).executeTakeFirstOrThrow()) as SandboxRow;
  }

  /** One sandbox of a tenant, for the admin surface. */
  async ofTenant(tenantId: string, id: string): Promise<SandboxRow> {
    const row = await this.deps.db.selectFrom('sandboxes').selectAll().where('id', '=', id).where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!row) throw sandboxNotFound(id);
    return row as SandboxRow;
  }

  async listOfTenant(tenantId: string, query: { limit: number; offset: number; state?: SandboxState | undefined }) {
    return this.page(tenantId, query);
  }

  /** A page of a tenant's sandboxes, newest first: all of them, or those `viewer` sees; `deleted` only when asked. */
  private async page(tenantId: string, query: { limit: number; offset: number; state?: SandboxState | undefined; owner?: string | undefined }, viewer?: Principal) {
    let select = this.deps.db.selectFrom('sandboxes').selectAll().where('tenant_id', '=', tenantId);
    if (viewer) select = select.where(visibleOwnerCondition(viewer, 'sandboxes.owner'));
    select = query.state ? select.where('state', '=', query.state) : select.where('state', '<>', 'deleted');
    if (query.owner !== undefined) select = select.where('owner', '=', query.owner);
    const rows = await select.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit + 1).offset(query.offset).execute();
    const more = rows.length > query.limit;
    return { sandboxes: rows.slice(0, query.limit).map((row) => this.out(row as SandboxRow, null)), has_more: more, next_offset: more ? query.offset + query.limit : null };
  }

  private async setState(id: string, state: SandboxState, extra: { failure?: string } = {}): Promise<void> {
    const now = this.now();
    await this.deps.db
      .updateTable('sandboxes')
      .set({
        state,
        updated_at: now,
        ...(state === 'paused' ? { paused_at: now } : {}),
        ...(state === 'running' ? { paused_at: null, stopped_at: null, last_active_at: now, holder: this.deps.holder } : {}),
        ...(state === 'stopped' ? { stopped_at: now } : {}),
        ...(state === 'deleted' ? { deleted_at: now } : {}),
        ...(extra.failure !== undefined ? { failure: extra.failure.slice(0, 2_000) } : {}),
      })
      .where('id', '=', id)
      .execute();
  }

  private startOf(row: Pick<SandboxRow, 'id' | 'tenant_id' | 'limits' | 'image'>): SandboxStart {
    return { id: row.id, tenantId: row.tenant_id, limits: row.limits, ...(row.image ? { image: row.image } : {}) };
  }

  out(row: SandboxRow, usage: SandboxOut['usage']): SandboxOut {
    return {
      id: row.id,
      name: row.name,
      state: row.state,
      owner: row.owner,
      session_id: row.session_id,
      host: row.host,
      limits: { cpus: row.limits.cpus, memory_mib: row.limits.memoryMiB, processes: row.limits.processes, disk_mib: row.limits.diskMiB },
      usage,
      exec_count: row.exec_count,
      failure: row.failure,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
      last_active_at: row.last_active_at.toISOString(),
      expires_at: row.expires_at.toISOString(),
      paused_at: row.paused_at?.toISOString() ?? null,
      stopped_at: row.stopped_at?.toISOString() ?? null,
      deleted_at: row.deleted_at?.toISOString() ?? null,
    };
  }
}

/** Holds the tenant's row for the transaction: counts and inserts of its sandboxes happen one at a time. */
async function lockTenant(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<void> {
  await trx.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).forUpdate().execute();
}

/**
 * A path in the sandbox, absolute under /workspace: relative ones are taken from it. `..`, NUL and anything outside
 * /workspace are refused with 400 naming the field (what a symlink inside points at is checked inside).
 */
export function workspacePath(raw: string, field: string, options: { allowRoot?: boolean } = {}): string {
  if (raw.includes('\u0000')) throw invalidArgument(`${field}: a path may not hold NUL`, { code: 'unsafe_path' });
  if (!raw.isWellFormed()) throw invalidArgument(`${field}: a path must be well-formed Unicode text`, { code: 'unsafe_path' });
  if (Buffer.byteLength(raw) > 4_096) throw invalidArgument(`${field}: a path is at most 4096 bytes`, { code: 'unsafe_path' });
  let relative = raw;
  if (raw.startsWith('/')) {
    if (raw !== WORKSPACE && !raw.startsWith(`${WORKSPACE}/`)) throw invalidArgument(`${field}: ${JSON.stringify(raw.slice(0, 200))} is outside /workspace`, { code: 'unsafe_path' });
    relative = raw.slice(WORKSPACE.length);
  }
  const plain = relative.replace(/^\/+/, '').replace(/\/+$/, '');
  if (plain === '' || plain === '.') {
    if (options.allowRoot) return WORKSPACE;
    throw invalidArgument(`${field}: name a file under /workspace`, { code: 'unsafe_path' });
  }
  // Each part as given: `..` anywhere is refused rather than resolved, so no path means two things.
  return posix.join(WORKSPACE, packagePath(plain, 'workspace'));
}

function commandText(argv: string[]): string {
  return argv[0] === '/bin/bash' && argv[1] === '-c' && argv.length === 3 ? argv[2]! : argv.map((arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : JSON.stringify(arg))).join(' ');
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
