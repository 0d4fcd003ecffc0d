/**
 * Rate-limit holds: after a platform answered 429 with a `retry_after`, no
 * call of that conversation's delivery may reach the platform before the
 * wait is over — not the retry of the refused call, not a later streaming
 * edit, not the final send, not the next run's first message. The hold is
 * kept per outbound side and conversation, in this process (a successor run
 * on another runner does not see it; the platform answers that one with a
 * 429 of its own, which holds it in turn). A hold that ended is dropped when
 * it is next read, or when any hold is set on the same outbound side: the
 * holds of conversations never heard from again do not pile up.
 */
import type { ChannelOutbound } from '../../src/channel.js';

/** Until when each conversation is held, ms on the clock of whoever set it; per outbound side. */
const holds = new WeakMap<ChannelOutbound, Map<string, number>>();

/** The end of the conversation's hold (ms), or 0 when none is known. Forgets holds that ended before `now`. */
export function heldUntil(outbound: ChannelOutbound, conversationId: string, now: number): number {
  const byConversation = holds.get(outbound);
  const until = byConversation?.get(conversationId) ?? 0;
  if (until !== 0 && until <= now) byConversation!.delete(conversationId);
  return until > now ? until : 0;
}

/** Holds the conversation until `untilMs` (a hold that already lasts longer stays), and forgets the side's holds that ended before `now`. */
export function holdUntil(outbound: ChannelOutbound, conversationId: string, untilMs: number, now: number): void {
  let byConversation = holds.get(outbound);
  if (!byConversation) holds.set(outbound, (byConversation = new Map()));
  // Only a 429 sets a hold, so sweeping here costs nothing on the ordinary path and bounds the map by the holds still running.
  for (const [c, until] of byConversation) if (until <= now) byConversation.delete(c);
  if ((byConversation.get(conversationId) ?? 0) < untilMs) byConversation.set(conversationId, untilMs);
}

/** Conversations of `outbound` with a hold recorded, ended ones not yet forgotten included (for tests and metrics). */
export function holdCount(outbound: ChannelOutbound): number {
  return holds.get(outbound)?.size ?? 0;
}
