/** The prompt head a run reads before its model call: the checkpoint, the meta fields, and other state keys in the same read. */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHECKPOINT_KEY } from '../../runner/compaction/checkpoint.js';
import { readPromptHead } from '../../runner/compaction/load.js';
import { UNANSWERED_KEY } from '../../src/record/unanswered.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
let prefix: string;
const CID = 'telegram:42';

beforeEach(() => {
  prefix = testPrefix();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await cleanupPrefix(redis, prefix);
});
afterAll(() => redis.quit());

describe('readPromptHead', () => {
  it('reads the checkpoint and the other state keys asked for in one HMGET of the state hash', async () => {
    const k = conversationKeys(prefix, CID);
    await redis.hset(k.state, CHECKPOINT_KEY, '{"cp":1}', UNANSWERED_KEY, '{"note":1}');
    await redis.hset(k.meta, 'reset_seq', '7', 'compact_requested', '9', 'model', 'fast');
    const hget = vi.spyOn(redis, 'hget');
    const hmget = vi.spyOn(redis, 'hmget');
    const head = await readPromptHead(redis, prefix, CID, [UNANSWERED_KEY, 'runner.absent']);
    expect(head).toEqual({ raw: '{"cp":1}', resetSeq: 7, compactRequested: 9, modelChoice: 'fast', state: ['{"note":1}', undefined] });
    expect(hget).not.toHaveBeenCalled();
    expect(hmget.mock.calls.filter(([key]) => key === k.state)).toHaveLength(1);
  });

  it('reads an empty conversation as no checkpoint, no reset, no /compact and no model choice', async () => {
    const head = await readPromptHead(redis, prefix, CID, [UNANSWERED_KEY]);
    expect(head).toEqual({ raw: undefined, resetSeq: 0, compactRequested: 0, modelChoice: undefined, state: [undefined] });
  });
});
