/**
 * Subagents after a run ended. A parent stopped (`/stop`) stops every child it
 * started whose result it never read. A parent that ended any other way adopts
 * those children instead: once a child is done, its result comes to the
 * parent's conversation as an event from `subagent` (a run there tells the
 * person), exactly once. Whichever end comes second, the parent's or the
 * child's, sends it: the parent writes the adoption before it looks at the
 * child, the child looks for an adoption after its end is recorded, and the
 * event's id (the child's) dedupes the two.
 */
import type { EndedRun, RunnerFeatureKit } from '../../../runner/feature.js';
import { ingestEvent } from '../../../src/events.js';
import type { RunOutcome } from '../../../src/record/entries.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import { ADOPTION_KEY_SUFFIX, CHILDREN_TTL_SECONDS, childrenKeys, childState, SUBAGENT_CHANNEL, stopAll } from './children.js';

/** Where an adopted child's result goes: the parent's conversation, charged to the parent run's identity. */
interface Adoption {
  parent: string;
  owner?: string;
}

const adoptionKey = (prefix: string, child: string) => `${conversationKeys(prefix, child).base}${ADOPTION_KEY_SUFFIX}`;

/** The `ended` hook of the subagents feature, for parents and children alike. */
export async function subagentsEnded(kit: RunnerFeatureKit, run: EndedRun, outcome: RunOutcome): Promise<void> {
  if (kit.channels.channelOf(run.conversationId) === SUBAGENT_CHANNEL) return announce(kit, run.conversationId);
  const keys = childrenKeys(kit.prefix, run);
  // One round trip: this runs at the end of every run while subagents are on.
  const [[, started], [, collected]] = (await kit.redis.multi().smembers(keys.started).smembers(keys.collected).exec()) as [
    [unknown, string[]],
    [unknown, string[]],
  ];
  const open = started.filter((id) => !collected.includes(id));
  if (open.length === 0) return;
  if (outcome === 'stopped') return stopAll(kit, run, open);
  const adoption: Adoption = { parent: run.conversationId, ...(run.identity !== undefined && { owner: run.identity }) };
  await Promise.all(
    open.map(async (id) => {
      await kit.redis.set(adoptionKey(kit.prefix, id), JSON.stringify(adoption), 'EX', CHILDREN_TTL_SECONDS);
      await announce(kit, id);
    }),
  );
}

/** Sends an adopted child's result to its parent's conversation, once the child is done; nothing for a child nobody adopted. */
async function announce(kit: RunnerFeatureKit, child: string): Promise<void> {
  const raw = await kit.redis.get(adoptionKey(kit.prefix, child));
  if (!raw) return;
  const { result, idle } = await childState(kit.redis, kit.prefix, child, { answers: [], lastSeq: 0 });
  if (!idle) return;
  // Written by a runner of this deployment (above), not user input.
  const adoption = JSON.parse(raw) as Adoption;
  const policy = kit.channels.settings(adoption.parent)?.policy;
  await ingestEvent(
    kit.ingest,
    {
      conversationId: adoption.parent,
      origin: {
        kind: 'event',
        source: SUBAGENT_CHANNEL,
        id: child,
        ...(adoption.owner !== undefined && { owner: adoption.owner }),
        data: { subagent: child, status: result.status },
      },
      text: result.answer ?? `The subagent ended without an answer (${result.reason ?? 'no reason given'}).`,
    },
    policy ? { policy } : {},
  );
}
