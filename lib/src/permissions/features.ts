// What this build implements, per capability and per `enable_*` switch: the catalogue names every capability SPEC.md
// lists, a ceiling may grant any of them, but only those a registered feature serves do anything yet. `/capabilities`
// offers only the switches a feature backs, and the mint warns of a grant nothing serves (docs/decisions/0030).
// A feature lands by registering here, in the change that builds it; the runtime checks its own against this list.
import { CATALOGUE, type Capability, type RequestFlag } from './catalogue.js';

export interface Feature {
  /** Where it is built, for people. */
  readonly name: string;
  /** The capabilities it gives something to. */
  readonly capabilities: readonly Capability[];
  /** Switches it honours beyond its capabilities' own (project skills need no capability, yet `enable_plugins` declines them). */
  readonly flags?: readonly RequestFlag[];
}

/** Every feature of this build. */
export const FEATURES: readonly Feature[] = [
  { name: 'conversations (runtime/src/chat, runtime/src/sessions)', capabilities: ['chat', 'system_prompt', 'steer'] },
  { name: 'built-in pauses (runtime/src/chat/tools.ts)', capabilities: ['ask_user', 'approvals'] },
  { name: 'generations beside the turn (runtime/src/chat/side.ts)', capabilities: ['auto_title', 'followups', 'recap'] },
  { name: 'documents and retrieval (runtime/src/documents)', capabilities: ['documents:read', 'documents:write'] },
  { name: 'memory and the wiki (runtime/src/memory)', capabilities: ['memory'] },
  { name: 'webhook tools and MCP servers (runtime/src/tools)', capabilities: ['webhook_tools', 'mcp:manage'] },
  { name: "the agent's plan (runtime/src/sessions/todos.ts)", capabilities: ['todo'] },
  { name: 'web search and page reads (runtime/src/tools/web.ts)', capabilities: ['web_search'] },
  { name: 'subagents (runtime/src/chat/subagents.ts)', capabilities: ['subagents'] },
  { name: 'skills (runtime/src/skills)', capabilities: ['plugins:write'], flags: ['enable_plugins'] },
  { name: 'scheduled tasks (runtime/src/tasks)', capabilities: ['tasks:read', 'tasks:write'] },
  { name: 'webhook triggers (runtime/src/triggers)', capabilities: ['triggers'] },
  { name: 'sandboxes and the agent\'s computer (runtime/src/computers)', capabilities: ['computer'] },
  { name: "the agent's browser and its hand-off (runtime/src/browsers)", capabilities: ['browser', 'browser_handoff'] },
];

const served = new Set<Capability>(FEATURES.flatMap((feature) => feature.capabilities));

/** Whether anything in this build serves the capability. */
export function isImplemented(capability: Capability): boolean {
  return served.has(capability);
}

/** The `enable_*` switches some feature honours: a capability it serves has the switch, or it names the switch itself. */
export const IMPLEMENTED_FLAGS: readonly RequestFlag[] = [
  ...new Set<RequestFlag>([
    ...CATALOGUE.flatMap((row) => (row.flag !== null && row.flag !== 'output_modalities' && served.has(row.name) ? [row.flag] : [])),
    ...FEATURES.flatMap((feature) => feature.flags ?? []),
  ]),
].sort();

/** The mint's warning for each granted capability nothing serves yet, in the order given. */
export function unimplementedWarnings(granted: readonly Capability[]): string[] {
  return granted.filter((capability) => !served.has(capability)).map((capability) => `granted capability '${capability}' has nothing behind it yet`);
}
