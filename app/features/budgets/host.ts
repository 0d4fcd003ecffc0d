/** Budgets' host part: purging a person deletes their usage counters. */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { Budgets } from '../../../src/people/budget.js';

/** The purge hook on `kit`'s identities. */
export function budgetsHost(kit: HostFeatureKit): HostFeature {
  const budgets = new Budgets({ client: kit.redis, prefix: kit.prefix, settings: kit.config.budgets });
  kit.identities.onChange({ purged: (identity) => budgets.purge(identity).then(() => undefined) });
  return { name: 'budgets' };
}
