import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { isSubjectInReach, isValidPath, isWithinScope, resolveScope } from './scope.js';

describe('isWithinScope', () => {
  it('compares whole `:` segments', () => {
    expect(isWithinScope('acme:u1', 'acme')).toBe(true);
    expect(isWithinScope('acme:u1:docs', 'acme')).toBe(true);
    expect(isWithinScope('acme', 'acme')).toBe(true);
    expect(isWithinScope('acme2', 'acme')).toBe(false);
    expect(isWithinScope('acme2:u1', 'acme')).toBe(false);
    expect(isWithinScope('acme', 'acme:u1')).toBe(false);
    expect(isWithinScope('other:acme', 'acme')).toBe(false);
  });

  it('answers false for malformed paths, so a bad value never widens', () => {
    expect(isWithinScope('acme:u1', '')).toBe(false);
    expect(isWithinScope('acme::u1', 'acme')).toBe(false);
    expect(isWithinScope('acme:u1', 'acme:')).toBe(false);
    expect(isWithinScope('acme:u1 ', 'acme')).toBe(false);
    expect(isValidPath('acme:bob@example.com')).toBe(true);
    expect(isValidPath(':acme')).toBe(false);
  });
});

describe('resolveScope', () => {
  it('means only the subject’s own data when scope is omitted', () => {
    expect(resolveScope('acme:u1', undefined)).toBe('acme:u1');
  });

  it('keeps a scope that is the subject or an ancestor of it', () => {
    expect(resolveScope('acme:u1', 'acme')).toBe('acme');
    expect(resolveScope('acme:u1', 'acme:u1')).toBe('acme:u1');
  });

  it('refuses a scope that is not a prefix of the subject, and malformed paths', () => {
    for (const [subject, scope] of [
      ['acme:u1', 'acme2'],
      ['acme:u1', 'acme:u2'],
      ['acme:u1', 'acme:u1:x'],
      ['', undefined],
      ['acme:u1', ''],
    ] as const) {
      expect(() => resolveScope(subject, scope)).toThrow(AppError);
      try {
        resolveScope(subject, scope);
      } catch (error) {
        expect((error as AppError).kind).toBe('invalid_argument');
      }
    }
  });
});

describe('isSubjectInReach', () => {
  it("keeps an administrator's erase inside its scope and data scope, whatever its roles let it read", () => {
    expect(isSubjectInReach({ scope: 'acme' }, 'acme:eng:alice')).toBe(true);
    expect(isSubjectInReach({ scope: 'acme:eng' }, 'acme:eng:alice')).toBe(true);
    expect(isSubjectInReach({ scope: 'acme:sales' }, 'acme:eng:alice')).toBe(false);
    // An omitted scope at mint is the subject itself: an admin minted without one reaches no one else.
    expect(isSubjectInReach({ scope: 'acme:admin' }, 'acme:eng:alice')).toBe(false);
    expect(isSubjectInReach({ scope: 'acme:admin' }, 'acme:admin')).toBe(true);
    expect(isSubjectInReach({ scope: 'acme', data_scope: 'acme:sales' }, 'acme:eng:alice')).toBe(false);
    expect(isSubjectInReach({ scope: 'acme', data_scope: 'acme:eng' }, 'acme:eng:alice')).toBe(true);
    expect(isSubjectInReach({ scope: 'acme' }, 'acme2:alice')).toBe(false);
  });
});
