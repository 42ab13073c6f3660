import { describe, expect, it } from 'vitest';
import { compileSide, GuardrailsSchema } from './guardrails.js';

describe('guardrails', () => {
  it('fires a pattern, a word list (whole words, any case) and each PII detector, and names the check that fired', () => {
    const side = compileSide([
      { name: 'secrets', kind: 'pattern', pattern: 'password\\s*[:=]', case_insensitive: true },
      { name: 'competitors', kind: 'list', words: ['Globex', 'initech corp'] },
      { name: 'pii', kind: 'pii' },
    ]);
    expect(side.firstFiring('my PASSWORD: hunter2')).toBe('secrets');
    expect(side.firstFiring('Should I switch to globex?')).toBe('competitors');
    expect(side.firstFiring('The Initech  Corp offer')).toBe('competitors');
    expect(side.firstFiring('globexing is not a word here')).toBeNull();
    expect(side.firstFiring('Mail me at ada@example.com')).toBe('pii');
    expect(side.firstFiring('Call +44 20 7946 0958 tomorrow')).toBe('pii');
    expect(side.firstFiring('Or (415) 555-0132 after six')).toBe('pii');
    expect(side.firstFiring('Card 4111 1111 1111 1111 please')).toBe('pii');
    expect(side.firstFiring('IBAN GB82 WEST 1234 5698 7654 32')).toBe('pii');
    expect(side.firstFiring('SSN 123-45-6789')).toBe('pii');
    // Look-alikes that are not: a card number failing Luhn, an IBAN failing its check, a short code.
    expect(side.firstFiring('Order 4111 1111 1111 1112 shipped')).toBeNull();
    expect(side.firstFiring('Ref GB00 WEST 1234 5698 7654 32')).toBeNull();
    expect(side.firstFiring('Your code is 4821')).toBeNull();
    expect(side.firstFiring('Nothing to see.')).toBeNull();
  });

  it('runs in linear time: a pattern that backtracks exponentially elsewhere answers at once', () => {
    const side = compileSide([{ name: 'nested', kind: 'pattern', pattern: '(a+)+$' }]);
    // A backtracking engine would not return from this input at all (2^100000 ways to split the a's); RE2 answers.
    expect(side.firstFiring(`${'a'.repeat(100_000)}b`)).toBeNull();
  });

  it('refuses what is not RE2, a duplicate name, and unknown fields, naming the place', () => {
    const refused = GuardrailsSchema.safeParse({ input: [{ name: 'x', kind: 'pattern', pattern: '(a)\\1' }] });
    expect(refused.success).toBe(false);
    expect(refused.error!.issues[0]!.path).toEqual(['input', 0, 'pattern']);
    const twice = GuardrailsSchema.safeParse({ output: [{ name: 'a', kind: 'pii' }, { name: 'a', kind: 'list', words: ['b'] }] });
    expect(twice.error!.issues[0]!.path).toEqual(['output', 1, 'name']);
    expect(GuardrailsSchema.safeParse({ input: [{ name: 'a', kind: 'pii', extra: 1 }] }).success).toBe(false);
    expect(GuardrailsSchema.parse({})).toEqual({ input: [], output: [] });
  });
});
