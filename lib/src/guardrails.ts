// A project's guardrails (issue 16; docs/decisions/0064): checks on what an end-user sends (input) and on what the
// agent answers (output). Patterns are RE2 expressions (re2js: linear time, so no pattern a project writes can stall a
// turn however long the text), lists are whole words or phrases, PII detectors find e-mail addresses, phone numbers,
// payment cards (Luhn-checked), IBANs (mod-97-checked) and US social security numbers, and a moderation model on the
// project's provider judges text the others cannot. One schema serves the control plane's write surface and the
// runtime's pushed configuration; the runtime compiles it once per configuration.
import { RE2JS } from 're2js';
import { z } from 'zod';

export const PII_TYPES = ['email', 'phone', 'credit_card', 'iban', 'us_ssn'] as const;
export type PiiType = (typeof PII_TYPES)[number];

const MAX_CHECKS_PER_SIDE = 32;
const MAX_PATTERN_CHARS = 1_000;
const MAX_WORDS = 500;

const checkName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'name must be 1-64 lower-case letters, digits, _ or -').meta({ description: 'Said when the check fires (its rules never are)' });

const compiles = (pattern: string, caseInsensitive: boolean | undefined) => {
  try {
    RE2JS.compile(pattern, caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0);
    return true;
  } catch {
    return false;
  }
};

export const GuardrailCheckSchema = z
  .discriminatedUnion('kind', [
    z.strictObject({
      name: checkName,
      kind: z.literal('pattern'),
      pattern: z.string().min(1).max(MAX_PATTERN_CHARS).meta({ description: 'An RE2 expression (no backreferences or lookaround); it fires when found anywhere in the text' }),
      case_insensitive: z.boolean().optional(),
    }),
    z.strictObject({
      name: checkName,
      kind: z.literal('list'),
      words: z
        .array(z.string().trim().min(1).max(200))
        .min(1)
        .max(MAX_WORDS)
        .meta({ description: 'Words or phrases; one fires when it stands as whole words in the text, whatever the case' }),
    }),
    z.strictObject({
      name: checkName,
      kind: z.literal('pii'),
      types: z.array(z.enum(PII_TYPES)).min(1).optional().meta({ description: `Which personal data to find (default all: ${PII_TYPES.join(', ')})` }),
    }),
    z.strictObject({
      name: checkName,
      kind: z.literal('moderation'),
      model: z.string().min(1).max(256).meta({ description: "A moderation model the project's provider serves (its `/moderations` endpoint), such as omni-moderation-latest" }),
    }),
  ])
  .superRefine((check, ctx) => {
    if (check.kind === 'pattern' && !compiles(check.pattern, check.case_insensitive)) {
      ctx.addIssue({ code: 'custom', path: ['pattern'], message: 'pattern is not an RE2 expression (backreferences and lookaround are not supported)' });
    }
  });

export type GuardrailCheck = z.infer<typeof GuardrailCheckSchema>;

const side = z.array(GuardrailCheckSchema).max(MAX_CHECKS_PER_SIDE);

export const GuardrailsSchema = z
  .strictObject({
    input: side.default([]).meta({ description: 'Checks on what an end-user sends: one that fires ends the turn before any model is called' }),
    output: side.default([]).meta({ description: "Checks on the agent's answer: one that fires withholds it" }),
  })
  .superRefine((rails, ctx) => {
    for (const [where, checks] of [['input', rails.input], ['output', rails.output]] as const) {
      const seen = new Set<string>();
      checks.forEach((check, index) => {
        if (seen.has(check.name)) ctx.addIssue({ code: 'custom', path: [where, index, 'name'], message: `two ${where} checks are named '${check.name}'` });
        seen.add(check.name);
      });
    }
  })
  .meta({ id: 'Guardrails' });

export type Guardrails = z.infer<typeof GuardrailsSchema>;

/** A side's checks made ready: the text checks compiled, the moderation checks apart (the runtime calls a model). */
export interface CompiledSide {
  /** The first text check that fires on `text`, by name; null when none. */
  firstFiring(text: string): string | null;
  moderation: { name: string; model: string }[];
  readonly empty: boolean;
}

export function compileSide(checks: readonly GuardrailCheck[]): CompiledSide {
  const matchers: { name: string; fires: (text: string) => boolean }[] = [];
  const moderation: { name: string; model: string }[] = [];
  for (const check of checks) {
    if (check.kind === 'pattern') {
      const pattern = RE2JS.compile(check.pattern, check.case_insensitive ? RE2JS.CASE_INSENSITIVE : 0);
      matchers.push({ name: check.name, fires: (text) => pattern.matcher(text).find() });
    } else if (check.kind === 'list') {
      const words = check.words.map((word) => RE2JS.quote(word).replace(/\\ /g, '\\s+').replace(/ /g, '\\s+'));
      const pattern = RE2JS.compile(`(?:^|[^\\p{L}\\p{N}_])(?:${words.join('|')})(?:$|[^\\p{L}\\p{N}_])`, RE2JS.CASE_INSENSITIVE);
      matchers.push({ name: check.name, fires: (text) => pattern.matcher(text).find() });
    } else if (check.kind === 'pii') {
      const types = new Set<PiiType>(check.types ?? PII_TYPES);
      matchers.push({ name: check.name, fires: (text) => [...types].some((type) => PII_DETECTORS[type](text)) });
    } else {
      moderation.push({ name: check.name, model: check.model });
    }
  }
  return {
    firstFiring: (text) => matchers.find((matcher) => matcher.fires(text))?.name ?? null,
    moderation,
    empty: matchers.length === 0 && moderation.length === 0,
  };
}

const email = RE2JS.compile('[\\p{L}\\p{N}._%+-]+@[\\p{L}\\p{N}-]+(?:\\.[\\p{L}\\p{N}-]+)*\\.[\\p{L}]{2,}');
// An international number (+ and 8 to 15 digits, grouped) or a North American one ((555) 123-4567, 555-123-4567):
// bare runs of digits are too often order numbers and codes to count.
const phone = RE2JS.compile('\\+\\d{1,3}(?:[ .-]?\\(?\\d{1,4}\\)?){2,5}|(?:\\(\\d{3}\\) ?|\\b\\d{3}[.-])\\d{3}[.-]\\d{4}\\b');
const cardCandidate = RE2JS.compile('(?:\\d[ -]?){12,18}\\d');
const ibanCandidate = RE2JS.compile('\\b[A-Z]{2}\\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\\b');
const ssn = RE2JS.compile('\\b\\d{3}-\\d{2}-\\d{4}\\b');

/** Each candidate found by `pattern`, in order. */
function* candidates(pattern: RE2JS, text: string): Generator<string> {
  const matcher = pattern.matcher(text);
  while (matcher.find()) yield matcher.group()!;
}

const PII_DETECTORS: Record<PiiType, (text: string) => boolean> = {
  email: (text) => email.matcher(text).find(),
  phone: (text) => [...candidates(phone, text)].some((found) => {
    const digits = found.replace(/\D/g, '').length;
    return digits >= 9 && digits <= 15;
  }),
  credit_card: (text) => [...candidates(cardCandidate, text)].some((found) => luhn(found.replace(/\D/g, ''))),
  iban: (text) => [...candidates(ibanCandidate, text)].some((found) => ibanValid(found.replace(/ /g, ''))),
  us_ssn: (text) => ssn.matcher(text).find(),
};

function luhn(digits: string): boolean {
  if (digits.length < 13 || digits.length > 19) return false;
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

function ibanValid(iban: string): boolean {
  if (iban.length < 15 || iban.length > 34) return false;
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let remainder = 0;
  for (const char of rearranged) {
    const value = /[A-Z]/.test(char) ? char.charCodeAt(0) - 55 : Number(char);
    for (const digit of String(value)) remainder = (remainder * 10 + Number(digit)) % 97;
  }
  return remainder === 1;
}
