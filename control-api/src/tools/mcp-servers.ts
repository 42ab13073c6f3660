// A project's MCP servers (SPEC.md Tools; docs/decisions/0053): servers reached over HTTP whose tools the project's
// agent may call, each with static headers sealed at rest and never listed. Stdio servers are refused. Every change
// bumps the configuration version and queues its push; the runtime connects to them.
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { conflict, invalidArgument, notFound } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import type { ProjectService } from '../projects/service.js';
import type { ControlSchema } from '../store/schema.js';
import { mcpHeadersAad } from './configuration.js';

export const MAX_MCP_SERVERS = 32;
export const MCP_TRANSPORTS = ['auto', 'streamable_http', 'sse'] as const;

type ServerRow = Selectable<ControlSchema['mcp_servers']>;

export interface McpServerInput {
  name: string;
  url: string;
  transport?: (typeof MCP_TRANSPORTS)[number] | undefined;
  headers?: Record<string, string> | undefined;
}

/** A server as listed: the names of its headers, never their values. */
export interface McpServerOut {
  id: string;
  name: string;
  url: string;
  transport: (typeof MCP_TRANSPORTS)[number];
  header_names: string[];
  created_at: string;
}

const serverNotFound = (serverId: string) => notFound(`MCP server ${serverId} not found`);

export class McpServerService {
  constructor(
    private readonly db: Kysely<ControlSchema>,
    private readonly secrets: SecretBox,
    private readonly projects: ProjectService,
    private readonly urlPolicy: UrlPolicy,
  ) {}

  async list(projectId: string): Promise<McpServerOut[]> {
    await this.projects.targetOf(projectId);
    const rows = await this.db.selectFrom('mcp_servers').selectAll().where('project_id', '=', projectId).orderBy('created_at').orderBy('id').execute();
    return rows.map(present);
  }

  async get(projectId: string, serverId: string): Promise<McpServerOut> {
    await this.projects.targetOf(projectId);
    const row = await this.db.selectFrom('mcp_servers').selectAll().where('project_id', '=', projectId).where('id', '=', serverId).executeTakeFirst();
    if (!row) throw serverNotFound(serverId);
    return present(row);
  }

  async add(projectId: string, input: McpServerInput): Promise<McpServerOut> {
    const checked = await checkUrl(input.url, this.urlPolicy, 'url');
    if (checked.url.username !== '' || checked.url.password !== '') throw invalidArgument('url must not carry credentials: send them as headers');
    const headers = input.headers ?? {};
    const id = randomUUID();
    const { result } = await this.projects.applyChange(projectId, async (trx) => {
      const taken = await trx.selectFrom('mcp_servers').select('id').where('project_id', '=', projectId).where('name', '=', input.name).executeTakeFirst();
      if (taken) throw conflict(`an MCP server named '${input.name}' already exists in this project`, { code: 'name_taken' });
      const count = await trx.selectFrom('mcp_servers').select((eb) => eb.fn.countAll<string>().as('n')).where('project_id', '=', projectId).executeTakeFirstOrThrow();
      if (Number(count.n) >= MAX_MCP_SERVERS) throw conflict(`a project has at most ${MAX_MCP_SERVERS} MCP servers; remove one first`, { code: 'too_many_servers' });
      const row = await trx
        .insertInto('mcp_servers')
        .values({
          id,
          project_id: projectId,
          name: input.name,
          url: checked.url.href,
          transport: input.transport ?? 'auto',
          header_names: JSON.stringify(Object.keys(headers).sort()),
          headers: Object.keys(headers).length === 0 ? null : this.secrets.seal(JSON.stringify(headers), mcpHeadersAad(projectId, id)),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { result: row };
    });
    return present(result);
  }

  async remove(projectId: string, serverId: string): Promise<McpServerOut> {
    await this.get(projectId, serverId);
    const { result } = await this.projects.applyChange(projectId, async (trx) => {
      const row = await trx.deleteFrom('mcp_servers').where('project_id', '=', projectId).where('id', '=', serverId).returningAll().executeTakeFirst();
      if (!row) throw serverNotFound(serverId);
      return { result: row };
    });
    return present(result);
  }
}

function present(row: ServerRow): McpServerOut {
  return { id: row.id, name: row.name, url: row.url, transport: row.transport, header_names: row.header_names, created_at: row.created_at.toISOString() };
}
