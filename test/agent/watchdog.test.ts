/**
 * The stream watchdog's signal: it follows the run's signal while the call
 * lasts and lets go of it once stopped, so a run of many model calls leaves
 * nothing on the run's signal.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { StreamIdleTimeout, StreamWatchdog } from '../../plugins/local-agent/watchdog.js';

/** Signals Node registered as depending on `signal` (what `AbortSignal.any` adds, one per call, kept until `signal` is collected). */
function dependants(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  return key ? ((signal as unknown as Record<symbol, Set<unknown> | undefined>)[key]?.size ?? 0) : 0;
}

describe('stream watchdog', () => {
  it("leaves nothing on the run's signal once each call's watchdog is stopped", () => {
    const run = new AbortController();
    for (let i = 0; i < 50; i++) new StreamWatchdog(60_000, run.signal).stop();
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);
    expect(dependants(run.signal)).toBe(0);
  });

  it("aborts the call when the run's signal aborts, with its reason, without counting as fired", () => {
    const run = new AbortController();
    const w = new StreamWatchdog(60_000, run.signal);
    run.abort('stop');
    expect(w.signal.aborted).toBe(true);
    expect(w.signal.reason).toBe('stop');
    expect(w.fired).toBe(false);
    w.stop();
  });

  it('fires after idleMs of silence with a StreamIdleTimeout', async () => {
    const run = new AbortController();
    const w = new StreamWatchdog(20, run.signal);
    await new Promise<void>((resolve) => w.signal.addEventListener('abort', () => resolve(), { once: true }));
    expect(w.fired).toBe(true);
    expect(w.signal.reason).toBeInstanceOf(StreamIdleTimeout);
    expect(run.signal.aborted).toBe(false);
    w.stop();
  });
});
