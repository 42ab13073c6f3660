// HTTP adapters for sandboxes (SPEC.md `/computers/*`; docs/decisions/0079), end-users' with `computer`, and the
// tenant's on the admin surface for the control plane's `/api/projects/:id/sandboxes`.
import { z } from 'zod';
import { invalidArgument } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition } from '@agentplane/lib/http/routes';
import { openSse } from '@agentplane/lib/http/sse';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { principalOf } from '../auth/guard.js';
import type { TenantService } from '../tenants/service.js';
import { SANDBOX_STATES } from '../store/schema.js';
import {
  DEFAULT_PAGE,
  EXEC_OUTPUT_LIMIT_BYTES,
  MAX_ARGV,
  MAX_COMMAND_BYTES,
  MAX_DOWNLOAD_BYTES,
  MAX_ENV_VARIABLES,
  MAX_PAGE,
  MAX_STDIN_BYTES,
  UPLOAD_LIMITS,
  type ComputerService,
  type SandboxRow,
} from './service.js';

const uuid = (name: string) => z.uuid({ error: `${name} must be a UUID` }).overwrite((id) => id.toLowerCase());
const SandboxParams = z.object({ id: uuid('id') });
const TenantParams = z.object({ tenant_id: uuid('tenant_id') });
const TenantSandboxParams = z.object({ tenant_id: uuid('tenant_id'), sandbox_id: uuid('sandbox_id'), action: z.enum(['pause', 'resume', 'delete']) });

const iso = z.iso.datetime();
const SandboxOut = z
  .object({
    id: z.uuid(),
    name: z.string().nullable(),
    state: z.enum(SANDBOX_STATES).meta({
      description: '`creating`, `running`, `paused` (processes frozen, memory kept), `stopped` (no processes; /workspace kept; resume starts it again), `failed`, `deleted`',
    }),
    owner: z.string().meta({ description: 'The subject that made it: the only one who may use or change it' }),
    session_id: z.uuid().nullable().meta({ description: "The conversation whose agent uses it; null for one a person made" }),
    host: z.enum(['local', 'kubernetes']),
    limits: z.object({ cpus: z.number(), memory_mib: z.int(), processes: z.int(), disk_mib: z.int() }),
    usage: z
      .object({ memory_bytes: z.number().nullable(), cpu_seconds: z.number().nullable(), disk_bytes: z.number().nullable(), processes: z.number().nullable() })
      .nullable()
      .meta({ description: 'What it uses now (`GET /computers/sessions/{id}` of a running or paused one); null elsewhere' }),
    exec_count: z.int(),
    failure: z.string().nullable(),
    created_at: iso,
    updated_at: iso,
    last_active_at: iso.meta({ description: 'The last command or file transfer; an idle one is paused after the project\'s idle_pause_seconds' }),
    expires_at: iso.meta({ description: 'When it is stopped whatever it does (the project\'s max_lifetime_seconds)' }),
    paused_at: iso.nullable(),
    stopped_at: iso.nullable(),
    deleted_at: iso.nullable(),
  })
  .meta({ id: 'Sandbox' });
const SandboxList = z
  .object({ sandboxes: z.array(SandboxOut), has_more: z.boolean(), next_offset: z.int().nullable().meta({ description: 'The next page\'s offset; null when has_more is false' }) })
  .meta({ id: 'SandboxList' });
const SandboxCreate = z.strictObject({ name: z.string().max(200).optional().meta({ description: 'For people' }) }).meta({ id: 'SandboxCreate' });
const ListQuery = z.object({
  limit: queryNumber((n) => n.int().min(1).max(MAX_PAGE)).default(DEFAULT_PAGE).meta({ description: `Page size, at most ${MAX_PAGE}` }),
  offset: queryNumber((n) => n.int().min(0).max(Number.MAX_SAFE_INTEGER)).default(0),
  state: z.enum(SANDBOX_STATES).optional().meta({ description: 'Only this state; default: all but `deleted`' }),
  owner: z.string().max(512).optional().meta({ description: 'Only this subject\'s (a privileged reader sees others\')' }),
});
const AdminListQuery = ListQuery.omit({ owner: true });

const envName = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;
const ExecBody = z
  .strictObject({
    command: z
      .union([
        z.string().min(1).max(MAX_COMMAND_BYTES),
        z.array(z.string().max(MAX_COMMAND_BYTES)).min(1).max(MAX_ARGV),
      ])
      .meta({ description: 'A shell line, run by `/bin/bash -c`; or a program and its arguments, run as they are' }),
    cwd: z.string().max(4_096).optional().meta({ description: 'Where it runs, under /workspace (relative paths are taken from it); default /workspace' }),
    env: z
      .record(z.string().regex(envName, 'an environment variable is named by letters, digits and _, not starting with a digit'), z.string().max(32 * 1024))
      .refine((env) => Object.keys(env).length <= MAX_ENV_VARIABLES, `at most ${MAX_ENV_VARIABLES} variables`)
      .optional()
      .meta({ description: 'Added to the sandbox\'s own (PATH, HOME=/workspace, LANG=C.UTF-8); nothing of the service\'s' }),
    stdin: z.string().max(MAX_STDIN_BYTES).optional().meta({ description: `Its standard input, at most ${MAX_STDIN_BYTES / 1024} KiB; default: none` }),
    timeout_seconds: z.int().min(1).max(3_600).optional().meta({ description: "At most the project's command_timeout_seconds, which is also the default" }),
  })
  .meta({ id: 'ExecRequest' });
const ExecOut = z
  .object({
    exit_code: z.int().nullable().meta({ description: 'Null when a signal or the timeout ended it' }),
    signal: z.string().nullable(),
    timed_out: z.boolean().meta({ description: 'The timeout ended it: its whole process tree was killed' }),
    stdout: z.string().meta({ description: `As UTF-8 (bytes that are not become U+FFFD), at most ${EXEC_OUTPUT_LIMIT_BYTES / 1024} KiB` }),
    stderr: z.string(),
    stdout_truncated: z.boolean().meta({ description: 'More was written than is shown; it was read and dropped' }),
    stderr_truncated: z.boolean(),
    duration_ms: z.int(),
  })
  .meta({ id: 'ExecResult' });
const HostOut = z
  .object({
    kind: z.enum(['local', 'kubernetes']),
    isolation: z.array(z.string()),
    enforcement: z.record(z.string(), z.string()).meta({ description: 'Each limit and what holds it on this host' }),
    network: z.literal('none'),
    workspace: z.string(),
    settings: z.record(z.string(), z.unknown()).meta({ description: "The project's computer settings (PUT /api/projects/:id/computer on the control plane)" }),
    limits: z.record(z.string(), z.number()).meta({ description: 'Sizes each request may carry or get' }),
  })
  .meta({ id: 'SandboxHost' });
const FilesQuery = z.object({ path: z.string().min(1).max(4_096).meta({ description: 'A file or directory under /workspace (relative paths are taken from it)' }) });
const FilesOut = z.object({ files: z.array(z.object({ path: z.string(), size: z.int() })) }).meta({ id: 'SandboxFilesWritten' });
const DirectoryOut = z
  .object({ path: z.string(), entries: z.array(z.object({ name: z.string(), type: z.enum(['file', 'directory', 'link', 'other']), size: z.number() })) })
  .meta({ id: 'SandboxDirectory' });
const UploadFields = z.object({
  path: z.string().max(4_096).optional().meta({ description: 'With one `file`: where it goes (default: its file name); with `unpack`: the directory it unpacks under (default /workspace)' }),
  unpack: z.enum(['true', 'false']).optional().meta({ description: '`true`: `file` is an archive (.zip, .tar.gz or .tar) unpacked under `path`' }),
});

const unauthenticated = { description: 'Missing, invalid or expired token' };
const forbidden = { description: 'No capability `computer`; or the sandbox is seen but belongs to another subject (`code` `not_owner`)' };
const notFound = { description: 'No such sandbox, or not one this token may see (the same answer)' };
const noHost = { description: 'This runtime has no sandbox host (`no_sandbox_host`)' };
const conflicts = {
  description: 'Paused (`sandbox_paused`: resume it first), stopped (`sandbox_stopped`), past its lifetime (`sandbox_expired`), deleted, failed, or the project holds its most (`too_many_sandboxes`)',
};

export function computerRoutes(computers: ComputerService): RouteDefinition[] {
  const authorize = ({ res }: { res: import('express').Response }) => void computers.authorize(principalOf(res));
  // Changing a sandbox: found (404), then owned (403), before the body is read.
  const owner = async ({ params, res }: { params: { id: string }; res: import('express').Response }) => {
    res.locals.sandbox = await computers.owned(principalOf(res), params.id);
  };
  const found = (res: import('express').Response) => res.locals.sandbox as SandboxRow | undefined;
  return [
    defineRoute({
      method: 'get',
      path: '/computers/host',
      operationId: 'describeSandboxHost',
      summary: 'Which sandbox host serves this project, what holds each limit, and the project\'s settings',
      tags: ['computers'],
      security: ['bearer'],
      responses: { 200: { description: 'The host', schema: HostOut }, 401: unauthenticated, 403: forbidden, 503: noHost },
      authorize,
      async handle({ res }) {
        return { body: computers.describeHost(principalOf(res)) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/computers/sessions',
      operationId: 'createSandbox',
      summary: 'Make a sandbox: an isolated computer with a /workspace, no network, and the project\'s limits',
      tags: ['computers'],
      security: ['bearer'],
      body: SandboxCreate,
      responses: { 201: { description: 'Made and running', schema: SandboxOut }, 401: unauthenticated, 403: forbidden, 409: conflicts, 503: { description: 'No host, or it could not make the sandbox (`sandbox_failed`)' } },
      authorize,
      async handle({ body, res }) {
        return { status: 201, body: await computers.create(principalOf(res), { name: body.name }) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/computers/sessions',
      operationId: 'listSandboxes',
      summary: 'Your sandboxes, newest first; a privileged reader also sees others\' under its scope',
      tags: ['computers'],
      security: ['bearer'],
      query: ListQuery,
      responses: { 200: { description: 'A page', schema: SandboxList }, 401: unauthenticated, 403: forbidden, 503: noHost },
      authorize,
      async handle({ query, res }) {
        return { body: await computers.list(principalOf(res), query) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/computers/sessions/{id}',
      operationId: 'getSandbox',
      summary: 'One sandbox: its state, times, usage and limits',
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      responses: { 200: { description: 'The sandbox', schema: SandboxOut }, 401: unauthenticated, 403: forbidden, 404: notFound, 503: noHost },
      authorize,
      async handle({ params, res }) {
        return { body: await computers.get(principalOf(res), params.id) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/computers/sessions/{id}',
      operationId: 'deleteSandbox',
      summary: 'Delete a sandbox of yours: its processes and /workspace go; its row stays as `deleted`',
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      responses: { 200: { description: 'Deleted', schema: SandboxOut }, 401: unauthenticated, 403: forbidden, 404: notFound, 503: noHost },
      authorize: owner,
      async handle({ params, res }) {
        return { body: await computers.delete(principalOf(res), params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/computers/sessions/{id}/pause',
      operationId: 'pauseSandbox',
      summary: 'Pause a sandbox of yours: its processes are frozen, their memory kept',
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      responses: { 200: { description: 'Paused (or already)', schema: SandboxOut }, 401: unauthenticated, 403: forbidden, 404: notFound, 409: conflicts, 503: noHost },
      authorize: owner,
      async handle({ params, res }) {
        return { body: await computers.pause(principalOf(res), params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/computers/sessions/{id}/resume',
      operationId: 'resumeSandbox',
      summary: 'Resume a paused sandbox of yours, or start a stopped one again with its /workspace',
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      responses: { 200: { description: 'Running', schema: SandboxOut }, 401: unauthenticated, 403: forbidden, 404: notFound, 409: conflicts, 503: noHost },
      authorize: owner,
      async handle({ params, res }) {
        return { body: await computers.resume(principalOf(res), params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/computers/sessions/{id}/exec',
      operationId: 'execInSandbox',
      summary: 'Run a command in a running sandbox of yours',
      description:
        `Answers its exit code, stdout and stderr (each at most ${EXEC_OUTPUT_LIMIT_BYTES / 1024} KiB, with a flag when cut). With \`Accept: text/event-stream\`, ` +
        'streams `stdout` and `stderr` frames as output comes and then one `exit` frame. A timeout kills its whole process tree and says so (`timed_out`). What it started in the background goes on after it returns.',
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      body: ExecBody,
      responses: {
        200: { description: 'It ran (whatever its exit code)', schema: ExecOut },
        400: { description: 'A cwd outside /workspace, or a timeout above the project\'s (`timeout_too_long`)' },
        401: unauthenticated,
        403: forbidden,
        404: notFound,
        409: conflicts,
        503: noHost,
      },
      authorize: owner,
      async handle({ params, body, req, res }) {
        const principal = principalOf(res);
        if (!(req.get('accept') ?? '').includes('text/event-stream')) return { body: await computers.exec(principal, params.id, body, undefined, undefined, found(res)) };
        // Validated and found before the stream opens, so a refusal is a plain answer with its status.
        computers.execSpecOf(principal, body);
        const controller = new AbortController();
        const writer = openSse(req, res);
        writer.signal.addEventListener('abort', () => controller.abort(), { once: true });
        let id = 0;
        const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
        try {
          const result = await computers.exec(
            principal,
            params.id,
            body,
            (stream, chunk) => void writer.write({ id: ++id, event: stream, data: { data: decoders[stream].decode(chunk, { stream: true }) } }),
            controller.signal,
            found(res),
          );
          const { stdout: _stdout, stderr: _stderr, ...exit } = result;
          await writer.write({ id: ++id, event: 'exit', data: exit });
        } catch (error) {
          await writer.write({ id: ++id, event: 'error', data: { detail: error instanceof Error ? error.message : String(error) } });
        }
        writer.end();
        return 'handled';
      },
    }),
    defineRoute({
      method: 'post',
      path: '/computers/sessions/{id}/files',
      operationId: 'uploadSandboxFiles',
      summary: 'Write files into a running sandbox of yours',
      description:
        `A form: one \`file\` part with \`path\` (default: its file name); or \`files\` parts each named by its path; or one \`file\` with \`unpack=true\`, an archive (.zip, .tar.gz, .tar) unpacked under \`path\`. ` +
        `Paths stay under /workspace: \`..\`, absolute paths elsewhere, links in an archive and targets whose real path leaves /workspace are refused (400 \`unsafe_path\`), and nothing is written. ` +
        `At most ${UPLOAD_LIMITS.archiveBytes / 1024 / 1024} MiB sent, ${UPLOAD_LIMITS.files} files and ${UPLOAD_LIMITS.unpackedBytes / 1024 / 1024} MiB unpacked.`,
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      multipart: {
        file: 'file',
        maxFileBytes: UPLOAD_LIMITS.archiveBytes,
        tooLargeHint: `an upload is at most ${UPLOAD_LIMITS.archiveBytes / 1024 / 1024} MiB: split it`,
        repeated: { name: 'files', maxParts: 1_000 },
        fields: UploadFields,
      },
      responses: {
        201: { description: 'Written', schema: FilesOut },
        400: { description: 'A path that would leave /workspace (`unsafe_path`), a hostile or unreadable archive, too large, or not a form' },
        401: unauthenticated,
        403: forbidden,
        404: notFound,
        409: conflicts,
        413: { description: 'A part larger than the limit' },
        503: noHost,
      },
      authorize: owner,
      async handle({ params, form, res }) {
        if (!form) throw invalidArgument('request body: files are sent as a form (Content-Type: multipart/form-data)');
        const fields = form.fields as z.infer<typeof UploadFields>;
        const principal = principalOf(res);
        if (form.files.length > 0 && form.file) throw invalidArgument('send either a file part or files parts, not both');
        if (fields.unpack === 'true') {
          if (!form.file) throw invalidArgument('file: unpack needs the archive as the `file` part');
          return { status: 201, body: await computers.upload(principal, params.id, { archive: { bytes: form.file.bytes, under: fields.path ?? '/workspace' } }) };
        }
        const files = form.file
          ? [{ path: fields.path ?? form.file.filename ?? '', bytes: form.file.bytes }]
          : form.files.map((part) => ({ path: part.filename ?? '', bytes: part.bytes }));
        if (files.some((file) => file.path === '')) throw invalidArgument('path: each file needs a path (the `path` field, or the part\'s file name)');
        return { status: 201, body: await computers.upload(principal, params.id, { files }) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/computers/sessions/{id}/files',
      operationId: 'downloadSandboxFile',
      summary: 'Download a file of a sandbox you can see, or list a directory',
      description: `A file comes as application/octet-stream (at most ${MAX_DOWNLOAD_BYTES / 1024 / 1024} MiB); a directory as its entries. A paused or stopped sandbox is woken for the read and left as it was. A privileged reader may download from others' sandboxes.`,
      tags: ['computers'],
      security: ['bearer'],
      params: SandboxParams,
      query: FilesQuery,
      responses: {
        200: { description: 'The file\'s bytes (application/octet-stream), or a directory\'s entries (JSON)', schema: DirectoryOut },
        400: { description: 'A path that leaves /workspace (`unsafe_path`), or neither a file nor a directory' },
        401: unauthenticated,
        403: forbidden,
        404: { description: 'No such sandbox (or not visible), or no such file in it (`file_not_found`)' },
        409: conflicts,
        503: noHost,
      },
      authorize,
      async handle({ params, query, res }) {
        let started = false;
        // A reader that goes away ends the read; one that is slow holds it back (nothing piles up here).
        const gone = new AbortController();
        res.once('close', () => gone.abort());
        // One wait for every chunk that met a full response (those already on their way arrive meanwhile).
        let behind: Promise<void> | undefined;
        const drained = () =>
          (behind ??= new Promise<void>((resolve) => {
            const done = () => {
              res.off('drain', done);
              res.off('close', done);
              behind = undefined;
              resolve();
            };
            res.once('drain', done);
            res.once('close', done);
          }));
        const result = await computers.download(principalOf(res), params.id, query.path, (chunk) => {
          if (!started) {
            started = true;
            const name = query.path.split('/').filter(Boolean).at(-1) ?? 'file';
            res.status(200);
            res.setHeader('Content-Type', 'application/octet-stream');
            res.setHeader('Content-Disposition', `attachment; filename="${name.replace(/[^\w.-]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(name)}`);
          }
          return res.write(chunk) ? undefined : drained();
        }, gone.signal);
        if (result.kind === 'directory') return { body: { path: result.path, entries: result.entries } };
        if (!started) {
          res.status(200).setHeader('Content-Type', 'application/octet-stream');
        }
        res.end();
        return 'handled';
      },
    }),
  ];
}

/** The tenant's sandboxes for the control plane (X-Admin-Key): listed, and one paused, resumed or deleted. */
export function sandboxAdminRoutes(computers: ComputerService, tenants: TenantService): RouteDefinition[] {
  const admin = { description: 'Missing or wrong X-Admin-Key' };
  return [
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/sandbox-host',
      operationId: 'describeTenantSandboxHost',
      summary: 'The sandbox host that serves this tenant',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      responses: { 200: { description: 'The host, or null when there is none', schema: HostOut.omit({ settings: true, limits: true, workspace: true }).nullable() }, 401: admin, 404: { description: 'No such tenant' } },
      async handle({ params }) {
        await tenants.existing(params.tenant_id);
        return { body: computers.host?.describe() ?? null };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/sandboxes',
      operationId: 'listTenantSandboxes',
      summary: "Every sandbox of the tenant's project, newest first",
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantParams,
      query: AdminListQuery,
      responses: { 200: { description: 'A page', schema: SandboxList }, 401: admin, 404: { description: 'No such tenant' } },
      async handle({ params, query }) {
        await tenants.existing(params.tenant_id);
        return { body: await computers.listOfTenant(params.tenant_id, query) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tenants/{tenant_id}/sandboxes/{sandbox_id}/{action}',
      operationId: 'actOnTenantSandbox',
      summary: 'Pause, resume or delete one sandbox of the tenant',
      tags: ['tenants'],
      security: ['adminKey'],
      params: TenantSandboxParams,
      responses: { 200: { description: 'The sandbox after it', schema: SandboxOut }, 401: admin, 404: { description: 'No such tenant or sandbox' }, 409: conflicts, 503: noHost },
      async handle({ params }) {
        await tenants.existing(params.tenant_id);
        const row = await computers.ofTenant(params.tenant_id, params.sandbox_id);
        if (!computers.host) throw invalidArgument('this runtime has no sandbox host');
        const body = params.action === 'pause' ? await computers.pauseRow(row) : params.action === 'resume' ? await computers.resumeRow(row) : await computers.deleteRow(row);
        return { body };
      },
    }),
  ];
}
