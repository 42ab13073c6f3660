// Effective permission for one request (SPEC.md What the service does 9): project ceiling ∩ token ∩
// per-request flag, plus `allowed_tools` when set. Every route and tool asks this; a caller can decline but
// never exceed.
import { permissionDenied } from '../errors.js';
import {
  CATALOGUE,
  REQUEST_FLAGS,
  capabilityInfo,
  isCapability,
  modalitySide,
  type Capability,
  type RequestFlag,
} from './catalogue.js';
import { ceilingCapabilities, tighterLimit, type CapabilityCeiling, type Effort, type TokenGrant } from './grant.js';

/** The per-request part of ChatRequest. A flag set to false declines; unset (or true) declines nothing. */
export interface RequestFlags extends Partial<Record<RequestFlag, boolean>> {
  /** Narrows the tools of this request by name. */
  allowed_tools?: readonly string[];
  /** Narrows the skills of this request by name. */
  plugins?: readonly string[];
  /** Output kinds wanted (`image` or `output:image`); `output:image|audio|video` not listed are declined. */
  output_modalities?: readonly string[];
}

export interface EffectivePermission {
  readonly capabilities: ReadonlySet<Capability>;
  /** Per `enable_*` flag: whether that feature is on for this request (held, and not declined). */
  readonly switches: Readonly<Record<RequestFlag, boolean>>;
  /** Unset means any model the project registered. */
  readonly allowedModels: readonly string[] | undefined;
  readonly maxEffort: Effort | undefined;
  readonly maxToolIterations: number | undefined;
  readonly maxContextTokens: number | undefined;
  has(capability: Capability): boolean;
  /**
   * Whether the model may be offered (or may call) this tool: the capabilities the built-in rule names for
   * it and the ones the caller says it needs are all held, and no allow-list leaves it out.
   */
  toolAllowed(name: string, needs?: Capability | readonly Capability[] | null): boolean;
  /** Skills need no capability (SPEC.md Authentication 13); `enable_plugins` false or `plugins` decline them. */
  skillAllowed(name: string): boolean;
  modelAllowed(model: string): boolean;
}

/**
 * SPEC.md Authentication 11-12: built-in tools and the capability each needs, so no caller can offer one
 * without it. The `browser_*` family is matched by prefix in `builtinToolCapabilities`.
 */
export const BUILTIN_TOOL_CAPABILITIES: Readonly<Record<string, readonly Capability[]>> = {
  web_search: ['web_search'],
  browse_url: ['web_search'],
  screenshot_url: ['web_search'],
  ask_user: ['ask_user'],
  request_approval: ['approvals'],
  // The agent's computer (runtime/src/computers/tools.ts).
  run_command: ['computer'],
  read_file: ['computer'],
  write_file: ['computer'],
  // Handing a page over is part of the browser family and also has a capability of its own.
  browser_handoff: ['browser', 'browser_handoff'],
};

/**
 * Names the service's own tools take, today's and those it is to have: a tool a project publishes (a webhook tool)
 * may not take one, nor a name of the browser family, so a published tool never stands in for a built-in.
 */
const RESERVED_TOOL_NAMES = new Set([
  ...Object.keys(BUILTIN_TOOL_CAPABILITIES),
  'search_documents',
  'remember',
  'recall',
  'forget',
  'write_wiki_page',
  'todo',
  'load_skill',
  'delegate',
  'schedule_task',
]);

export function isReservedToolName(name: string): boolean {
  return RESERVED_TOOL_NAMES.has(name) || name.startsWith('browser_');
}

/** The capabilities a tool needs by its name alone; empty for a tool the built-in rule does not know. */
export function builtinToolCapabilities(name: string): readonly Capability[] {
  const listed = Object.hasOwn(BUILTIN_TOOL_CAPABILITIES, name) ? BUILTIN_TOOL_CAPABILITIES[name] : undefined;
  if (listed) return listed;
  return name.startsWith('browser_') ? ['browser'] : [];
}

/**
 * The token's capability list is taken literally: modality inheritance was resolved when it was issued, so an
 * empty `output:*` side here means none, and a token never gains what the ceiling adds after its mint.
 */
export function effectivePermission(input: {
  ceiling: CapabilityCeiling;
  token: TokenGrant;
  request?: RequestFlags;
}): EffectivePermission {
  const { ceiling, token } = input;
  const request = input.request ?? {};
  const allowed = ceilingCapabilities(ceiling);
  // isCapability guards against a name the catalogue no longer knows (a claim signed by an older release).
  const held = new Set(token.capabilities.filter((capability) => isCapability(capability) && allowed.has(capability)));

  const declined = (flag: RequestFlag) => request[flag] === false;
  const wantedOutputs =
    request.output_modalities === undefined
      ? undefined
      : new Set(request.output_modalities.map((kind) => (modalitySide(kind) === 'output' ? kind : `output:${kind}`)));

  const capabilities = new Set<Capability>();
  for (const capability of held) {
    const info = capabilityInfo(capability);
    if (info.flag === 'output_modalities') {
      if (wantedOutputs && !wantedOutputs.has(capability)) continue;
    } else if (info.flag !== null && info.flagScope !== 'controls' && declined(info.flag)) {
      continue;
    }
    capabilities.add(capability);
  }

  const switches = Object.fromEntries(
    REQUEST_FLAGS.map((flag) => {
      // Project skills need no capability, so `enable_plugins` is on unless declined.
      const backed = flag === 'enable_plugins' || CATALOGUE.some((row) => row.flag === flag && held.has(row.name));
      return [flag, backed && !declined(flag)];
    }),
  ) as Record<RequestFlag, boolean>;

  const toolLists = [token.allowedTools, request.allowed_tools].filter((list) => list !== undefined);
  const skills = request.plugins === undefined ? undefined : new Set(request.plugins);
  const models = token.allowedModels === undefined ? undefined : new Set(token.allowedModels);

  return {
    capabilities,
    switches,
    allowedModels: token.allowedModels,
    maxEffort: token.maxEffort,
    maxToolIterations: tighterLimit(token.maxToolIterations, ceiling.maxToolIterations),
    maxContextTokens: tighterLimit(token.maxContextTokens, ceiling.maxContextTokens),
    has: (capability) => capabilities.has(capability),
    toolAllowed(name, needs) {
      const extra = needs === undefined || needs === null ? [] : typeof needs === 'string' ? [needs] : needs;
      const required = [...builtinToolCapabilities(name), ...extra];
      return (
        required.every((capability) => capabilities.has(capability)) && toolLists.every((list) => list.includes(name))
      );
    },
    skillAllowed: (name) => switches.enable_plugins && (skills === undefined || skills.has(name)),
    modelAllowed: (model) => models === undefined || models.has(model),
  };
}

/** Refuses (403 `capability_denied`) a caller without `capability`, naming `what` needed it. */
export function requireCapability(permission: Pick<EffectivePermission, 'has'>, capability: Capability, what: string): void {
  if (!permission.has(capability)) throw permissionDenied(`${what} needs capability '${capability}', which this token does not hold`, { code: 'capability_denied' });
}
