/**
 * Replies that did not reach the user: refused when sent (the 24-hour
 * window closed, another 4xx) or reported `failed` by a status callback.
 * Each is recorded once under the message it names (a redelivered status
 * writes the same field), at most `MAX_FAILURES` per conversation, and the
 * console lists them as the conversation's problems.
 */
import { type RedisClient, storage } from 'steerbot/plugin';
import { WINDOW_CLOSED_CODE } from './errors.js';
import { failuresKey } from './keys.js';

/** Most failures kept per conversation; later ones are not recorded (the count shown is then a floor). */
export const MAX_FAILURES = 100;

const recordScript = storage.defineScript(new URL('./failure-record-1.lua', import.meta.url));

/** One failed reply. */
export interface FailureRecord {
  /** `send`: refused when sent; `status`: a `failed` status callback. */
  source: 'send' | 'status';
  /** The Graph error code, when there was one (131047: the 24-hour window closed). */
  code?: number;
  /** What WhatsApp said, short. */
  title: string;
  /** When it was recorded, ms since the epoch. */
  at: number;
}

/** Records a failed reply under `id` (its `wamid`, or its delivery key when it never got one). Idempotent per id. */
export async function recordFailure(redis: RedisClient, prefix: string, conversationId: string, id: string, failure: FailureRecord): Promise<void> {
  await recordScript.run(redis, [failuresKey(prefix, conversationId)], [id, JSON.stringify(failure), MAX_FAILURES]);
}

/** The failures recorded for a conversation, oldest first. */
export async function readFailures(redis: RedisClient, prefix: string, conversationId: string): Promise<Array<FailureRecord & { id: string }>> {
  const all = await redis.hgetall(failuresKey(prefix, conversationId));
  const out: Array<FailureRecord & { id: string }> = [];
  for (const [id, raw] of Object.entries(all)) {
    try {
      out.push({ id, ...(JSON.parse(raw) as FailureRecord) });
    } catch {
      // A field this build cannot read is shown as a failure without details.
      out.push({ id, source: 'status', title: 'unreadable failure record', at: 0 });
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

/** Text of one failure, for the console. */
export function describeFailure(f: FailureRecord): string {
  if (f.code === WINDOW_CLOSED_CODE) return '24-hour window closed (the user must write first, or send a template)';
  return `${f.code !== undefined ? `${f.code} ` : ''}${f.title}`.slice(0, 200);
}

/** The `conversationProblems` of a WhatsApp channel: one line naming how many replies failed and the newest reason. One read. */
export function failureProblems(redis: RedisClient, prefix: string): (conversationId: string) => Promise<string[]> {
  return async (conversationId) => {
    const failures = await readFailures(redis, prefix, conversationId);
    const last = failures.at(-1);
    if (!last) return [];
    const n = failures.length;
    return [`${n} ${n === 1 ? 'reply' : 'replies'} not delivered (last: ${describeFailure(last)})`];
  };
}
