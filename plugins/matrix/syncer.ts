/**
 * The `/sync` long poll, with one syncing host across hosts: whoever holds
 * the Redis lease calls `/sync`, the others stand by and take over once it
 * expires (or is given up on stop). The `since` token is stored in Redis
 * after every answer whose events were all handed to the host, so a
 * restarted or taking-over host resumes where the last one stopped; events
 * handed over twice (a host died between `receive` and storing `since`) are
 * dropped by the host's dedupe (`matrix:<event id>`).
 */
import { type Logger, type RedisClient, storage } from 'steerbot/plugin';
import type { MatrixClient } from './client.js';
import { type SyncResponse, syncResponseSchema } from './sync-schema.js';

/** What one `/sync` asks for: rooms' timelines with member counts; no presence, no account data. */
const SYNC_FILTER = JSON.stringify({
  presence: { not_types: ['*'] },
  account_data: { not_types: ['*'] },
  room: {
    timeline: { limit: 50 },
    state: { lazy_load_members: true },
    ephemeral: { not_types: ['*'] },
    account_data: { not_types: ['*'] },
  },
});

/** Options of a MatrixSyncer. */
export interface SyncerOptions {
  client: MatrixClient;
  lease: storage.RedisLease;
  redis: RedisClient;
  /** The key `since` is stored at. */
  sinceKey: string;
  /** Long-poll timeout of one `/sync`, in ms. */
  timeoutMs: number;
  logger: Logger;
  /** Handles one answer (`initial`: the first one, without `since`). Throws only on a transient failure: the same `since` is asked again. */
  handle(sync: SyncResponse, initial: boolean): Promise<void>;
}

/** The sync loop and its lease (`LeasedPoll`): `/sync` from the stored `since`, stored again once an answer was handed over. */
export function matrixSyncer(o: SyncerOptions): storage.LeasedPoll<string | null, SyncResponse> {
  return new storage.LeasedPoll<string | null, SyncResponse>({
    lease: o.lease,
    logger: o.logger,
    name: 'sync',
    leaseName: 'matrix sync',
    standby: 'another host syncs',
    prepare: () => storage.redisCall(() => o.redis.get(o.sinceKey)),
    async poll(since, signal) {
      const query: Record<string, string> = { filter: SYNC_FILTER, timeout: String(since === null ? 0 : o.timeoutMs) };
      if (since !== null) query.since = since;
      // The call's own timeout leaves the server its long-poll time and a margin.
      return syncResponseSchema.parse(await o.client.call('sync', 'GET', 'sync', { query, signal, timeoutMs: o.timeoutMs + 15_000 }));
    },
    async deliver(sync, since, active) {
      await o.handle(sync, since === null);
      if (active()) await storage.redisCall(() => o.redis.set(o.sinceKey, sync.next_batch));
    },
  });
}
