/**
 * An event-stream route that sends one event, then holds the stream open
 * until `release()`, then sends a last one: what a stream that outlasts a
 * server timeout looks like to the tests of those timeouts.
 */
import type { HttpRoute } from '../../src/http/routes.js';
import { eventStream } from '../../src/http/routes.js';

/** `GET <path>` answering `data: first`, then, once released, `data: last`. */
export function heldEventStream(path = '/events'): { route: HttpRoute; release: () => void } {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const route: HttpRoute = {
    method: 'GET',
    path,
    handle: async () =>
      eventStream(
        (async function* () {
          yield 'data: first\n\n';
          await released;
          yield 'data: last\n\n';
        })(),
      ),
  };
  return { route, release: () => release() };
}
