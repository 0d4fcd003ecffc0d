/**
 * The channel contract on the email plugin, against real local IMAP and SMTP
 * servers: a contract message is a mail from alice (authenticated by the
 * receiving server) in the thread of its chat, a root Message-ID of this
 * harness's own, so what the bot sent is read back from alice's mailbox by
 * that thread. The sender id is alice's address.
 */
import { randomBytes } from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll } from 'vitest';
import { createEmailPlugin } from '../../plugins/email/channel.js';
import { cursorKey } from '../../plugins/email/keys.js';
import { type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { type MailServers, startMailServers } from '../../testing/fakes/mail-servers.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { appendTo, emailConfig, rawMail, repliesIn } from './email-harness.js';

let servers: MailServers;
beforeAll(async () => {
  servers = await startMailServers();
});
afterAll(async () => {
  await servers?.stop();
});

channelPluginContract({
  name: 'email',
  redisUrl: redisUrl(),
  async makeHarness(env) {
    const plugin = createEmailPlugin(emailConfig(servers), { logger: env.logger, redis: env.redis, prefix: env.prefix });
    // Threads of this harness only: alice's mailbox keeps the replies of earlier tests.
    const nonce = randomBytes(6).toString('hex');
    const root = (chatId: string) => `chat-${chatId}.${nonce}@contract.test`;
    const refsOf = (r: ParsedMail) => (r.references === undefined ? 0 : Array.isArray(r.references) ? r.references.length : 1);
    const inOrder = async (chatId: string) => (await repliesIn(servers, `<${root(chatId)}>`)).sort((a, b) => refsOf(a) - refsOf(b));
    const watching = () =>
      waitFor(async () => (await env.redis.exists(cursorKey(env.prefix, servers.host, servers.bot.user, 'INBOX'))) === 1, 10_000, 'the mailbox cursor');
    return {
      plugin,
      async inject(m: ContractMessage) {
        // Mail that arrives before the bot's first cursor is history to it.
        await watching();
        // Put into the bot's mailbox in order (IMAP APPEND), as its server delivers: SMTP would not keep the contract's order.
        const { raw } = await rawMail(servers, {
          text: m.text,
          messageId: `<u${m.updateId}.${nonce}@contract.test>`,
          references: [`<${root(m.chatId)}>`],
          inReplyTo: `<${root(m.chatId)}>`,
        });
        await appendTo(servers, servers.bot, raw);
      },
      expected: (m) => ({
        updateKey: `email:u${m.updateId}.${nonce}@contract.test`,
        conversationId: `email:${root(m.chatId)}`,
        senderId: servers.alice.address,
      }),
      // The bot's mails of a thread form a chain (each answers the one before): ordered by how long their References are.
      received: async (chatId) => (await inOrder(chatId)).map((r) => (r.text ?? '').trim()),
      files: async (chatId) =>
        (await repliesIn(servers, `<${root(chatId)}>`)).flatMap((r) => r.attachments.map((a) => ({ name: a.filename ?? '', bytes: a.content }))),
      close: async () => undefined,
    };
  },
  capabilities: { files: true },
  // A reply goes through a real SMTP server's queue into a real mailbox: slower than an HTTP fake under load.
  waitMs: 30_000,
});
