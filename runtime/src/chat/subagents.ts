// Subagents (SPEC.md capability `subagents`, flag `enable_subagents`; docs/decisions/0057): the `delegate` tool
// starts a child run in a conversation of its own (`parent_session_id` set) on a model the project allows, for the
// same person, unattended: no client tools, no `ask_user`, and no delegating further. The delegating turn waits for
// it and reads its answer; a child that cannot finish (it failed, or paused for a person) ends the parent's turn
// with `subagents_incomplete`. At most `max_concurrent` of a project's subagents run at once.
import { sql, type Kysely } from 'kysely';
import type { Logger } from '@agentplane/lib/logging';
import type { Principal } from '../auth/authenticate.js';
import type { RuntimeSchema } from '../store/schema.js';
import { REQUEST_FLAGS, type EffectivePermission } from '@agentplane/lib/permissions';
import type { ChatService, RequestNarrowing } from './service.js';
import type { ServerTool } from './tools.js';

export const DEFAULT_MAX_CONCURRENT_SUBAGENTS = 4;
/** What is kept of a child's answer as the tool result. */
const MAX_CHILD_ANSWER_CHARS = 20_000;

export class Subagents {
  private chat: ChatService | undefined;

  constructor(private readonly deps: { db: Kysely<RuntimeSchema>; logger: Logger }) {}

  /** The chat service children are started through (it offers this tool, so it is handed over once made). */
  attach(chat: ChatService): void {
    this.chat = chat;
  }

  /**
   * `delegate`, offered under capability `subagents`. The child keeps what the delegating request declined or
   * narrowed (its flags, `plugins`, `allowed_tools`): a caller can decline but never exceed, through a child too.
   */
  tool(principal: Principal, permission: EffectivePermission, request: RequestNarrowing): ServerTool {
    const declined = Object.fromEntries(REQUEST_FLAGS.filter((flag) => !permission.switches[flag]).map((flag) => [flag, false]));
    const section = principal.configuration.document.subagents;
    const models = section?.models ?? [];
    return {
      needs: ['subagents'],
      definition: {
        name: 'delegate',
        description:
          'Hand a self-contained piece of work to a subagent: it works in a conversation of its own, with the same access as you, and its answer comes back to you. ' +
          'Give it everything it needs in `task`: it cannot ask the person anything. Use it for work that can be done apart from this conversation.',
        parameters: {
          type: 'object',
          properties: {
            task: { type: 'string', description: 'The work, with all the context it needs' },
            ...(models.length > 0 ? { model: { type: 'string', enum: models, description: `The model it runs on (default ${models[0]})` } } : {}),
          },
          required: ['task'],
        },
      },
      run: async (args, signal, context) => {
        const task = typeof args.task === 'string' ? args.task.trim() : '';
        if (task === '') return { ok: false, message: 'delegate needs a `task`: the work, with what the subagent needs to know.' };
        const model = models.length === 0 ? context.model : typeof args.model === 'string' && models.includes(args.model) ? args.model : models[0]!;
        const limit = section?.max_concurrent ?? DEFAULT_MAX_CONCURRENT_SUBAGENTS;
        const busy = `The project's ${limit} subagents are all at work; do this yourself, or delegate it later.`;
        if ((await this.running(principal.tenantId)) >= limit) return { ok: false, message: busy };
        const started = await this.chat!.start(
          principal,
          {
            ...declined,
            ...(request.plugins ? { plugins: request.plugins } : {}),
            ...(request.allowed_tools ? { allowed_tools: request.allowed_tools } : {}),
            message: task,
            model,
            enable_subagents: false,
            enable_ask_user: false,
            tools: [],
          } as Parameters<ChatService['start']>[1],
          undefined,
          { awaitEnd: true, parentSessionId: context.sessionId },
        );
        if (started.kind !== 'started' || !started.ended) {
          const why = started.kind === 'refused' && started.error instanceof Error ? started.error.message : 'it could not be started';
          return { ok: false, message: `The subagent did not start: ${why}`, stop: 'subagents_incomplete' };
        }
        // Counting and starting are two statements, so delegates racing each other (on this replica or another) may all
        // have counted a free place: each looks again once its child is stored, and a child with `limit` or more
        // running children started before it (in start order, which all of them see alike) stands down.
        if ((await this.runningBefore(principal.tenantId, started.runId)) >= limit) {
          await this.chat!.cancel(principal, started.runId).catch(() => undefined);
          await started.ended.catch(() => undefined);
          return { ok: false, message: busy };
        }
        // The delegating turn is cancelled or cut off: so is its child.
        const onAbort = () => void this.chat!.cancel(principal, started.runId).catch(() => undefined);
        signal.addEventListener('abort', onAbort, { once: true });
        let frame;
        try {
          frame = await started.ended;
        } finally {
          signal.removeEventListener('abort', onAbort);
        }
        if (signal.aborted) throw signal.reason;
        const where = `(its conversation: ${started.sessionId})`;
        if (!frame || frame.type === 'error') {
          return { ok: false, message: `The subagent failed ${where}: ${frame?.message ?? 'it stopped without an answer'}`, stop: 'subagents_incomplete' };
        }
        if (frame.requires_action || frame.finish_reason === 'cancelled') {
          return { ok: false, message: `The subagent could not finish ${where}: it stopped to wait for ${frame.requires_action ? 'a person' : 'nothing (it was cancelled)'}.`, stop: 'subagents_incomplete' };
        }
        return { ok: true, text: `The subagent's answer ${where}:\n\n${frame.content}`.slice(0, MAX_CHILD_ANSWER_CHARS) };
      },
    };
  }

  /** The tenant's subagent runs at work now (a lapsed lease is a run no longer running). */
  private async running(tenantId: string): Promise<number> {
    const { rows } = await sql<{ n: string }>`
      select count(*) as n from runs join sessions on sessions.id = runs.session_id
      where runs.tenant_id = ${tenantId} and runs.status = 'running' and runs.lease_expires_at > now() and sessions.parent_session_id is not null`.execute(this.deps.db);
    return Number(rows[0]?.n ?? 0);
  }

  /** The tenant's subagent runs at work now that started before `runId` (by creation time, then id). */
  private async runningBefore(tenantId: string, runId: string): Promise<number> {
    const { rows } = await sql<{ n: string }>`
      select count(*) as n from runs join sessions on sessions.id = runs.session_id, (select created_at, id from runs where id = ${runId}) ours
      where runs.tenant_id = ${tenantId} and runs.status = 'running' and runs.lease_expires_at > now() and sessions.parent_session_id is not null
        and (runs.created_at, runs.id) < (ours.created_at, ours.id)`.execute(this.deps.db);
    return Number(rows[0]?.n ?? 0);
  }
}
