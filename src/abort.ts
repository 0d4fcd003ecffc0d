/**
 * Abort signals tied to a longer-lived one without `AbortSignal.any`: that
 * registers the new signal with every source in Node's cleanup registry, an
 * entry per call that a long-lived source (a run's, a process's stop
 * signal) keeps until it is itself collected (nodejs/node#55351). A listener
 * removed when the work ends leaves nothing behind.
 */

/** A controller aborted with `parent`'s reason when `parent` aborts, until `unlink()`; call `unlink()` when the work ends. */
export function childController(parent: AbortSignal | undefined): { controller: AbortController; unlink(): void } {
  const controller = new AbortController();
  if (!parent) return { controller, unlink: () => undefined };
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { controller, unlink: () => undefined };
  }
  const onAbort = () => controller.abort(parent.reason);
  parent.addEventListener('abort', onAbort, { once: true });
  return { controller, unlink: () => parent.removeEventListener('abort', onAbort) };
}
