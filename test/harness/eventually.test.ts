// The wait every integration test leans on: it must end on a definite success only, or a check that cannot see what
// it looks for (an optional chain on a row not there yet) would pass at once.
import { describe, expect, it } from 'vitest';
import { eventually } from './eventually.js';

/** A check that answers each of `answers` in turn, then the last one forever; counts its calls. */
function scripted<T>(answers: Array<() => T>) {
  let calls = 0;
  const check = () => answers[Math.min(calls++, answers.length - 1)]!();
  return { check, calls: () => calls };
}

const quick = { intervalMs: 1, timeoutMs: 2_000 };

describe('eventually', () => {
  it('keeps waiting through undefined, null, false and thrown errors, and returns the first definite value', async () => {
    const rows = scripted<{ status: string } | null | undefined | false>([
      () => undefined,
      () => null,
      () => false,
      () => {
        throw new Error('not there yet');
      },
      () => ({ status: 'ready' }),
    ]);
    expect(await eventually(rows.check, quick)).toEqual({ status: 'ready' });
    expect(rows.calls()).toBe(5);
  });

  it('does not take an optional chain on something missing for success', async () => {
    let row: { tags: string[] } | undefined;
    const found = eventually(() => row?.tags.includes('ready'), quick);
    setTimeout(() => (row = { tags: ['ready'] }), 20);
    expect(await found).toBe(true);
  });

  it('counts 0 and the empty string as values: only undefined, null and false mean "not yet"', async () => {
    expect(await eventually(() => 0, quick)).toBe(0);
    expect(await eventually(() => '', quick)).toBe('');
  });

  it('fails with what it waited for and why, when the check never holds', async () => {
    await expect(eventually(() => undefined, { ...quick, timeoutMs: 20, what: 'the row' })).rejects.toThrow(
      /the row not reached within 20 ms: the check returned undefined \(a check returns a value, or true, once it holds\)/,
    );
    await expect(eventually(() => null, { ...quick, timeoutMs: 20 })).rejects.toThrow(/condition not reached within 20 ms: the check returned null/);
    await expect(
      eventually(
        () => {
          throw new Error('status is Pending');
        },
        { ...quick, timeoutMs: 20 },
      ),
    ).rejects.toThrow(/status is Pending/);
  });
});
