/**
 * The delivery sink: sends a run's messages through the channel's outbound
 * side. A reply longer than the channel's `maxMessageChars` is split
 * (`splitMessage`) and every chunk is its own outbound message with a stable
 * delivery key (`<run id>:<answered seq>:<n>`), recorded in the conversation's outbox before
 * it is sent, so a retried or re-acquired run never sends an acknowledged
 * message twice. Rate limits (`ChannelApiError.retryAfterMs`) and platform
 * 5xx are retried a bounded number of times. When the channel can edit
 * messages and streams, deltas are shown by editing one message in place
 * (throttled to the channel's interval, identical edits skipped) and the
 * final message edits it to the final text instead of sending a duplicate.
 */

import type { Logger } from 'pino';
import type { ChannelOutbound, MessageButton, OutboundFile, VoiceFormat } from '../../src/channel.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import type { RedisClient } from '../../src/scripts/index.js';
import { splitMessage } from '../../src/split-message.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { inSpan, SPAN, SpanKind, SpanStatusCode } from '../../src/telemetry/tracing.js';
import type { DeliverySink, FileDelivery } from '../plugin.js';
import { sendFileOnce } from './files.js';
import { RunOutbox } from './outbox.js';
import { PlatformCalls } from './platform-calls.js';
import { StatusReactions } from './reactions.js';
import { refused, StreamingEdits } from './streaming-edits.js';
import { TypingIndicator } from './typing.js';

export type { ChannelOutbound } from '../../src/channel.js';

/** Finds the outbound side for a conversation (by its channel id prefix). */
export type OutboundResolver = (conversationId: string) => ChannelOutbound | undefined;

export type { OutboxRecord } from './outbox.js';

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
  /** Most attempts of one send / edit that is rate-limited (429) or fails with a 5xx. Default 5. */
  maxAttempts?: number;
  /** First wait after a 5xx, in ms; doubles per attempt. Default 500. */
  retryBaseMs?: number;
  /** Longest wait between two attempts, in ms (a longer `retry_after` is cut to this). Default 30000. */
  maxRetryDelayMs?: number;
  /** Clock, ms since the epoch (streaming throttle). Default `Date.now`. */
  now?: () => number;
  /** Waits `ms` (tests make it instant). Default: a timer. */
  sleep?: (ms: number) => Promise<void>;
  /** The outbox expires this long after its last write, in seconds (every write renews it). Default 604 800 (7 days). */
  outboxTtlSeconds?: number;
  /** Acknowledged outbox records beyond the conversation's newest this many are dropped at a claim (this run's and the active run's stay); 0: no count bound. Default 100. */
  outboxMaxEntries?: number;
  /** The run's fencing token: claims of delivery keys are refused once another attempt owns the run. Default: unfenced. */
  token?: number;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * A delivery sink bound to one run; `close()` stops typing and streaming.
 * Its parts: the outbox (claims and records: outbox.ts), the platform calls
 * (serialized, held, retried: platform-calls.ts), streaming edits
 * (streaming-edits.ts) and typing (typing.ts).
 */
export class RunDelivery implements DeliverySink {
  private n = 0;
  private anchor: number | undefined;
  private readonly outbound: ChannelOutbound | undefined;
  private readonly outbox: RunOutbox;
  private readonly calls: PlatformCalls;
  private readonly streaming: StreamingEdits;
  private readonly typingIndicator: TypingIndicator;
  /** Reactions on the person's messages showing the run's progress (where the channel shows them). */
  readonly reactions: StatusReactions;
  /** Number of messages handed to the channel by this sink (sends, not edits). */
  sent = 0;

  constructor(private readonly o: RunDeliveryOptions) {
    this.outbound = o.resolve(o.conversationId);
    const now = o.now ?? Date.now;
    this.outbox = new RunOutbox(o);
    this.calls = new PlatformCalls(this.outbound, { ...o, now, sleep: o.sleep ?? defaultSleep });
    this.streaming = new StreamingEdits({
      conversationId: o.conversationId,
      outbound: this.outbound,
      outbox: this.outbox,
      calls: this.calls,
      logger: o.logger,
      now,
      nextKey: () => this.nextKey(),
      onSent: () => this.sent++,
    });
    this.typingIndicator = new TypingIndicator(this.outbound, o.conversationId, this.calls, o.logger);
    this.reactions = new StatusReactions(o.conversationId, this.outbound, o.logger);
    if (!this.outbound) o.logger.warn({ conversationId: o.conversationId }, 'no outbound channel for conversation; replies are only recorded');
  }

  /** Sends one complete message, split to the channel's limit; never throws (failures are logged and left in the outbox). */
  async message(text: string, opts: { buttons?: MessageButton[]; key?: string } = {}): Promise<void> {
    const out = this.outbound;
    const chunks = out ? splitMessage(text, out.maxMessageChars) : text ? [text] : [];
    if (opts.key !== undefined) {
      const key = opts.key;
      await this.calls.enqueue(async () => {
        for (let i = 0; i < chunks.length; i++)
          await this.deliver(`${this.o.runId}:${key}:${i}`, chunks[i]!, i === chunks.length - 1 ? opts.buttons : undefined);
      });
      return;
    }
    const stream = this.streaming.take();
    if (chunks.length === 0) return;
    // Keys are taken now, in call order, whatever the queue does later.
    const keys = chunks.map((_, i) => (i === 0 && stream ? stream.key : this.nextKey()));
    await this.calls.enqueue(async () => {
      let from = 0;
      if (stream?.phase === 'skip') from = 1;
      else if (stream?.messageId !== undefined && stream.phase === 'live') {
        if (await this.streaming.finish(stream, chunks[0]!)) from = 1;
      }
      // Buttons go under the last part.
      for (let i = from; i < chunks.length; i++) await this.deliver(keys[i]!, chunks[i]!, i === chunks.length - 1 ? opts.buttons : undefined);
    });
  }

  /**
   * Sends one file under `<run id>:<key>:0`, after every message queued
   * before it (files.ts: the outbox, the text instead of a file the channel
   * cannot take). Never throws.
   */
  async file(file: OutboundFile, opts: { key: string }): Promise<FileDelivery> {
    const key = `${this.o.runId}:${opts.key}:0`;
    let result: FileDelivery = { outcome: 'failed', error: 'the file could not be recorded for delivery' };
    await this.calls.enqueue(async () => {
      result = await this.traced(key, async () => {
        const r = await sendFileOnce(
          {
            conversationId: this.o.conversationId,
            outbound: this.outbound,
            outbox: this.outbox,
            calls: this.calls,
            logger: this.o.logger,
            sendText: (k, text) => this.deliverChunk(k, text),
            onSent: () => this.sent++,
          },
          key,
          file,
        );
        return { value: r, outcome: r.outcome === 'failed' ? 'failed' : 'sent' };
      });
    });
    return result;
  }

  fileLimit(): number | undefined {
    return this.outbound?.sendFile ? (this.outbound.maxFileBytes ?? 0) : undefined;
  }

  voiceFormat(): VoiceFormat {
    return this.outbound?.voiceFormat ?? 'opus';
  }

  /** A streaming delta: shown by editing one message when the channel streams; ignored otherwise. */
  delta(text: string): void {
    this.streaming.delta(text);
  }

  streams(): boolean {
    return this.streaming.live();
  }

  typing(): void {
    this.typingIndicator.start(this.outbound?.typingDelayMs ?? DEFAULTS.typingDelayMs, this.o.typingIntervalMs ?? DEFAULTS.typingIntervalMs);
  }

  /** Stops the typing refresh and any pending streaming edit. */
  close(): void {
    this.typingIndicator.stop();
    this.streaming.close();
  }

  /**
   * Starts a new turn of the run: later delivery keys are
   * `<run id>:<anchor>:<n>`, where `anchor` is the newest user message the
   * turn answers (from the record). A new attempt answering the same message
   * gets the same keys (an acknowledged reply is not sent again); an attempt
   * that answers a newer message gets new ones (it is not mistaken for a
   * reply that was already sent).
   */
  beginTurn(anchorSeq: number): void {
    this.anchor = anchorSeq;
    this.n = 0;
  }

  private nextKey(): string {
    return this.anchor === undefined ? `${this.o.runId}:${this.n++}` : `${this.o.runId}:${this.anchor}:${this.n++}`;
  }

  /** Sends one chunk under its delivery key, unless an earlier attempt already delivered it. Traced as a `delivery` span. */
  private async deliver(key: string, text: string, buttons?: MessageButton[]): Promise<void> {
    await this.traced(key, async () => {
      const outcome = await this.deliverChunk(key, text, buttons);
      return { value: outcome, outcome };
    });
  }

  /** Runs one delivery as a `delivery` span, counted by its outcome. */
  private traced<T>(key: string, fn: () => Promise<{ value: T; outcome: 'sent' | 'skipped' | 'recorded' | 'failed' }>): Promise<T> {
    const channel = this.calls.channelId();
    return inSpan(
      SPAN.delivery,
      {
        kind: SpanKind.PRODUCER,
        attributes: { 'steerbot.channel': channel, 'steerbot.delivery_key': key, 'steerbot.delivery.attempts': 1, 'steerbot.delivery.rate_limit_retries': 0 },
      },
      async (span) => {
        const { value, outcome } = await fn();
        span.setAttribute('steerbot.delivery.outcome', outcome);
        if (outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR });
        metrics.deliveries.inc({ channel, outcome });
        return value;
      },
    );
  }

  private async deliverChunk(key: string, text: string, buttons?: MessageButton[]): Promise<'sent' | 'skipped' | 'recorded' | 'failed'> {
    const out = this.outbound;
    const claim = await this.outbox.claim(key, out ? 'possibly-dispatched' : 'not-dispatched');
    if (!out) return 'recorded';
    if (!claim.claimed) {
      const earlier = claim.record;
      if (!earlier.streaming) {
        this.o.logger.info({ deliveryKey: key }, 'skipping a message already delivered by an earlier attempt');
        return 'skipped';
      }
      // A streaming preview left by an earlier attempt is finished in place rather than sent again.
      if (earlier.messageId !== undefined && out.edit && (await this.streaming.finish({ key, messageId: earlier.messageId, shown: '' }, text))) return 'sent';
      await this.outbox.write(key, { status: 'possibly-dispatched' });
    }
    // A send whose outcome an earlier attempt never recorded: the channel may find that message instead of sending it again.
    const since = claim.claimed ? claim.maybeSentSince : undefined;
    try {
      const { messageId } = await this.calls.withRetry(key, () =>
        out.send(this.o.conversationId, text, {
          deliveryKey: key,
          format: 'markdown',
          ...(buttons && { buttons }),
          ...(since !== undefined && { maybeSentSince: since }),
        }),
      );
      // Written as soon as the platform answers, nothing awaited before it: a death between the two is the one
      // window in which a channel that cannot find its message by key shows it twice.
      await this.outbox.write(key, { status: 'acknowledged', messageId });
      this.sent++;
      return 'sent';
    } catch (err) {
      if (refused(err)) await this.outbox.write(key, { status: 'not-dispatched', error: (err as Error).message.slice(0, 200) });
      this.o.logger.error({ err, deliveryKey: key }, 'delivery failed');
      return 'failed';
    }
  }
}
