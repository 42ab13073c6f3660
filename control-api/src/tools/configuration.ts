// The tools' part of what a project's runtime is told: each webhook tool with its signing secrets opened for the
// push (the runtime seals them at rest), the replaced one while its rotation's overlap lasts; each MCP server with
// its static headers opened.
import type { Kysely, Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import type { ControlSchema } from '../store/schema.js';

/** Binds a sealed signing secret to its project, tool and place. */
export const webhookSecretAad = (projectId: string, toolId: string, place: 'current' | 'previous') => `project:${projectId}:webhook-tool:${toolId}:${place}`;

/** Binds the sealed key of the project's web search engine to its project. */
export const webSearchKeyAad = (projectId: string) => `project:${projectId}:web-search:api-key`;

/** Binds an MCP server's sealed headers to its project and server. */
export const mcpHeadersAad = (projectId: string, serverId: string) => `project:${projectId}:mcp-server:${serverId}:headers`;

/** An MCP server as the runtime receives it, its headers in clear (the runtime seals them at rest). */
export interface PushedMcpServer {
  id: string;
  name: string;
  url: string;
  transport: 'auto' | 'streamable_http' | 'sse';
  headers?: Record<string, string>;
}

/** The project's MCP servers for its configuration push, headers opened. */
export async function pushedMcpServers(db: Kysely<ControlSchema> | Transaction<ControlSchema>, secrets: SecretBox, projectId: string): Promise<PushedMcpServer[]> {
  const rows = await db.selectFrom('mcp_servers').selectAll().where('project_id', '=', projectId).orderBy('name').execute();
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    url: row.url,
    transport: row.transport,
    ...(row.headers === null ? {} : { headers: JSON.parse(secrets.open(row.headers, mcpHeadersAad(projectId, row.id))) as Record<string, string> }),
  }));
}

/** The webhook tools as the runtime receives them, secrets in clear (the runtime seals them at rest). */
export interface PushedWebhookTool {
  id: string;
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  url: string;
  requires_approval: boolean;
  secrets: Array<{ secret: string; until?: string }>;
}

/** The project's tools for its configuration push, secrets opened; a replaced secret while it still signs. */
export async function pushedWebhookTools(db: Kysely<ControlSchema> | Transaction<ControlSchema>, secrets: SecretBox, projectId: string): Promise<PushedWebhookTool[]> {
  const rows = await db.selectFrom('webhook_tools').selectAll().where('project_id', '=', projectId).orderBy('name').execute();
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    description: row.description,
    parameters: row.parameters,
    url: row.url,
    requires_approval: row.requires_approval,
    secrets: [
      { secret: secrets.open(row.secret, webhookSecretAad(projectId, row.id, 'current')) },
      // Pushed with its end, not dropped when it passes: the runtime stops signing with it then, and the pushed
      // document stays the same content for its version.
      ...(row.previous_secret && row.previous_secret_until
        ? [{ secret: secrets.open(row.previous_secret, webhookSecretAad(projectId, row.id, 'previous')), until: row.previous_secret_until.toISOString() }]
        : []),
    ],
  }));
}
