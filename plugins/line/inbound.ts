/**
 * The LINE channel's inbound side: each checked delivery's text message
 * events are normalized and handed to the host, and the event's reply token
 * is kept (beside the ingest) for the outbound side's first reply. The
 * channel secret's signature carries no time, so an event whose own
 * `timestamp` is older than the dedupe window less a margin (or that has
 * none) is dropped unanswered: a captured delivery replayed after its dedupe
 * key expired would otherwise be answered again.
 */
import type { ChannelHost } from 'steerbot/channel';
import { type Logger, pluginMetrics, type RedisClient, replayWindowSeconds, type StaleReason, staleDelivery, storage } from 'steerbot/plugin';
import { replyTokenKey } from './keys.js';
import { normalizeEvent } from './normalize.js';
import type { LineEvent, LinePayload } from './payload-schema.js';

/** How long a reply token is kept, in seconds: LINE's validity (about a minute), with no margin (the outbound side checks its age). */
const REPLY_TOKEN_TTL_SECONDS = 60;

const keepScript = storage.defineScript(new URL('./reply-token-keep-1.lua', import.meta.url));

/** Events dropped as too old to answer (`steerbot_line_stale_deliveries_total`), by reason. */
const staleDeliveries = pluginMetrics('line').counter(
  'stale_deliveries_total',
  'LINE events dropped unanswered because their timestamp is older than the dedupe window less a margin, or missing.',
  ['reason'],
);

/** What the inbound side needs. */
export interface LineInboundOptions {
  channelId: string;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The inbound side of one LINE channel. */
export class LineInbound {
  constructor(private readonly o: LineInboundOptions) {}

  private now(): number {
    return (this.o.now ?? Date.now)();
  }

  /** Handles one delivery: every event, in order. An empty `events` (the console's Verify) is answered 200. */
  async handle(host: ChannelHost, payload: LinePayload): Promise<Record<string, unknown>> {
    const windowSeconds = replayWindowSeconds(host.dedupeTtlSeconds);
    const results: string[] = [];
    for (const event of payload.events) results.push(this.tooOld(event, windowSeconds) ?? (await this.handleEvent(host, event)));
    return { ok: true, results };
  }

  /** `ignored:<reason>` when the event's time is outside the replay window or missing (logged and counted), else undefined. */
  private tooOld(event: LineEvent, windowSeconds: number): string | undefined {
    const seconds = event.timestamp === undefined ? undefined : Math.floor(event.timestamp / 1000);
    const reason: StaleReason | undefined = staleDelivery(seconds, windowSeconds, this.now());
    if (!reason) return undefined;
    staleDeliveries.inc({ reason });
    this.o.logger.info({ id: event.webhookEventId, timestamp: event.timestamp, windowSeconds, reason }, 'line event too old to be answered; dropped');
    return `ignored:${reason}`;
  }

  private async handleEvent(host: ChannelHost, event: LineEvent): Promise<string> {
    const normalized = normalizeEvent(this.o.channelId, event);
    if (normalized.kind === 'skip') {
      this.o.logger.debug({ type: event.type, reason: normalized.reason, id: event.webhookEventId }, 'line event ignored');
      return `ignored:${normalized.reason}`;
    }
    const { message } = normalized;
    if (event.deliveryContext?.isRedelivery) this.o.logger.info({ id: event.webhookEventId }, 'line redelivered an event');
    // The token is kept beside the ingest, not after it: the runner's first reply may ask for it at once.
    const [result] = await Promise.all([host.receive(this.o.channelId, message), this.keepReplyToken(message.conversationId, event)]);
    return result.kind === 'ingested' ? result.result.kind : result.kind;
  }

  /**
   * Keeps the event's reply token with the event's time (its age decides whether it is still used), unless a newer
   * event's is kept or this one was kept before: a replayed capture cannot swap its used token in. A redelivered
   * event's is not kept: the first delivery's was (or the event was never answered, and its token is old).
   */
  private async keepReplyToken(conversationId: string, event: LineEvent): Promise<void> {
    const token = event.replyToken;
    if (!token || event.deliveryContext?.isRedelivery) return;
    const at = event.timestamp ?? this.now();
    const key = replyTokenKey(this.o.prefix, conversationId);
    await storage.redisCall(() => keepScript.run(this.o.redis, [key], [at, token, REPLY_TOKEN_TTL_SECONDS]));
  }
}
