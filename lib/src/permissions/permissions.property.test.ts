// Property-based tests: whatever a caller asks (ceilings, tokens, requests, narrowings drawn at random), it can
// decline but never exceed.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { CAPABILITIES, REQUEST_FLAGS, modalitySide, type Capability } from './catalogue.js';
import { effectivePermission, type EffectivePermission, type RequestFlags } from './effective.js';
import {
  DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
  EFFORTS,
  ceilingCapabilities,
  resolveRequestedCapabilities,
  type CapabilityCeiling,
  type Effort,
  type TokenClaims,
  type TokenGrant,
} from './grant.js';
import { clampMint, narrowClaims, type IssuedClaims, type NarrowRequest } from './narrowing.js';
import { isWithinScope } from './scope.js';

const MODELS = ['m1', 'm2', 'm3'];
const ROLES = ['admin', 'member', 'service', 'viewer'];
const GROUPS = ['everyone', 'ops'];
const TOOLS = [
  'web_search', 'browse_url', 'screenshot_url', 'browser_click', 'browser_handoff', 'ask_user', 'request_approval',
  'crm_lookup', 'notes',
];
const NAMES = [...CAPABILITIES, 'web-search', 'output:imag', 'input:smell', 'teleport'];

const sorted = <T extends string>(items: readonly T[]) => [...new Set(items)].sort();
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const seg = fc.constantFrom('a', 'b');
const segs = (min: number, max: number) => fc.array(seg, { minLength: min, maxLength: max });
const path = segs(1, 3).map((s) => s.join(':'));
const effort = fc.constantFrom(...EFFORTS);
const capabilitySet = fc.subarray([...CAPABILITIES]).map(sorted);
const limit = (max: number) => fc.integer({ min: 0, max });

const ceilingArb: fc.Arbitrary<CapabilityCeiling> = fc.record({
  capabilities: capabilitySet,
  readOnly: fc.boolean(),
  maxTokenLifetimeSeconds: maybe(fc.integer({ min: 1, max: 100_000 })),
  maxToolIterations: maybe(limit(30)),
  maxContextTokens: maybe(fc.integer({ min: 1, max: 50_000 })),
  defaultRoles: fc.subarray(ROLES),
  defaultGroups: fc.subarray(GROUPS),
});

const grantFields = {
  capabilities: capabilitySet,
  allowedTools: maybe(fc.subarray(TOOLS).map(sorted)),
  allowedModels: maybe(fc.subarray(MODELS).map(sorted)),
  maxEffort: maybe(effort),
  maxToolIterations: maybe(limit(30)),
  maxContextTokens: maybe(fc.integer({ min: 1, max: 50_000 })),
};
const tokenArb: fc.Arbitrary<TokenGrant> = fc.record(grantFields);

const requestArb: fc.Arbitrary<RequestFlags> = fc.record({
  ...Object.fromEntries(REQUEST_FLAGS.map((flag) => [flag, maybe(fc.boolean())])),
  allowed_tools: maybe(fc.subarray(TOOLS)),
  plugins: maybe(fc.subarray(['faq', 'billing'])),
  output_modalities: maybe(fc.subarray(['text', 'image', 'audio', 'video', 'output:image', 'file'])),
});

/** Every tool, bare and with each capability it may declare it needs. */
const everyTool = TOOLS.flatMap((name) => [undefined, ...CAPABILITIES].map((needs) => ({ name, needs })));

/** A parent token as issuance leaves it: scope a prefix of the subject, data scope (if any) under the scope. */
const parentArb: fc.Arbitrary<TokenClaims> = fc
  .record({
    subject: segs(1, 3),
    scopeDepth: fc.integer({ min: 1, max: 3 }),
    dataExtension: maybe(segs(0, 2)),
    roles: fc.subarray(ROLES).map(sorted),
    groups: fc.subarray(GROUPS).map(sorted),
    ...grantFields,
  })
  .map(({ subject, scopeDepth, dataExtension, ...rest }) => {
    const scope = subject.slice(0, Math.min(scopeDepth, subject.length));
    return {
      ...rest,
      subject: subject.join(':'),
      scope: scope.join(':'),
      ...(dataExtension ? { dataScope: [...scope, ...dataExtension].join(':') } : {}),
    };
  });

const narrowArb: fc.Arbitrary<NarrowRequest> = fc.record({
  subject: maybe(path),
  scope: maybe(path),
  dataScope: maybe(path),
  capabilities: maybe(fc.subarray(NAMES)),
  allowedModels: maybe(fc.subarray(MODELS)),
  allowedTools: maybe(fc.subarray(TOOLS)),
  roles: maybe(fc.subarray(ROLES)),
  groups: maybe(fc.subarray(GROUPS)),
  maxEffort: maybe(effort),
  maxToolIterations: maybe(limit(40)),
  maxContextTokens: maybe(fc.integer({ min: 1, max: 60_000 })),
  expiresIn: maybe(fc.integer({ min: 1, max: 200_000 })),
});

/**
 * A request the parent can grant: its own subject, a scope from its own down to its subject, a data scope under its
 * own; the other fields drawn as freely as `narrowArb` draws them (they only narrow, or warn). Drawn at random, a
 * request names another subject or scope almost every time and is refused (98 in 100), so the properties about
 * what is issued would check almost nothing without these.
 */
function grantableBy(parent: TokenClaims): fc.Arbitrary<NarrowRequest> {
  const { subject, scope, dataScope } = pathsGrantableBy(parent);
  return fc
    .tuple(narrowArb, fc.record({ subject: maybe(subject), scope: maybe(scope), dataScope: maybe(dataScope) }))
    .map(([free, within]) => ({ ...free, ...within }));
}

/** The subject, scopes and data scopes a request may name and still be granted by `parent`. */
function pathsGrantableBy(parent: TokenClaims): Paths {
  const subject = parent.subject.split(':');
  return {
    subject: fc.constant(parent.subject),
    scope: fc.integer({ min: parent.scope.split(':').length, max: subject.length }).map((depth) => subject.slice(0, depth).join(':')),
    dataScope: segs(0, 2).map((extra) => [parent.dataScope ?? parent.scope, ...extra].join(':')),
  };
}
type Paths = Record<'subject' | 'scope' | 'dataScope', fc.Arbitrary<string>>;

/** A parent and a request to narrow it: either anything at all (mostly refused) or one the parent can grant. */
const parentAndRequestArb = parentArb.chain((parent) => fc.tuple(fc.constant(parent), fc.oneof(narrowArb, grantableBy(parent))));

/**
 * A request at least as tight as `r1` in every field `r1` sets; free in the fields it leaves unset, where its paths
 * are drawn from `free` (any path by default).
 */
function tighterThan(r1: NarrowRequest, free: Paths = { subject: path, scope: path, dataScope: path }): fc.Arbitrary<NarrowRequest> {
  const under = (base: string) => segs(0, 1).map((extra) => [base, ...extra].join(':'));
  const subset = <T>(items: readonly T[]) => fc.subarray([...items]);
  const tighterCapabilities = (names: readonly string[]) =>
    subset(names).map((picked) => {
      // A side r1 names must stay named, or r2 would ask to inherit that side whole.
      const sides = new Set(picked.map(modalitySide));
      const keep = names.filter((name) => {
        const side = modalitySide(name);
        return side !== null && !sides.has(side) && (sides.add(side), true);
      });
      return [...picked, ...keep];
    });
  const dataScope =
    r1.dataScope !== undefined ? under(r1.dataScope) : r1.scope !== undefined ? maybe(under(r1.scope)) : maybe(free.dataScope);
  return fc.record({
    subject: r1.subject !== undefined ? under(r1.subject) : maybe(free.subject),
    scope: r1.scope !== undefined ? under(r1.scope) : maybe(free.scope),
    dataScope,
    capabilities: r1.capabilities !== undefined ? tighterCapabilities(r1.capabilities) : maybe(fc.subarray(NAMES)),
    allowedModels: r1.allowedModels !== undefined ? subset(r1.allowedModels) : maybe(fc.subarray(MODELS)),
    allowedTools: r1.allowedTools !== undefined ? subset(r1.allowedTools) : maybe(fc.subarray(TOOLS)),
    roles: r1.roles !== undefined ? subset(r1.roles) : maybe(fc.subarray(ROLES)),
    groups: r1.groups !== undefined ? subset(r1.groups) : maybe(fc.subarray(GROUPS)),
    maxEffort:
      r1.maxEffort !== undefined ? fc.constantFrom(...EFFORTS.slice(0, EFFORTS.indexOf(r1.maxEffort) + 1)) : maybe(effort),
    maxToolIterations: r1.maxToolIterations !== undefined ? limit(r1.maxToolIterations) : maybe(limit(40)),
    maxContextTokens:
      r1.maxContextTokens !== undefined
        ? fc.integer({ min: 1, max: r1.maxContextTokens })
        : maybe(fc.integer({ min: 1, max: 60_000 })),
    expiresIn: maybe(fc.integer({ min: 1, max: 200_000 })),
  });
}

/** Runs a narrowing; a refusal must be one of the typed ones, and answers undefined. */
function tryNarrow(parent: TokenClaims, request: NarrowRequest, project: CapabilityCeiling): IssuedClaims | undefined {
  try {
    return narrowClaims(parent, request, project);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect(['permission_denied', 'invalid_argument']).toContain((error as AppError).kind);
    return undefined;
  }
}

const subsetOf = <T>(a: Iterable<T>, b: Iterable<T>) => {
  const container = new Set(b);
  return [...a].every((item) => container.has(item));
};
const effortRank = (value: Effort | undefined) => (value === undefined ? EFFORTS.length : EFFORTS.indexOf(value));
const atMost = (child: number | undefined, parent: number | undefined) =>
  parent === undefined || (child !== undefined && child <= parent);

/** Everything `narrower` allows, `wider` allows too. */
function expectWithin(narrower: EffectivePermission, wider: EffectivePermission) {
  expect(subsetOf(narrower.capabilities, wider.capabilities)).toBe(true);
  for (const flag of REQUEST_FLAGS) if (narrower.switches[flag]) expect(wider.switches[flag]).toBe(true);
  for (const name of TOOLS) {
    for (const needs of [undefined, ...CAPABILITIES]) {
      if (narrower.toolAllowed(name, needs)) expect(wider.toolAllowed(name, needs)).toBe(true);
    }
  }
  for (const skill of ['faq', 'billing']) if (narrower.skillAllowed(skill)) expect(wider.skillAllowed(skill)).toBe(true);
  for (const model of MODELS) if (narrower.modelAllowed(model)) expect(wider.modelAllowed(model)).toBe(true);
  expect(effortRank(narrower.maxEffort)).toBeLessThanOrEqual(effortRank(wider.maxEffort));
  expect(atMost(narrower.maxToolIterations, wider.maxToolIterations)).toBe(true);
  expect(atMost(narrower.maxContextTokens, wider.maxContextTokens)).toBe(true);
}

describe('effective permission, for any ceiling, token and request', () => {
  it('is within the ceiling and within the token', () => {
    fc.assert(
      fc.property(ceilingArb, tokenArb, requestArb, (ceiling, token, request) => {
        const { capabilities } = effectivePermission({ ceiling, token, request });
        expect(subsetOf(capabilities, ceilingCapabilities(ceiling))).toBe(true);
        expect(subsetOf(capabilities, token.capabilities)).toBe(true);
        if (ceiling.readOnly) expect(capabilities.has('documents:write')).toBe(false);
      }),
    );
  });

  it('holds for tokens minted from any requested names: inherited modalities stay within the ceiling', () => {
    fc.assert(
      fc.property(ceilingArb, fc.subarray(NAMES), requestArb, (ceiling, names, request) => {
        const { granted } = resolveRequestedCapabilities(names, ceiling);
        expect(subsetOf(granted, ceilingCapabilities(ceiling))).toBe(true);
        const known = new Set<string>(names);
        for (const capability of granted) {
          // Anything granted was asked for by name, or inherited on a side the request named nothing of.
          const side = modalitySide(capability);
          const inherited = side !== null && !names.some((name) => modalitySide(name) === side);
          expect(known.has(capability) || inherited).toBe(true);
        }
        const { capabilities } = effectivePermission({ ceiling, token: { capabilities: granted }, request });
        expect(subsetOf(capabilities, ceilingCapabilities(ceiling))).toBe(true);
      }),
    );
  });

  it('any request can only decline: never more than with no request at all', () => {
    fc.assert(
      fc.property(ceilingArb, tokenArb, requestArb, (ceiling, token, request) => {
        expectWithin(effectivePermission({ ceiling, token, request }), effectivePermission({ ceiling, token }));
      }),
    );
  });

  it('declining one more flag never adds anything', () => {
    fc.assert(
      fc.property(ceilingArb, tokenArb, requestArb, fc.constantFrom(...REQUEST_FLAGS), (ceiling, token, request, flag) => {
        expectWithin(
          effectivePermission({ ceiling, token, request: { ...request, [flag]: false } }),
          effectivePermission({ ceiling, token, request }),
        );
      }),
    );
  });

  // A random tool is allowed in about 3 runs in 100, so these two ask about every tool, with every capability it
  // may need, and count the runs in which one was allowed (about a third): those are the runs that checked something.
  const TOOL_RUNS = 300;
  it('allowed_tools only removes tools, and never changes the capabilities', () => {
    let checked = 0;
    fc.assert(
      fc.property(ceilingArb, tokenArb, requestArb, fc.subarray(TOOLS), (ceiling, token, request, list) => {
        const without = effectivePermission({ ceiling, token, request: { ...request, allowed_tools: undefined } });
        const withList = effectivePermission({ ceiling, token, request: { ...request, allowed_tools: list } });
        expect([...withList.capabilities]).toEqual([...without.capabilities]);
        const allowed = everyTool.filter((tool) => withList.toolAllowed(tool.name, tool.needs));
        for (const tool of allowed) {
          expect(without.toolAllowed(tool.name, tool.needs)).toBe(true);
          expect(list).toContain(tool.name);
        }
        if (allowed.length > 0) checked += 1;
      }),
      { numRuns: TOOL_RUNS },
    );
    expect(checked).toBeGreaterThanOrEqual(TOOL_RUNS / 5);
  });

  it('a tool is allowed only with every capability the network rule names for it', () => {
    let checked = 0;
    fc.assert(
      fc.property(ceilingArb, tokenArb, requestArb, (ceiling, token, request) => {
        const permission = effectivePermission({ ceiling, token, request });
        const allowed = everyTool.filter((tool) => permission.toolAllowed(tool.name, tool.needs));
        for (const tool of allowed) {
          const network = ['web_search', 'browse_url', 'screenshot_url'].includes(tool.name);
          if (network) expect(permission.has('web_search')).toBe(true);
          if (tool.name.startsWith('browser_')) expect(permission.has('browser')).toBe(true);
          if (tool.name === 'ask_user') expect(permission.has('ask_user')).toBe(true);
          if (tool.name === 'request_approval') expect(permission.has('approvals')).toBe(true);
          if (tool.needs) expect(permission.has(tool.needs)).toBe(true);
        }
        if (allowed.length > 0) checked += 1;
      }),
      { numRuns: TOOL_RUNS },
    );
    expect(checked).toBeGreaterThanOrEqual(TOOL_RUNS / 5);
  });
});

describe('minting, for any request', () => {
  it('stays within the project: capabilities, lifetime and limits', () => {
    const mintArb = fc.record({
      subject: path,
      capabilities: maybe(fc.subarray(NAMES)),
      roles: maybe(fc.subarray(ROLES)),
      maxEffort: maybe(effort),
      maxToolIterations: maybe(limit(40)),
      maxContextTokens: maybe(fc.integer({ min: 1, max: 60_000 })),
      expiresIn: maybe(fc.integer({ min: 1, max: 200_000 })),
    });
    fc.assert(
      fc.property(ceilingArb, mintArb, (ceiling, request) => {
        const { claims, expiresIn, warnings } = clampMint(request, ceiling);
        expect(subsetOf(claims.capabilities, ceilingCapabilities(ceiling))).toBe(true);
        expect(expiresIn).toBeLessThanOrEqual(ceiling.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS);
        expect(atMost(claims.maxToolIterations, ceiling.maxToolIterations)).toBe(true);
        expect(atMost(claims.maxContextTokens, ceiling.maxContextTokens)).toBe(true);
        expect(subsetOf(ceiling.defaultRoles ?? [], claims.roles)).toBe(true);
        const privileged = claims.roles.some((role) => ['admin', 'owner', 'service'].includes(role));
        expect(warnings.some((warning) => warning.startsWith('role '))).toBe(privileged);
      }),
    );
  });

  it('is deterministic: order and duplicates of the requested names do not matter', () => {
    fc.assert(
      fc.property(ceilingArb, fc.subarray(NAMES), (ceiling, names) => {
        const shuffled = [...names].reverse().concat(names.slice(0, 2));
        expect(resolveRequestedCapabilities(shuffled, ceiling)).toEqual(resolveRequestedCapabilities(names, ceiling));
      }),
    );
  });
});

describe('narrowing, for any parent and request', () => {
  it('never widens any claim', () => {
    fc.assert(
      fc.property(ceilingArb, parentAndRequestArb, (project, [parent, request]) => {
        const issued = tryNarrow(parent, request, project);
        // A refusal was checked by tryNarrow (a typed one). fast-check draws again for a run fc.pre skips, and fails
        // when too many are skipped: every run it counts, here and below, checked issued claims.
        fc.pre(issued !== undefined);
        const { claims: child, expiresIn } = issued!;
        const held = parent.capabilities.filter((capability) => ceilingCapabilities(project).has(capability));
        expect(subsetOf(child.capabilities, held)).toBe(true);
        expect(isWithinScope(child.subject, parent.subject)).toBe(true);
        expect(isWithinScope(child.scope, parent.scope)).toBe(true);
        expect(isWithinScope(child.subject, child.scope)).toBe(true);
        expect(isWithinScope(child.dataScope ?? child.scope, parent.dataScope ?? parent.scope)).toBe(true);
        if (parent.allowedModels) expect(subsetOf(child.allowedModels ?? MODELS, parent.allowedModels)).toBe(true);
        if (parent.allowedTools) expect(subsetOf(child.allowedTools ?? TOOLS, parent.allowedTools)).toBe(true);
        expect(subsetOf(child.roles, parent.roles)).toBe(true);
        expect(subsetOf(child.groups, parent.groups)).toBe(true);
        expect(effortRank(child.maxEffort)).toBeLessThanOrEqual(effortRank(parent.maxEffort));
        expect(atMost(child.maxToolIterations, parent.maxToolIterations)).toBe(true);
        expect(atMost(child.maxContextTokens, parent.maxContextTokens)).toBe(true);
        expect(atMost(child.maxToolIterations, project.maxToolIterations)).toBe(true);
        expect(atMost(child.maxContextTokens, project.maxContextTokens)).toBe(true);
        expect(expiresIn).toBeLessThanOrEqual(project.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS);
      }),
    );
  });

  it('the child can do nothing the parent cannot, whatever either request asks', () => {
    fc.assert(
      fc.property(ceilingArb, parentAndRequestArb, requestArb, (project, [parent, request], flags) => {
        const issued = tryNarrow(parent, request, project);
        fc.pre(issued !== undefined);
        expectWithin(
          effectivePermission({ ceiling: project, token: issued!.claims, request: flags }),
          effectivePermission({ ceiling: project, token: parent, request: flags }),
        );
      }),
    );
  });

  it('narrowing twice equals narrowing once with the tighter request', () => {
    // Paths r1 leaves unset are drawn for r2 either at random or among those the parent grants, so that both
    // refusals and issued claims are compared often.
    const requests = parentAndRequestArb.chain(([parent, r1]) => {
      const grantable = pathsGrantableBy(parent);
      const free = { subject: fc.oneof(path, grantable.subject), scope: fc.oneof(path, grantable.scope), dataScope: fc.oneof(path, grantable.dataScope) };
      return tighterThan(r1, free).map((r2) => [parent, r1, r2] as const);
    });
    let compared = 0;
    fc.assert(
      fc.property(ceilingArb, requests, (project, [parent, r1, r2]) => {
        const first = tryNarrow(parent, r1, project);
        fc.pre(first !== undefined);
        const twice = tryNarrow(first!.claims, r2, project);
        const once = tryNarrow(parent, r2, project);
        expect(twice === undefined).toBe(once === undefined);
        if (twice && once) {
          compared += 1;
          expect(twice.claims).toEqual(once.claims);
          expect(twice.expiresIn).toBe(once.expiresIn);
        }
      }),
      { numRuns: 500 },
    );
    // Refusals must agree too, but issued claims were compared in a fair share of the runs (about 3 in 10).
    expect(compared).toBeGreaterThanOrEqual(500 / 5);
  });

  it('narrowing with the same request again changes nothing', () => {
    fc.assert(
      fc.property(ceilingArb, parentAndRequestArb, (project, [parent, request]) => {
        const first = tryNarrow(parent, request, project);
        fc.pre(first !== undefined);
        const again = narrowClaims(first!.claims, request, project);
        expect(again.claims).toEqual(first!.claims);
      }),
    );
  });

  it('never yields documents:write in a read-only project', () => {
    fc.assert(
      fc.property(ceilingArb, parentAndRequestArb, (project, [parent, request]) => {
        const issued = tryNarrow(parent, request, { ...project, readOnly: true });
        fc.pre(issued !== undefined);
        expect(issued!.claims.capabilities).not.toContain('documents:write' satisfies Capability);
      }),
    );
  });
});

describe('scopes', () => {
  it('within is reflexive and transitive, and a sibling with a longer name is never within', () => {
    fc.assert(
      fc.property(path, path, path, (a, b, c) => {
        expect(isWithinScope(a, a)).toBe(true);
        if (isWithinScope(a, b) && isWithinScope(b, c)) expect(isWithinScope(a, c)).toBe(true);
        expect(isWithinScope(`${a}2`, a)).toBe(false);
        expect(isWithinScope(`${a}:${b}`, a)).toBe(true);
      }),
    );
  });
});
