// A project's webhook tools (SPEC.md Tools; docs/decisions/0052): HTTPS endpoints the agent may call, each with its
// own signing secret, returned once (at creation, and at each rotation) and sealed at rest. A rotation keeps the
// replaced secret signing beside the new one for 24 hours. Every change bumps the configuration version and queues
// its push (ProjectService.applyChange); the runtime makes the calls and keeps their record, which is read from it.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { AppError, conflict, invalidArgument, notFound } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { isReservedToolName } from '@agentplane/lib/permissions';
import type { ProjectService } from '../projects/service.js';
import type { Provisioner } from '../provisioning/provisioner.js';
import type { ControlSchema } from '../store/schema.js';
import { webhookSecretAad } from './configuration.js';

/** SPEC.md Limits: how long a replaced secret still signs. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;
export const MAX_WEBHOOK_TOOLS = 128;
export const MAX_PARAMETERS_BYTES = 32 * 1024;
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

type ToolRow = Selectable<ControlSchema['webhook_tools']>;

export interface WebhookToolInput {
  name: string;
  description: string;
  parameters?: Record<string, unknown> | undefined;
  url: string;
  requiresApproval?: boolean | undefined;
}

export type WebhookToolPatch = Partial<Omit<WebhookToolInput, 'name'>>;

/** A tool as listed: never its secret. */
export interface WebhookToolOut {
  id: string;
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  url: string;
  requiresApproval: boolean;
  created_at: string;
  updated_at: string;
  rotated_at: string | null;
  /** While a rotation's overlap lasts: when the replaced secret stops signing. */
  previousSecretUntil: string | null;
}

/** A tool as created, with its secret: the only time it is shown. */
export interface WebhookToolCreated extends WebhookToolOut {
  secret: string;
}

export interface WebhookToolRotated {
  id: string;
  secret: string;
  previousSecretUntil: string;
}

const toolNotFound = (toolId: string) => notFound(`webhook tool ${toolId} not found`);

export class WebhookToolService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly secrets: SecretBox,
    private readonly projects: ProjectService,
    private readonly urlPolicy: UrlPolicy,
    private readonly provisioner: Provisioner | undefined,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async list(projectId: string): Promise<WebhookToolOut[]> {
    await this.projects.targetOf(projectId);
    const rows = await this.db.selectFrom('webhook_tools').selectAll().where('project_id', '=', projectId).orderBy('created_at').orderBy('id').execute();
    return rows.map((row) => this.present(row));
  }

  async get(projectId: string, toolId: string): Promise<WebhookToolOut> {
    return this.present(await this.row(projectId, toolId));
  }

  /** Publishes a tool: its URL vetted, its secret made, sealed and shown this once. */
  async create(projectId: string, input: WebhookToolInput): Promise<WebhookToolCreated> {
    const name = input.name;
    if (!TOOL_NAME.test(name)) throw invalidArgument('name must be 1-64 letters, digits, _ or - (how models name functions)');
    if (isReservedToolName(name)) throw invalidArgument(`name '${name}' is a built-in tool's; choose another`, { code: 'reserved_tool_name' });
    const parameters = checkParameters(input.parameters ?? { type: 'object', properties: {} });
    const url = await this.checkedUrl(input.url);
    const secret = newSecret();
    const id = randomUUID();
    const { result: row } = await this.projects.applyChange(projectId, async (trx) => {
      const taken = await trx.selectFrom('webhook_tools').select('id').where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst();
      if (taken) throw conflict(`a webhook tool named '${name}' already exists in this project`, { code: 'name_taken' });
      const count = await trx.selectFrom('webhook_tools').select((eb) => eb.fn.countAll<string>().as('n')).where('project_id', '=', projectId).executeTakeFirstOrThrow();
      if (Number(count.n) >= MAX_WEBHOOK_TOOLS) throw conflict(`a project has at most ${MAX_WEBHOOK_TOOLS} webhook tools; remove one first`, { code: 'too_many_tools' });
      const inserted = await trx
        .insertInto('webhook_tools')
        .values({
          id,
          project_id: projectId,
          name,
          description: input.description,
          parameters: JSON.stringify(parameters),
          url,
          requires_approval: input.requiresApproval ?? false,
          secret: this.secrets.seal(secret, webhookSecretAad(projectId, id, 'current')),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { result: inserted };
    });
    return { ...this.present(row), secret };
  }

  /** Changes what is sent; a field left out keeps its value (the approval gate included). */
  async update(projectId: string, toolId: string, patch: WebhookToolPatch): Promise<WebhookToolOut> {
    await this.row(projectId, toolId);
    const set: Partial<{ description: string; parameters: string; url: string; requires_approval: boolean }> = {};
    if (patch.description !== undefined) set.description = patch.description;
    if (patch.parameters !== undefined) set.parameters = JSON.stringify(checkParameters(patch.parameters));
    if (patch.url !== undefined) set.url = await this.checkedUrl(patch.url);
    if (patch.requiresApproval !== undefined) set.requires_approval = patch.requiresApproval;
    if (Object.keys(set).length === 0) return this.get(projectId, toolId);
    const { result } = await this.projects.applyChange(projectId, async (trx) => {
      const row = await trx
        .updateTable('webhook_tools')
        .set({ ...set, updated_at: this.now() })
        .where('project_id', '=', projectId)
        .where('id', '=', toolId)
        .returningAll()
        .executeTakeFirst();
      if (!row) throw toolNotFound(toolId);
      return { result: row };
    });
    return this.present(result);
  }

  async remove(projectId: string, toolId: string): Promise<WebhookToolOut> {
    await this.row(projectId, toolId);
    const { result } = await this.projects.applyChange(projectId, async (trx) => {
      const row = await trx.deleteFrom('webhook_tools').where('project_id', '=', projectId).where('id', '=', toolId).returningAll().executeTakeFirst();
      if (!row) throw toolNotFound(toolId);
      return { result: row };
    });
    return this.present(result);
  }

  /**
   * A new secret, shown this once; the current one goes on signing beside it for 24 hours. A secret replaced by an
   * earlier rotation whose overlap has not ended stops signing now: only the newest two ever sign.
   */
  async rotate(projectId: string, toolId: string): Promise<WebhookToolRotated> {
    await this.row(projectId, toolId);
    const secret = newSecret();
    const now = this.now();
    const until = new Date(now.getTime() + ROTATION_OVERLAP_MS);
    await this.projects.applyChange(projectId, async (trx) => {
      const current = await trx.selectFrom('webhook_tools').selectAll().where('project_id', '=', projectId).where('id', '=', toolId).forUpdate().executeTakeFirst();
      if (!current) throw toolNotFound(toolId);
      const replaced = this.secrets.open(current.secret, webhookSecretAad(projectId, toolId, 'current'));
      await trx
        .updateTable('webhook_tools')
        .set({
          secret: this.secrets.seal(secret, webhookSecretAad(projectId, toolId, 'current')),
          previous_secret: this.secrets.seal(replaced, webhookSecretAad(projectId, toolId, 'previous')),
          previous_secret_until: until,
          rotated_at: now,
          updated_at: now,
        })
        .where('id', '=', toolId)
        .execute();
      return { result: undefined };
    });
    return { id: toolId, secret, previousSecretUntil: until.toISOString() };
  }

  /** Recent calls of the project's webhook tools, newest first, as the runtime recorded them. */
  async deliveries(projectId: string, limit: number | undefined): Promise<unknown> {
    const target = await this.projects.targetOf(projectId);
    if (!this.provisioner) throw new AppError('unavailable', "no runtime is configured (RUNTIME_URL, RUNTIME_ADMIN_KEY): the calls are recorded there");
    return this.provisioner.withRuntime(target, (runtime) =>
      runtime.tenantCall(target.tenantId, 'GET', '/tools/deliveries', { query: limit === undefined ? {} : { limit: String(limit) } }),
    );
  }

  private async row(projectId: string, toolId: string): Promise<ToolRow> {
    await this.projects.targetOf(projectId);
    const row = await this.db.selectFrom('webhook_tools').selectAll().where('project_id', '=', projectId).where('id', '=', toolId).executeTakeFirst();
    if (!row) throw toolNotFound(toolId);
    return row;
  }

  private async checkedUrl(url: string): Promise<string> {
    const checked = await checkUrl(url, this.urlPolicy, 'url');
    if (checked.url.username !== '' || checked.url.password !== '') throw invalidArgument('url must not carry credentials: the call is signed instead');
    return checked.url.href;
  }

  private present(row: ToolRow): WebhookToolOut {
    const overlapping = row.previous_secret_until !== null && row.previous_secret_until.getTime() > this.now().getTime();
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      parameters: row.parameters,
      url: row.url,
      requiresApproval: row.requires_approval,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
      rotated_at: row.rotated_at?.toISOString() ?? null,
      previousSecretUntil: overlapping ? row.previous_secret_until!.toISOString() : null,
    };
  }
}

/** `whsec_` and 32 random bytes: a secret that reads as what it is in a handler's configuration. */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** A parameters schema as the models' function-calling APIs take it: a JSON Schema object for an object. */
function checkParameters(parameters: Record<string, unknown>): Record<string, unknown> {
  if (parameters.type !== 'object') throw invalidArgument("parameters must be a JSON Schema for an object: {\"type\": \"object\", \"properties\": {...}}");
  if (Buffer.byteLength(JSON.stringify(parameters)) > MAX_PARAMETERS_BYTES) throw invalidArgument(`parameters may be at most ${MAX_PARAMETERS_BYTES / 1024} KiB of JSON`);
  return parameters;
}
