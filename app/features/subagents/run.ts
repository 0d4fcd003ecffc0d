/**
 * Subagents' runner part: a run gets `RunContext.subagents` when
 * `subagents.enabled`. Each task becomes an input (an event from `delegate`)
 * of a child conversation of its own, `subagent:<run id>.<call>.<n>`, so it
 * runs like any run: on any runner, with its own record, lease and
 * checkpoint, under the input policy `steer` (a steer message joins its run).
 * Ids and update keys come from the run, the tool call and the task's place,
 * so a takeover re-running the call finds the same children and starts none
 * twice. A child's input is owned by the run's accountable identity: its
 * spend is charged there. Children cannot delegate (depth 1): the member is
 * absent in their runs. A child's answers are its record's final steps; the
 * wait blocks on its record and reads it again when an entry arrives.
 */
import { createHash } from 'node:crypto';
import type { FeatureRun, RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import type { RunSubagents, SubagentResult } from '../../../runner/plugin.js';
import { answerText, isFinalStep } from '../../../runner/projection.js';
import { InvalidInputError } from '../../../src/errors.js';
import { ingestEvent } from '../../../src/events.js';
import { blockingConnection } from '../../../src/http/stream-readers.js';
import { readRange } from '../../../src/record/read.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import type { RedisClient } from '../../../src/scripts/index.js';

/** The channel id of child conversations. */
export const SUBAGENT_CHANNEL = 'subagent';

/** Longest single blocked read while waiting, in ms. */
const MAX_BLOCK_MS = 30_000;

/** The subagents member of a run's context; none when subagents are off or the run is a child's. */
export function subagentsRunner(kit: RunnerFeatureKit): RunnerFeature {
  const settings = kit.config.subagents;
  if (!settings.enabled) return { name: 'subagents' };
  return {
    name: 'subagents',
    context: (run) => (kit.channels.channelOf(run.conversationId) === SUBAGENT_CHANNEL ? {} : { subagents: runSubagents(kit, run) }),
  };
}

const digest = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 12);

/** The id of the `n`-th child (from 1) a call of run `runId` with idempotency key `key` starts. */
export function childId(runId: string, key: string, n: number): string {
  return `${SUBAGENT_CHANNEL}:${runId}.${digest(key)}.${n}`;
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
      return results;
    },
  };
}

/** How long a run's set of children is kept, in seconds (7 days: past any run). */
const CHILDREN_TTL_SECONDS = 7 * 86_400;

/**
 * Adds `ids` to the run's children in Redis (kept beside its run record), or
 * throws InvalidInputError, adding none, when the run would have more than
 * `max`: counted across the run's invocations and attempts and its parallel
 * calls (the check and the add are one MULTI); a re-run of a call adds nothing.
 */
async function reserve(kit: RunnerFeatureKit, run: FeatureRun, ids: readonly string[], max: number): Promise<void> {
  const key = `${conversationKeys(kit.prefix, run.conversationId).run(run.runId)}:children`;
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

/** What a wait has read of one child's record so far: its answers and how its last run ended. */
interface ChildView {
  answers: string[];
  ended?: { outcome: string; reason?: string | undefined };
  /** The last seq read (the record's stream ids are `<seq>-0`). */
  lastSeq: number;
}

/** Where one child stands: reads its record from where `view` stopped (each entry once per wait), and whether a run is active or waiting. */
async function childState(client: RedisClient, prefix: string, id: string, view: ChildView): Promise<{ result: SubagentResult; idle: boolean }> {
  const k = conversationKeys(prefix, id);
  const [active, pending, entries] = await Promise.all([client.get(k.active), client.llen(k.pending), readRange(client, k.log, { fromSeq: view.lastSeq + 1 })]);
  for (const e of entries) {
    view.lastSeq = e.seq;
    if (e.kind === 'model.step' && isFinalStep(e)) {
      const text = answerText(e.messages).trim();
      if (text) view.answers.push(text);
    } else if (e.kind === 'run.ended') view.ended = { outcome: e.outcome, reason: e.reason };
  }
  const idle = !active && pending === 0 && view.ended !== undefined;
  const answer = view.answers.join('\n\n');
  const status = !idle ? 'running' : answer ? 'done' : 'failed';
  const result: SubagentResult = {
    id,
    status,
    ...(answer && { answer }),
    ...(status === 'failed' && { reason: view.ended?.reason ?? view.ended?.outcome ?? 'ended without an answer' }),
  };
  return { result, idle };
}

/** Waits for one child until it is idle, `deadline` passes or `signal` fires. */
async function waitOne(kit: RunnerFeatureKit, id: string, deadline: number, signal: AbortSignal): Promise<SubagentResult> {
  const log = conversationKeys(kit.prefix, id).log;
  const view: ChildView = { answers: [], lastSeq: 0 };
  let conn: RedisClient | undefined;
  const stop = () => conn?.disconnect();
  signal.addEventListener('abort', stop, { once: true });
  try {
    for (;;) {
      const { result, idle } = await childState(kit.redis, kit.prefix, id, view);
      const left = deadline - Date.now();
      if (idle || left <= 0 || signal.aborted) return result;
      conn ??= blockingConnection(kit.redis);
      try {
        await conn.xread('COUNT', 1, 'BLOCK', Math.min(MAX_BLOCK_MS, Math.max(1, left)), 'STREAMS', log, view.lastSeq > 0 ? `${view.lastSeq}-0` : '0-0');
      } catch (err) {
        if (!signal.aborted) throw err;
      }
    }
  } finally {
    signal.removeEventListener('abort', stop);
    conn?.disconnect();
  }
}

/** Stops the children's runs: the parent was stopped while waiting for them. */
async function stopAll(kit: RunnerFeatureKit, run: FeatureRun, ids: readonly string[]): Promise<void> {
  await Promise.all(
    ids.map((id) =>
      kit.ingest.dispatch
        .requestStop({ conversationId: id, updateKey: `stop.${run.runId}`, sender: { id: 'delegate', name: 'delegate' } }, 'stop')
        .catch((err: unknown) => kit.logger.warn({ err, subagent: id }, 'subagent not stopped')),
    ),
  );
}
