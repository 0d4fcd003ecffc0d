/**
 * How old a platform delivery may be and still be answered, for channels
 * whose request signature carries no time (WhatsApp's `X-Hub-Signature-256`,
 * Telegram's secret token header). Such a delivery recorded by anyone on the
 * way can be sent again unchanged; the dedupe key recognises it only while it
 * lives (`dispatch.dedupeTtlSeconds`). So a delivery is answered only while
 * its own time (the message's timestamp) is inside the dedupe window less a
 * margin: whatever is accepted still has its dedupe key when a replay or a
 * redelivery of it arrives, and anything older is refused outright.
 */
import { DEFAULTS } from '../config/defaults.js';

/** Margin between the oldest delivery answered and the end of the dedupe window, in seconds (at most half a short window). */
export const REPLAY_MARGIN_SECONDS = 300;

/**
 * Oldest age of a delivery that is still answered, in seconds: the dedupe
 * TTL less `REPLAY_MARGIN_SECONDS` (less half the TTL when the TTL is under
 * twice the margin). Default TTL: `DEFAULTS.dispatch.dedupeTtlSeconds`
 * (86 400), giving 86 100.
 */
export function replayWindowSeconds(dedupeTtlSeconds: number = DEFAULTS.dispatch.dedupeTtlSeconds): number {
  return dedupeTtlSeconds - Math.min(REPLAY_MARGIN_SECONDS, Math.floor(dedupeTtlSeconds / 2));
}

/** Why a delivery is too old to answer: `stale` (its time is outside the window) or `no-timestamp` (it names none). */
export type StaleReason = 'stale' | 'no-timestamp';

/**
 * Whether a delivery sent at `sentAtSeconds` (unix seconds, as the platform
 * wrote it; undefined when it names none) is too old to answer at `nowMs`
 * with a replay window of `windowSeconds`. A time in the future is not
 * stale (clocks differ). Returns the reason, or undefined when it may be answered.
 */
export function staleDelivery(sentAtSeconds: number | string | undefined, windowSeconds: number, nowMs: number = Date.now()): StaleReason | undefined {
  if (sentAtSeconds === undefined || sentAtSeconds === '') return 'no-timestamp';
  const sent = Number(sentAtSeconds);
  if (!Number.isFinite(sent)) return 'no-timestamp';
  return Math.floor(nowMs / 1000) - sent > windowSeconds ? 'stale' : undefined;
}
