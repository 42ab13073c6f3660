// What a project allows and what a token holds, and how a requested capability list becomes a grant: unknown
// names dropped with a hint, names outside the ceiling dropped with a warning, modalities inherited.
import {
  CAPABILITIES,
  MODALITY_SIDES,
  isCapability,
  modalitySide,
  type Capability,
} from './catalogue.js';

export const EFFORTS = ['minimal', 'low', 'medium', 'high'] as const;
export type Effort = (typeof EFFORTS)[number];

/** SPEC.md Limits: a token lives 3600 seconds unless the mint asks otherwise. */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 3600;
/** SPEC.md leaves the maximum `expires_in` unshown; a project without its own maximum gets one day. */
export const DEFAULT_MAX_TOKEN_LIFETIME_SECONDS = 86_400;

/** A project's capability ceiling and maxima: nothing minted or narrowed in the project goes beyond these. */
export interface CapabilityCeiling {
  capabilities: readonly Capability[] | ReadonlySet<Capability>;
  /** A read-only project never grants `documents:write`, even when its list names it. */
  readOnly?: boolean;
  /** Longest `expires_in` a token of this project may get; `DEFAULT_MAX_TOKEN_LIFETIME_SECONDS` when unset. */
  maxTokenLifetimeSeconds?: number;
  /** Unset means unlimited. */
  maxToolIterations?: number;
  /** Unset means unlimited. */
  maxContextTokens?: number;
  /** Added to every minted token's own roles and groups. */
  defaultRoles?: readonly string[];
  defaultGroups?: readonly string[];
  /** Models the project registered; when given, a mint naming another model is refused. */
  registeredModels?: readonly string[];
}

/** What a token holds. Its capability list is literal: modality inheritance was resolved when it was issued. */
export interface TokenGrant {
  capabilities: readonly Capability[];
  /** Tool names the token may use; unset means no restriction beyond capabilities. */
  allowedTools?: readonly string[];
  /** Unset means any registered model; an empty list means none. */
  allowedModels?: readonly string[];
  maxEffort?: Effort;
  maxToolIterations?: number;
  maxContextTokens?: number;
}

/** A token's full claims: its grant plus who it is and what it sees. */
export interface TokenClaims extends TokenGrant {
  /** Identity path; owns what it creates (`user_ref` on the wire of `/auth/token`). */
  subject: string;
  /** Visibility prefix: the token sees the subtree under it. */
  scope: string;
  /** Visibility prefix for data; unset means the same as `scope`. */
  dataScope?: string;
  roles: readonly string[];
  groups: readonly string[];
}

export interface RequestedCapabilities {
  /** Sorted. */
  granted: Capability[];
  /** One line per requested name that was not granted, in sorted order of the names. */
  warnings: string[];
}

/** The capabilities a ceiling really allows: a read-only project's ceiling never holds `documents:write`. */
export function ceilingCapabilities(ceiling: CapabilityCeiling): Set<Capability> {
  const allowed = new Set(ceiling.capabilities);
  if (ceiling.readOnly) allowed.delete('documents:write');
  return allowed;
}

/** The mint path: a requested capability list against the project's ceiling. */
export function resolveRequestedCapabilities(
  requested: readonly string[],
  ceiling: CapabilityCeiling,
): RequestedCapabilities {
  return resolveAgainst(requested, ceilingCapabilities(ceiling), {
    readOnly: ceiling.readOnly === true,
    holder: "the project's ceiling",
  });
}

/**
 * A requested list against whatever may be handed on (`available`): the project's ceiling when minting, the
 * caller's own capabilities within the ceiling when narrowing. `holder` names that source in warnings.
 */
export function resolveAgainst(
  requested: readonly string[],
  available: ReadonlySet<Capability>,
  options: { readOnly: boolean; holder: string },
): RequestedCapabilities {
  const granted = new Set<Capability>();
  const warnings: string[] = [];
  for (const name of [...new Set(requested)].sort()) {
    if (!isCapability(name)) {
      const hint = didYouMean(name);
      warnings.push(`unknown capability '${name}' was not granted${hint ? `; did you mean '${hint}'?` : ''}`);
    } else if (name === 'documents:write' && options.readOnly) {
      warnings.push("capability 'documents:write' was not granted: the project is read-only");
    } else if (!available.has(name)) {
      warnings.push(`capability '${name}' was not granted: it is not in ${options.holder}`);
    } else {
      granted.add(name);
    }
  }
  for (const capability of inheritModalities(requested, available)) granted.add(capability);
  return { granted: [...granted].sort(), warnings };
}

/**
 * SPEC.md Authentication 10: for each side (`input:*`, `output:*`) the request names nothing of, every
 * available capability of that side is inherited. A side the request names is not inherited at all, so it
 * holds exactly what was listed (and available). Returns only the inherited capabilities.
 */
export function inheritModalities(requested: readonly string[], available: Iterable<Capability>): Capability[] {
  const named = new Set(requested.map(modalitySide));
  const inherited = MODALITY_SIDES.filter((side) => !named.has(side));
  return [...available].filter((capability) => {
    const side = modalitySide(capability);
    return side !== null && inherited.includes(side);
  });
}

/** The catalogue name closest to a misspelt one, when it is close enough to be a likely typo. */
export function didYouMean(name: string): Capability | undefined {
  const wanted = name.trim().toLowerCase();
  const tolerance = Math.max(1, Math.floor(wanted.length / 4));
  let best: { capability: Capability; distance: number } | undefined;
  for (const capability of CAPABILITIES) {
    const distance = editDistance(wanted, capability);
    // CAPABILITIES is in a fixed order, so ties resolve the same way every time.
    if (distance <= tolerance && (!best || distance < best.distance)) best = { capability, distance };
  }
  return best?.capability;
}

/** Optimal string alignment distance: Levenshtein plus adjacent transpositions (`memroy` is one edit away). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number) => rows[i]![j]!;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        distance = Math.min(distance, at(i - 2, j - 2) + 1);
      }
      rows[i]![j] = distance;
    }
  }
  return at(a.length, b.length);
}

export function isEffort(value: string): value is Effort {
  return (EFFORTS as readonly string[]).includes(value);
}

/** The lower of two effort ceilings; unset means no ceiling, so the other one applies. */
export function tighterEffort(a: Effort | undefined, b: Effort | undefined): Effort | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return EFFORTS.indexOf(a) <= EFFORTS.indexOf(b) ? a : b;
}

/** The lowest of several numeric ceilings; unset ones mean unlimited and do not count. */
export function tighterLimit(...limits: (number | undefined)[]): number | undefined {
  const set = limits.filter((limit): limit is number => limit !== undefined);
  return set.length === 0 ? undefined : Math.min(...set);
}

/** Intersection of two allow-lists where unset means "everything"; sorted, so claims compare by value. */
export function intersectAllowList(
  a: readonly string[] | undefined,
  b: readonly string[] | undefined,
): string[] | undefined {
  if (a === undefined && b === undefined) return undefined;
  if (a === undefined) return [...new Set(b)].sort();
  if (b === undefined) return [...new Set(a)].sort();
  const other = new Set(b);
  return [...new Set(a.filter((item) => other.has(item)))].sort();
}
