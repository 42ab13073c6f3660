// What a caller may call (SPEC.md `GET /tools`): the same tool set a turn of theirs would be offered (the same
// permission arithmetic over the same server tools), each with where it comes from and whether it waits for
// approval, and what the loader says of each MCP server they reach. Client tools are declared by each chat request,
// so none is listed here.
import { effectivePermission, type RequestFlags } from '@agentplane/lib/permissions';
import { claimsFromToken } from '@agentplane/lib/tokens/permission-claims';
import type { Principal } from '../auth/authenticate.js';
import type { ToolRegistry } from '../chat/tool-registry.js';
import { ToolSet } from '../chat/tools.js';
import type { McpServer, McpTools } from './mcp.js';
import type { UserMcpServers } from './user-mcp.js';

export interface ToolListing {
  tools: Array<{ name: string; description: string; origin: 'builtin' | 'webhook' | 'mcp' | 'skill'; requires_approval: boolean }>;
  mcp_servers: Array<{ name: string; origin: 'project' | 'personal'; ok: boolean; verdict: string | null; tools: number }>;
}

export class ToolCatalog {
  constructor(
    private readonly deps: {
      tools: ToolRegistry;
      mcp: McpTools;
      userMcp: UserMcpServers;
    },
  ) {}

  async list(principal: Principal, flags: RequestFlags): Promise<ToolListing> {
    const permission = effectivePermission({ ceiling: principal.configuration.document.ceiling, token: claimsFromToken(principal.claims), request: flags });
    const set = ToolSet.forTurn(permission, {}, await this.deps.tools.forTurn({ principal, permission, request: {} }));
    const servers: Array<{ server: McpServer; origin: 'project' | 'personal' }> = [
      ...(principal.configuration.document.mcp_servers ?? []).map((server) => ({ server, origin: 'project' as const })),
      ...(await this.deps.userMcp.serversOf(principal)).map((server) => ({ server, origin: 'personal' as const })),
    ];
    return {
      tools: set.list().map((tool) => ({
        name: tool.definition.name,
        description: tool.definition.description ?? '',
        origin: tool.server?.origin ?? 'builtin',
        requires_approval: tool.requiresApproval,
      })),
      mcp_servers: await Promise.all(
        servers.map(async ({ server, origin }) => {
          const load = await this.deps.mcp.load(server);
          return { name: server.name, origin, ok: load.verdict === null, verdict: load.verdict, tools: load.tools.length };
        }),
      ),
    };
  }
}
