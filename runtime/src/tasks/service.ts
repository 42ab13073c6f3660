// Scheduled tasks as a person sees them (SPEC.md Task, Tasks endpoints; docs/decisions/0058): create one (`tasks:write`
// and `chat`, since its fires are turns), list and read those the caller may see (`tasks:read`, the conversations'
// visibility rule), cancel one's own. A task acts for its creator with the claims their token held, under the
// project's ceiling as it is at each fire. The agent gets the same three as tools under `enable_scheduling`.
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable } from 'kysely';
import { pageOf } from '@agentplane/lib/db/paging';
import { conflict, invalidArgument, notFound, permissionDenied } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { requireCapability, type Capability, type EffectivePermission } from '@agentplane/lib/permissions';
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';
import { grantOf, type Principal } from '../auth/authenticate.js';
import { chooseModel } from '../chat/model-choice.js';
import type { ServerTool } from '../chat/tools.js';
import { canSeeOwner, ownsConversation, visibleOwnerCondition } from '../sessions/access.js';
import type { SessionService } from '../sessions/service.js';
import { underCap } from '../store/capped.js';
import type { RuntimeSchema, TasksTable } from '../store/schema.js';
import { nextSlot, parseSchedule, type ScheduleInput } from './schedule.js';

/** Tasks one person may have scheduled (or running) at once. */
export const MAX_ACTIVE_TASKS_PER_SUBJECT = 100;
/** Tasks a project may have scheduled at once. */
export const MAX_ACTIVE_TASKS_PER_TENANT = 10_000;
export const MAX_TASK_PROMPT_CHARS = 32_000;
export const DEFAULT_TASK_PAGE = 100;
export const MAX_TASK_PAGE = 1_000;

export const TASK_STATUSES = ['scheduled', 'running', 'completed', 'incomplete', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
/** The statuses a task still acts in. */
const ACTIVE: TaskStatus[] = ['scheduled', 'running'];

export interface TaskInput extends ScheduleInput {
  name?: string | undefined;
  prompt: string;
  callback_url?: string | null | undefined;
  session_id?: string | null | undefined;
  model?: string | null | undefined;
}

export interface TaskOut {
  id: string;
  name: string;
  prompt: string;
  status: TaskStatus;
  cron: string | null;
  timezone: string;
  interval_seconds: number | null;
  run_at: string | null;
  next_run_at: string | null;
  run_count: number;
  last_error: string | null;
  last_finish_reason: string | null;
  last_run_error: string | null;
  last_run_at: string | null;
  last_run_id: string | null;
  last_session_id: string | null;
  callback_url: string | null;
  session_id: string | null;
  model: string | null;
  subject: string;
  created_at: string;
  updated_at: string;
}

export type TaskRow = Selectable<TasksTable>;

// One wording for "does not exist" and "not yours to see" (STYLE.md 4).
const taskNotFound = (id: string) => notFound(`task ${id} not found`);
const taskNotOwned = (id: string) => permissionDenied(`task ${id} belongs to another subject: this token may read it but not change it`, { code: 'not_owner' });

export interface TaskServiceDeps {
  db: Kysely<RuntimeSchema>;
  sessions: SessionService;
  urlPolicy: UrlPolicy;
  /** Stops a run of a task being cancelled (its one-shot run, or a recurring one's current fire). */
  cancelRun(principal: Principal, runId: string): Promise<unknown>;
  /** Told when a task is created or cancelled here: this process's scheduler looks again at once, its CronJob follows. */
  changed?: (taskId: string) => void;
  now?: () => Date;
}

export class TaskService {
  constructor(private readonly deps: TaskServiceDeps) {}

  authorizeRead(principal: Principal): void {
    requireCapability(principal.permission, 'tasks:read', 'reading scheduled tasks');
  }

  /** Creating or cancelling; creating also needs `chat`, which the task's turns run under. */
  authorizeWrite(principal: Principal): void {
    requireCapability(principal.permission, 'tasks:write', 'scheduling tasks');
  }

  /**
   * `narrowedBy`: the turn that asked (the agent's `schedule_task`): the task keeps what that request declined or
   * narrowed (its `enable_*` flags, `allowed_tools`), as a subagent does, so a schedule can never do more than the
   * conversation that made it could.
   */
  async create(principal: Principal, input: TaskInput, narrowedBy?: { permission: EffectivePermission; allowedTools?: string[] | undefined }): Promise<TaskOut> {
    const { db } = this.deps;
    requireCapability(principal.permission, 'chat', "a task's turns");
    const now = this.now();
    const spec = parseSchedule(input, now);
    const prompt = input.prompt.trim();
    if (prompt === '') throw invalidArgument('prompt must not be empty');
    const callbackUrl = input.callback_url ? (await checkUrl(input.callback_url, this.deps.urlPolicy, 'callback_url')).url.href : null;
    // The conversation its fires post into must be the caller's own; the model, one this token may use now.
    if (input.session_id) await this.deps.sessions.ownedSession(principal, input.session_id);
    if (input.model) chooseModel(principal.configuration, principal.permission, principal.routing, input.model);
    const subject = principal.claims.sub;
    // Counted and inserted under the tenant's lock: concurrent creates cannot both take the last place.
    const row = await underCap(db, `tasks:${principal.tenantId}`, async (trx) => {
      const active = await trx
        .selectFrom('tasks')
        .select([sql<string>`count(*)`.as('all'), sql<string>`count(*) filter (where owner = ${subject})`.as('mine')])
        .where('tenant_id', '=', principal.tenantId)
        .where('status', 'in', ACTIVE)
        .executeTakeFirstOrThrow();
      if (Number(active.mine) >= MAX_ACTIVE_TASKS_PER_SUBJECT) {
        throw conflict(`a person may have at most ${MAX_ACTIVE_TASKS_PER_SUBJECT} scheduled tasks; cancel one first`, { code: 'too_many_tasks' });
      }
      if (Number(active.all) >= MAX_ACTIVE_TASKS_PER_TENANT) {
        throw conflict(`a project may have at most ${MAX_ACTIVE_TASKS_PER_TENANT} scheduled tasks; cancel some first`, { code: 'too_many_tasks' });
      }
      return trx
        .insertInto('tasks')
        .values({
          id: randomUUID(),
          tenant_id: principal.tenantId,
          owner: subject,
          name: (input.name?.trim() || oneLine(prompt)).slice(0, 200),
          prompt,
          cron: spec.kind === 'cron' ? spec.cron : null,
          timezone: spec.kind === 'cron' ? spec.timezone : '',
          interval_seconds: spec.kind === 'interval' ? spec.intervalSeconds : null,
          run_at: spec.kind === 'once' ? spec.runAt : null,
          callback_url: callbackUrl,
          session_id: input.session_id ?? null,
          model: input.model ?? null,
          acts_as: JSON.stringify(narrowedGrant(grantOf(principal.claims), narrowedBy)),
          status: 'scheduled',
          next_run_at: nextSlot(spec, now, now)!,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    this.deps.changed?.(row.id);
    return present(row);
  }

  /** The tasks the caller may see, newest first; `status` narrows. */
  async list(principal: Principal, query: { limit: number; offset: number; status?: TaskStatus | undefined }) {
    let select = this.deps.db
      .selectFrom('tasks')
      .selectAll()
      .where('tenant_id', '=', principal.tenantId)
      .where(visibleOwnerCondition(principal, 'tasks.owner'))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(query.limit + 1)
      .offset(query.offset);
    if (query.status) select = select.where('status', '=', query.status);
    const page = pageOf(await select.execute(), query);
    return { tasks: page.rows.map(present), has_more: page.has_more, next_offset: page.next_offset };
  }

  async get(principal: Principal, id: string): Promise<TaskOut> {
    return present(await this.visible(principal, id));
  }

  /**
   * Cancels one of the caller's own tasks: it fires no more, and a run of it under way is stopped. A task already
   * ended is answered as it is.
   */
  async cancel(principal: Principal, id: string): Promise<TaskOut> {
    const row = await this.visible(principal, id);
    if (!ownsConversation(principal, row.owner)) throw taskNotOwned(id);
    if (!(ACTIVE as string[]).includes(row.status)) return present(row);
    const cancelled = await this.deps.db
      .updateTable('tasks')
      .set({ status: 'cancelled', next_run_at: null, updated_at: new Date() })
      .where('id', '=', id)
      .where('status', 'in', ACTIVE)
      .returningAll()
      .executeTakeFirst();
    // Fires claimed but not started yet start nothing now.
    await this.deps.db
      .updateTable('task_fires')
      .set({ state: 'settled', outcome: JSON.stringify({ status: 'incomplete', finishReason: 'cancelled', error: null }), claim_expires_at: null })
      .where('task_id', '=', id)
      .where('state', '=', 'pending')
      .execute();
    const running = await this.deps.db
      .selectFrom('task_fires')
      .innerJoin('runs', 'runs.id', 'task_fires.run_id')
      .select('task_fires.run_id')
      .where('task_fires.task_id', '=', id)
      .where('runs.status', '=', 'running')
      .execute();
    for (const fire of running) await this.deps.cancelRun(principal, fire.run_id).catch(() => undefined);
    this.deps.changed?.(id);
    return present(cancelled ?? (await this.visible(principal, id)));
  }

  /** Every task of a tenant, newest first: the control plane's list (GET /api/projects/:id/tasks). */
  async ofTenant(tenantId: string, query: { limit: number; offset: number; status?: TaskStatus | undefined }) {
    let select = this.deps.db.selectFrom('tasks').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit + 1).offset(query.offset);
    if (query.status) select = select.where('status', '=', query.status);
    const page = pageOf(await select.execute(), query);
    return { tasks: page.rows.map(present), has_more: page.has_more, next_offset: page.next_offset };
  }

  /** The agent's tools: schedule (`tasks:write`), list (`tasks:read`) and cancel (`tasks:write`) the person's tasks. */
  tools(principal: Principal, permission?: EffectivePermission, request?: { allowed_tools?: string[] | undefined }): ServerTool[] {
    const narrowedBy = permission ? { permission, allowedTools: request?.allowed_tools } : undefined;
    const refusal = (error: unknown) => ({ ok: false as const, message: error instanceof Error ? error.message : String(error) });
    return [
      {
        needs: ['tasks:write'],
        definition: {
          name: 'schedule_task',
          description:
            'Schedule work for later, for this person: at a moment (run_at), every so many seconds (interval_seconds, at least 60) or on a cron ' +
            '(5 to 7 fields, in an IANA time zone). When it fires, `prompt` is run as a new message of its own conversation, with nobody there to answer questions.',
          parameters: {
            type: 'object',
            properties: {
              prompt: { type: 'string', description: 'What to do when it fires, with everything needed to do it' },
              name: { type: 'string', description: 'A short name the person will recognise' },
              run_at: { type: 'string', description: 'Once, at this RFC 3339 time with its offset (2026-12-01T09:00:00Z)' },
              interval_seconds: { type: 'integer', minimum: 60 },
              cron: { type: 'string', description: 'Such as "0 9 * * 1-5" for 09:00 on weekdays' },
              timezone: { type: 'string', description: 'IANA zone of the cron, such as Europe/Paris; blank is UTC' },
            },
            required: ['prompt'],
          },
        },
        run: async (args) => {
          try {
            const task = await this.create(
              principal,
              {
                prompt: String(args.prompt ?? ''),
                ...(typeof args.name === 'string' ? { name: args.name } : {}),
                ...(typeof args.run_at === 'string' ? { run_at: args.run_at } : {}),
                ...(typeof args.interval_seconds === 'number' ? { interval_seconds: args.interval_seconds } : {}),
                ...(typeof args.cron === 'string' ? { cron: args.cron } : {}),
                ...(typeof args.timezone === 'string' ? { timezone: args.timezone } : {}),
              },
              narrowedBy,
            );
            return { ok: true, text: `Scheduled task ${task.id} ('${task.name}'); it first fires at ${task.next_run_at}.` };
          } catch (error) {
            return refusal(error);
          }
        },
      },
      {
        needs: ['tasks:read'],
        definition: {
          name: 'list_tasks',
          description: "This person's scheduled tasks that are still active: id, name, schedule and when each fires next.",
          parameters: { type: 'object', properties: {} },
        },
        run: async () => {
          const { tasks } = await this.list(principal, { limit: 50, offset: 0, status: 'scheduled' });
          const mine = tasks.filter((task) => task.subject === principal.claims.sub);
          if (mine.length === 0) return { ok: true, text: 'No scheduled tasks.' };
          return { ok: true, text: mine.map((task) => `${task.id}: '${task.name}', ${scheduleText(task)}, next at ${task.next_run_at}`).join('\n') };
        },
      },
      {
        needs: ['tasks:write'],
        definition: {
          name: 'cancel_task',
          description: "Cancel one of this person's scheduled tasks by its id (list_tasks gives them).",
          parameters: { type: 'object', properties: { task_id: { type: 'string' } }, required: ['task_id'] },
        },
        run: async (args) => {
          const id = String(args.task_id ?? '');
          if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) return { ok: false, message: `No task ${id}: give an id list_tasks answered.` };
          try {
            const task = await this.cancel(principal, id.toLowerCase());
            return { ok: true, text: `Task ${task.id} ('${task.name}') is ${task.status}.` };
          } catch (error) {
            return refusal(error);
          }
        },
      },
    ];
  }

  /** The task if the caller may see it, else the 404 a made-up id gets. */
  private async visible(principal: Principal, id: string): Promise<TaskRow> {
    const row = await this.deps.db.selectFrom('tasks').selectAll().where('id', '=', id).where('tenant_id', '=', principal.tenantId).executeTakeFirst();
    if (!row || !canSeeOwner(principal, row.owner)) throw taskNotFound(id);
    return row;
  }

  private now(): Date {
    return this.deps.now?.() ?? new Date();
  }
}

export function present(row: TaskRow): TaskOut {
  const iso = (date: Date | null) => (date === null ? null : date.toISOString());
  return {
    id: row.id,
    name: row.name,
    prompt: row.prompt,
    status: row.status as TaskStatus,
    cron: row.cron,
    timezone: row.timezone,
    interval_seconds: row.interval_seconds,
    run_at: iso(row.run_at),
    next_run_at: iso(row.next_run_at),
    run_count: row.run_count,
    last_error: row.last_error,
    last_finish_reason: row.last_finish_reason,
    last_run_error: row.last_run_error,
    last_run_at: iso(row.last_run_at),
    last_run_id: row.last_run_id,
    last_session_id: row.last_session_id,
    callback_url: row.callback_url,
    session_id: row.session_id,
    model: row.model,
    subject: row.owner,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function scheduleText(task: TaskOut): string {
  if (task.cron !== null) return `cron '${task.cron}'${task.timezone === '' ? ' UTC' : ` ${task.timezone}`}`;
  if (task.interval_seconds !== null) return `every ${task.interval_seconds} s`;
  return `once at ${task.run_at}`;
}

/** The grant a task acts with: the token's, less what the asking turn declined or narrowed. */
function narrowedGrant(grant: AccessTokenGrant, narrowedBy: { permission: EffectivePermission; allowedTools?: string[] | undefined } | undefined): AccessTokenGrant {
  if (!narrowedBy) return grant;
  const capabilities = grant.capabilities.filter((capability) => narrowedBy.permission.has(capability as Capability));
  const allowed = narrowedBy.allowedTools;
  const allowedTools = allowed === undefined ? grant.allowed_tools : grant.allowed_tools === undefined ? allowed : grant.allowed_tools.filter((tool) => allowed.includes(tool));
  return { ...grant, capabilities, ...(allowedTools === undefined ? {} : { allowed_tools: allowedTools }) };
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}
