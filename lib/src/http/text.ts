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

/**
 * The JSON Schema `pattern` that admits exactly the text `textProblem` admits: any code point but U+0000 and the
 * surrogates, spelled as every code point outside U+0000 and U+D7FF-U+E000, or U+D7FF or U+E000. ECMA-262, read with
 * the `u` flag as JSON Schema means it: without that flag an engine sees a character above U+FFFF as two lone
 * surrogates. It names no surrogate, since engines that match over UTF-8 (Rust's regex, behind schemathesis's
 * validator) refuse a pattern that does, and its one wide class is a negated one, which generators draw from quickly.
 */
export const TEXT_PATTERN = '^(?:[^\\u0000\\uD7FF-\\uE000]|[\\uD7FF\\uE000])*$';

type JsonSchema = Record<string, unknown>;

/**
 * Whether a pattern admits only characters it lists (`^[a-z0-9_-]{1,64}$`): no negated class, no `.` outside a class,
 * no escape that stands for a wide set or a code point. Such a pattern admits no NUL and no surrogate already, and a
 * second pattern beside it would only make generators discard what they draw.
 */
const listsWhatItAdmits = (pattern: string) =>
  !/\[\^|\\[SDWPpuxc0]/.test(pattern) && !pattern.replace(/\\./g, '').replace(/\[[^\]]*\]/g, '').includes('.');

/** Whether a schema already states the rule (the same schema object may be rendered more than once). */
const says = (schema: JsonSchema) =>
  schema.pattern === TEXT_PATTERN || ((schema.allOf as JsonSchema[] | undefined) ?? []).some((part) => part.pattern === TEXT_PATTERN);

/**
 * Says in one request schema what `untextualFields` refuses before any schema runs, so a document built from the
 * schemas admits no text the server refuses: a string gets TEXT_PATTERN (beside a pattern of its own that admits more
 * than the characters it lists, in `allOf`), an
 * object that takes names it does not list gets TEXT_PATTERN on its `propertyNames`. Left alone: fixed values
 * (`enum`, `const`), file parts (`format: binary`) and formats whose own pattern admits only ASCII (uuid, date-time).
 */
export function declareStorableText(schema: JsonSchema): void {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.includes('string') && !('enum' in schema) && !('const' in schema) && schema.format !== 'binary') {
    if (schema.pattern === undefined) schema.pattern = TEXT_PATTERN;
    else if (schema.format === undefined && !listsWhatItAdmits(String(schema.pattern)) && !says(schema)) schema.allOf = [...((schema.allOf as JsonSchema[] | undefined) ?? []), { pattern: TEXT_PATTERN }];
  }
  if (types.includes('object') && schema.additionalProperties !== false && schema.propertyNames === undefined) {
    schema.propertyNames = { pattern: TEXT_PATTERN };
  }
}
