/**
 * Budgets' host part: purging a person deletes their usage counters; purging
 * a conversation leaves its counters (a purge must not reset a budget) and
 * forgets only that its refusals were told, so the chat that starts over
 * hears of a spent budget again.
 */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { Budgets } from '../../../src/people/budget.js';

/** The purge hooks on `kit`'s identities and on `/purge`. */
export function budgetsHost(kit: HostFeatureKit): HostFeature {
  const budgets = new Budgets({ client: kit.redis, prefix: kit.prefix, settings: kit.config.budgets });
  kit.identities.onChange({ purged: (identity) => budgets.purge(identity).then(() => undefined) });
  return { name: 'budgets', purging: async (conversationId) => () => budgets.forgetNotices(conversationId) };
}
