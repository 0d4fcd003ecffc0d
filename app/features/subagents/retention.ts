/**
 * Idle retention of a parent's children: a child expires with its parent.
 * Once a parent's run ended and idle retention (`retention.idleTtlSeconds`)
 * set the parent's keys to expire, every child its indexed runs started (the
 * runs' sets of children) is set to expire with the parent (within the
 * second: retention counts whole seconds), with its adoption, and the runs'
 * sets of children, kept in the parent's slot, no later than the parent: nothing of the tasks a person's conversation delegated outlives it.
 * A child still running is left to its own retention at its end; its result
 * then comes to the parent as an event, whose run's end applies this again.
 */
import type { RunnerFeatureKit } from '../../../runner/feature.js';
import { resolveRetention, retainConversation } from '../../../src/protocol/retention.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import { ADOPTION_KEY_SUFFIX, childrenKeys } from './children.js';

/** After a parent's run ended: its children and its runs' sets of children expire no later than it does. */
export async function expireChildrenWithParent(kit: RunnerFeatureKit, conversationId: string): Promise<void> {
  if (kit.config.retention.idleTtlSeconds <= 0) return;
  const k = conversationKeys(kit.prefix, conversationId);
  // The parent expires only when retention found it idle: a run active or a message waiting keeps it.
  const leftMs = await kit.redis.pttl(k.meta);
  if (leftMs <= 0) return;
  const sets = (await kit.redis.zrange(k.runs, '0', '-1')).map((runId) => childrenKeys(kit.prefix, { conversationId, runId }));
  const children = new Set((await Promise.all(sets.map((s) => kit.redis.smembers(s.started)))).flat());
  // Retention counts whole seconds: a child goes within a second of its parent.
  const idle = { ...resolveRetention(), idleTtlSeconds: Math.ceil(leftMs / 1000) };
  await Promise.all([...children].map((id) => retainConversation(kit.redis, kit.prefix, id, idle, [ADOPTION_KEY_SUFFIX])));
  const keys = sets.flatMap((s) => [s.started, s.collected]);
  const ttls = await Promise.all(keys.map((key) => kit.redis.pttl(key)));
  await Promise.all(keys.flatMap((key, i) => (ttls[i]! === -1 || ttls[i]! > leftMs ? [kit.redis.pexpire(key, leftMs)] : [])));
}
