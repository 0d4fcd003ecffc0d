/**
 * The delivery sink: sends a run's messages through the channel's outbound
 * side. Each outbound message has a stable delivery key (`<run id>:<n>`)
 * recorded in the conversation's outbox before it is sent, so a retried or
 * re-acquired run never sends an acknowledged message twice.
 */
import type { Logger } from 'pino';
import { conversationKeys } from '../src/keys.js';
import type { RedisClient } from '../src/scripts/index.js';
import type { DeliverySink } from './plugin.js';
import type { ChannelOutbound } from '../src/channel.js';

export type { ChannelOutbound } from '../src/channel.js';

/** Finds the outbound side for a conversation (by its channel id prefix). */
export type OutboundResolver = (conversationId: string) => ChannelOutbound | undefined;

/** Outbox record states. */
export type OutboxStatus = 'not-dispatched' | 'possibly-dispatched' | 'acknowledged';

/** Options of a run's delivery sink. */
export interface RunDeliveryOptions {
  client: RedisClient;
  prefix: string;
  conversationId: string;
  runId: string;
  resolve: OutboundResolver;
  logger: Logger;
  /** How often typing is refreshed while the run is active, in ms. Default 4000. */
  typingIntervalMs?: number;
}

/** A delivery sink bound to one run; `close()` stops typing. */
export class RunDelivery implements DeliverySink {
  private n = 0;
  private typingTimer: NodeJS.Timeout | undefined;
  private readonly outbound: ChannelOutbound | undefined;
  private readonly outboxKey: string;
  /** Number of messages handed to the channel by this sink. */
  sent = 0;

  constructor(private readonly o: RunDeliveryOptions) {
    this.outbound = o.resolve(o.conversationId);
    this.outboxKey = conversationKeys(o.prefix, o.conversationId).outbox;
    if (!this.outbound) o.logger.warn({ conversationId: o.conversationId }, 'no outbound channel for conversation; replies are only recorded');
  }

  async message(text: string): Promise<void> {
    const key = `${this.o.runId}:${this.n++}`;
    const claimed = await this.o.client.hsetnx(this.outboxKey, key, JSON.stringify({ status: 'not-dispatched' }));
    if (!claimed) {
      const current = await this.o.client.hget(this.outboxKey, key);
      if (current && (JSON.parse(current) as { status: OutboxStatus }).status === 'acknowledged') {
        this.o.logger.info({ deliveryKey: key }, 'skipping a message already delivered by an earlier attempt');
        return;
      }
    }
    if (!this.outbound) return;
    await this.o.client.hset(this.outboxKey, key, JSON.stringify({ status: 'possibly-dispatched' }));
    try {
      const { messageId } = await this.outbound.send(this.o.conversationId, text);
      await this.o.client.hset(this.outboxKey, key, JSON.stringify({ status: 'acknowledged', messageId }));
      this.sent++;
    } catch (err) {
      this.o.logger.error({ err, deliveryKey: key }, 'delivery failed');
    }
  }

  delta(_text: string): void {
    // Streaming edits arrive with the channel plugins; complete messages are always sent.
  }

  typing(): void {
    const out = this.outbound;
    if (!out?.typing || this.typingTimer) return;
    const fire = () => void out.typing!(this.o.conversationId).catch((err: unknown) => this.o.logger.debug({ err }, 'typing failed'));
    fire();
    this.typingTimer = setInterval(fire, this.o.typingIntervalMs ?? 4000);
    this.typingTimer.unref();
  }

  /** Stops the typing indicator refresh. */
  close(): void {
    if (this.typingTimer) clearInterval(this.typingTimer);
    this.typingTimer = undefined;
  }
}
