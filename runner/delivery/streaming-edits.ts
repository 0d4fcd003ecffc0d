/**
 * Streaming by editing one message in place: deltas are shown as a preview
 * message, edited at most once per the channel's interval (identical edits
 * skipped), best effort (no retries; a failure ends streaming). The run's
 * final message then edits the preview to the final text instead of sending
 * a duplicate (`finish`).
 */
import type { Logger } from 'pino';
import type { ChannelOutbound } from '../../src/channel.js';
import { ChannelApiError } from '../../src/errors.js';
import type { RunOutbox } from './outbox.js';
import type { PlatformCalls } from './platform-calls.js';

/** A message being streamed by editing it in place. */
export interface Stream {
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

/** What the streaming edits of one run work with. */
export interface StreamingDeps {
  conversationId: string;
  outbound: ChannelOutbound | undefined;
  outbox: RunOutbox;
  calls: PlatformCalls;
  logger: Logger;
  now: () => number;
  /** The next delivery key of the run. */
  nextKey: () => string;
  /** A message was handed to the channel (a send, not an edit). */
  onSent: () => void;
}

/** Whether a failed call is known not to have reached the user (a 4xx answer: the platform refused it). */
export const refused = (err: unknown) => err instanceof ChannelApiError && err.status !== undefined && err.status >= 400 && err.status < 500;

/** The streaming preview of one run (at most one at a time). */
export class StreamingEdits {
  private stream: Stream | undefined;

  constructor(private readonly d: StreamingDeps) {}

  /** True when the channel streams (edits a message in place): deltas are shown. */
  live(): boolean {
    const out = this.d.outbound;
    return Boolean(out?.edit && out.streamEditIntervalMs);
  }

  /** A streaming delta: shown by editing one message when the channel streams; ignored otherwise. */
  delta(text: string): void {
    if (!this.live() || !text) return;
    const s = (this.stream ??= {
      key: this.d.nextKey(),
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

  /** The final message takes the preview over: no more edits from deltas. Returns it, if there was one. */
  take(): Stream | undefined {
    const stream = this.stream;
    this.stream = undefined;
    if (stream) {
      stream.final = true;
      clearTimeout(stream.timer);
    }
    return stream;
  }

  /** Stops any pending edit (the run ends). */
  close(): void {
    if (this.stream) {
      this.stream.final = true;
      clearTimeout(this.stream.timer);
    }
  }

  /** Edits a streamed message to its final text (first chunk); false when that failed and the chunk must be sent anew. */
  async finish(s: Pick<Stream, 'key' | 'messageId' | 'shown'>, text: string): Promise<boolean> {
    const out = this.d.outbound!;
    try {
      // Formatted like a message sent whole, so a streamed reply ends looking the same.
      if (text !== s.shown) await this.d.calls.withRetry(s.key, () => out.edit!(this.d.conversationId, s.messageId!, text, { format: 'markdown' }));
      await this.d.outbox.write(s.key, { status: 'acknowledged', messageId: s.messageId! });
      return true;
    } catch (err) {
      this.d.logger.warn({ err, deliveryKey: s.key }, 'final edit of a streamed message failed; sending the text as a new message');
      // The key's record still says `streaming`; a plain record lets `deliver` send the chunk.
      await this.d.outbox.write(s.key, { status: 'not-dispatched', error: 'final edit failed' });
      return false;
    }
  }

  private scheduleFlush(s: Stream): void {
    if (s.final || s.phase !== 'live' || s.queued || s.timer) return;
    const interval = this.d.outbound!.streamEditIntervalMs!(this.d.conversationId);
    const wait = s.messageId === undefined && s.lastAt === 0 ? 0 : Math.max(0, s.lastAt + interval - this.d.now());
    s.timer = setTimeout(() => {
      s.timer = undefined;
      s.queued = true;
      void this.d.calls
        .enqueue(() => this.flush(s))
        .finally(() => {
          s.queued = false;
          if (!s.final && s.phase === 'live' && this.preview(s.buffer) !== s.shown) this.scheduleFlush(s);
        });
    }, wait);
    s.timer.unref();
  }

  /** What a streamed message shows for `buffer`: trimmed, cut to the limit (the final message carries the rest). */
  private preview(buffer: string): string {
    const max = this.d.outbound!.maxMessageChars;
    const text = buffer.trim();
    return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
  }

  /** Sends the streamed message or edits it to the latest preview. Best effort: no retries, a failure ends streaming. */
  private async flush(s: Stream): Promise<void> {
    await this.d.calls.waitHold();
    if (s.final || s.phase !== 'live') return;
    const text = this.preview(s.buffer);
    if (!text || text === s.shown) return;
    try {
      if (s.messageId === undefined && !(await this.firstShow(s, text))) return;
      await this.d.outbound!.edit!(this.d.conversationId, s.messageId!, text, { format: 'markdown' });
      s.shown = text;
      s.lastAt = this.d.now();
    } catch (err) {
      await this.flushFailed(s, err);
    }
  }

  /**
   * The preview's first show: sent under its key, unless an earlier attempt
   * got that far (its message is then edited). True when an edit is still to do.
   */
  private async firstShow(s: Stream, text: string): Promise<boolean> {
    const claim = await this.d.outbox.claim(s.key, 'possibly-dispatched');
    if (!claim.claimed && !claim.record.streaming) {
      s.phase = 'skip';
      return false;
    }
    if (!claim.claimed && claim.record.messageId !== undefined) {
      s.messageId = claim.record.messageId;
      return true;
    }
    const since = claim.claimed ? claim.maybeSentSince : undefined;
    const { messageId } = await this.d.outbound!.send(this.d.conversationId, text, {
      deliveryKey: s.key,
      format: 'markdown',
      ...(since !== undefined && { maybeSentSince: since }),
    });
    s.messageId = messageId;
    s.shown = text;
    s.lastAt = this.d.now();
    this.d.onSent();
    // Acknowledged before anything else is awaited (see RunDelivery.deliverChunk).
    await this.d.outbox.write(s.key, { status: 'acknowledged', messageId, streaming: true });
    return false;
  }

  private async flushFailed(s: Stream, err: unknown): Promise<void> {
    if (err instanceof ChannelApiError && err.retryAfterMs !== undefined) this.d.calls.hold(err.retryAfterMs);
    if (err instanceof ChannelApiError && err.retryAfterMs !== undefined && s.messageId !== undefined) {
      // Rate-limited edit: skip it, try again after the platform's wait.
      s.lastAt = this.d.now() + err.retryAfterMs;
      return;
    }
    if (s.messageId === undefined && refused(err)) await this.d.outbox.write(s.key, { status: 'not-dispatched', error: (err as Error).message.slice(0, 200) });
    s.phase = s.messageId === undefined ? 'failed' : s.phase;
    this.d.logger.warn({ err, deliveryKey: s.key }, 'streaming update failed');
    if (s.messageId !== undefined) s.lastAt = this.d.now();
  }
}
