import { randomBytes } from 'node:crypto';

/**
 * A new run id: `r` + time + randomness in base 36. Usable as a BullMQ job id
 * (no `:`, never all digits) and sortable by creation time.
 */
export function newRunId(nowMs = Date.now()): string {
  return `r${nowMs.toString(36)}${randomBytes(8).toString('hex')}`;
}
