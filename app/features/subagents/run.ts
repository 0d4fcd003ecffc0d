/**
 * Subagents' runner part: a run gets `RunContext.features.subagents` when
 * `subagents.enabled`. Each task becomes an input (an event from `delegate`)
 * of a child conversation of its own, `subagent:<run id>.<call>.<n>`, so it
 * runs like any run: on any runner, with its own record, lease and
 * checkpoint, under the input policy `steer` (a steer message joins its run).
 * Ids and update keys come from the run, the tool call and the task's place,
 * so a takeover re-running the call finds the same children and starts none
 * twice. A child's input is owned by the run's accountable identity and
 * names the run's conversation as its parent: the child runs under the
 * parent's profile, and its spend is charged to that identity and to the
 * parent conversation's budget. Children cannot delegate (depth 1): the
 * member is absent in their runs, and in runs an adopted child's result started. A child's answers are its record's final steps; the
 * wait blocks on its record and reads it again when an entry arrives.
 */
import type { FeatureRun, RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import type { RunResult, RunSubagents, SubagentResult } from '../../../runner/plugin.js';
import { InvalidInputError } from '../../../src/errors.js';
import { ingestEvent } from '../../../src/events.js';
import { CHILDREN_TTL_SECONDS, childId, childrenKeys, digest, SUBAGENT_CHANNEL, stopAll, taskParent, waitOne } from './children.js';
import { subagentsEnded } from './ended.js';
import { expireChildrenWithParent } from './retention.js';

/** Terminal reason of a run in a child conversation that no `delegate` task started: refused, never run under a profile of its own. */
export const NO_PARENT_REASON = 'subagent without a parent';

/**
 * A child's parent, whose profile and budgets its runs take, and the
 * subagents member of a run's context (none when subagents are off or the
 * run is a child's). Children's parents are named even with subagents off: a
 * child started before they were turned off still runs as its parent's.
 */
export function subagentsRunner(kit: RunnerFeatureKit): RunnerFeature {
  const isChild = (conversationId: string) => kit.channels.channelOf(conversationId) === SUBAGENT_CHANNEL;
  const lineage: RunnerFeature = {
    name: 'subagents',
    parent: (conversationId, starter) => (isChild(conversationId) ? taskParent(starter) : undefined),
    // Fail closed: a child run without a known parent would run under the child conversation's own profile and budget.
    before: async (run) => (isChild(run.conversationId) && run.parentConversationId === undefined ? orphanRefused(kit, run) : undefined),
    // Also with subagents off since: children started before expire with their parent.
    ended: async (run) => (isChild(run.conversationId) ? undefined : expireChildrenWithParent(kit, run.conversationId)),
  };
  if (!kit.config.subagents.enabled) return lineage;
  return {
    ...lineage,
    context: (run) => (isChild(run.conversationId) || startedByResult(run) ? {} : { subagents: runSubagents(kit, run) }),
    ended: async (run, outcome) => {
      await subagentsEnded(kit, run, outcome);
      await lineage.ended?.(run, outcome);
    },
  };
}

/**
 * Whether the run was started by an adopted child's result: such a run starts no children, or text a child read
 * could have every result start the next ones, an endless chain of runs no person started.
 */
const startedByResult = (run: FeatureRun): boolean => run.starter?.origin?.source === SUBAGENT_CHANNEL;

/** Ends a child's run that names no parent before anything is spent on it (final: a follow-up would be refused the same way). */
function orphanRefused(kit: RunnerFeatureKit, run: FeatureRun): RunResult {
  kit.logger.warn({ conversationId: run.conversationId, runId: run.runId }, 'a run in a subagent conversation without a delegate task refused');
  return { outcome: 'failed', reason: NO_PARENT_REASON, final: true };
}

function runSubagents(kit: RunnerFeatureKit, run: FeatureRun): RunSubagents {
  const { maxPerRun, timeoutSeconds } = kit.config.subagents;
  const own = `${SUBAGENT_CHANNEL}:${run.runId}.`;
  const ingest = (conversationId: string, id: string, text: string) =>
    ingestEvent(
      kit.ingest,
      {
        conversationId,
        origin: { kind: 'event', source: 'delegate', id, ...(run.identity !== undefined && { owner: run.identity }), data: { parent: run.conversationId } },
        text,
      },
      { policy: 'steer', channel: SUBAGENT_CHANNEL },
    );
  return {
    timeoutMs: timeoutSeconds * 1000,
    async start(key, tasks) {
      const ids = tasks.map((_, i) => childId(run.runId, key, i + 1));
      await reserve(kit, run, ids, maxPerRun);
      await Promise.all(ids.map((id, i) => ingest(id, 'task', tasks[i]!)));
      return ids;
    },
    async steer(id, text, key) {
      if (!id.startsWith(own)) return false;
      await ingest(id, `steer.${digest(key)}`, text);
      return true;
    },
    async wait(ids, opts) {
      const deadline = Date.now() + opts.timeoutMs;
      const results: SubagentResult[] = [];
      for (const id of ids) {
        if (!id.startsWith(own)) {
          results.push({ id, status: 'failed', reason: 'not a subagent of this run' });
          continue;
        }
        results.push(await waitOne(kit, id, deadline, opts.signal));
      }
      if (opts.signal.aborted) await stopAll(kit, run, ids);
      // A child whose result the run read is its own business from now on: it is not announced when the run ends.
      const done = results.filter((r) => r.status !== 'running' && r.id.startsWith(own)).map((r) => r.id);
      if (done.length > 0)
        await kit.redis
          .multi()
          .sadd(childrenKeys(kit.prefix, run).collected, ...done)
          .expire(childrenKeys(kit.prefix, run).collected, CHILDREN_TTL_SECONDS)
          .exec();
      return results;
    },
  };
}

/**
 * Adds `ids` to the run's children in Redis (kept beside its run record), or
 * throws InvalidInputError, adding none, when the run would have more than
 * `max`: counted across the run's invocations and attempts and its parallel
 * calls (the check and the add are one MULTI); a re-run of a call adds nothing.
 */
async function reserve(kit: RunnerFeatureKit, run: FeatureRun, ids: readonly string[], max: number): Promise<void> {
  const key = childrenKeys(kit.prefix, run).started;
  const replies = await kit.redis
    .multi()
    .smismember(key, ...ids)
    .sadd(key, ...ids)
    .scard(key)
    .expire(key, CHILDREN_TTL_SECONDS)
    .exec();
  const [[, had], , [, count]] = replies as [[unknown, number[]], unknown, [unknown, number]];
  if (count <= max) return;
  const added = ids.filter((_, i) => had[i] === 0);
  if (added.length > 0) await kit.redis.srem(key, ...added);
  throw new InvalidInputError(`a run may start at most ${max} subagents (${count - added.length} started); wait for their results instead`);
}
