/**
 * A web chat visitor's ids: the public id derived from the page's secret,
 * and which conversation a secret opens against a real Redis — its public
 * id's, or one started before public ids under `web:<secret>`.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicChatId, publicConversationId, VISITOR_SECRET_RE, VisitorIds } from '../../plugins/web/visitor-id.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

/** A secret the way the page makes one: 16 random bytes, base64url. */
const freshSecret = () => randomBytes(16).toString('base64url');

describe('publicChatId', () => {
  it('is `h.` and 24 base64url characters, the same for the same secret, and shows nothing of the secret', () => {
    const secret = freshSecret();
    const id = publicChatId(secret);
    expect(id).toMatch(/^h\.[A-Za-z0-9_-]{24}$/);
    expect(publicChatId(secret)).toBe(id);
    expect(publicChatId(freshSecret())).not.toBe(id);
    expect(id).not.toContain(secret);
    expect(publicConversationId(secret)).toBe(`web:${id}`);
  });

  it('is no secret: presented as one, it is refused', () => {
    const id = publicChatId(freshSecret());
    expect(VISITOR_SECRET_RE.test(id)).toBe(false);
    expect(VISITOR_SECRET_RE.test(`web:${id}`)).toBe(false);
  });
});

describe('VisitorIds.resolve', () => {
  const prefix = testPrefix();
  let redis: Redis;
  let ids: VisitorIds;
  /** Leaves a record entry in `conversationId`, as a message would. */
  const record = (conversationId: string) => redis.xadd(`${prefix}:{c:${conversationId}}:log`, '1-0', 'e', '{}');

  beforeAll(() => {
    redis = new Redis(redisUrl());
    ids = new VisitorIds({ redis, prefix });
  });
  afterAll(async () => {
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });

  it('names a new visitor by its public id', async () => {
    const secret = freshSecret();
    expect(await ids.resolve(secret)).toEqual({ conversationId: publicConversationId(secret), chatId: publicChatId(secret), legacy: false });
  });

  it('keeps a visitor whose secret has a record under web:<secret>, and none under its public id, in that conversation with its old ids', async () => {
    const secret = freshSecret();
    await record(`web:${secret}`);
    expect(await ids.resolve(secret)).toEqual({ conversationId: `web:${secret}`, chatId: secret, legacy: true });
  });

  it('keeps a visitor on its public id once that has a record, even if the old one has too', async () => {
    const secret = freshSecret();
    await record(`web:${secret}`);
    await record(publicConversationId(secret));
    expect((await ids.resolve(secret)).conversationId).toBe(publicConversationId(secret));
  });

  it('moves a visitor to its public id once the old record is gone (purged or expired)', async () => {
    const secret = freshSecret();
    await record(`web:${secret}`);
    await redis.del(`${prefix}:{c:web:${secret}}:log`);
    expect((await ids.resolve(secret)).conversationId).toBe(publicConversationId(secret));
  });
});
