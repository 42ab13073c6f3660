// Identity and visibility paths: `:`-separated segments, where a scope sees the subtree under it. Compared by
// whole segments, never by string prefix, so `acme2` is not inside `acme`.
import { invalidArgument } from '../errors.js';

const SEPARATOR = ':';
// One or more non-empty segments; no whitespace or control characters, so two spellings of one path cannot
// differ by something invisible.
const PATH = /^[^:\s\p{Cc}]+(?::[^:\s\p{Cc}]+)*$/u;

/** A path is one or more non-empty segments separated by `:` (`acme`, `acme:u1`). */
export function isValidPath(path: string): boolean {
  return PATH.test(path);
}

/** Whether `path` equals `scopePrefix` or lies under it. Either being malformed answers false (fail closed). */
export function isWithinScope(path: string, scopePrefix: string): boolean {
  if (!isValidPath(path) || !isValidPath(scopePrefix)) return false;
  return path === scopePrefix || path.startsWith(scopePrefix + SEPARATOR);
}

/**
 * The scope a token gets for a subject: an omitted scope means only the subject's own data, so it is the
 * subject itself; a given scope must be the subject or one of its ancestors.
 */
export function resolveScope(subject: string, scope: string | undefined): string {
  requirePath('subject', subject);
  if (scope === undefined) return subject;
  requirePath('scope', scope);
  if (!isWithinScope(subject, scope)) {
    throw invalidArgument(`scope '${scope}' must be the subject '${subject}' or a prefix of it`);
  }
  return scope;
}

/**
 * Whether a token may act on `subject`'s data as an administrator (forget them): the subject lies under the token's
 * `scope` and, when it has one, its `data_scope`. A privileged role widens what a token reads (SPEC.md
 * Authentication 6), never whom it may erase: that stays inside the scope it was given, which an omitted scope made
 * the token's own subject.
 */
export function isSubjectInReach(token: { scope: string; data_scope?: string | undefined }, subject: string): boolean {
  return isWithinScope(subject, token.scope) && (token.data_scope === undefined || isWithinScope(subject, token.data_scope));
}

export function requirePath(field: string, path: string): void {
  if (!isValidPath(path)) {
    throw invalidArgument(`${field} '${path}' is not a path of non-empty segments separated by ':'`);
  }
}
