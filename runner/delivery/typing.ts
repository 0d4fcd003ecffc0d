/**
 * The typing indicator of a run: sent at once and refreshed every
 * `intervalMs` until stopped. Typing is a platform call like any other:
 * none while a 429 holds the conversation, and a 429 it gets holds the rest.
 */
import type { Logger } from 'pino';
import type { ChannelOutbound } from '../../src/channel.js';
import { ChannelApiError } from '../../src/errors.js';
import type { PlatformCalls } from './platform-calls.js';

/** The typing refresh of one run. */
export class TypingIndicator {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly outbound: ChannelOutbound | undefined,
    private readonly conversationId: string,
    private readonly calls: PlatformCalls,
    private readonly logger: Logger,
  ) {}

  /** Starts the refresh (no-op when the channel has no typing, or it runs already). */
  start(intervalMs: number): void {
    const out = this.outbound;
    if (!out?.typing || this.timer) return;
    const fire = () => {
      if (this.calls.held()) return;
      void out.typing!(this.conversationId).catch((err: unknown) => {
        if (err instanceof ChannelApiError && err.retryAfterMs !== undefined) this.calls.hold(err.retryAfterMs);
        this.logger.debug({ err }, 'typing failed');
      });
    };
    fire();
    this.timer = setInterval(fire, intervalMs);
    this.timer.unref();
  }

  /** Stops the refresh. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
