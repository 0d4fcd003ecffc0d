/**
 * A channel's `reactions` setting (opt-in): the emoji its outbound `react`
 * shows for a run's progress on the person's message.
 */
import { z } from 'zod';

/** A run's progress on a message, as a reaction shows it (`ChannelOutbound.react`). */
export type ReactionStatus = 'taken' | 'answered' | 'failed';

/** The emoji of each status, or false (no reactions). */
export type ReactionsSetting = false | Record<ReactionStatus, string>;

/**
 * The schema of a channel's `reactions` setting, with the platform's own
 * `defaults`: false (the default), true (the defaults), or emoji by status
 * (`{ "taken": "👀" }`; the others keep their defaults).
 */
export function reactionsSetting(defaults: Record<ReactionStatus, string>) {
  const emoji = z.string().min(1).max(64);
  return z
    .union([z.boolean(), z.strictObject({ taken: emoji.optional(), answered: emoji.optional(), failed: emoji.optional() })], {
      error: 'expected true, false or emoji by status ({ "taken": "👀", "answered": "👍", "failed": "😢" })',
    })
    .default(false)
    .transform((v): ReactionsSetting => {
      if (v === false) return false;
      if (v === true) return { ...defaults };
      return { taken: v.taken ?? defaults.taken, answered: v.answered ?? defaults.answered, failed: v.failed ?? defaults.failed };
    })
    .describe(
      `Show a run's progress as a reaction on the person's message: \`taken\` (${defaults.taken}), \`answered\` (${defaults.answered}), \`failed\` (${defaults.failed}); true for these, or emoji by status. Default false.`,
    );
}

/**
 * The emoji a platform that keeps every reaction (Discord, Slack) must take
 * off before showing `status`: on an answer or a failure, the bot's other
 * statuses' emoji (a failed message a follow-up run answers shows the
 * answer alone); none for `taken`, the first.
 */
export function staleReactions(emoji: Record<ReactionStatus, string>, status: ReactionStatus): string[] {
  if (status === 'taken') return [];
  return [emoji.taken, emoji[status === 'answered' ? 'failed' : 'answered']].filter((e) => e !== emoji[status]);
}
