/**
 * The channel contract on the web chat, public (no login; the `access`
 * section decides who may talk), through its HTTP routes: a contract message
 * is a POST from a browser of its own per chat (its secret in the body; the
 * conversation goes by the public id derived from it), and what the bot sent is read
 * back from the conversation's reply stream, the events the page shows
 * (edits applied, files fetched from their signed URLs).
 */
import { randomBytes } from 'node:crypto';
import { createWebPlugin } from '../../plugins/web/index.js';
import type { WebEvent } from '../../plugins/web/outbound.js';
import { publicChatId } from '../../plugins/web/visitor-id.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { redisUrl } from '../helpers/redis.js';

channelPluginContract({
  name: 'web chat (public)',
  redisUrl: redisUrl(),
  async makeHarness(env) {
    const plugin = createWebPlugin({ public: true }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    // Browsers of this harness only; the page's own ids are 8-64 characters.
    const nonce = randomBytes(4).toString('hex');
    const browser = (chatId: string) => `b${chatId}-${nonce}`;
    const events = async (chatId: string): Promise<WebEvent[]> =>
      (await env.redis.xrange(replyStreamKey(env.prefix, `web:${publicChatId(browser(chatId))}`), '-', '+')).map(
        ([, fields]) => JSON.parse(fields[1]!) as WebEvent,
      );
    const post = async (chatId: string, id: string, text: string) => {
      await fetch(`${env.baseUrl()}/chat/api/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ conversation: browser(chatId), id, text }),
      });
    };
    const messages = async (chatId: string) => {
      const shown = new Map<string, Extract<WebEvent, { type: 'message' }>>();
      for (const e of await events(chatId)) {
        if (e.type === 'message') shown.set(e.id, { ...e });
        else if (e.type === 'edit' && shown.has(e.id)) shown.get(e.id)!.text = e.text;
      }
      return [...shown.values()];
    };
    let clicks = 0;
    return {
      plugin,
      inject: (m: ContractMessage) => post(m.chatId, `u${m.updateId}`, m.text),
      expected: (m) => {
        const id = publicChatId(browser(m.chatId));
        return { updateKey: `web:${id}:u${m.updateId}`, conversationId: `web:${id}`, senderId: id };
      },
      received: async (chatId) => (await messages(chatId)).map((e) => e.text),
      typingCount: async (chatId) => (await events(chatId)).filter((e) => e.type === 'typing').length,
      buttons: async (chatId) => (await messages(chatId)).at(-1)?.buttons ?? [],
      click: (chatId, command) => post(chatId, `click-${++clicks}`, command),
      files: async (chatId) =>
        Promise.all(
          (await events(chatId))
            .filter((e) => e.type === 'file')
            .map(async (e) => ({ name: e.name, bytes: new Uint8Array(await (await fetch(new URL(e.url, env.baseUrl()))).arrayBuffer()) })),
        ),
      close: async () => undefined,
    };
  },
  capabilities: { typing: true, edit: true, buttons: 'text', files: true },
});
