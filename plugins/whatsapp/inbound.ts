/**
 * The WhatsApp channel's inbound side: each checked delivery's messages are
 * normalized and handed to the host (a click on a reply button is answered
 * here, WhatsApp having no toast), the newest message id is kept for the
 * read receipt and typing indicator (not a refused stranger's: they would
 * leave a key per number for a day), and status callbacks create no turns:
 * a `failed` one is recorded for the reply it names. The app secret's
 * signature carries no time, so a message or status whose own `timestamp` is
 * older than the dedupe window less a margin (or that has none) is dropped
 * unanswered: a captured delivery replayed after its dedupe key expired
 * would otherwise be answered again.
 */
import type { ChannelHost, ChannelOutbound, ReceiveResult } from 'steerbot/channel';
import { type Logger, pluginMetrics, type RedisClient, replayWindowSeconds, type StaleReason, staleDelivery, storage } from 'steerbot/plugin';
import type { WhatsAppConfig } from './config.js';
import { recordFailure } from './failures.js';
import type { GraphClient } from './graph.js';
import { lastInboundKey } from './keys.js';
import { conversationIdOf, normalizeMessage } from './normalize.js';
import type { ChangeValue, WaMessage, WaStatus, WebhookPayload } from './payload-schema.js';

/** How long the newest message id is kept, in seconds: WhatsApp's customer-service window. */
const LAST_INBOUND_TTL_SECONDS = 24 * 3600;

/** Longest a command's message keeps the newest message id, in seconds: a run it came in during may still show typing. */
const COMMAND_MARKER_TTL_SECONDS = 3600;

const settleScript = storage.defineScript(new URL('./last-inbound-settle-1.lua', import.meta.url));

/** Messages and statuses dropped as too old to answer (`steerbot_whatsapp_stale_deliveries_total`), by reason. */
const staleDeliveries = pluginMetrics('whatsapp').counter(
  'stale_deliveries_total',
  'WhatsApp messages and statuses dropped unanswered because their timestamp is older than the dedupe window less a margin, or missing.',
  ['reason'],
);

/** What the inbound side needs. */
export interface WhatsAppInboundOptions {
  channelId: string;
  cfg: WhatsAppConfig;
  graph: GraphClient;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** The channel's outbound side: a button click's answer goes out as any reply does. */
  outbound: ChannelOutbound;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The inbound side of one WhatsApp channel. */
export class WhatsAppInbound {
  constructor(private readonly o: WhatsAppInboundOptions) {}

  /** Handles one delivery: every message and status of the changes for this channel's phone number, in order. */
  async handle(host: ChannelHost, payload: WebhookPayload): Promise<Record<string, unknown>> {
    const results: string[] = [];
    const windowSeconds = replayWindowSeconds(host.dedupeTtlSeconds);
    const tooOld = (item: WaMessage | WaStatus, kind: 'message' | 'status') => this.tooOld(item, kind, windowSeconds);
    for (const entry of payload.entry) {
      for (const change of entry.changes) {
        if (change.field !== 'messages' || !this.forUs(change.value)) continue;
        for (const status of change.value.statuses ?? []) results.push(tooOld(status, 'status') ?? (await this.handleStatus(status)));
        for (const msg of change.value.messages ?? []) {
          results.push(tooOld(msg, 'message') ?? (await this.handleMessage(host, msg, this.nameOf(change.value, msg.from))));
        }
      }
    }
    return { ok: true, results };
  }

  /**
   * `ignored:<reason>` when the item's timestamp is outside the replay window
   * or missing (logged and counted; nothing is written or sent), else undefined.
   * Meta signs the body, so a replay cannot change or drop the timestamp.
   */
  private tooOld(item: WaMessage | WaStatus, kind: 'message' | 'status', windowSeconds: number): string | undefined {
    const reason: StaleReason | undefined = staleDelivery(item.timestamp, windowSeconds, (this.o.now ?? Date.now)());
    if (!reason) return undefined;
    staleDeliveries.inc({ reason });
    this.o.logger.info({ kind, id: item.id, timestamp: item.timestamp, windowSeconds, reason }, `whatsapp ${kind} too old to be answered; dropped`);
    return `ignored:${reason}`;
  }

  /** Deliveries for another phone number of the same app are not this channel's. */
  private forUs(value: ChangeValue): boolean {
    return value.metadata?.phone_number_id === this.o.cfg.phoneNumberId;
  }

  private nameOf(value: ChangeValue, waId: string): string | undefined {
    return value.contacts?.find((c) => c.wa_id === waId)?.profile?.name;
  }

  private async handleMessage(host: ChannelHost, msg: WaMessage, name: string | undefined): Promise<string> {
    const normalized = normalizeMessage(this.o.channelId, msg, name);
    if (normalized.kind === 'skip') {
      this.o.logger.debug({ type: msg.type, reason: normalized.reason }, 'whatsapp message ignored');
      return `ignored:${normalized.reason}`;
    }
    const { message } = normalized;
    if (normalized.kind === 'button') {
      const result = await host.receive(this.o.channelId, message);
      await this.answerButton(message.conversationId, result);
      return result.kind === 'ingested' ? result.result.kind : result.kind;
    }
    // The newest message id is kept beside the ingest, not after it: the runner's typing indicator may ask for it at once.
    const [result] = await Promise.all([host.receive(this.o.channelId, message), this.remember(message.conversationId, msg.id)]);
    await this.settle(message.conversationId, msg.id, result);
    return result.kind === 'ingested' ? result.result.kind : result.kind;
  }

  /**
   * Takes back the newest message id `remember` kept when the host did not
   * take the message in, so a stranger writing from many numbers leaves no
   * key: only runs show typing, and only messages taken in start one (the
   * refusal notice and a pairing code go out without it). A refused sender
   * (their `/pair` and `/link` too) or a purged conversation has no run, so
   * the id goes (a chat is its sender's alone). A command is from someone
   * with access, maybe mid-run, whose run still shows typing: the id stays at
   * most `COMMAND_MARKER_TTL_SECONDS`. Only this message's own id is taken
   * back: a later message of the sender that was taken in keeps the id it kept.
   */
  private async settle(conversationId: string, messageId: string, result: ReceiveResult): Promise<void> {
    if (result.kind === 'ingested' && result.result.kind !== 'purged') return;
    await takeBackLastInbound(this.o.redis, this.o.prefix, conversationId, messageId, result.kind === 'command' ? COMMAND_MARKER_TTL_SECONDS : 0);
  }

  /** Keeps the newest message id: the read receipt and the typing indicator name it. */
  private async remember(conversationId: string, messageId: string): Promise<void> {
    await storage.redisCall(() => this.o.redis.set(lastInboundKey(this.o.prefix, conversationId), messageId, 'EX', LAST_INBOUND_TTL_SECONDS));
  }

  /** A click on a reply button: the command's reply goes to the chat (once: a redelivered click is a duplicate). Failures are logged. */
  private async answerButton(conversationId: string, result: ReceiveResult): Promise<void> {
    if (result.kind !== 'command' || result.duplicate || !result.reply) return;
    await this.o.outbound
      .send(conversationId, result.reply.slice(0, this.o.outbound.maxMessageChars))
      .catch((err: unknown) => this.o.logger.warn({ err, conversationId }, 'could not answer the button click'));
  }

  /** A status callback: no turn; `failed` is recorded for the reply it names. */
  private async handleStatus(status: WaStatus): Promise<string> {
    if (status.status !== 'failed') return `status:${status.status}`;
    const error = status.errors?.[0];
    const conversationId = conversationIdOf(this.o.channelId, status.recipient_id);
    await storage.redisCall(() =>
      recordFailure(this.o.redis, this.o.prefix, conversationId, status.id, {
        source: 'status',
        ...(error?.code !== undefined && { code: error.code }),
        title: (error?.title ?? error?.message ?? 'failed').slice(0, 300),
        at: (this.o.now ?? Date.now)(),
      }),
    );
    this.o.logger.warn({ conversationId, messageId: status.id, code: error?.code }, 'whatsapp reports a reply failed');
    return 'status:failed';
  }
}

/**
 * Deletes the conversation's newest message id (`ttlSeconds` 0), or cuts its
 * lifetime to at most `ttlSeconds`, only while it is `messageId`. True when it was.
 */
export async function takeBackLastInbound(redis: RedisClient, prefix: string, conversationId: string, messageId: string, ttlSeconds: number): Promise<boolean> {
  const [n] = await storage.redisCall(() => settleScript.run(redis, [lastInboundKey(prefix, conversationId)], [messageId, ttlSeconds]));
  return n === 1;
}
