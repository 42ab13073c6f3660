import { describe, expect, it } from 'vitest';
import { textProblem, untextualFields } from './text.js';

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
