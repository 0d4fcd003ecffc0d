/** Budgets' part of a person's export: their usage counters by window. */
import { usageView } from '../../../src/export/conversation.js';
import type { ExportKit, ExportPart } from '../../../src/export/part.js';
import { identityUsageKey } from '../../../src/people/budget.js';

/** The identity's counters (`usage`): tokens per day and month, runs per hour, notices per window. */
export function budgetsExport(kit: ExportKit): ExportPart {
  const key = (identity: string) => identityUsageKey(kit.prefix, identity);
  return {
    holds: async (identity) => (await kit.redis.exists(key(identity))) > 0,
    person: (identity) => [['usage', async () => usageView(await kit.redis.hgetall(key(identity)))]],
  };
}
