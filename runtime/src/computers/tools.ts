// The agent's computer (SPEC.md capability `computer`, flag `enable_computer`; docs/decisions/0079): run a command,
// read a file, write a file, in the conversation's own sandbox. The sandbox is made on the first call of a
// conversation, woken when it was paused or stopped, and paused again once the turn ended; a person sees it at
// `/computers/sessions` and downloads what the agent made. The turn engine knows none of this: it is a tool family.
import type { FamilyTools, ToolCaller, ToolFamily } from '../chat/tool-registry.js';
import type { ServerTool } from '../chat/tools.js';
import { workspacePath, type ComputerService, type SandboxRow } from './service.js';

export const COMPUTER_TOOL_NAMES = ['run_command', 'read_file', 'write_file'] as const;
/** What the model gets of each of stdout and stderr, and of a file read: the rest is said to be cut. */
export const TOOL_OUTPUT_CHARS = 8_000;
export const MAX_WRITE_CHARS = 200_000;

const cut = (text: string, limit = TOOL_OUTPUT_CHARS) => (text.length > limit ? `${text.slice(0, limit)}\n[cut: ${text.length - limit} more characters]` : text);

/** The computer's tools for one turn; `ended` pauses the sandbox the turn used. */
export function computerTools(computers: ComputerService, caller: ToolCaller): FamilyTools {
  const { principal } = caller;
  if (!computers.host) return { tools: [] };
  const needs = ['computer'] as const;
  // The sandboxes this turn used (a turn runs in one conversation, but a resumed pause may name another run).
  const used = new Set<string>();
  const sandbox = async (sessionId: string): Promise<SandboxRow> => {
    const row = await computers.forConversation(principal, sessionId);
    used.add(sessionId);
    return row;
  };
  // A task's or a trigger's run acts with a made-up token whose issuer says so.
  const who = { actor: principal.claims.sub, actorKind: principal.claims.iss.endsWith(':unattended') ? ('unattended' as const) : ('end_user' as const) };
  const tools: ServerTool[] = [
    {
      needs,
      definition: {
        name: 'run_command',
        description:
          'Run a shell command (bash) in your own sandboxed Linux computer for this conversation: files persist in /workspace between calls; there is no network. ' +
          'Use it to compute, convert files, or write and test code. Output is cut after about 8,000 characters each of stdout and stderr.',
        parameters: {
          type: 'object',
          properties: {
            command: { type: 'string', description: 'The shell line, run by /bin/bash -c in /workspace' },
            cwd: { type: 'string', description: 'Where to run it, under /workspace (default /workspace)' },
            timeout_seconds: { type: 'integer', minimum: 1, description: "At most the project's command timeout, which is the default" },
          },
          required: ['command'],
        },
      },
      async run(args, signal, context) {
        if (typeof args.command !== 'string' || args.command.trim() === '') return { ok: false, message: 'run_command needs `command`: the shell line to run.' };
        const request = {
          command: args.command,
          ...(typeof args.cwd === 'string' ? { cwd: args.cwd } : {}),
          ...(typeof args.timeout_seconds === 'number' && Number.isInteger(args.timeout_seconds) ? { timeout_seconds: args.timeout_seconds } : {}),
        };
        const row = await sandbox(context.sessionId);
        const result = await computers.execRow(principal, row, request, who, undefined, signal);
        const lines = [
          result.timed_out ? `timed out after ${Math.round(result.duration_ms / 1000)} s: the command and everything it started were ended` : `exit code ${result.exit_code ?? `none (ended by ${result.signal})`}`,
          result.stdout ? `stdout:\n${cut(result.stdout)}${result.stdout_truncated ? '\n[cut: the sandbox kept only the first MiB]' : ''}` : 'stdout: (empty)',
          ...(result.stderr ? [`stderr:\n${cut(result.stderr)}${result.stderr_truncated ? '\n[cut: the sandbox kept only the first MiB]' : ''}`] : []),
        ];
        return { ok: true, text: lines.join('\n') };
      },
    },
    {
      needs,
      definition: {
        name: 'read_file',
        description: 'Read a text file of your sandbox (under /workspace). Long files are cut after about 8,000 characters; use run_command (head, sed -n) for parts.',
        parameters: { type: 'object', properties: { path: { type: 'string', description: 'The file, under /workspace' } }, required: ['path'] },
      },
      async run(args, _signal, context) {
        if (typeof args.path !== 'string') return { ok: false, message: 'read_file needs `path`.' };
        const path = safePath(args.path);
        if (!path.ok) return { ok: false, message: path.message };
        const chunks: Buffer[] = [];
        let size = 0;
        try {
          const read = await computers.download(principal, (await sandbox(context.sessionId)).id, path.value, (chunk) => {
            size += chunk.length;
            if (size <= TOOL_OUTPUT_CHARS * 4) chunks.push(chunk);
          });
          if (read.kind === 'directory') return { ok: true, text: `${path.value} is a directory:\n${read.entries.map((entry) => `${entry.type === 'directory' ? `${entry.name}/` : entry.name} (${entry.size} bytes)`).join('\n')}` };
        } catch (error) {
          return { ok: false, message: error instanceof Error ? error.message : String(error) };
        }
        return { ok: true, text: cut(Buffer.concat(chunks).toString('utf8')) };
      },
    },
    {
      needs,
      definition: {
        name: 'write_file',
        description: 'Write a text file in your sandbox (under /workspace), replacing it if it exists; directories are made as needed.',
        parameters: {
          type: 'object',
          properties: { path: { type: 'string', description: 'The file, under /workspace' }, content: { type: 'string', description: 'Its whole text' } },
          required: ['path', 'content'],
        },
      },
      async run(args, _signal, context) {
        if (typeof args.path !== 'string' || typeof args.content !== 'string') return { ok: false, message: 'write_file needs `path` and `content`.' };
        if (args.content.length > MAX_WRITE_CHARS) return { ok: false, message: `That is ${args.content.length} characters; write at most ${MAX_WRITE_CHARS} at a time.` };
        const path = safePath(args.path);
        if (!path.ok) return { ok: false, message: path.message };
        try {
          const written = await computers.uploadRow(await sandbox(context.sessionId), { files: [{ path: path.value, bytes: Buffer.from(args.content) }] });
          return { ok: true, text: `Wrote ${written.files[0]!.path} (${written.files[0]!.size} bytes).` };
        } catch (error) {
          return { ok: false, message: error instanceof Error ? error.message : String(error) };
        }
      },
    },
  ];
  return {
    tools,
    // Paused once the turn ended: its processes are frozen and cost nothing until the next turn wakes them.
    ended: async () => {
      for (const sessionId of used) await computers.pauseConversation(principal.tenantId, sessionId);
    },
  };
}

function safePath(raw: string): { ok: true; value: string } | { ok: false; message: string } {
  try {
    return { ok: true, value: workspacePath(raw, 'path', { allowRoot: true }) };
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}

/** The computer as a tool family of the turn. */
export function computerFamily(computers: ComputerService): ToolFamily {
  return { name: 'computer', forTurn: (caller) => computerTools(computers, caller) };
}

