// Issuing claims: the mint path (a project key asks, the project's ceiling bounds) and the narrowing path
// (`POST /auth/token`: a token asks for a child, its own claims bound). Either can only keep or tighten.
import { invalidArgument, permissionDenied } from '../errors.js';
import { privilegedRoles, type Capability } from './catalogue.js';
import {
  DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
  DEFAULT_TOKEN_LIFETIME_SECONDS,
  ceilingCapabilities,
  intersectAllowList,
  isEffort,
  resolveAgainst,
  resolveRequestedCapabilities,
  tighterEffort,
  tighterLimit,
  type CapabilityCeiling,
  type Effort,
  type TokenClaims,
} from './grant.js';
import { isWithinScope, requirePath, resolveScope } from './scope.js';

/** SPEC.md "End-user token request", in the domain's names. */
export interface MintRequest {
  subject: string;
  scope?: string;
  /** Omitted: the whole ceiling. */
  capabilities?: readonly string[];
  roles?: readonly string[];
  groups?: readonly string[];
  models?: readonly string[];
  maxEffort?: Effort;
  maxToolIterations?: number;
  maxContextTokens?: number;
  expiresIn?: number;
}

/** SPEC.md "Narrow-token fields". Anything omitted keeps the calling token's value. */
export interface NarrowRequest {
  /** `user_ref` on the wire. */
  subject?: string;
  capabilities?: readonly string[];
  scope?: string;
  dataScope?: string;
  allowedModels?: readonly string[];
  allowedTools?: readonly string[];
  roles?: readonly string[];
  groups?: readonly string[];
  maxEffort?: Effort;
  maxToolIterations?: number;
  maxContextTokens?: number;
  expiresIn?: number;
}

/** Claims ready to sign, the lifetime to sign them for, and the response's `warnings`. */
export interface IssuedClaims {
  claims: TokenClaims;
  expiresIn: number;
  warnings: string[];
}

/** SPEC.md Errors rule 1: a model the project did not register, named anywhere, in these words. */
export function modelNotAvailable(model: string, registered: readonly string[]) {
  return invalidArgument(`model '${model}' is not available to this project. Registered: ${[...registered].sort().join(', ')}`);
}

/** Refuses the first of `models` the project does not register; unset `registered` means registration is not checked. */
export function requireRegisteredModels(models: readonly string[] | undefined, registered: readonly string[] | undefined): void {
  if (!models || !registered) return;
  const unknown = models.find((model) => !registered.includes(model));
  if (unknown !== undefined) throw modelNotAvailable(unknown, registered);
}

/** The mint path: every field of the request clamped against the project's ceiling and maxima. */
export function clampMint(request: MintRequest, ceiling: CapabilityCeiling): IssuedClaims {
  const scope = resolveScope(request.subject, request.scope);
  const { granted, warnings } = resolveRequestedCapabilities(
    request.capabilities ?? [...ceilingCapabilities(ceiling)],
    ceiling,
  );
  const models = request.models === undefined ? undefined : [...new Set(request.models)].sort();
  requireRegisteredModels(models, ceiling.registeredModels);
  const roles = union(ceiling.defaultRoles, request.roles);
  const claims: TokenClaims = {
    subject: request.subject,
    scope,
    capabilities: granted,
    roles,
    groups: union(ceiling.defaultGroups, request.groups),
    ...defined({
      allowedModels: models,
      maxEffort: checkedEffort(request.maxEffort),
      maxToolIterations: tighterLimit(
        checkedCount('maxToolIterations', request.maxToolIterations, 0),
        ceiling.maxToolIterations,
      ),
      maxContextTokens: tighterLimit(
        checkedCount('maxContextTokens', request.maxContextTokens, 1),
        ceiling.maxContextTokens,
      ),
    }),
  };
  return {
    claims,
    expiresIn: clampLifetime(request.expiresIn, ceiling),
    warnings: [...warnings, ...privilegeWarnings(roles)],
  };
}

/**
 * The narrowing path: a child of `parent` with every claim intersected or clamped against the parent's (and
 * the project's, which may have tightened since the parent was issued). A limit the parent lacks may be set
 * on the child; one the parent has is never loosened. Refuses a subject or scope outside the parent's.
 */
export function narrowClaims(parent: TokenClaims, requested: NarrowRequest, project: CapabilityCeiling): IssuedClaims {
  // The child is the parent's own subject, never another: whatever the parent's roles or scope, acting as any
  // other path (a sibling, or a user under the parent's path) would read that user's `self` documents, which not
  // even a privileged token sees. A child narrows what the subject may do, not who it is.
  const subject = requested.subject ?? parent.subject;
  requirePath('user_ref', subject);
  if (subject !== parent.subject) {
    throw permissionDenied(`user_ref '${subject}' is not the calling token's subject '${parent.subject}': a narrowed token acts as the same subject`);
  }
  const scope = requested.scope ?? parent.scope;
  requirePath('scope', scope);
  if (!isWithinScope(scope, parent.scope)) {
    throw permissionDenied(`scope '${scope}' is outside the calling token's scope '${parent.scope}'`);
  }
  if (!isWithinScope(subject, scope)) {
    throw invalidArgument(`scope '${scope}' must be the subject '${subject}' or a prefix of it`);
  }
  const parentDataScope = parent.dataScope ?? parent.scope;
  const dataScope = requested.dataScope ?? parent.dataScope;
  if (dataScope !== undefined) {
    requirePath('data_scope', dataScope);
    if (!isWithinScope(dataScope, parentDataScope)) {
      throw permissionDenied(
        `data_scope '${dataScope}' is outside the calling token's data scope '${parentDataScope}'`,
      );
    }
  }

  const allowed = ceilingCapabilities(project);
  const available = new Set<Capability>(parent.capabilities.filter((capability) => allowed.has(capability)));
  const { granted, warnings } = resolveAgainst(requested.capabilities ?? [...available], available, {
    readOnly: project.readOnly === true,
    holder: 'the calling token',
  });
  const allowedModels = intersectAllowList(parent.allowedModels, requested.allowedModels);
  for (const model of requested.allowedModels ?? []) {
    if (!allowedModels?.includes(model)) {
      warnings.push(`model '${model}' was not allowed: the calling token may not use it`);
    }
  }
  const roles = intersectAllowList(parent.roles, requested.roles) ?? [];

  const claims: TokenClaims = {
    subject,
    scope,
    capabilities: granted,
    roles,
    groups: intersectAllowList(parent.groups, requested.groups) ?? [],
    ...defined({
      dataScope,
      allowedModels,
      allowedTools: intersectAllowList(parent.allowedTools, requested.allowedTools),
      maxEffort: tighterEffort(parent.maxEffort, checkedEffort(requested.maxEffort)),
      maxToolIterations: tighterLimit(
        parent.maxToolIterations,
        checkedCount('maxToolIterations', requested.maxToolIterations, 0),
        project.maxToolIterations,
      ),
      maxContextTokens: tighterLimit(
        parent.maxContextTokens,
        checkedCount('maxContextTokens', requested.maxContextTokens, 1),
        project.maxContextTokens,
      ),
    }),
  };
  // SPEC.md Authentication 7: clamped against the project's maximum, not the parent's remaining life.
  return {
    claims,
    expiresIn: clampLifetime(requested.expiresIn, project),
    warnings: [...warnings, ...privilegeWarnings(roles)],
  };
}

function clampLifetime(expiresIn: number | undefined, ceiling: CapabilityCeiling): number {
  const wanted = checkedCount('expiresIn', expiresIn, 1) ?? DEFAULT_TOKEN_LIFETIME_SECONDS;
  return Math.min(wanted, ceiling.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS);
}

function privilegeWarnings(roles: readonly string[]): string[] {
  return privilegedRoles(roles).map(
    (role) =>
      `role '${role}' is privileged: the token reads every end-user's sessions, documents and memory in the project`,
  );
}

/** Whole numbers at or above `min`; the schema at the edge should already have said so, this holds the line. */
function checkedCount(field: string, value: number | undefined, min: number): number | undefined {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < min)) {
    throw invalidArgument(`${field} must be a whole number of at least ${min}`);
  }
  return value;
}

function checkedEffort(value: string | undefined): Effort | undefined {
  if (value !== undefined && !isEffort(value)) {
    throw invalidArgument(`maxEffort must be one of minimal, low, medium, high`);
  }
  return value;
}

function union(a: readonly string[] | undefined, b: readonly string[] | undefined): string[] {
  return [...new Set([...(a ?? []), ...(b ?? [])])].sort();
}

/** Drops unset optional claims so two equal claim sets compare equal and nothing `undefined` is signed. */
function defined<T extends object>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Partial<T>;
}
