/**
 * Catch-up after downtime. A gateway session gets no events from before it
 * started, so a message sent while no host was connected would never arrive.
 * The channel therefore keeps, per Discord channel, the newest message id it
 * handed to the host (hash `<prefix>:p:discord:cursors`, moved only forward by
 * the `cursor-advance` script). A starting host reads, over REST, the recent
 * messages after the cursors of the most recently active channels and hands
 * them to the host like gateway messages; the host's dedupe drops any that a
 * host still connected took already.
 */
import type { Client, Message } from 'discord.js';
import type { Logger } from 'pino';
import { type RedisClient, storage } from 'steerbot/plugin';

/** Most messages one REST call returns. */
export const CATCH_UP_PAGE = 100;

/** The hash of per-channel cursors under `prefix` (the plugin's key `cursors`). */
export const cursorsKey = (prefix: string): string => storage.pluginStorage(prefix, 'discord').key('cursors');

/** Moves cursors forward, never back (`cursor-advance-1.lua`). */
const cursorAdvance = storage.defineScript(new URL('./cursor-advance-1.lua', import.meta.url));

/** Orders snowflakes as numbers. */
export function compareSnowflakes(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** Records that the message `messageId` of `channelId` was handed to the host (never moves the cursor back). */
export async function advanceCursor(redis: RedisClient, prefix: string, channelId: string, messageId: string): Promise<void> {
  await advanceCursors(redis, prefix, new Map([[channelId, messageId]]));
}

/** `advanceCursor` for several channels in one call: newest message id by channel id. */
export async function advanceCursors(redis: RedisClient, prefix: string, newest: ReadonlyMap<string, string>): Promise<void> {
  if (newest.size === 0) return;
  await cursorAdvance.run(redis, [cursorsKey(prefix)], [...newest].flat());
}

/**
 * The cursors of one process, kept in memory and written about once a second
 * (and on `flush()`), so a message costs the host no extra round trip. A
 * cursor left behind by a crash only makes the next catch-up read again what
 * dedupe then drops.
 */
export class CursorBuffer {
  private newest = new Map<string, string>();

  constructor(private readonly o: { redis: RedisClient; prefix: string; logger: Logger; describe(err: unknown): string }) {}

  /** Notes that `messageId` of `channelId` was handed to the host. */
  note(channelId: string, messageId: string): void {
    const current = this.newest.get(channelId);
    if (current === undefined || compareSnowflakes(messageId, current) > 0) this.newest.set(channelId, messageId);
  }

  /** Writes the noted cursors in one call; on failure keeps them for the next. Never throws. */
  async flush(): Promise<void> {
    const batch = this.newest;
    if (batch.size === 0) return;
    this.newest = new Map();
    try {
      await advanceCursors(this.o.redis, this.o.prefix, batch);
    } catch (err) {
      for (const [channel, id] of batch) this.note(channel, id);
      this.o.logger.warn({ channels: batch.size, error: this.o.describe(err) }, 'discord: could not record the catch-up cursors; trying again');
    }
  }
}

/** What `missedMessages` looks at. */
export interface CatchUpOptions {
  /** Cursors by channel id (`HGETALL` of `cursorsKey`). */
  cursors: Record<string, string>;
  /** Channels read at most, the most recently active first. */
  maxChannels: number;
  /** Messages older than this (ms since the epoch) are left alone. */
  notBefore: number;
  logger: Logger;
  /** An error as log text (the channel scrubs its token from it). */
  describe(err: unknown): string;
}

/**
 * The messages after each cursor, oldest first per channel, from the newest
 * page of each channel (up to 100 messages; when more were missed, the older
 * ones are skipped and a warning says so). A channel that cannot be read is
 * logged and skipped.
 */
export async function missedMessages(client: Client, o: CatchUpOptions): Promise<Message[]> {
  const channels = Object.entries(o.cursors)
    .filter(([, id]) => /^\d{1,25}$/.test(id))
    .sort(([, a], [, b]) => compareSnowflakes(b, a))
    .slice(0, o.maxChannels);
  const out: Message[] = [];
  for (const [channelId, cursor] of channels) {
    try {
      const channel = await client.channels.fetch(channelId);
      if (!channel?.isTextBased()) continue;
      const page = await channel.messages.fetch({ limit: CATCH_UP_PAGE, cache: false });
      const newer = [...page.values()].filter((m) => compareSnowflakes(m.id, cursor) > 0).sort((a, b) => compareSnowflakes(a.id, b.id));
      if (newer.length === CATCH_UP_PAGE)
        o.logger.warn({ channelId, after: cursor }, 'discord: more messages were missed than one page holds; only the newest are caught up');
      out.push(...newer.filter((m) => m.createdTimestamp >= o.notBefore));
    } catch (err) {
      o.logger.warn({ channelId, error: o.describe(err) }, 'discord: could not read missed messages of a channel');
    }
  }
  return out;
}
