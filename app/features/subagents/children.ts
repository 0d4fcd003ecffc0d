/**
 * One subagent's conversation as its parent sees it: where it stands (its
 * answers and how its last run ended, read from its record), a wait that
 * blocks on its record, and stopping it.
 */
import { createHash } from 'node:crypto';
import type { FeatureRun, RunnerFeatureKit } from '../../../runner/feature.js';
import type { SubagentResult } from '../../../runner/plugin.js';
import { answerText, isFinalStep } from '../../../runner/projection.js';
import { blockingConnection } from '../../../src/http/stream-readers.js';
import type { SeqEntry } from '../../../src/record/entries.js';
import { readRange } from '../../../src/record/read.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import type { RedisClient } from '../../../src/scripts/index.js';

/** The channel id of child conversations. */
export const SUBAGENT_CHANNEL = 'subagent';

/** Longest single blocked read while waiting, in ms. */
const MAX_BLOCK_MS = 30_000;

/** How long a run's sets of children are kept, in seconds (7 days: past any run). */
export const CHILDREN_TTL_SECONDS = 7 * 86_400;

/** Suffix of a child's key naming the parent that adopted it (ended.ts), in the child's slot. */
export const ADOPTION_KEY_SUFFIX = 'adopted';

/** A short hash of `s`, for ids. */
export const digest = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 12);

/** Most children one `delegate` call can have started: the largest `subagents.maxPerRun`, so a limit lowered since still finds them all. */
const MOST_PER_CALL = 16;

/** One `delegate` call of a conversation: its run and idempotency key, which name its children. */
export interface DelegateCall {
  run: string;
  key: string;
}

/**
 * The child conversations a conversation's `delegate` calls started, found one
 * way for the purge and the export: `started`, the ids each run's set of
 * children names (kept a week); `recorded`, those and every id each call could
 * name (older ones, under the largest `maxPerRun`) whose record is still there.
 * Sorted.
 */
export async function childConversations(
  redis: RedisClient,
  prefix: string,
  conversationId: string,
  calls: readonly DelegateCall[],
): Promise<{ started: string[]; recorded: string[] }> {
  const runs = [...new Set(calls.map((c) => c.run))];
  const started = [...new Set((await Promise.all(runs.map((runId) => redis.smembers(childrenKeys(prefix, { conversationId, runId }).started)))).flat())].sort();
  const guessed = calls.flatMap(({ run, key }) => Array.from({ length: MOST_PER_CALL }, (_, i) => childId(run, key, i + 1)));
  const ids = [...new Set([...started, ...guessed])].sort();
  // Each child in its own slot: one EXISTS each.
  const there = await Promise.all(ids.map(async (id) => (await redis.exists(conversationKeys(prefix, id).log)) > 0));
  return { started, recorded: ids.filter((_, i) => there[i]) };
}

/** The id of the `n`-th child (from 1) a call of run `runId` with idempotency key `key` starts. */
export function childId(runId: string, key: string, n: number): string {
  return `${SUBAGENT_CHANNEL}:${runId}.${digest(key)}.${n}`;
}

/**
 * The conversation a child's task came from: the `parent` of the `delegate`
 * task or steer message, which only the subagents feature writes (a child
 * conversation has no channel, no events route and no schedules); undefined
 * for any other entry.
 */
export function taskParent(entry: SeqEntry | undefined): string | undefined {
  const origin = entry?.kind === 'message.received' ? entry.origin : undefined;
  if (origin?.kind !== 'event' || origin.source !== 'delegate') return undefined;
  const parent = origin.data?.parent;
  return typeof parent === 'string' && !parent.startsWith(`${SUBAGENT_CHANNEL}:`) ? parent : undefined;
}

/** A run's sets of children, kept beside its run record: every child it started, and those whose result it read. */
export function childrenKeys(prefix: string, run: Pick<FeatureRun, 'conversationId' | 'runId'>): { started: string; collected: string } {
  const base = `${conversationKeys(prefix, run.conversationId).run(run.runId)}:children`;
  return { started: base, collected: `${base}:collected` };
}

/** What a wait has read of one child's record so far: its answers and how its last run ended. */
export interface ChildView {
  answers: string[];
  ended?: { outcome: string; reason?: string | undefined };
  /** The last seq read (the record's stream ids are `<seq>-0`). */
  lastSeq: number;
}

/** Where one child stands: reads its record from where `view` stopped (each entry once per wait), and whether a run is active or waiting. */
export async function childState(client: RedisClient, prefix: string, id: string, view: ChildView): Promise<{ result: SubagentResult; idle: boolean }> {
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
export async function waitOne(kit: RunnerFeatureKit, id: string, deadline: number, signal: AbortSignal): Promise<SubagentResult> {
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
export async function stopAll(kit: RunnerFeatureKit, run: Pick<FeatureRun, 'runId'>, ids: readonly string[]): Promise<void> {
  await Promise.all(
    ids.map((id) =>
      kit.ingest.dispatch
        .requestStop({ conversationId: id, updateKey: `stop.${run.runId}`, sender: { id: 'delegate', name: 'delegate' } }, 'stop')
        .catch((err: unknown) => kit.logger.warn({ err, subagent: id }, 'subagent not stopped')),
    ),
  );
}
