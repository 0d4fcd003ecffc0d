/**
 * Subagents' host part: `/status` lists the children of the conversation's
 * active run, running or finished; the console draws the run tree
 * (console.ts). They are found from the run's `delegate`
 * calls in the record (each call's idempotency key names its children, see
 * run.ts), so nothing besides the children's own conversations is stored.
 * `/purge` of a conversation purges its children too: their records hold the
 * tasks it delegated and what the children found.
 */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { readRange, readTail } from '../../../src/record/read.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import type { RedisClient } from '../../../src/scripts/index.js';
import { childConversations, childId, childrenKeys } from './children.js';
import { registerSubagentsApi, subagentsPanel } from './console.js';

/** How many of the latest record entries `/status` looks through for the active run's `delegate` calls. */
const STATUS_TAIL_ENTRIES = 200;

/** The `/status` lines of subagents; none when subagents are off. */
export function subagentsHost(kit: HostFeatureKit): HostFeature {
  const { enabled, maxPerRun } = kit.config.subagents;
  // Children started before subagents were turned off still go with their parent.
  const purging = (conversationId: string) => purgingChildren(kit, conversationId);
  if (!enabled) return { name: 'subagents', purging };
  return {
    name: 'subagents',
    purging,
    status: (_channelId, conversationId) => childrenStatus(kit.redis, kit.prefix, conversationId, maxPerRun),
    console: { api: (route) => registerSubagentsApi(route, kit), panel: subagentsPanel },
  };
}

/**
 * Before a purge: finds every child the conversation's `delegate` calls
 * started, from its record (which the purge deletes), as the export finds
 * them (`childConversations`). Returns what purges them once the parent is
 * gone, stopping any that still run, and deletes the runs' sets of children.
 */
async function purgingChildren(kit: HostFeatureKit, conversationId: string): Promise<() => Promise<void>> {
  const { redis, prefix } = kit;
  const record = await readRange(redis, conversationKeys(prefix, conversationId).log);
  const calls = record.flatMap((e) => (e.kind === 'tool.started' && e.tool === 'delegate' ? [{ run: e.run, key: e.key }] : []));
  const runs = [...new Set(calls.map((c) => c.run))].map((runId) => childrenKeys(prefix, { conversationId, runId }));
  const { started, recorded } = await childConversations(redis, prefix, conversationId, calls);
  const ids = new Set([...started, ...recorded]);
  // Through the host's purge, as the parent: each child's hooks run, and a late write of its run meets a tombstone
  // that outlives its dedupe keys. A running child is stopped.
  const { purge } = kit;
  return async () => {
    await Promise.all([...ids].map((id) => purge(id, { stopActive: true })));
    if (runs.length > 0) await redis.del(...runs.flatMap((k) => [k.started, k.collected]));
  };
}

/** `Subagents: 1 running, 1 finished (…)` for the active run's children; nothing without an active run or children. */
export async function childrenStatus(redis: RedisClient, prefix: string, conversationId: string, maxPerRun: number): Promise<string[]> {
  const k = conversationKeys(prefix, conversationId);
  const [runId, tail] = await Promise.all([redis.get(k.active), readTail(redis, k.log, STATUS_TAIL_ENTRIES)]);
  if (!runId) return [];
  const keys = new Set(tail.flatMap((e) => (e.kind === 'tool.started' && e.run === runId && e.tool === 'delegate' ? [e.key] : [])));
  const ids = [...keys].flatMap((key) => Array.from({ length: maxPerRun }, (_, i) => childId(runId, key, i + 1)));
  const states = await Promise.all(
    ids.map((id) => {
      const c = conversationKeys(prefix, id);
      return Promise.all([redis.exists(c.log), redis.get(c.active)]);
    }),
  );
  const started = ids.filter((_, i) => states[i]![0] === 1);
  const running = ids.filter((_, i) => states[i]![1] !== null);
  if (started.length === 0) return [];
  return [`Subagents: ${running.length} running, ${started.length - running.length} finished${running.length ? ` (${running.join(', ')})` : ''}.`];
}
