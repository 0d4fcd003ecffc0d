/**
 * The email inbound side on a real Redis with a scripted host: a thread
 * belongs to the address that started it, so another sender who names it
 * (its ids in `References`) gets a conversation of their own and the
 * thread's replies still go to its person; the thread a reply is addressed
 * by is kept only for a mail the host takes, so a sender the access rules
 * refuse leaves no key behind; a mail that does not name the bot in `To` or
 * `Cc` (a signed mail sent on) writes nothing. Addresses an operator wrote
 * with capitals in `access` admit their senders, through the real host.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import nodemailer from 'nodemailer';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { EmailInbound } from '../../plugins/email/inbound.js';
import { threadKey } from '../../plugins/email/keys.js';
import type { ChannelHost, InboundMessage, ReceiveResult } from '../../src/channel.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { cleanupPrefix, testPrefix } from '../../testing/redis.js';
import { redisUrl } from '../helpers/redis.js';

let redis: Redis;
let prefix: string;
const received: InboundMessage[] = [];

beforeEach(() => {
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  received.length = 0;
});

afterEach(async () => {
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

async function raw(from: string, messageId: string, references: string[] = [], to = 'bot@example.test'): Promise<Buffer> {
  const info = await nodemailer.createTransport({ streamTransport: true, buffer: true }).sendMail({
    from,
    to,
    subject: 'Hi',
    text: 'hello',
    messageId,
    ...(references.length > 0 && { references, inReplyTo: references.at(-1) }),
    // Handed over by the sender's own server: SPF passes for its domain.
    headers: { 'Authentication-Results': `mx.example.test; dkim=pass header.d=${from.split('@')[1]}; spf=pass smtp.mailfrom=${from}` },
  });
  return info.message as Buffer;
}

function inbound(): EmailInbound {
  return new EmailInbound({
    channelId: 'email',
    self: 'bot@example.test',
    authServId: 'mx.example.test',
    maxAttachmentBytes: 1024,
    redis,
    prefix,
    cursorKey: `${prefix}:p:email:cursor:test`,
    logger: pino({ level: 'silent' }),
  });
}

function host(result: ReceiveResult): ChannelHost {
  return {
    receive: async (_id, message) => {
      received.push(message);
      return result;
    },
  } as ChannelHost;
}

const refused: ReceiveResult = { kind: 'ignored', reason: 'refused' };
const ingested: ReceiveResult = { kind: 'ingested', result: { kind: 'new-run', seq: 1, runId: 'r1' } } as unknown as ReceiveResult;
const round = (uid: number, source: Buffer) => ({ validity: '7', mails: [{ uid, source }], next: { validity: '7', uid } });

describe('email inbound threads', () => {
  it('keeps no thread for a mail the host ignores (a refused sender), and the cursor still moves on', async () => {
    await inbound().handle(host(refused), round(3, await raw('eve@example.org', '<e1@example.org>')), () => true);
    expect(received).toHaveLength(1);
    expect(await redis.exists(threadKey(prefix, 'email:e1@example.org'))).toBe(0);
    expect(await redis.hgetall(`${prefix}:p:email:cursor:test`)).toEqual({ validity: '7', uid: '3' });
  });

  it('leaves an existing thread as it was when a refused sender writes into it, and keeps no thread of theirs', async () => {
    await inbound().handle(host(ingested), round(1, await raw('alice@example.org', '<a1@example.org>')), () => true);
    const key = threadKey(prefix, 'email:a1@example.org');
    const before = await redis.hgetall(key);
    expect(before).toMatchObject({ to: 'alice@example.org', last: '<a1@example.org>' });
    await inbound().handle(host(refused), round(2, await raw('eve@example.org', '<e2@example.org>', ['<a1@example.org>'])), () => true);
    expect(received.at(-1)).toMatchObject({ conversationId: 'email:a1@example.org:eve@example.org', sender: { id: 'eve@example.org' } });
    expect(await redis.hgetall(key)).toEqual(before);
    expect(await redis.exists(threadKey(prefix, 'email:a1@example.org:eve@example.org'))).toBe(0);
  });

  it('gives an accepted sender who names another address’s thread a conversation of their own, found again by their next mail', async () => {
    await inbound().handle(host(ingested), round(1, await raw('Alice@Example.org', '<a1@example.org>')), () => true);
    const alice = threadKey(prefix, 'email:a1@example.org');
    const before = await redis.hgetall(alice);
    await inbound().handle(host(ingested), round(2, await raw('eve@example.org', '<e2@example.org>', ['<a1@example.org>'])), () => true);
    await inbound().handle(host(ingested), round(3, await raw('eve@example.org', '<e3@example.org>', ['<a1@example.org>', '<e2@example.org>'])), () => true);
    expect(received.slice(1).map((m) => m.conversationId)).toEqual(['email:a1@example.org:eve@example.org', 'email:a1@example.org:eve@example.org']);
    expect(await redis.hgetall(alice)).toEqual(before);
    expect(await redis.hgetall(threadKey(prefix, 'email:a1@example.org:eve@example.org'))).toMatchObject({ to: 'eve@example.org', last: '<e3@example.org>' });
    // Its owner, writing from the same address in another case, still continues it.
    await inbound().handle(host(ingested), round(4, await raw('ALICE@example.org', '<a4@example.org>', ['<a1@example.org>'])), () => true);
    expect(received.at(-1)?.conversationId).toBe('email:a1@example.org');
    expect(await redis.hgetall(alice)).toMatchObject({ to: 'alice@example.org', last: '<a4@example.org>' });
  });

  it('ignores a mail that names the bot in neither To nor Cc, writing nothing; the cursor still moves on', async () => {
    await inbound().handle(host(ingested), round(5, await raw('alice@example.org', '<a5@example.org>', [], 'eve@example.org')), () => true);
    expect(received).toEqual([]);
    expect(await redis.keys(`${prefix}:*`)).toEqual([`${prefix}:p:email:cursor:test`]);
    expect(await redis.hgetall(`${prefix}:p:email:cursor:test`)).toEqual({ validity: '7', uid: '5' });
  });
});

describe('email access lists', () => {
  it('admit the senders an operator wrote with capitals in users and admins, as the loaded configuration lists them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'steerbot-email-access-'));
    try {
      const file = join(dir, 'steerbot.json');
      const access = { channels: { email: { policy: 'allowlist', users: ['Alice@Example.ORG'], admins: ['Bob@example.org'] } } };
      await writeFile(file, JSON.stringify({ access }));
      const config = readConfig({ env: {}, file });
      const email = config.access.channels.email!;
      // What the host composes a channel's settings with: its configured admins.
      const system = ingestOnlyHost({
        redis,
        prefix,
        logger: pino({ level: 'silent' }),
        access: () => config.access,
        settings: () => ({ admins: email.admins }),
      });
      const log = (id: string) => redis.exists(`${prefix}:{c:email:${id}}:log`);
      await inbound().handle(system.host, round(1, await raw('alice@example.org', '<a1@example.org>')), () => true);
      await inbound().handle(system.host, round(2, await raw('bob@example.org', '<b1@example.org>')), () => true);
      await inbound().handle(system.host, round(3, await raw('eve@example.org', '<e1@example.org>')), () => true);
      expect([await log('a1@example.org'), await log('b1@example.org'), await log('e1@example.org')]).toEqual([1, 1, 0]);
      expect(email).toMatchObject({ users: ['alice@example.org'], admins: ['bob@example.org'] });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
