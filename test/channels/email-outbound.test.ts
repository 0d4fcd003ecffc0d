/**
 * The email channel's SMTP failures through delivery, against a scripted
 * SMTP server (a real mail server cannot be told to defer one mail): a 4xx
 * is retried with backoff and the mail is accepted once; a 5xx is a clear,
 * final failure; a reply to a conversation with no thread is refused
 * before anything is submitted.
 */
import { createServer, type Server } from 'node:net';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEmailPlugin } from '../../plugins/email/channel.js';
import { EmailApiError } from '../../plugins/email/errors.js';
import { threadKey } from '../../plugins/email/keys.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { InvalidInputError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { cleanupPrefix, testPrefix } from '../../testing/redis.js';
import { redisUrl } from '../helpers/redis.js';

const CONVERSATION = 'email:root.1@example.test';

/** A scripted SMTP server: `MAIL FROM` answers the next of `mailReplies` (then 250); every accepted DATA is kept. */
async function scriptedSmtp(mailReplies: string[]): Promise<{ server: Server; port: number; accepted: string[]; mailCommands: number }> {
  const state = { accepted: [] as string[], mailCommands: 0 };
  const server = createServer((socket) => {
    let data: string | undefined;
    let buffered = '';
    socket.write('220 fake.smtp ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffered += chunk.toString();
      for (let i = buffered.indexOf('\r\n'); i >= 0; i = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, i);
        buffered = buffered.slice(i + 2);
        if (data !== undefined) {
          if (line === '.') {
            state.accepted.push(data);
            data = undefined;
            socket.write('250 2.0.0 queued\r\n');
          } else data += `${line}\n`;
          continue;
        }
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO' || verb === 'HELO') socket.write('250 fake.smtp\r\n');
        else if (verb === 'MAIL') {
          state.mailCommands++;
          socket.write(`${mailReplies.shift() ?? '250 2.1.0 ok'}\r\n`);
        } else if (verb === 'DATA') {
          data = '';
          socket.write('354 go ahead\r\n');
        } else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as { port: number }).port,
    get accepted() {
      return state.accepted;
    },
    get mailCommands() {
      return state.mailCommands;
    },
  };
}

let redis: Redis;
let prefix: string;
let smtp: Awaited<ReturnType<typeof scriptedSmtp>>;
const logger = createLogger({ level: 'silent' });

function plugin(): ChannelPlugin {
  return createEmailPlugin(
    {
      address: 'bot@example.test',
      imapHost: '127.0.0.1',
      imapPassword: 'imap-secret-password',
      smtpHost: '127.0.0.1',
      smtpPort: smtp.port,
      smtpRequireTls: false,
      smtpAuth: false,
      authServId: 'mx.example.test',
    },
    { logger, redis, prefix },
  );
}

const delivery = (p: ChannelPlugin) =>
  new RunDelivery({ client: redis, prefix, conversationId: CONVERSATION, runId: 'remail', resolve: () => p.outbound, logger, retryBaseMs: 10 });

beforeEach(async () => {
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  await redis.hset(threadKey(prefix, CONVERSATION), { to: 'alice@example.test', subject: 'Hi', last: '<root.1@example.test>', refs: '<root.1@example.test>' });
});

afterEach(async () => {
  await new Promise((resolve) => smtp.server.close(resolve));
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

describe('email outbound over SMTP', () => {
  it('retries a mail the server deferred with 4xx, and it is accepted once', async () => {
    smtp = await scriptedSmtp(['451 4.7.1 greylisted, try again later', '421 4.3.2 busy']);
    await delivery(plugin()).message('After the deferrals.');
    expect(smtp.mailCommands).toBe(3);
    expect(smtp.accepted).toHaveLength(1);
    expect(smtp.accepted[0]).toContain('After the deferrals.');
    expect(smtp.accepted[0]).toMatch(/^In-Reply-To: <root\.1@example\.test>$/m);
  });

  it('fails clearly on a 5xx refusal, without retrying it', async () => {
    smtp = await scriptedSmtp(['550 5.7.1 relaying denied']);
    const err = await plugin()
      .outbound.send(CONVERSATION, 'refused', { deliveryKey: 'remail:1:0' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmailApiError);
    expect(err).toMatchObject({ status: 422, smtpCode: 550 });
    expect((err as Error).message).toMatch(/^email send refused: 550 5\.7\.1 relaying denied/);
    expect(smtp.accepted).toEqual([]);
    expect(smtp.mailCommands).toBe(1);
  });

  it('gives a resend with the same delivery key the same Message-ID', async () => {
    smtp = await scriptedSmtp([]);
    const p = plugin();
    const a = await p.outbound.send(CONVERSATION, 'once', { deliveryKey: 'remail:2:0' });
    const b = await p.outbound.send(CONVERSATION, 'once', { deliveryKey: 'remail:2:0', maybeSentSince: Date.now() });
    expect(b.messageId).toBe(a.messageId);
    expect(smtp.accepted.map((m) => /^Message-ID: (.*)$/im.exec(m)?.[1])).toEqual([a.messageId, a.messageId]);
  });

  it('refuses a reply to a conversation it received no mail in, submitting nothing', async () => {
    smtp = await scriptedSmtp([]);
    await expect(plugin().outbound.send('email:unknown@example.test', 'hello')).rejects.toBeInstanceOf(InvalidInputError);
    expect(smtp.mailCommands).toBe(0);
  });
});
