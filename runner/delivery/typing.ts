/**
 * The typing indicator of a run: first sent once the run has worked
 * `delayMs` (a quicker answer shows none, and costs no platform call), then
 * refreshed every `intervalMs` until stopped. Typing is a platform call like any other:
 * none while a 429 holds the conversation, and a 429 it gets holds the rest.
 */
import type { Logger } from 'pino';
import type { ChannelOutbound } from '../../src/channel.js';
import { ChannelApiError } from '../../src/errors.js';
import type { PlatformCalls } from './platform-calls.js';

/** The typing refresh of one run. */
export class TypingIndicator {
  /** The first typing's delay timer, then the refresh interval; set exactly while the indicator runs. */
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly outbound: ChannelOutbound | undefined,
    private readonly conversationId: string,
    private readonly calls: PlatformCalls,
    private readonly logger: Logger,
  ) {}

  /** Starts the refresh (no-op when the channel has no typing, or it runs already). */
  start(delayMs: number, intervalMs: number): void {
    const out = this.outbound;
    if (!out?.typing || this.timer) return;
    const fire = () => {
      if (this.calls.held()) return;
      void out.typing!(this.conversationId).catch((err: unknown) => {
        if (err instanceof ChannelApiError && err.retryAfterMs !== undefined) this.calls.hold(err.retryAfterMs);
        this.logger.debug({ err }, 'typing failed');
      });
    };
    const refresh = () => {
      fire();
      this.timer = setInterval(fire, intervalMs);
      this.timer.unref();
    };
    if (delayMs <= 0) return refresh();
    this.timer = setTimeout(refresh, delayMs);
    this.timer.unref();
  }

  /** Stops the refresh (a typing not sent yet is never sent). */
  stop(): void {
    // clearTimeout and clearInterval clear either kind of timer.
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
