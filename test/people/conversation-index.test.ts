/**
 * Where each account wrote (`ConversationIndex`): a note is one write per
 * account and conversation, repeated at most once per `rememberMs` by a
 * process; an identity's conversations are its accounts'; a purge forgets
 * them and the next message is noted again at once.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConversationIndex, conversationIndexKey } from '../../src/people/conversation-index.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
let prefix: string;
let now = 0;
let index: ConversationIndex;
beforeEach(() => {
  prefix = testPrefix();
  now = 1_000_000;
  index = new ConversationIndex({ redis, prefix, rememberMs: 60_000, now: () => now });
});
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

describe('ConversationIndex', () => {
  it('notes where an account wrote, once a minute per conversation, and lists an identity as its accounts', async () => {
    await index.note('telegram', '1', 'telegram:1');
    await index.note('telegram', '1', 'telegram:-100');
    await index.note('webhook:crm', 'alice', 'webhook:crm:room');
    expect(await redis.hgetall(conversationIndexKey(prefix, 'telegram:1'))).toEqual({ 'telegram:1': 'telegram', 'telegram:-100': 'telegram' });

    // Remembered: a second note within the minute writes nothing (the key, deleted behind its back, stays gone) ...
    await redis.del(conversationIndexKey(prefix, 'telegram:1'));
    await index.note('telegram', '1', 'telegram:1');
    expect(await redis.exists(conversationIndexKey(prefix, 'telegram:1'))).toBe(0);
    // ... and after it, the note is written again.
    now += 60_001;
    await index.note('telegram', '1', 'telegram:1');
    expect(await redis.hgetall(conversationIndexKey(prefix, 'telegram:1'))).toEqual({ 'telegram:1': 'telegram' });

    expect(await index.of(['webhook:crm:alice', 'telegram:1'])).toEqual([
      { account: 'telegram:1', conversationId: 'telegram:1', channelId: 'telegram' },
      { account: 'webhook:crm:alice', conversationId: 'webhook:crm:room', channelId: 'webhook:crm' },
    ]);
  });

  it('forgets on purge, and notes the next message at once', async () => {
    await index.note('telegram', '1', 'telegram:1');
    await index.purge(['telegram:1', 'discord:11']);
    expect(await index.of(['telegram:1'])).toEqual([]);
    await index.note('telegram', '1', 'telegram:1');
    expect(await index.of(['telegram:1'])).toHaveLength(1);
  });

  it('skips a user id no account can be made of, writing nothing', async () => {
    await index.note('telegram', 'a {b}', 'telegram:1');
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });
});
