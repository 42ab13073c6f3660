// SPEC.md's Capabilities table as data (name, group, what it grants, the per-request switch that can decline
// it) and the privileged roles. Everything else in lib/src/permissions reads from here, never from a copy.

export const CAPABILITY_GROUPS = [
  'Conversation',
  'Knowledge',
  'Internet',
  'Agentic',
  'Human in the loop',
  'Extensions',
  'In and out',
] as const;
export type CapabilityGroup = (typeof CAPABILITY_GROUPS)[number];

/** Every per-request `enable_*` flag of ChatRequest. */
export const REQUEST_FLAGS = [
  'enable_rag',
  'enable_memory',
  'enable_web_search',
  'enable_browser',
  'enable_todo',
  'enable_decisions',
  'enable_computer',
  'enable_subagents',
  'enable_scheduling',
  'enable_ask_user',
  'enable_approvals',
  'enable_widgets',
  'enable_auto_title',
  'enable_voice_control',
  'enable_webhook_tools',
  'enable_plugins',
  'enable_action_space',
] as const;
export type RequestFlag = (typeof REQUEST_FLAGS)[number];

/** What lets one request decline a capability: an `enable_*` flag, the `output_modalities` list, or nothing. */
export type PerRequestSwitch = RequestFlag | 'output_modalities' | null;

interface CatalogueRow {
  readonly name: string;
  readonly group: CapabilityGroup;
  readonly grants: string;
  readonly flag: PerRequestSwitch;
  /**
   * `controls`: the flag switches only some controls of the capability and never declines the capability
   * itself (SPEC.md: `enable_voice_control` is "hold, resume controls only").
   */
  readonly flagScope?: 'controls';
}

const rows = [
  { name: 'chat', group: 'Conversation', grants: 'conversations', flag: null },
  { name: 'system_prompt', group: 'Conversation', grants: "per-request system message (project's wins)", flag: null },
  { name: 'steer', group: 'Conversation', grants: 'message into a running turn', flag: null },
  {
    name: 'voice',
    group: 'Conversation',
    grants: 'live full-duplex call',
    flag: 'enable_voice_control',
    flagScope: 'controls',
  },
  { name: 'documents:read', group: 'Knowledge', grants: 'search', flag: 'enable_rag' },
  {
    name: 'documents:write',
    group: 'Knowledge',
    grants: 'upload and manage (read-only project never mints write)',
    flag: 'enable_rag',
  },
  { name: 'memory', group: 'Knowledge', grants: 'durable memory and wiki', flag: 'enable_memory' },
  { name: 'web_search', group: 'Internet', grants: 'web search and page reads', flag: 'enable_web_search' },
  { name: 'browser', group: 'Internet', grants: 'drive a browser', flag: 'enable_browser' },
  { name: 'browser_handoff', group: 'Internet', grants: 'hand a page to the user', flag: null },
  { name: 'todo', group: 'Agentic', grants: 'plan across a conversation', flag: 'enable_todo' },
  { name: 'decisions', group: 'Agentic', grants: 'typed questions to a decision model', flag: 'enable_decisions' },
  { name: 'computer', group: 'Agentic', grants: 'sandboxed compute', flag: 'enable_computer' },
  { name: 'subagents', group: 'Agentic', grants: 'work handed to another agent', flag: 'enable_subagents' },
  { name: 'tasks:read', group: 'Agentic', grants: 'scheduling', flag: 'enable_scheduling' },
  { name: 'tasks:write', group: 'Agentic', grants: 'scheduling', flag: 'enable_scheduling' },
  { name: 'triggers', group: 'Agentic', grants: 'webhook triggers end-users may create', flag: null },
  { name: 'ask_user', group: 'Human in the loop', grants: 'pause on a question', flag: 'enable_ask_user' },
  {
    name: 'approvals',
    group: 'Human in the loop',
    grants: 'stop before something irreversible',
    flag: 'enable_approvals',
  },
  { name: 'widgets', group: 'Human in the loop', grants: 'interactive widgets', flag: 'enable_widgets' },
  { name: 'ui_tools', group: 'Human in the loop', grants: 'components drawn in the UI', flag: null },
  { name: 'voice:transfer', group: 'Human in the loop', grants: 'hand a caller to a person', flag: null },
  { name: 'followups', group: 'Human in the loop', grants: 'suggested next messages', flag: null },
  { name: 'recap', group: 'Human in the loop', grants: 'one-line recap', flag: null },
  { name: 'auto_title', group: 'Human in the loop', grants: 'title each conversation', flag: 'enable_auto_title' },
  { name: 'webhook_tools', group: 'Extensions', grants: 'call published webhook tools', flag: 'enable_webhook_tools' },
  { name: 'mcp:manage', group: 'Extensions', grants: 'end-users attach MCP servers', flag: null },
  { name: 'plugins:write', group: 'Extensions', grants: 'end-users upload skills', flag: 'enable_plugins' },
  {
    name: 'action_space',
    group: 'Extensions',
    grants: 'relevance-based tool pre-selection',
    flag: 'enable_action_space',
  },
  { name: 'input:file', group: 'In and out', grants: 'any attachment; unperceivable content read as text', flag: null },
  { name: 'input:image', group: 'In and out', grants: 'model perceives directly', flag: null },
  { name: 'input:audio', group: 'In and out', grants: 'model perceives directly', flag: null },
  { name: 'input:video', group: 'In and out', grants: 'model perceives directly', flag: null },
  { name: 'output:file', group: 'In and out', grants: 'hand back any produced file', flag: null },
  { name: 'output:image', group: 'In and out', grants: 'model generates that kind', flag: 'output_modalities' },
  { name: 'output:audio', group: 'In and out', grants: 'model generates that kind', flag: 'output_modalities' },
  { name: 'output:video', group: 'In and out', grants: 'model generates that kind', flag: 'output_modalities' },
] as const satisfies readonly CatalogueRow[];

export type Capability = (typeof rows)[number]['name'];

export interface CapabilityInfo extends CatalogueRow {
  readonly name: Capability;
}

/** The whole table, in SPEC.md's order. */
export const CATALOGUE: readonly CapabilityInfo[] = rows;

export const CAPABILITIES: readonly Capability[] = rows.map((row) => row.name);

const byName = new Map<string, CapabilityInfo>(rows.map((row) => [row.name, row]));

export function isCapability(name: string): name is Capability {
  return byName.has(name);
}

export function capabilityInfo(name: Capability): CapabilityInfo {
  return byName.get(name)!;
}

/** Keeps the names the catalogue knows, e.g. when reading claims back from a token this service signed. */
export function knownCapabilities(names: readonly string[]): Capability[] {
  return [...new Set(names.filter(isCapability))].sort();
}

export const MODALITY_KINDS = ['file', 'image', 'audio', 'video'] as const;
export type ModalityKind = (typeof MODALITY_KINDS)[number];
export type ModalitySide = 'input' | 'output';
export const MODALITY_SIDES: readonly ModalitySide[] = ['input', 'output'];

/**
 * The modality side a name speaks about, by its prefix alone: `output:imag` (a typo) still names the output
 * side, so a misspelt narrowing fails closed instead of silently inheriting every output kind.
 */
export function modalitySide(name: string): ModalitySide | null {
  if (name.startsWith('input:')) return 'input';
  if (name.startsWith('output:')) return 'output';
  return null;
}

/** Roles that carry privilege (SPEC.md Authentication 6). Matched exactly: `Admin` is an ordinary role. */
export const PRIVILEGED_ROLES = ['admin', 'owner', 'service'] as const;
export type PrivilegedRole = (typeof PRIVILEGED_ROLES)[number];

const privileged = new Set<string>(PRIVILEGED_ROLES);

/** Whether any of these roles is privileged. Groups never are, so they are not an argument here. */
export function isPrivileged(roles: readonly string[]): boolean {
  return roles.some((role) => privileged.has(role));
}

/** The privileged roles among these, sorted. */
export function privilegedRoles(roles: readonly string[]): PrivilegedRole[] {
  return [...new Set(roles.filter((role): role is PrivilegedRole => privileged.has(role)))].sort();
}
