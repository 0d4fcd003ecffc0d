import { randomBytes } from 'node:crypto';

// One random process tag plus a counter: unique across processes without a
// syscall per id (ingest asks for a candidate run id on every update).
const PROCESS_TAG = randomBytes(6).toString('hex');
let counter = 0;

/**
 * A new run id: `r` + time, a random per-process tag and a counter, in base
 * 36 / hex. Usable as a BullMQ job id (no `:`, never all digits), unique
 * across processes, and sortable by creation time within a process.
 */
export function newRunId(nowMs = Date.now()): string {
  counter = (counter + 1) % 0x100000;
  return `r${nowMs.toString(36)}${PROCESS_TAG}${counter.toString(36)}`;
}
