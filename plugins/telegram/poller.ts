/**
 * Long polling with one poller across hosts: whoever holds the Redis lease
 * calls getUpdates, the others stand by and take over once it expires (or is
 * given up on stop). The offset lives in memory only: after a takeover the
 * new poller fetches the updates its predecessor had not confirmed yet, and
 * the host's dedupe (`telegram:<update_id>`) drops the ones already ingested.
 */
import type { Api } from 'grammy';
import { type Logger, storage } from 'steerbot/plugin';
import { isApiCallError, toChannelApiError } from './errors.js';

/** Options of a TelegramPoller. */
export interface PollerOptions {
  api: Api;
  lease: storage.RedisLease;
  /** The bot token, only to redact it from logged errors. */
  token: string;
  /** Long-poll timeout of one getUpdates call, in seconds. */
  pollTimeoutSeconds: number;
  logger: Logger;
  /**
   * Handles one raw update. Throws only on a transient failure (Redis down):
   * polling then backs off and fetches the same update again.
   */
  handle(update: unknown): Promise<void>;
}

type Updates = Awaited<ReturnType<Api['getUpdates']>>;

/** The polling loop and its lease (`LeasedPoll`): getUpdates from the offset in memory, the webhook deleted once per lease. */
export function telegramPoller(opts: PollerOptions): storage.LeasedPoll<void, Updates> {
  let offset: number | undefined;
  let webhookCleared = false;
  return new storage.LeasedPoll<void, Updates>({
    lease: opts.lease,
    logger: opts.logger,
    name: 'polling',
    leaseName: 'telegram polling',
    standby: 'another host polls',
    onLeaseTaken: () => {
      offset = undefined;
      webhookCleared = false;
    },
    async prepare() {
      if (webhookCleared) return;
      // getUpdates is refused while a webhook is set.
      await opts.api.deleteWebhook({ drop_pending_updates: false });
      webhookCleared = true;
    },
    poll: (_, signal) =>
      opts.api.getUpdates(
        { ...(offset !== undefined && { offset }), timeout: opts.pollTimeoutSeconds, allowed_updates: ['message', 'callback_query'] },
        // grammY types the signal as its polyfill's; it only listens for `abort`, which a native signal fires.
        signal as unknown as Parameters<Api['getUpdates']>[1],
      ),
    async deliver(updates, _, active) {
      for (const update of updates) {
        // After losing the lease, leave the rest to the new poller.
        if (!active()) return;
        await opts.handle(update);
        offset = update.update_id + 1;
      }
    },
    // Telegram's errors are rebuilt without the token; Redis and host errors are logged as they are.
    safeError: (err) => (isApiCallError(err) ? toChannelApiError(err, 'getUpdates', opts.token) : err),
  });
}
