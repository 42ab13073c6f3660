// What a skill package holds (SPEC.md Skill; docs/decisions/0056): each file named exactly SKILL.md is a skill,
// published under the `name` of its YAML frontmatter (not its folder's), with its `description`; the files beside it
// (references/, scripts/ and the rest of its folder) go with it. plugin.json is kept as supplied, or written when
// absent. mcp.json registers its servers reached over HTTP; a stdio server is refused. Whatever is left out comes
// back in `warnings`, named.
import { parse } from 'yaml';
import { invalidArgument } from '@agentplane/lib/errors';
import { storableText, textProblem, untextualFields } from '@agentplane/lib/http/text';
import { nestedDeeperThan } from '@agentplane/lib/schemas/json';
import { MCP_HEADER_NAME, MCP_HEADER_VALUE, MCP_SERVER_NAME, STDIO_MCP_REFUSED } from '@agentplane/lib/mcp';

export const SKILL_FILE = 'SKILL.md';

const SKILL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const MAX_DESCRIPTION = 1_024;
/** How deep a supplied plugin.json may nest. */
const MAX_MANIFEST_DEPTH = 32;

/** At most `length` code points of `text`: a cut never leaves half a surrogate pair. */
const cut = (text: string, length: number) => Array.from(text).slice(0, length).join('');

export interface PackagedSkill {
  name: string;
  description: string;
  /** The folder of its SKILL.md in the package ('' at the root). */
  dir: string;
}

export interface PackagedMcpServer {
  name: string;
  url: string;
  headers?: Record<string, string>;
}

export interface SkillPackage {
  name: string;
  manifest: Record<string, unknown>;
  skills: PackagedSkill[];
  mcpServers: PackagedMcpServer[];
  /** Every file kept, by path. */
  files: Map<string, Buffer>;
  warnings: string[];
}

const dirOf = (path: string) => (path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '');
const within = (path: string, dir: string) => dir === '' || path.startsWith(`${dir}/`);

/** A SKILL.md's frontmatter and body; null when it has no frontmatter block. */
export function frontmatterOf(text: string): { data: Record<string, unknown>; body: string } | null {
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  if (!match) return null;
  let data: unknown;
  try {
    data = parse(match[1]!, { maxAliasCount: 10 });
  } catch {
    return null;
  }
  return data !== null && typeof data === 'object' && !Array.isArray(data) ? { data: data as Record<string, unknown>, body: match[2]! } : null;
}

/** The package made of `files`, named `fallbackName` when neither plugin.json nor a skill names it. */
export function skillPackage(files: Map<string, Buffer>, fallbackName: string | undefined): SkillPackage {
  const warnings: string[] = [];
  const skills: PackagedSkill[] = [];
  for (const [path, bytes] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    if (path.split('/').at(-1) !== SKILL_FILE) continue;
    const text = bytes.toString('utf8');
    const front = frontmatterOf(text);
    const name = typeof front?.data.name === 'string' ? front.data.name.trim() : '';
    const description = typeof front?.data.description === 'string' ? front.data.description.trim() : '';
    if (!front || name === '' || description === '') {
      warnings.push(`${path}: skipped, its frontmatter needs a name and a description`);
      continue;
    }
    if (textProblem(description) !== null) {
      warnings.push(`${path}: skipped, its description ${textProblem(description)}`);
      continue;
    }
    if (!SKILL_NAME.test(name)) {
      warnings.push(`${path}: skipped, its name '${name.slice(0, 80)}' is not 1-64 letters, digits, _, . or -`);
      continue;
    }
    if (skills.some((skill) => skill.name === name)) {
      warnings.push(`${path}: skipped, another SKILL.md of the package is already named '${name}'`);
      continue;
    }
    skills.push({ name, description: cut(description, MAX_DESCRIPTION), dir: dirOf(path) });
  }

  let manifest: Record<string, unknown> | undefined;
  const suppliedManifest = files.get('plugin.json');
  if (suppliedManifest) {
    try {
      const parsed: unknown = JSON.parse(suppliedManifest.toString('utf8'));
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
      manifest = parsed as Record<string, unknown>;
    } catch {
      throw invalidArgument('plugin.json is not a JSON object', { code: 'invalid_package' });
    }
    if (nestedDeeperThan(manifest, MAX_MANIFEST_DEPTH)) throw invalidArgument(`plugin.json nests deeper than ${MAX_MANIFEST_DEPTH} levels`, { code: 'invalid_package' });
    const problems = untextualFields(manifest, 'plugin.json');
    if (problems.length > 0) throw invalidArgument(`${problems[0]!.loc.join('.')}: ${problems[0]!.msg}`, { code: 'invalid_package' });
  }

  const mcpServers: PackagedMcpServer[] = [];
  const mcp = files.get('mcp.json');
  if (mcp) {
    let servers: Record<string, unknown> = {};
    try {
      const parsed = JSON.parse(mcp.toString('utf8')) as { mcpServers?: unknown };
      if (parsed.mcpServers && typeof parsed.mcpServers === 'object') servers = parsed.mcpServers as Record<string, unknown>;
    } catch {
      warnings.push('mcp.json: skipped, it is not JSON');
    }
    for (const [name, raw] of Object.entries(servers)) {
      const server = (raw ?? {}) as { url?: unknown; command?: unknown; type?: unknown; headers?: unknown };
      if (server.command !== undefined || server.type === 'stdio') {
        warnings.push(`mcp.json: server '${name}' refused: ${STDIO_MCP_REFUSED}`);
        continue;
      }
      if (!MCP_SERVER_NAME.test(name) || typeof server.url !== 'string' || !/^https?:\/\//i.test(server.url)) {
        warnings.push(`mcp.json: server '${name}' skipped: it needs a lower-case name of at most 24 characters and an http(s) url`);
        continue;
      }
      const headers = server.headers && typeof server.headers === 'object' ? Object.fromEntries(Object.entries(server.headers).filter(([, value]) => typeof value === 'string')) : undefined;
      if (untextualFields({ url: server.url, headers }, 'mcp.json').length > 0 || Object.entries(headers ?? {}).some(([key, value]) => !MCP_HEADER_NAME.test(key) || !MCP_HEADER_VALUE.test(String(value)))) {
        warnings.push(`mcp.json: server '${name}' skipped: its url or headers hold characters a request cannot carry`);
        continue;
      }
      mcpServers.push({ name, url: server.url, ...(headers && Object.keys(headers).length > 0 ? { headers: headers as Record<string, string> } : {}) });
    }
  }

  // What is kept: each skill's folder, and the package's own two files.
  const kept = new Map<string, Buffer>();
  for (const [path, bytes] of files) {
    if (path === 'plugin.json' || path === 'mcp.json' || skills.some((skill) => within(path, skill.dir))) kept.set(path, bytes);
    else warnings.push(`${path}: skipped, it belongs to no skill`);
  }
  if (skills.length === 0) throw invalidArgument(`the package has no skill: a skill is a file named exactly ${SKILL_FILE} whose frontmatter has a name and a description`, { code: 'invalid_package' });

  const name =
    (typeof manifest?.name === 'string' && manifest.name.trim() !== '' ? manifest.name.trim() : undefined) ??
    (fallbackName ? fallbackName.replace(/\.(zip|tar\.gz|tgz|md)$/i, '').trim() || undefined : undefined) ??
    skills[0]!.name;
  if (!manifest) {
    manifest = { name, version: '1.0.0', description: skills.map((skill) => skill.description).join(' ').slice(0, 500), skills: skills.map((skill) => skill.name) };
    kept.set('plugin.json', Buffer.from(JSON.stringify(manifest, null, 2)));
  }
  // Whatever came from the upload's own words (a file name, a refused skill's name) is made storable text.
  return { name: cut(storableText(name), 128), manifest, skills, mcpServers, files: kept, warnings: warnings.map((warning) => cut(storableText(warning), 500)) };
}
