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
import { backoffMs } from '../src/backoff.js';
import { type ChannelOutbound, channelIdOf, DEFAULT_DELIVERY_KEY_TTL_SECONDS, type MessageButton } from '../src/channel.js';
import { DEFAULTS } from '../src/defaults.js';
import { ChannelApiError } from '../src/errors.js';
import { conversationKeys } from '../src/keys.js';
import { type RedisClient, runScript } from '../src/scripts/index.js';
import { checkReply } from '../src/scripts/results.js';
import { splitMessage } from '../src/split-message.js';
import { metrics } from '../src/telemetry/metrics.js';
import { inSpan, SPAN, SpanKind, SpanStatusCode, trace } from '../src/telemetry/tracing.js';
import type { DeliverySink } from './plugin.js';
import { heldUntil, holdUntil } from './rate-hold.js';

export type { ChannelOutbound } from '../src/channel.js';

/** Finds the outbound side for a conversation (by its channel id prefix). */
export type OutboundResolver = (conversationId: string) => ChannelOutbound | undefined;

/** Outbox record states. */
export type OutboxStatus = 'not-dispatched' | 'possibly-dispatched' | 'acknowledged';

/** One outbox record (JSON in the conversation's outbox hash, field = delivery key). */
export interface OutboxRecord {
  status: OutboxStatus;
  /** Platform message id, once acknowledged. */
  messageId?: string;
  /** The message is a streaming preview that has not been edited to its final text yet. */
  streaming?: boolean;
  /** Why the last attempt failed, when it is known not to have been sent. */
  error?: string;
}

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

/** A message being streamed by editing it in place. */
interface Stream {
  /** Delivery key of the streamed message (the final text's first chunk reuses it). */
  key: string;
  /** Everything the plugin streamed so far. */
  buffer: string;
  /** Platform id of the streamed message, once sent. */
  messageId: string | undefined;
  /** Text the platform shows now. */
  shown: string;
  /** When the last send / edit happened, ms. */
  lastAt: number;
  /** `skip`: an earlier attempt delivered this message in full; `failed`: streaming gave up (the final text is sent normally). */
  phase: 'live' | 'skip' | 'failed';
  /** `message()` took over: no more edits from deltas. */
  final: boolean;
  timer: NodeJS.Timeout | undefined;
  /** A flush is queued or running. */
  queued: boolean;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** Whether a failed call is known not to have reached the user (a 4xx answer: the platform refused it). */
const refused = (err: unknown) => err instanceof ChannelApiError && err.status !== undefined && err.status >= 400 && err.status < 500;

/** A delivery sink bound to one run; `close()` stops typing and streaming. */
export class RunDelivery implements DeliverySink {
  private n = 0;
  private typingTimer: NodeJS.Timeout | undefined;
  private readonly outbound: ChannelOutbound | undefined;
  private readonly outboxKey: string;
  private readonly outboxIndexKey: string;
  private readonly runKey: string;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Serializes every platform call of this run, so edits and sends never overtake each other. */
  private chain: Promise<void> = Promise.resolve();
  private stream: Stream | undefined;
  /** Number of messages handed to the channel by this sink (sends, not edits). */
  sent = 0;

  constructor(private readonly o: RunDeliveryOptions) {
    this.outbound = o.resolve(o.conversationId);
    const keys = conversationKeys(o.prefix, o.conversationId);
    this.outboxKey = keys.outbox;
    this.outboxIndexKey = keys.outboxIndex;
    this.runKey = keys.run(o.runId);
    this.now = o.now ?? Date.now;
    this.sleep = o.sleep ?? defaultSleep;
    if (!this.outbound) o.logger.warn({ conversationId: o.conversationId }, 'no outbound channel for conversation; replies are only recorded');
  }

  /** Sends one complete message, split to the channel's limit; never throws (failures are logged and left in the outbox). */
  async message(text: string, opts: { buttons?: MessageButton[]; key?: string } = {}): Promise<void> {
    const out = this.outbound;
    const chunks = out ? splitMessage(text, out.maxMessageChars) : text ? [text] : [];
    if (opts.key !== undefined) {
      const key = opts.key;
      await this.enqueue(async () => {
        for (let i = 0; i < chunks.length; i++)
          await this.deliver(`${this.o.runId}:${key}:${i}`, chunks[i]!, i === chunks.length - 1 ? opts.buttons : undefined);
      });
      return;
    }
    const stream = this.stream;
    this.stream = undefined;
    if (stream) {
      stream.final = true;
      clearTimeout(stream.timer);
    }
    if (chunks.length === 0) return;
    // Keys are taken now, in call order, whatever the queue does later.
    const keys = chunks.map((_, i) => (i === 0 && stream ? stream.key : this.nextKey()));
    await this.enqueue(async () => {
      let from = 0;
      if (stream?.phase === 'skip') from = 1;
      else if (stream?.messageId !== undefined && stream.phase === 'live') {
        if (await this.finishStream(stream, chunks[0]!)) from = 1;
      }
      // Buttons go under the last part.
      for (let i = from; i < chunks.length; i++) await this.deliver(keys[i]!, chunks[i]!, i === chunks.length - 1 ? opts.buttons : undefined);
    });
  }

  /** A streaming delta: shown by editing one message when the channel streams; ignored otherwise. */
  delta(text: string): void {
    const out = this.outbound;
    if (!out?.edit || !out.streamEditIntervalMs || !text) return;
    const s = (this.stream ??= {
      key: this.nextKey(),
      buffer: '',
      messageId: undefined,
      shown: '',
      lastAt: 0,
      phase: 'live',
      final: false,
      timer: undefined,
      queued: false,
    });
    s.buffer += text;
    this.scheduleFlush(s);
  }

  typing(): void {
    const out = this.outbound;
    if (!out?.typing || this.typingTimer) return;
    const fire = () => {
      // Typing is a platform call like any other: none while a 429 holds the conversation.
      if (heldUntil(out, this.o.conversationId, this.now()) !== 0) return;
      void out.typing!(this.o.conversationId).catch((err: unknown) => {
        if (err instanceof ChannelApiError && err.retryAfterMs !== undefined) this.hold(err.retryAfterMs);
        this.o.logger.debug({ err }, 'typing failed');
      });
    };
    fire();
    this.typingTimer = setInterval(fire, this.o.typingIntervalMs ?? DEFAULTS.typingIntervalMs);
    this.typingTimer.unref();
  }

  /** Stops the typing refresh and any pending streaming edit. */
  close(): void {
    if (this.typingTimer) clearInterval(this.typingTimer);
    this.typingTimer = undefined;
    if (this.stream) {
      this.stream.final = true;
      clearTimeout(this.stream.timer);
    }
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

  private anchor: number | undefined;

  private nextKey(): string {
    return this.anchor === undefined ? `${this.o.runId}:${this.n++}` : `${this.o.runId}:${this.anchor}:${this.n++}`;
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    const run = this.chain.then(task).catch((err: unknown) => this.o.logger.error({ err }, 'delivery failed'));
    this.chain = run;
    return run;
  }

  /** Records a message's outcome, fenced like the claim (a stale attempt's write throws StaleRunError). */
  private async writeRecord(key: string, record: OutboxRecord): Promise<void> {
    checkReply(
      'outbox-set',
      await runScript(this.o.client, 'outbox-set', [this.outboxKey, this.runKey], [key, this.token, JSON.stringify(record), this.outboxTtl]),
      this.o.runId,
    );
  }

  /** The fencing token as the outbox scripts take it ('' for an unfenced sink). */
  private get token(): string {
    return this.o.token === undefined ? '' : String(this.o.token);
  }

  private get outboxTtl(): number {
    return this.o.outboxTtlSeconds ?? DEFAULT_DELIVERY_KEY_TTL_SECONDS;
  }

  /**
   * Claims a delivery key in one script: `delivered` with the record when an
   * earlier attempt got it acknowledged, else records `status` and answers
   * `claimed`. Throws StaleRunError when the run's token moved on.
   */
  private async claim(key: string, status: 'possibly-dispatched' | 'not-dispatched'): Promise<{ claimed: true } | { claimed: false; record: OutboxRecord }> {
    const reply = checkReply(
      'outbox-claim',
      await runScript(
        this.o.client,
        'outbox-claim',
        [this.outboxKey, this.runKey, this.outboxIndexKey],
        [key, this.token, JSON.stringify({ status } satisfies OutboxRecord), this.outboxTtl, this.o.outboxMaxEntries ?? DEFAULTS.retention.indexMaxEntries],
      ),
      this.o.runId,
    );
    return reply[0] === 'delivered' ? { claimed: false, record: JSON.parse(String(reply[1])) as OutboxRecord } : { claimed: true };
  }

  /** Sends one chunk under its delivery key, unless an earlier attempt already delivered it. Traced as a `delivery` span. */
  private deliver(key: string, text: string, buttons?: MessageButton[]): Promise<void> {
    const channel = channelIdOf(this.o.conversationId);
    return inSpan(
      SPAN.delivery,
      {
        kind: SpanKind.PRODUCER,
        attributes: { 'steerbot.channel': channel, 'steerbot.delivery_key': key, 'steerbot.delivery.attempts': 1, 'steerbot.delivery.rate_limit_retries': 0 },
      },
      async (span) => {
        const outcome = await this.deliverChunk(key, text, buttons);
        span.setAttribute('steerbot.delivery.outcome', outcome);
        if (outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR });
        metrics.deliveries.inc({ channel, outcome });
      },
    );
  }

  private async deliverChunk(key: string, text: string, buttons?: MessageButton[]): Promise<'sent' | 'skipped' | 'recorded' | 'failed'> {
    const out = this.outbound;
    const claim = await this.claim(key, out ? 'possibly-dispatched' : 'not-dispatched');
    if (!out) return 'recorded';
    if (!claim.claimed) {
      const earlier = claim.record;
      if (!earlier.streaming) {
        this.o.logger.info({ deliveryKey: key }, 'skipping a message already delivered by an earlier attempt');
        return 'skipped';
      }
      // A streaming preview left by an earlier attempt is finished in place rather than sent again.
      if (earlier.messageId !== undefined && out.edit && (await this.finishStream({ key, messageId: earlier.messageId, shown: '' }, text))) return 'sent';
      await this.writeRecord(key, { status: 'possibly-dispatched' });
    }
    try {
      const { messageId } = await this.withRetry(key, () =>
        out.send(this.o.conversationId, text, { deliveryKey: key, format: 'markdown', ...(buttons && { buttons }) }),
      );
      await this.writeRecord(key, { status: 'acknowledged', messageId });
      this.sent++;
      return 'sent';
    } catch (err) {
      if (refused(err)) await this.writeRecord(key, { status: 'not-dispatched', error: (err as Error).message.slice(0, 200) });
      this.o.logger.error({ err, deliveryKey: key }, 'delivery failed');
      return 'failed';
    }
  }

  /** Edits a streamed message to its final text (first chunk); false when that failed and the chunk must be sent anew. */
  private async finishStream(s: Pick<Stream, 'key' | 'messageId' | 'shown'>, text: string): Promise<boolean> {
    const out = this.outbound!;
    try {
      // Formatted like a message sent whole, so a streamed reply ends looking the same.
      if (text !== s.shown) await this.withRetry(s.key, () => out.edit!(this.o.conversationId, s.messageId!, text, { format: 'markdown' }));
      await this.writeRecord(s.key, { status: 'acknowledged', messageId: s.messageId! });
      return true;
    } catch (err) {
      this.o.logger.warn({ err, deliveryKey: s.key }, 'final edit of a streamed message failed; sending the text as a new message');
      // The key's record still says `streaming`; a plain record lets `deliver` send the chunk.
      await this.writeRecord(s.key, { status: 'not-dispatched', error: 'final edit failed' });
      return false;
    }
  }

  private scheduleFlush(s: Stream): void {
    if (s.final || s.phase !== 'live' || s.queued || s.timer) return;
    const interval = this.outbound!.streamEditIntervalMs!(this.o.conversationId);
    const wait = s.messageId === undefined && s.lastAt === 0 ? 0 : Math.max(0, s.lastAt + interval - this.now());
    s.timer = setTimeout(() => {
      s.timer = undefined;
      s.queued = true;
      void this.enqueue(() => this.flush(s)).finally(() => {
        s.queued = false;
        if (!s.final && s.phase === 'live' && this.preview(s.buffer) !== s.shown) this.scheduleFlush(s);
      });
    }, wait);
    s.timer.unref();
  }

  /** What a streamed message shows for `buffer`: trimmed, cut to the limit (the final message carries the rest). */
  private preview(buffer: string): string {
    const max = this.outbound!.maxMessageChars;
    const text = buffer.trim();
    return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
  }

  /** Sends the streamed message or edits it to the latest preview. Best effort: no retries, a failure ends streaming. */
  private async flush(s: Stream): Promise<void> {
    await this.waitHold();
    if (s.final || s.phase !== 'live') return;
    const text = this.preview(s.buffer);
    if (!text || text === s.shown) return;
    const out = this.outbound!;
    try {
      if (s.messageId === undefined) {
        const claim = await this.claim(s.key, 'possibly-dispatched');
        if (!claim.claimed && !claim.record.streaming) {
          s.phase = 'skip';
          return;
        }
        if (!claim.claimed && claim.record.messageId !== undefined) {
          s.messageId = claim.record.messageId;
        } else {
          const { messageId } = await out.send(this.o.conversationId, text, { deliveryKey: s.key, format: 'markdown' });
          s.messageId = messageId;
          s.shown = text;
          s.lastAt = this.now();
          this.sent++;
          await this.writeRecord(s.key, { status: 'acknowledged', messageId, streaming: true });
          return;
        }
      }
      await out.edit!(this.o.conversationId, s.messageId, text, { format: 'markdown' });
      s.shown = text;
      s.lastAt = this.now();
    } catch (err) {
      if (err instanceof ChannelApiError && err.retryAfterMs !== undefined) this.hold(err.retryAfterMs);
      if (err instanceof ChannelApiError && err.retryAfterMs !== undefined && s.messageId !== undefined) {
        // Rate-limited edit: skip it, try again after the platform's wait.
        s.lastAt = this.now() + err.retryAfterMs;
        return;
      }
      if (s.messageId === undefined && refused(err)) await this.writeRecord(s.key, { status: 'not-dispatched', error: (err as Error).message.slice(0, 200) });
      s.phase = s.messageId === undefined ? 'failed' : s.phase;
      this.o.logger.warn({ err, deliveryKey: s.key }, 'streaming update failed');
      if (s.messageId !== undefined) s.lastAt = this.now();
    }
  }

  /**
   * Holds every later platform call of this conversation for a 429's
   * `retryAfterMs` (cut to `maxRetryDelayMs`); returns the wait in ms.
   */
  private hold(retryAfterMs: number): number {
    const wait = Math.min(Math.max(0, retryAfterMs), this.o.maxRetryDelayMs ?? DEFAULTS.deliveryMaxRetryDelayMs);
    if (this.outbound) holdUntil(this.outbound, this.o.conversationId, this.now() + wait, this.now());
    return wait;
  }

  /** Waits until no 429 holds this conversation (set by any call of this run, or of an earlier run in this process). */
  private async waitHold(): Promise<void> {
    if (!this.outbound) return;
    // Checked again after the wait: a timer may fire a millisecond early on the wall clock. Bounded, for injected clocks.
    for (let i = 0; i < 3; i++) {
      const until = heldUntil(this.outbound, this.o.conversationId, this.now());
      if (until === 0) return;
      await this.sleep(until - this.now());
    }
  }

  /** Runs a platform call, retrying rate limits (after `retryAfterMs`) and 5xx (exponential backoff), at most `maxAttempts` times. */
  private async withRetry<T>(key: string, call: () => Promise<T>): Promise<T> {
    const maxAttempts = this.o.maxAttempts ?? DEFAULTS.deliveryMaxAttempts;
    const cap = this.o.maxRetryDelayMs ?? DEFAULTS.deliveryMaxRetryDelayMs;
    for (let attempt = 1; ; attempt++) {
      // Later attempts come after this loop's own wait; the first waits out a hold set by any earlier call.
      if (attempt === 1) await this.waitHold();
      try {
        return await call();
      } catch (err) {
        // A 429 holds every later call of the conversation, also when this one gives up.
        const held = err instanceof ChannelApiError && err.retryAfterMs !== undefined ? this.hold(err.retryAfterMs) : undefined;
        if (!(err instanceof ChannelApiError) || attempt >= maxAttempts) throw err;
        let delay: number;
        if (held !== undefined) delay = held;
        else if (err.status !== undefined && err.status >= 500) delay = backoffMs(attempt, this.o.retryBaseMs ?? 500);
        else throw err;
        delay = Math.min(Math.max(0, delay), cap);
        // `deliveryAttempt`, not `attempt`: the run's logger already carries the run's `attempt`.
        this.o.logger.warn({ deliveryKey: key, deliveryAttempt: attempt, delayMs: delay, status: err.status }, 'channel call failed; retrying');
        noteRetry(channelIdOf(this.o.conversationId), held !== undefined, delay, attempt);
        await this.sleep(delay);
      }
    }
  }
}

const rateLimitRetries = new WeakMap<object, number>();

/** A retried platform call: counted, and on the active `delivery` span (attempts so far, retries after 429, time waited). */
function noteRetry(channel: string, rateLimited: boolean, delayMs: number, attempt: number): void {
  metrics.deliveryRetries.inc({ channel, reason: rateLimited ? 'rate_limit' : 'server_error' });
  if (rateLimited) metrics.rateLimitWait.inc({ channel }, delayMs / 1000);
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return;
  span.setAttribute('steerbot.delivery.attempts', attempt + 1);
  if (rateLimited) {
    const n = (rateLimitRetries.get(span) ?? 0) + 1;
    rateLimitRetries.set(span, n);
    span.setAttribute('steerbot.delivery.rate_limit_retries', n);
  }
  span.addEvent('retry', { 'steerbot.delivery.attempt': attempt, 'steerbot.delivery.rate_limited': rateLimited, 'steerbot.delivery.wait_ms': delayMs });
}
