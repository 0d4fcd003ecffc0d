/**
 * The conversation index's host part: where each person wrote, noted after
 * their message or command is recorded (what the export of a person finds,
 * src/export/); purging a person deletes it.
 */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { ConversationIndex } from '../../../src/people/conversation-index.js';

/** Notes each recorded sender; `/purge` leaves nothing of the sender's to find where it was sent. */
export function conversationIndexHost(kit: HostFeatureKit): HostFeature {
  const index = new ConversationIndex({ redis: kit.redis, prefix: kit.prefix });
  kit.identities.onChange({ purged: (_identity, accounts) => index.purge(accounts).then(() => undefined) });
  return {
    name: 'conversation index',
    // A duplicate too: the redelivery of a message whose note was lost (the host died after recording it).
    recorded: async (input) => {
      if (input.command !== 'purge') await index.note(input.channelId, input.senderId, input.conversationId);
    },
  };
}
