/** Schedules' part of a person's export: the schedules they own, in every conversation. */
import type { ExportKit, ExportPart } from '../../../src/export/part.js';
import { parseJsonOrUndefined } from '../../../src/json.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import { ownerIndexKey, splitOwnerEntry } from '../../../src/schedules/schedules.js';

/** The identity's schedules (`schedules`), oldest first; an index entry whose schedule is gone is skipped. */
export function schedulesExport(kit: ExportKit): ExportPart {
  const { redis, prefix } = kit;
  const owned = async (identity: string): Promise<unknown[]> => {
    const entries = (await redis.smembers(ownerIndexKey(prefix, identity))).map(splitOwnerEntry);
    const raw = await Promise.all(entries.map(([id, conversationId]) => redis.hget(conversationKeys(prefix, conversationId).schedules, id)));
    return raw
      .flatMap((json) => (json === null ? [] : [(parseJsonOrUndefined(json) ?? { value: json }) as { createdAt?: number; id?: string }]))
      .sort((a, b) => Number(a.createdAt ?? 0) - Number(b.createdAt ?? 0) || String(a.id).localeCompare(String(b.id)));
  };
  return {
    holds: async (identity) => (await redis.exists(ownerIndexKey(prefix, identity))) > 0,
    person: (identity) => [['schedules', () => owned(identity)]],
  };
}
