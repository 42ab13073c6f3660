// Waiting for something a real server does in its own time (a controller reconciling, a Pod starting): poll a
// check until it passes or a deadline passes, then fail with the check's last error. Tests never sleep blindly.

export interface EventuallyOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Names what was awaited in the failure message. */
  what?: string;
}

/** What a check answers while the awaited thing has not happened yet. */
export type NotYet = undefined | null | false;

/**
 * Calls `check` until it returns a definite success, and returns that value.
 *
 * The contract: a check that is done returns a value that is neither `undefined`, `null` nor `false` (the thing
 * awaited, or `true`). While not done it returns one of those, or throws (its message then explains a timeout).
 * `undefined` counts as "not yet" so that an optional chain on something still missing (`row?.status === ...` is
 * fine, `row?.list.includes(...)` yields `undefined`) keeps waiting instead of passing: a check made only of
 * `expect(...)` calls must therefore end with `return true`.
 */
export async function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, NotYet>> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let last: unknown = new Error('never checked');
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== null && value !== false) return value as Exclude<T, NotYet>;
      last = new Error(`the check returned ${String(value)}${value === undefined ? ' (a check returns a value, or true, once it holds)' : ''}`);
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      const reason = last instanceof Error ? last.message : String(last);
      throw new Error(`${options.what ?? 'condition'} not reached within ${options.timeoutMs ?? 30_000} ms: ${reason}`, { cause: last });
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 200));
  }
}
