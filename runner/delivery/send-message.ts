/**
 * Sends a message to a conversation from outside a run (the messages API,
 * `sendMessage`): recorded once per idempotency key (the agent sees it in
 * later prompts), then delivered through the conversation's outbox like a
 * reply: split to the channel's limit, each part claimed before it is sent,
 * rate limits retried. A retry with the same key skips the parts already
 * acknowledged and delivers the rest; a concurrent one is told the key is busy.
 * Once every part is acknowledged the ids are kept under the key for its
 * dedupe window: a retry answers them and sends nothing, however many newer
 * deliveries the outbox has pruned since.
 */
import type { Logger } from 'pino';
import type { ChannelOutbound } from '../../src/channel.js';
import {
  assertSendRequest,
  keepSendResult,
  type RecordSendResult,
  recordSend,
  releaseSendLock,
  type SendCaller,
  type SendKeyScope,
  type SendMessageRequest,
  type SendMessageResult,
} from '../../src/protocol/send.js';
import { asRedisUnavailable } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import type { RedisClient } from '../../src/scripts/index.js';
import { splitMessage } from '../../src/split-message.js';
import type { OutboxRecord } from './outbox.js';
import { type OutboundResolver, RunDelivery } from './sink.js';

/** How long one send may hold its key before another call may deliver it, in ms. */
const SEND_LOCK_MS = 60_000;

/** What a `MessageSender` needs. */
export interface MessageSenderOptions {
  client: RedisClient;
  prefix: string;
  /** The outbound side of a conversation's channel. */
  resolve: OutboundResolver;
  logger: Logger;
  /** Dedupe TTL of an idempotency key, in seconds (`dispatch.dedupeTtlSeconds`). */
  dedupeTtlSeconds: number;
  /** Longest text, in characters (`dispatch.maxMessageChars`). */
  maxMessageChars: number;
  /** Waits between delivery retries (tests make it instant). Default: a timer. */
  sleep?: (ms: number) => Promise<void>;
}

/** Options of one send. */
export interface SendOptions {
  /** Whether the send may open a conversation that has no record yet (when its channel can). Default true. */
  open?: boolean;
}

/** Sends messages to conversations, exactly once per idempotency key. */
export class MessageSender {
  constructor(private readonly o: MessageSenderOptions) {}

  /**
   * Records and delivers one message. Throws InvalidInputError (nothing
   * written) on a bad request, RedisUnavailableError while Redis cannot be reached.
   */
  async send(req: SendMessageRequest, caller: SendCaller, opts: SendOptions = {}): Promise<SendMessageResult> {
    assertSendRequest(req, this.o.maxMessageChars);
    const out = this.o.resolve(req.conversationId);
    if (!out) return { kind: 'unknown-conversation' };
    let recorded: RecordSendResult;
    try {
      recorded = await recordSend(req, {
        client: this.o.client,
        prefix: this.o.prefix,
        dedupeTtlSeconds: this.o.dedupeTtlSeconds,
        lockMs: SEND_LOCK_MS,
        known: opts.open === false || !(out.opensConversation?.(req.conversationId) ?? false),
        caller,
      });
    } catch (err) {
      throw asRedisUnavailable(err);
    }
    if (recorded.kind === 'unknown') return { kind: 'unknown-conversation' };
    if (recorded.kind === 'purged' || recorded.kind === 'busy') return recorded;
    if (recorded.kind === 'done') return { kind: 'sent', seq: recorded.seq, messageIds: recorded.messageIds, duplicate: true };
    // The keys whose lock this call holds: a key 0.1.0 recorded keeps its own lock and result.
    const scope: SendKeyScope = recorded.kind === 'duplicate' ? recorded.scope : caller;
    // A retry delivers what the first call recorded, whatever text it carries now.
    const entry = recorded.kind === 'duplicate' ? recorded.entry : undefined;
    const message = entry ? { ...req, text: entry.text, ...(entry.buttons && { buttons: entry.buttons }) } : req;
    try {
      // A duplicate whose entry is gone (purged, or trimmed) is never delivered again: it answers what the outbox says.
      const result =
        recorded.kind === 'duplicate' && !entry
          ? await this.readBack(out, req, recorded.seq, true)
          : await this.deliver(out, message, recorded.seq, recorded.kind === 'duplicate');
      if (result.kind === 'sent') await this.keep(req, scope, result);
      return result;
    } finally {
      await releaseSendLock(this.o.client, this.o.prefix, req, scope, recorded.lockToken).catch((err: unknown) =>
        this.o.logger.warn({ err }, 'could not release a send lock; it expires on its own'),
      );
    }
  }

  /** Keeps a delivered send's ids under its key; a failure is logged (a retry then reads the outbox, as before). */
  private async keep(req: SendMessageRequest, scope: SendKeyScope, result: { seq: number; messageIds: string[] }): Promise<void> {
    await keepSendResult(this.o.client, this.o.prefix, req, scope, result.seq, result.messageIds).catch((err: unknown) =>
      this.o.logger.warn({ err }, 'could not keep the result of a send under its key; a retry reads the outbox instead'),
    );
  }

  /** Delivers the parts not yet acknowledged, then reads back what the outbox says of each. */
  private async deliver(out: ChannelOutbound, req: SendMessageRequest, seq: number, duplicate: boolean): Promise<SendMessageResult> {
    // The seq is the same for every call with this key: so are the delivery keys `send-<seq>:<key>:<n>`.
    const runId = `send-${seq}`;
    const delivery = new RunDelivery({
      client: this.o.client,
      prefix: this.o.prefix,
      conversationId: req.conversationId,
      runId,
      resolve: () => out,
      logger: this.o.logger,
      ...(this.o.sleep && { sleep: this.o.sleep }),
    });
    try {
      await delivery.message(req.text, { key: req.idempotencyKey, ...(req.buttons && { buttons: req.buttons }) });
    } finally {
      delivery.close();
    }
    return await this.readBack(out, req, seq, duplicate);
  }

  /** Reads back what the outbox says of each part of the message recorded at `seq`. */
  private async readBack(out: ChannelOutbound, req: SendMessageRequest, seq: number, duplicate: boolean): Promise<SendMessageResult> {
    const runId = `send-${seq}`;
    const parts = splitMessage(req.text, out.maxMessageChars).length;
    const fields = Array.from({ length: parts }, (_, i) => `${runId}:${req.idempotencyKey}:${i}`);
    const raw = fields.length > 0 ? await this.o.client.hmget(conversationKeys(this.o.prefix, req.conversationId).outbox, ...fields) : [];
    const records = raw.map((r) => (r ? (JSON.parse(r) as OutboxRecord) : undefined));
    // A missing record (never written, or purged) counts as unsent.
    const unsent = records.findIndex((r) => r?.status !== 'acknowledged');
    if (unsent >= 0 || records.length === 0) {
      return { kind: 'failed', seq, error: records[unsent]?.error ?? 'the channel did not acknowledge the message' };
    }
    return { kind: 'sent', seq, messageIds: records.map((r) => r!.messageId ?? ''), duplicate };
  }
}
