// Skills (SPEC.md Skill, Authentication 13; docs/decisions/0056): packages the project publishes (on the control
// plane, through the admin surface) and packages an end-user with `plugins:write` uploads for themselves, added on
// top of the project's. Skills need no capability; `enable_plugins` false declines them for a request and `plugins`
// narrows them by name. A turn is told each skill's name and description in its system prompt and loads a skill's
// instructions, or one of its files, with `load_skill` when it needs them (progressive disclosure).
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { conflict, notFound, permissionDenied } from '@agentplane/lib/errors';
import { storableText } from '@agentplane/lib/http/text';
import { checkUrl, type UrlPolicy } from '@agentplane/lib/net/url-guard';
import { requireCapability, type EffectivePermission } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import type { ServerTool } from '../chat/tools.js';
import type { PubSub } from '@agentplane/lib/events/port';
import { silentLogger, type Logger } from '@agentplane/lib/logging';
import type { PluginsTable, RuntimeSchema } from '../store/schema.js';
import type { McpServer } from '../tools/mcp.js';
import { unpack, type PackageUpload } from './archive.js';
import { frontmatterOf, SKILL_FILE, skillPackage, type PackagedMcpServer } from './package.js';

/**
 * How long a tenant's skill list is kept before it is read again. Another replica's upload or removal is heard at
 * once on the event bus (`PLUGIN_CHANGES_CHANNEL`); the time limit covers a notice lost on the way (pub/sub is at most
 * once).
 */
const SKILLS_TTL_MS = 10_000;
export const PLUGIN_CHANGES_CHANNEL = 'runtime:plugin-changes';
/** What load_skill hands the model of one file. */
const MAX_LOADED_CHARS = 20_000;

type PluginRow = Selectable<PluginsTable>;

export interface PluginOut {
  id: string;
  name: string;
  visibility: 'project' | 'private';
  owner_subject: string | null;
  skills: Array<{ name: string; description: string }>;
  mcp_servers: string[];
  warnings: string[];
  created_at: string;
}

/** A skill a caller may use: where it is and what it says it does. */
interface VisibleSkill {
  pluginId: string;
  name: string;
  description: string;
  dir: string;
}

const pluginNotFound = (id: string) => notFound(`plugin ${id} not found`);
const mcpAad = (tenantId: string, pluginId: string) => `tenant:${tenantId}:plugin:${pluginId}:mcp-servers`;

export class SkillService {
  private readonly kept = new Map<string, { at: number; rows: PluginRow[] }>();

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly secrets: SecretBox,
    private readonly urlPolicy: UrlPolicy,
    private readonly now: () => number = Date.now,
    /** The event bus the replicas tell each other of a tenant's changed packages on. */
    private readonly pubsub?: PubSub,
    private readonly logger: Logger = silentLogger(),
  ) {}

  /** Drops a tenant's kept list when another replica says it changed; resolves to the way to stop listening. */
  listen(): Promise<() => Promise<void>> {
    if (!this.pubsub) return Promise.resolve(async () => {});
    return this.pubsub.subscribe(PLUGIN_CHANGES_CHANNEL, (message) => {
      const tenantId = (message as { tenant_id?: unknown } | null)?.tenant_id;
      if (typeof tenantId === 'string') this.kept.delete(tenantId);
    });
  }

  /** This replica changed a tenant's packages: its list goes stale now, the others' when they hear. */
  private async changed(tenantId: string): Promise<void> {
    this.kept.delete(tenantId);
    await this.pubsub?.publish(PLUGIN_CHANGES_CHANNEL, { tenant_id: tenantId }).catch((error: unknown) =>
      this.logger.warn({ err: error, tenant_id: tenantId }, `could not tell the other replicas a tenant's skills changed; their lists stay at most ${SKILLS_TTL_MS} ms old`),
    );
  }

  /** Uploading needs capability `plugins:write`. */
  authorizeUpload(principal: Principal): void {
    requireCapability(principal.permission, 'plugins:write', 'uploading skills');
  }

  /** An end-user's upload, private to them. */
  async uploadOwn(principal: Principal, upload: PackageUpload): Promise<PluginOut> {
    this.authorizeUpload(principal);
    return this.store(principal.tenantId, principal.claims.sub, upload);
  }

  /** The project's upload, visible to every end-user of the project (the admin surface, for the control plane). */
  uploadProject(tenantId: string, upload: PackageUpload): Promise<PluginOut> {
    return this.store(tenantId, null, upload);
  }

  /** The project's packages and the caller's own. */
  async listVisible(principal: Principal): Promise<PluginOut[]> {
    return (await this.rows(principal.tenantId)).filter((row) => row.owner === null || row.owner === principal.claims.sub).map(present);
  }

  /** Every package of the tenant, the project's and each end-user's (the control plane's listing). */
  async listAll(tenantId: string): Promise<PluginOut[]> {
    return (await this.rows(tenantId)).map(present);
  }

  /** Removes the caller's own package; the project's is removed on the control plane (403), another's is unseen (404). */
  async removeOwn(principal: Principal, id: string): Promise<PluginOut> {
    const row = (await this.rows(principal.tenantId)).find((candidate) => candidate.id === id);
    if (!row || (row.owner !== null && row.owner !== principal.claims.sub)) throw pluginNotFound(id);
    if (row.owner === null) throw permissionDenied(`plugin ${id} is the project's: it is removed on the control plane`, { code: 'not_owner' });
    return this.delete(principal.tenantId, row);
  }

  async removeAny(tenantId: string, id: string): Promise<PluginOut> {
    const row = (await this.rows(tenantId)).find((candidate) => candidate.id === id);
    if (!row) throw pluginNotFound(id);
    return this.delete(tenantId, row);
  }

  /** The skills a turn of this caller may use under `permission` (enable_plugins, plugins). */
  async skillsFor(principal: Principal, permission: EffectivePermission): Promise<VisibleSkill[]> {
    const rows = await this.rows(principal.tenantId);
    const seen = new Set<string>();
    const skills: VisibleSkill[] = [];
    // The caller's own first: added on top, an own skill of a project skill's name is theirs.
    for (const row of [...rows.filter((r) => r.owner === principal.claims.sub), ...rows.filter((r) => r.owner === null)]) {
      for (const skill of row.skills) {
        if (seen.has(skill.name) || !permission.skillAllowed(skill.name)) continue;
        seen.add(skill.name);
        skills.push({ pluginId: row.id, ...skill });
      }
    }
    return skills;
  }

  /**
   * The MCP servers the caller's visible packages bring (their mcp.json): the project's packages', and the caller's
   * own packages' apart (offered only under `mcp:manage`, as servers a person attaches are).
   */
  async mcpServersFor(principal: Principal): Promise<{ project: McpServer[]; personal: McpServer[] }> {
    const rows = (await this.rows(principal.tenantId)).filter((row) => row.sealed_mcp_servers !== null && (row.owner === null || row.owner === principal.claims.sub));
    const serversOf = (of: PluginRow[]) => of.flatMap((row) =>
      (JSON.parse(this.secrets.open(row.sealed_mcp_servers!, mcpAad(row.tenant_id, row.id))) as PackagedMcpServer[]).map((server) => ({
        id: `plugin:${row.id}:${server.name}`,
        name: server.name,
        url: server.url,
        transport: 'auto' as const,
        headers: server.headers,
      })),
    );
    return { project: serversOf(rows.filter((row) => row.owner === null)), personal: serversOf(rows.filter((row) => row.owner !== null)) };
  }

  /** `load_skill` for a turn that may use `skills`, and what the system prompt says of them; none without skills. */
  toolFor(tenantId: string, skills: VisibleSkill[]): ServerTool | undefined {
    if (skills.length === 0) return undefined;
    const byName = new Map(skills.map((skill) => [skill.name, skill]));
    return {
      needs: [],
      origin: 'skill',
      guidance: [
        'You have skills: instructions for particular kinds of work, with files beside them. When a request matches a skill, load it with load_skill before you start, and follow it.',
        ...skills.map((skill) => `- ${skill.name}: ${skill.description}`),
      ].join('\n'),
      definition: {
        name: 'load_skill',
        description: "Load a skill's instructions (its SKILL.md), or one of its files (a reference or a script) by its path within the skill.",
        parameters: {
          type: 'object',
          properties: {
            name: { type: 'string', enum: skills.map((skill) => skill.name), description: 'The skill' },
            file: { type: 'string', description: 'A file of the skill, such as references/forms.md; omit for its instructions' },
          },
          required: ['name'],
        },
      },
      run: async (args) => {
        const skill = typeof args.name === 'string' ? byName.get(args.name) : undefined;
        if (!skill) return { ok: false, message: `There is no skill '${String(args.name)}' here; the skills are: ${skills.map((s) => s.name).join(', ')}.` };
        const prefix = skill.dir === '' ? '' : `${skill.dir}/`;
        const rows = await this.db.selectFrom('plugin_files').select(['path', 'content']).where('plugin_id', '=', skill.pluginId).execute();
        // PGlite answers bytea as a Uint8Array, pg as a Buffer.
        const files = rows.map((row) => ({ path: row.path, text: Buffer.from(row.content).toString('utf8') }));
        const own = files.filter((file) => file.path.startsWith(prefix) && file.path !== 'plugin.json' && file.path !== 'mcp.json');
        if (typeof args.file === 'string' && args.file.trim() !== '') {
          const wanted = `${prefix}${args.file.trim().replace(/^\.?\//, '')}`;
          const file = own.find((candidate) => candidate.path === wanted);
          if (!file) return { ok: false, message: `Skill ${skill.name} has no file ${args.file}; it has: ${own.map((f) => f.path.slice(prefix.length)).join(', ')}.` };
          return { ok: true, text: storableText(file.text).slice(0, MAX_LOADED_CHARS) };
        }
        const main = own.find((file) => file.path === `${prefix}${SKILL_FILE}`);
        const body = main ? (frontmatterOf(main.text)?.body ?? '') : '';
        const others = own.map((file) => file.path.slice(prefix.length)).filter((path) => path !== SKILL_FILE);
        const listing = others.length > 0 ? `\n\nFiles of this skill (load one with load_skill and its path): ${others.join(', ')}` : '';
        return { ok: true, text: storableText(`${body.trim()}${listing}`).slice(0, MAX_LOADED_CHARS) };
      },
    };
  }

  /** Rows purged with the tenant (their files go with them). */
  static async purge(trx: Kysely<RuntimeSchema>, tenantId: string): Promise<number> {
    return Number((await trx.deleteFrom('plugins').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows);
  }

  private async store(tenantId: string, owner: string | null, upload: PackageUpload): Promise<PluginOut> {
    const files = await unpack(upload);
    const single = !upload.files?.length && files.size === 1 && files.has(SKILL_FILE);
    // An archive's own name (never its path) names the package when plugin.json does not.
    const archiveName = upload.file?.filename?.split(/[\\/]/).at(-1);
    const read = skillPackage(files, single ? undefined : archiveName);
    // An mcp.json server at an address the guard refuses is left out here, named, rather than offered to fail.
    for (const server of [...read.mcpServers]) {
      try {
        await checkUrl(server.url, this.urlPolicy, `mcp.json server '${server.name}'`);
      } catch (error) {
        read.mcpServers.splice(read.mcpServers.indexOf(server), 1);
        read.warnings.push(`mcp.json: server '${server.name}' skipped: ${error instanceof Error ? error.message : 'its url is refused'}`.slice(0, 500));
      }
    }
    // A skill name is one skill for whoever sees it: not twice among the project's, nor twice among a person's own.
    const taken = new Set((await this.rows(tenantId, true)).filter((row) => row.owner === owner).flatMap((row) => row.skills.map((skill) => skill.name)));
    const clash = read.skills.find((skill) => taken.has(skill.name));
    if (clash) throw conflict(`a skill named '${clash.name}' is already published ${owner === null ? 'for the project' : 'by you'}; remove that package first`, { code: 'name_taken' });
    const id = randomUUID();
    const row = await this.db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto('plugins')
        .values({
          id,
          tenant_id: tenantId,
          owner,
          name: read.name,
          manifest: JSON.stringify(read.manifest),
          skills: JSON.stringify(read.skills),
          sealed_mcp_servers: read.mcpServers.length > 0 ? this.secrets.seal(JSON.stringify(read.mcpServers), mcpAad(tenantId, id)) : null,
          warnings: JSON.stringify(read.warnings),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      const entries = [...read.files].map(([path, content]) => ({ plugin_id: id, path, content }));
      for (let at = 0; at < entries.length; at += 100) await trx.insertInto('plugin_files').values(entries.slice(at, at + 100)).execute();
      return inserted;
    });
    await this.changed(tenantId);
    return present(row);
  }

  private async delete(tenantId: string, row: PluginRow): Promise<PluginOut> {
    await this.db.deleteFrom('plugins').where('tenant_id', '=', tenantId).where('id', '=', row.id).execute();
    await this.changed(tenantId);
    return present(row);
  }

  /** The tenant's packages, kept a few seconds so a turn does not read them each time. */
  private async rows(tenantId: string, fresh = false): Promise<PluginRow[]> {
    const kept = this.kept.get(tenantId);
    if (!fresh && kept && this.now() - kept.at < SKILLS_TTL_MS) return kept.rows;
    const rows = await this.db.selectFrom('plugins').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
    this.kept.set(tenantId, { at: this.now(), rows });
    return rows;
  }
}

function present(row: PluginRow): PluginOut {
  return {
    id: row.id,
    name: row.name,
    visibility: row.owner === null ? 'project' : 'private',
    owner_subject: row.owner,
    skills: row.skills.map(({ name, description }) => ({ name, description })),
    mcp_servers: [],
    warnings: row.warnings,
    created_at: row.created_at.toISOString(),
  };
}
