/**
 * The parts the schedule tests build for each test against a real Redis and
 * real BullMQ: the Schedules service (3 per conversation, 1 s apart at the
 * least), the run queue and dispatch, each on the test's prefix.
 */
import { Redis } from 'ioredis';
import { accessSchema } from '../../src/config/schema.js';
import { AccessRules } from '../../src/people/access-rule.js';
import { IdentityStore } from '../../src/people/identity.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import { bullPrefixFor, RunQueue } from '../../src/protocol/run-queue.js';
import type { ScheduleFireWorker } from '../../src/schedules/fire-worker.js';
import { Schedules } from '../../src/schedules/schedules.js';
import { cleanupPrefix, redisUrl } from './redis.js';

/** A BullMQ connection (no retry limit per request, as BullMQ wants). */
export const bullConn = () => new Redis(redisUrl(), { maxRetriesPerRequest: null });

export interface ScheduleParts {
  schedules: Schedules;
  queue: RunQueue;
  dispatch: Dispatch;
}

export function scheduleParts(redis: Redis, prefix: string): ScheduleParts {
  return {
    schedules: new Schedules({
      client: redis,
      prefix,
      connection: bullConn(),
      bullPrefix: bullPrefixFor(prefix),
      limits: { maxPerConversation: 3, minIntervalSeconds: 1 },
    }),
    queue: new RunQueue({ connection: bullConn(), bullPrefix: bullPrefixFor(prefix) }),
    dispatch: new Dispatch({ client: redis, prefix, steeringCapable: true }),
  };
}

/** The access rule of a configuration that lists no channel (every channel open): a fire worker's `access`. */
export function openAccess(redis: Redis, prefix: string): AccessRules {
  return new AccessRules({ access: accessSchema.parse({}), identities: new IdentityStore({ redis, prefix }), redis, prefix });
}

/** Closes the worker (if any) and the parts, and deletes what the test wrote. */
export async function closeScheduleParts(redis: Redis, prefix: string, parts: ScheduleParts, worker?: ScheduleFireWorker): Promise<void> {
  await worker?.close();
  await parts.schedules.close();
  await parts.queue.close();
  await cleanupPrefix(redis, prefix);
  await cleanupPrefix(redis, bullPrefixFor(prefix));
}
