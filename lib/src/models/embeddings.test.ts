// Reading an embeddings answer in either form a server may send, whatever was asked: float arrays and base64
// strings of little-endian float32 give the same vectors, in the inputs' order; an answer with no usable vectors is
// the provider's failure (502), never a vector of the wrong length.
import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { vectorsOf } from './embeddings.js';

const base64Of = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString('base64');
const answer = (...embeddings: unknown[]) => ({ object: 'list', data: embeddings.map((embedding, index) => ({ object: 'embedding', index, embedding })) });

describe('vectorsOf', () => {
  const first = [0.5, -0.25, 0.125, 1, 0, -1, 0.75, 2];
  const second = [1, 2, 3, 4, 5, 6, 7, 8];

  it('reads float arrays and base64 alike, to the same vectors', () => {
    expect(vectorsOf(answer(first, second), 'm', 2)).toEqual([first, second]);
    expect(vectorsOf(answer(base64Of(first), base64Of(second)), 'm', 2)).toEqual([first, second]);
  });

  it("puts vectors in the inputs' order by their index", () => {
    const shuffled = { data: [{ index: 1, embedding: second }, { index: 0, embedding: base64Of(first) }] };
    expect(vectorsOf(shuffled, 'm', 2)).toEqual([first, second]);
  });

  it('refuses an answer with too few, repeated or unusable vectors as upstream_failed', () => {
    const refused = (body: unknown, expected: number) => {
      try {
        vectorsOf(body, 'embed-small', expected);
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        expect((error as AppError).kind).toBe('upstream_failed');
        return (error as AppError).message;
      }
      throw new Error('accepted');
    };
    expect(refused(answer(first), 2)).toBe("the embedding model 'embed-small' answered 1 vectors for 2 texts");
    expect(refused({ data: [{ index: 0, embedding: first }, { index: 0, embedding: second }] }, 2)).toMatch(/an embedding at index 0$/);
    expect(refused({ error: 'nope' }, 1)).toMatch(/answered no data$/);
    expect(refused(answer('not base64!'), 1)).toMatch(/neither a float array nor base64$/);
    expect(refused(answer(Buffer.from([1, 2, 3, 4, 5, 6]).toString('base64')), 1)).toMatch(/base64 embedding of 6 bytes/);
    expect(refused(answer([1, 'two', 3]), 1)).toMatch(/not finite numbers$/);
    expect(refused(answer(base64Of([1, Number.NaN])), 1)).toMatch(/not finite numbers$/);
    expect(refused(answer([]), 1)).toMatch(/an empty embedding$/);
  });
});
