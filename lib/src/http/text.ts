// Text no field of ours may hold, refused in one place for every route before any schema or store sees it:
// PostgreSQL cannot store a NUL in text (it would fail as a 500 deep in a query), and a lone UTF-16 surrogate
// is not Unicode text at all (it cannot be encoded as UTF-8, so it would be mangled on the way to any store).
import type { FieldProblem } from '../errors.js';

const NUL = '\u0000';

/** What is wrong with one string, or null. */
export function textProblem(text: string): string | null {
  if (text.includes(NUL)) return 'must not contain the NUL character (U+0000)';
  if (!text.isWellFormed()) return 'must be well-formed Unicode text (it holds a lone UTF-16 surrogate)';
  return null;
}

/** Every string (and object key) under `value` that is not storable text, each named by its path below `where`. */
export function untextualFields(value: unknown, where: string): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const visit = (node: unknown, path: (string | number)[], depth: number) => {
    if (typeof node === 'string') {
      const problem = textProblem(node);
      if (problem) problems.push({ loc: [where, ...path], msg: problem });
      return;
    }
    // Bodies are bounded by the size limit; the depth bound only keeps a hostile nesting from recursing far.
    if (node === null || typeof node !== 'object' || depth > 64) return;
    if (Array.isArray(node)) {
      node.forEach((item, index) => visit(item, [...path, index], depth + 1));
      return;
    }
    for (const [key, item] of Object.entries(node)) {
      const problem = textProblem(key);
      if (problem) problems.push({ loc: [where, ...path, key], msg: `name ${problem}` });
      visit(item, [...path, key], depth + 1);
    }
  };
  visit(value, [], 0);
  return problems;
}

/**
 * Text from outside that we keep rather than refuse (a model's answer): each NUL and lone surrogate becomes U+FFFD,
 * the replacement character, so the rest can be stored and shown as it came.
 */
export function storableText(text: string): string {
  if (!text.includes(NUL) && text.isWellFormed()) return text;
  return text.replaceAll(NUL, '\uFFFD').toWellFormed();
}
