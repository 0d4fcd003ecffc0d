/**
 * A run's progress shown as reactions on the person's messages
 * (`ChannelOutbound.react`, opt-in per channel): taken, answered, failed.
 * Best effort: a reaction the platform refuses is logged and the run goes on.
 * Calls go one after another, so a message never ends on an older status.
 */
import type { Logger } from 'pino';
import type { ChannelOutbound } from '../../src/channel.js';
import type { ReactionStatus } from '../../src/config/reactions.js';
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';

type Messages = ReadonlyArray<SeqEntry<MessageReceived>>;

/** The status reactions of one run attempt's conversation. */
export class StatusReactions {
  /** The status last shown per platform message id (no call to show it again). */
  private readonly shown = new Map<string, ReactionStatus>();
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly conversationId: string,
    private readonly outbound: ChannelOutbound | undefined,
    private readonly logger: Logger,
  ) {}

  /** Shows `status` on each of `messages` that has a platform message id (a schedule's fire or an event has none). */
  mark(messages: Messages, status: ReactionStatus): void {
    const out = this.outbound;
    if (!out?.react) return;
    for (const m of messages) {
      const id = m.messageId;
      if (id === undefined || m.origin || this.shown.get(id) === status) continue;
      this.shown.set(id, status);
      this.chain = this.chain
        .then(() => out.react!(this.conversationId, id, status))
        .catch((err: unknown) => this.logger.warn({ err, messageId: id, status }, 'status reaction not shown'));
    }
  }

  /** Resolves once every reaction asked for so far was shown or given up. */
  settled(): Promise<void> {
    return this.chain;
  }
}
