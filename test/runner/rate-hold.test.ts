/**
 * Rate-limit holds per outbound side and conversation: a hold that ended is
 * forgotten even for a conversation never read again.
 */
import { describe, expect, it } from 'vitest';
import { heldUntil, holdCount, holdUntil } from '../../runner/delivery/rate-hold.js';
import type { ChannelOutbound } from '../../src/channel.js';

const outbound = () => ({}) as ChannelOutbound;

describe('rate holds', () => {
  it('hold a conversation until the wait is over', () => {
    const out = outbound();
    holdUntil(out, 'c1', 2000, 1000);
    expect(heldUntil(out, 'c1', 1500)).toBe(2000);
    expect(heldUntil(out, 'c1', 2000)).toBe(0);
    expect(holdCount(out)).toBe(0);
  });

  it('forget the ended holds of conversations never read again when another hold is set', () => {
    const out = outbound();
    for (let i = 0; i < 100; i++) holdUntil(out, `quiet-${i}`, 1000 + i, 500);
    expect(holdCount(out)).toBe(100);
    // Later, one more 429 on another conversation: the quiet ones' holds have all ended.
    holdUntil(out, 'busy', 5000, 2000);
    expect(holdCount(out)).toBe(1);
    expect(heldUntil(out, 'busy', 2000)).toBe(5000);
  });

  it('keep the holds still running when another is set', () => {
    const out = outbound();
    holdUntil(out, 'a', 3000, 1000);
    holdUntil(out, 'b', 1500, 1000);
    holdUntil(out, 'c', 4000, 2000);
    expect(holdCount(out)).toBe(2);
    expect(heldUntil(out, 'a', 2000)).toBe(3000);
  });
});
