// Waiting for something a real server does in its own time (a controller reconciling, a Pod starting): poll a
// check until it passes or a deadline passes, then fail with the check's last error. Tests never sleep blindly.

export interface EventuallyOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Names what was awaited in the failure message. */
  what?: string;
}

/** Calls `check` until it returns without throwing (and not `false`); returns its value. */
export async function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, false>> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let last: unknown = new Error('never checked');
  for (;;) {
    try {
      const value = await check();
      if (value !== false) return value as Exclude<T, false>;
      last = new Error('the check returned false');
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
