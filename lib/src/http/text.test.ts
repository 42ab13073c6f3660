import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { declareStorableText, TEXT_PATTERN, textProblem, untextualFields } from './text.js';

describe('storable text', () => {
  it('refuses NUL and lone surrogates, and nothing a person writes', () => {
    expect(textProblem('a\u0000b')).toMatch(/NUL/);
    expect(textProblem('\ud800')).toMatch(/lone UTF-16 surrogate/);
    expect(textProblem('x\udc00y')).toMatch(/lone UTF-16 surrogate/);
    for (const fine of ['', 'plain', 'émoji 😀 (a surrogate pair)', '中文', 'tab\tnew\nline', '\u200b']) expect(textProblem(fine)).toBeNull();
  });

  it('names each bad field by its path, keys included', () => {
    expect(untextualFields({ message: 'hi\u0000', list: ['ok', '\ud83d'], nested: { ['k\u0000']: 1 } }, 'body')).toEqual([
      { loc: ['body', 'message'], msg: expect.stringMatching(/NUL/) },
      { loc: ['body', 'list', 1], msg: expect.stringMatching(/surrogate/) },
      { loc: ['body', 'nested', 'k\u0000'], msg: expect.stringMatching(/^name .*NUL/) },
    ]);
    expect(untextualFields({ fine: ['a', { b: 'c' }], n: 1, t: true, z: null }, 'query')).toEqual([]);
  });
});

describe('the text rule as the OpenAPI documents state it', () => {
  // JSON Schema reads a pattern as ECMA-262 with the `u` flag, as ajv does.
  const pattern = new RegExp(TEXT_PATTERN, 'u');

  it('admits exactly the strings the server admits, lone surrogates and characters above U+FFFF included', () => {
    for (const text of ['', 'plain', 'émoji 😀', '\u{10FFFF}', '\uFFFF', '\uE000', '\uD7FF', '\uE001', '\uD7FE', 'tab\tnew\nline', 'a\u0000b', '\ud800', 'x\udfffy', '\ude00\ud83d']) {
      expect(pattern.test(text), JSON.stringify(text)).toBe(textProblem(text) === null);
    }
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (text) => pattern.test(text) === (textProblem(text) === null)), { seed: 20261128, numRuns: 500 });
  });

  it('is put on every request string and on the names of open objects, beside a pattern of their own', () => {
    const string = { type: 'string' };
    const named = { type: 'string', pattern: '^[^/]+$' };
    const listed = { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,100}$' };
    const uuid = { type: 'string', format: 'uuid', pattern: '^[0-9a-f-]{36}$' };
    const fixed = { type: 'string', enum: ['a', 'b'] };
    const file = { type: 'string', format: 'binary' };
    const open = { type: 'object', additionalProperties: {} };
    const closed = { type: 'object', additionalProperties: false };
    for (const schema of [string, named, listed, uuid, fixed, file, open, closed]) declareStorableText(schema);
    expect(string).toEqual({ type: 'string', pattern: TEXT_PATTERN });
    expect(named).toEqual({ type: 'string', pattern: '^[^/]+$', allOf: [{ pattern: TEXT_PATTERN }] });
    expect(listed).toEqual({ type: 'string', pattern: '^[A-Za-z0-9_.-]{1,100}$' });
    expect(uuid).toEqual({ type: 'string', format: 'uuid', pattern: '^[0-9a-f-]{36}$' });
    expect(fixed).toEqual({ type: 'string', enum: ['a', 'b'] });
    expect(file).toEqual({ type: 'string', format: 'binary' });
    expect(open).toEqual({ type: 'object', additionalProperties: {}, propertyNames: { pattern: TEXT_PATTERN } });
    expect(closed).toEqual({ type: 'object', additionalProperties: false });
  });
});
