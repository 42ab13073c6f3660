// MCP servers an end-user attaches for themselves (capability `mcp:manage`; docs/decisions/0053): kept per tenant
// and owner, their headers sealed, offered only in their owner's turns, seen and removed by their owner alone (404
// to anyone else, as for a made-up id). Stdio servers cannot be attached, and every URL passes the guard.
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { conflict, invalidArgument, notFound } from '@agentplane/lib/errors';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { requireCapability } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import { underCap } from '../store/capped.js';
import type { RuntimeSchema, UserMcpServersTable } from '../store/schema.js';
import type { McpServer, McpTransport } from './mcp.js';

/** Servers one person may attach. */
export const MAX_USER_MCP_SERVERS = 8;

export interface UserMcpInput {
  name: string;
  url: string;
  transport?: McpTransport | undefined;
  headers?: Record<string, string> | undefined;
}

export interface UserMcpOut {
  id: string;
  name: string;
  url: string;
  transport: McpTransport;
  header_names: string[];
  created_at: string;
}

type Row = Selectable<UserMcpServersTable>;

const headersAad = (tenantId: string, id: string) => `tenant:${tenantId}:user-mcp:${id}:headers`;
const serverNotFound = (id: string) => notFound(`MCP server ${id} not found`);

export class UserMcpServers {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly secrets: SecretBox,
    private readonly urlPolicy: UrlPolicy,
  ) {}

  /** The caller may manage their own servers. */
  authorize(principal: Principal): void {
    requireCapability(principal.permission, 'mcp:manage', 'attaching MCP servers');
  }

  async list(principal: Principal): Promise<UserMcpOut[]> {
    return (await this.rows(principal)).map(present);
  }

  /** Attaches a server for the caller: the URL vetted, the headers sealed; names of the project's servers are taken. */
  async add(principal: Principal, input: UserMcpInput): Promise<UserMcpOut> {
    const checked = await checkUrl(input.url, this.urlPolicy, 'url');
    if (checked.url.username !== '' || checked.url.password !== '') throw invalidArgument('url must not carry credentials: send them as headers');
    if ((principal.configuration.document.mcp_servers ?? []).some((server) => server.name === input.name)) {
      throw conflict(`'${input.name}' is the name of one of the project's MCP servers; choose another`, { code: 'name_taken' });
    }
    const headers = input.headers ?? {};
    const id = randomUUID();
    // Counted and inserted under the person's lock: concurrent attaches cannot both take the last place.
    const row = await underCap(this.db, `user-mcp:${principal.tenantId}:${principal.claims.sub}`, async (trx) => {
      const mine = await this.rows(principal, trx);
      if (mine.some((row) => row.name === input.name)) throw conflict(`you already have an MCP server named '${input.name}'`, { code: 'name_taken' });
      if (mine.length >= MAX_USER_MCP_SERVERS) throw conflict(`a person may attach at most ${MAX_USER_MCP_SERVERS} MCP servers; remove one first`, { code: 'too_many_servers' });
      return trx
        .insertInto('user_mcp_servers')
        .values({
          id,
          tenant_id: principal.tenantId,
          owner: principal.claims.sub,
          name: input.name,
          url: checked.url.href,
          transport: input.transport ?? 'auto',
          header_names: JSON.stringify(Object.keys(headers).sort()),
          sealed_headers: Object.keys(headers).length === 0 ? null : this.secrets.seal(JSON.stringify(headers), headersAad(principal.tenantId, id)),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return present(row);
  }

  async remove(principal: Principal, id: string): Promise<UserMcpOut> {
    const row = await this.db
      .deleteFrom('user_mcp_servers')
      .where('tenant_id', '=', principal.tenantId)
      .where('owner', '=', principal.claims.sub)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw serverNotFound(id);
    return present(row);
  }

  /** The caller's servers as the loader takes them, headers opened; none without `mcp:manage`. */
  async serversOf(principal: Principal): Promise<McpServer[]> {
    if (!principal.permission.has('mcp:manage')) return [];
    return (await this.rows(principal)).map((row) => ({
      id: row.id,
      name: row.name,
      url: row.url,
      transport: row.transport,
      ...(row.sealed_headers === null ? {} : { headers: JSON.parse(this.secrets.open(row.sealed_headers, headersAad(row.tenant_id, row.id))) as Record<string, string> }),
    }));
  }

  /** The tenant's rows, inside the erase's purge transaction. */
  static async purge(trx: Kysely<RuntimeSchema>, tenantId: string): Promise<number> {
    return Number((await trx.deleteFrom('user_mcp_servers').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows);
  }

  private rows(principal: Principal, db: Kysely<RuntimeSchema> = this.db): Promise<Row[]> {
    return db
      .selectFrom('user_mcp_servers')
      .selectAll()
      .where('tenant_id', '=', principal.tenantId)
      .where('owner', '=', principal.claims.sub)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }
}

function present(row: Row): UserMcpOut {
  return { id: row.id, name: row.name, url: row.url, transport: row.transport, header_names: row.header_names, created_at: row.created_at.toISOString() };
}
