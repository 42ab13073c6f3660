import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { CAPABILITIES, type Capability } from './catalogue.js';
import type { CapabilityCeiling, TokenClaims } from './grant.js';
import { clampMint, narrowClaims } from './narrowing.js';

const project: CapabilityCeiling = {
  capabilities: CAPABILITIES,
  maxTokenLifetimeSeconds: 7200,
  maxToolIterations: 10,
  maxContextTokens: 32_000,
  defaultRoles: ['member'],
  defaultGroups: ['everyone'],
  registeredModels: ['gpt-a', 'gpt-b', 'gpt-c'],
};

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return error.kind;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('clampMint', () => {
  it('applies defaults: lifetime 3600, scope = subject, project roles and groups, the project’s limits', () => {
    const { claims, expiresIn, warnings } = clampMint({ subject: 'acme:u1', capabilities: ['chat'] }, project);
    expect(expiresIn).toBe(3600);
    expect(warnings).toEqual([]);
    expect(claims).toMatchObject({
      subject: 'acme:u1',
      scope: 'acme:u1',
      roles: ['member'],
      groups: ['everyone'],
      maxToolIterations: 10,
      maxContextTokens: 32_000,
    });
    expect(claims.allowedModels).toBeUndefined();
    expect(claims.maxEffort).toBeUndefined();
  });

  it('clamps lifetime and limits to the project’s maxima; a mint can only narrow them', () => {
    const { claims, expiresIn } = clampMint(
      { subject: 'acme:u1', expiresIn: 999_999, maxToolIterations: 50, maxContextTokens: 8000 },
      project,
    );
    expect(expiresIn).toBe(7200);
    expect(claims.maxToolIterations).toBe(10);
    expect(claims.maxContextTokens).toBe(8000);
    expect(clampMint({ subject: 'a', expiresIn: 999_999 }, { capabilities: [] }).expiresIn).toBe(86_400);
  });

  it('leaves the tool-loop unlimited when neither the mint nor the project sets one', () => {
    expect(clampMint({ subject: 'a' }, { capabilities: ['chat'] }).claims.maxToolIterations).toBeUndefined();
  });

  it('adds requested roles and groups to the defaults, and warns when a privileged role is granted', () => {
    const { claims, warnings } = clampMint({ subject: 'acme:ops', roles: ['admin', 'viewer'], groups: ['ops'] }, project);
    expect(claims.roles).toEqual(['admin', 'member', 'viewer']);
    expect(claims.groups).toEqual(['everyone', 'ops']);
    expect(warnings).toEqual([
      "role 'admin' is privileged: the token reads every end-user's sessions, documents and memory in the project",
    ]);
    expect(clampMint({ subject: 'a' }, { capabilities: [], defaultRoles: ['service'] }).warnings).toHaveLength(1);
    expect(clampMint({ subject: 'a', groups: ['admin'] }, project).warnings).toEqual([]);
  });

  it('reports unknown and trimmed capabilities as warnings, with a hint', () => {
    const { claims, warnings } = clampMint(
      { subject: 'a', capabilities: ['chat', 'web-search', 'browser'] },
      { capabilities: ['chat', 'web_search'] as Capability[] },
    );
    expect(claims.capabilities).toEqual(['chat']);
    expect(warnings).toEqual([
      "capability 'browser' was not granted: it is not in the project's ceiling",
      "unknown capability 'web-search' was not granted; did you mean 'web_search'?",
    ]);
  });

  it('grants the whole ceiling when no capabilities are asked for', () => {
    const ceiling = { capabilities: ['chat', 'documents:write', 'output:file'] as Capability[], readOnly: true };
    expect(clampMint({ subject: 'a' }, ceiling)).toMatchObject({
      claims: { capabilities: ['chat', 'output:file'] },
      warnings: [],
    });
  });

  it('refuses a scope that is not a prefix of the subject, an unregistered model and bad numbers', () => {
    expect(refusal(() => clampMint({ subject: 'acme:u1', scope: 'acme2' }, project))).toBe('invalid_argument');
    expect(refusal(() => clampMint({ subject: 'acme:u1', models: ['gpt-z'] }, project))).toBe('invalid_argument');
    expect(() => clampMint({ subject: 'acme:u1', models: ['gpt-z'] }, project)).toThrow(
      "model 'gpt-z' is not available to this project. Registered: gpt-a, gpt-b, gpt-c",
    );
    expect(refusal(() => clampMint({ subject: 'a', expiresIn: 0 }, project))).toBe('invalid_argument');
    expect(refusal(() => clampMint({ subject: 'a', maxToolIterations: 1.5 }, project))).toBe('invalid_argument');
    expect(refusal(() => clampMint({ subject: 'a', maxEffort: 'extreme' as 'high' }, project))).toBe('invalid_argument');
    const deduplicated = clampMint({ subject: 'a', models: ['gpt-b', 'gpt-a', 'gpt-b'] }, project);
    expect(deduplicated.claims.allowedModels).toEqual(['gpt-a', 'gpt-b']);
  });
});

describe('narrowClaims (POST /auth/token)', () => {
  const parent: TokenClaims = {
    subject: 'acme:u1',
    scope: 'acme',
    capabilities: ['chat', 'documents:read', 'output:file', 'output:image', 'web_search'],
    roles: ['member', 'viewer'],
    groups: ['everyone'],
    allowedModels: ['gpt-a', 'gpt-b'],
    maxEffort: 'medium',
    maxToolIterations: 6,
  };

  it('with nothing asked, the child equals the parent (within the project) and lives the default lifetime', () => {
    const { claims, expiresIn, warnings } = narrowClaims(parent, {}, project);
    expect({ ...claims, maxContextTokens: undefined }).toEqual({ ...parent, maxContextTokens: undefined });
    expect(claims.maxContextTokens).toBe(32_000);
    expect(expiresIn).toBe(3600);
    expect(warnings).toEqual([]);
  });

  it('intersects capabilities and models, with warnings for what the caller does not hold', () => {
    const { claims, warnings } = narrowClaims(
      parent,
      { capabilities: ['chat', 'browser'], allowedModels: ['gpt-b', 'gpt-c'] },
      project,
    );
    expect(claims.capabilities).toEqual(['chat', 'output:file', 'output:image']);
    expect(claims.allowedModels).toEqual(['gpt-b']);
    expect(warnings).toEqual([
      "capability 'browser' was not granted: it is not in the calling token",
      "model 'gpt-c' was not allowed: the calling token may not use it",
    ]);
  });

  it("inherits the parent's modality sides, not the project's, when the child names none", () => {
    const narrowParent: TokenClaims = { ...parent, capabilities: ['chat', 'output:file'] };
    const capabilitiesFor = (requested: string[]) =>
      narrowClaims(narrowParent, { capabilities: requested }, project).claims.capabilities;
    expect(capabilitiesFor(['chat'])).toEqual(['chat', 'output:file']);
    expect(capabilitiesFor(['chat', 'output:video'])).toEqual(['chat']);
  });

  it('clamps effort and limits; a limit the parent lacks can be set on the child', () => {
    const { claims } = narrowClaims(
      parent,
      { maxEffort: 'high', maxToolIterations: 50, maxContextTokens: 1000 },
      project,
    );
    expect(claims).toMatchObject({ maxEffort: 'medium', maxToolIterations: 6, maxContextTokens: 1000 });
    expect(narrowClaims({ ...parent, maxEffort: undefined }, { maxEffort: 'low' }, project).claims.maxEffort).toBe('low');
    expect(narrowClaims(parent, { maxEffort: 'minimal' }, project).claims.maxEffort).toBe('minimal');
  });

  it("clamps expires_in against the project's maximum, not the parent's remaining life", () => {
    expect(narrowClaims(parent, { expiresIn: 5000 }, project).expiresIn).toBe(5000);
    expect(narrowClaims(parent, { expiresIn: 50_000 }, project).expiresIn).toBe(7200);
  });

  it('keeps scope and data scope within the parent’s, by segments', () => {
    expect(narrowClaims(parent, { scope: 'acme:u1' }, project).claims.scope).toBe('acme:u1');
    expect(refusal(() => narrowClaims(parent, { scope: 'acme2' }, project))).toBe('permission_denied');
    const scopedParent = { ...parent, scope: 'acme:u1' };
    expect(refusal(() => narrowClaims(scopedParent, { scope: 'acme' }, project))).toBe('permission_denied');
    expect(narrowClaims(parent, { dataScope: 'acme:u1' }, project).claims.dataScope).toBe('acme:u1');
    expect(refusal(() => narrowClaims(parent, { dataScope: 'other' }, project))).toBe('permission_denied');
    expect(refusal(() => narrowClaims({ ...parent, dataScope: 'acme:u1' }, { dataScope: 'acme' }, project))).toBe(
      'permission_denied',
    );
  });

  it('keeps the subject the parent’s own, even for a privileged parent or a path under it', () => {
    expect(narrowClaims(parent, { subject: 'acme:u1' }, project).claims.subject).toBe('acme:u1');
    // A path under the parent's could be another user's (`acme` -> `acme:alice`), with her `self` documents.
    expect(refusal(() => narrowClaims(parent, { subject: 'acme:u1:bot' }, project))).toBe('permission_denied');
    expect(refusal(() => narrowClaims(parent, { subject: 'acme:u2' }, project))).toBe('permission_denied');
    const admin = { ...parent, roles: ['admin'] };
    expect(refusal(() => narrowClaims(admin, { subject: 'acme:u2' }, project))).toBe('permission_denied');
    expect(refusal(() => narrowClaims({ ...parent, subject: 'acme', scope: 'acme' }, { subject: 'acme:alice' }, project))).toBe('permission_denied');
    expect(refusal(() => narrowClaims(parent, { scope: 'acme:u1:x' }, project))).toBe('invalid_argument');
  });

  it('never adds roles or groups; a kept privileged role still warns', () => {
    expect(narrowClaims(parent, { roles: ['viewer', 'admin'], groups: [] }, project).claims).toMatchObject({
      roles: ['viewer'],
      groups: [],
    });
    expect(narrowClaims({ ...parent, roles: ['owner'] }, {}, project).warnings).toHaveLength(1);
  });

  it('never yields documents:write in a read-only project, even from a parent that holds it', () => {
    const writer = { ...parent, capabilities: ['chat', 'documents:write'] as Capability[] };
    const { claims, warnings } = narrowClaims(writer, { capabilities: ['documents:write'] }, { ...project, readOnly: true });
    expect(claims.capabilities.includes('documents:write')).toBe(false);
    expect(warnings).toEqual(["capability 'documents:write' was not granted: the project is read-only"]);
  });
});
