/**
 * Polling with a deadline, for conditions no event announces (Redis state,
 * another process's work). No vitest imports: child processes may load it.
 */

/**
 * Polls `check` every `intervalMs` until it returns something other than
 * undefined, null or false, and returns that; throws naming `what` after
 * `timeoutMs`.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 10_000,
  what = 'condition',
  intervalMs = 10,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
