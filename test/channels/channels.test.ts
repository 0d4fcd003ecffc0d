import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { createChannels } from '../../app/start.js';
import { channelIds } from '../../app/summary.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { channelResolver, outboundResolver } from '../../src/channel.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { redisUrl } from '../helpers/redis.js';

const redis = new Redis(redisUrl(), { lazyConnect: true });
const deps = { logger: createLogger({ level: 'silent' }), redis, prefix: 'tchannels' };
afterAll(() => redis.disconnect());

const config = readConfig({ env: { TELEGRAM_BOT_TOKEN: '123456:abcdef', DISCORD_BOT_TOKEN: 'discord-token' } });
const withWebhooks = {
  ...config,
  channels: {
    ...config.channels,
    webhooks: {
      crm: { ...loadWebhook(), admins: ['a'] },
      shop: loadWebhook(),
    },
  },
};
function loadWebhook() {
  return webhookChannelConfigSchema.parse({ secret: '0123456789abcdef' });
}

describe('channels from config', () => {
  it('creates one plugin per configured channel, none when none is configured', async () => {
    // The web chat is on without configuration; STEERBOT_WEB=false turns it off.
    expect((await createChannels(readConfig({ env: {} }), deps)).map((p) => p.id)).toEqual(['web']);
    expect(await createChannels(readConfig({ env: { STEERBOT_WEB: 'false' } }), deps)).toEqual([]);
    expect(channelIds(readConfig({ env: { STEERBOT_WEB: 'false' } }))).toEqual([]);
    const plugins = await createChannels(withWebhooks, deps);
    expect(plugins.map((p) => p.id)).toEqual(['telegram', 'discord', 'webhook:crm', 'webhook:shop', 'web']);
    expect(channelIds(withWebhooks)).toEqual(['telegram', 'discord', 'web', 'webhook:crm', 'webhook:shop']);
  });

  it("finds a conversation's outbound side by its channel id", async () => {
    const resolve = outboundResolver(await createChannels(withWebhooks, deps));
    expect(resolve('telegram:42')?.channelId).toBe('telegram');
    expect(resolve('telegram:-100:7')?.channelId).toBe('telegram');
    expect(resolve('discord:9:10')?.channelId).toBe('discord');
    expect(resolve('webhook:crm:ticket:1')?.channelId).toBe('webhook:crm');
    expect(resolve('webhook:other:1')).toBeUndefined();
    expect(resolve('nope:1')).toBeUndefined();
  });

  it('finds the channel of a conversation id: the longest registered channel id that prefixes it', () => {
    const channelIdOf = channelResolver(['webhook', 'telegram', 'webhook:crm', 'webhook:crm:a:b:c']);
    expect(channelIdOf('telegram:42:7')).toBe('telegram');
    expect(channelIdOf('webhook:crm:a:b')).toBe('webhook:crm');
    expect(channelIdOf('webhook')).toBe('webhook');
    expect(channelIdOf('webhook:other:1')).toBe('webhook');
    expect(channelIdOf('telegrams:1')).toBeUndefined();
  });

  it('takes a Matrix thread (`/<root>`) and a Teams channel thread (`;messageid=`) for a thread of the chat id that prefixes it', () => {
    const chatOf = channelResolver(['matrix:!room:fake.test', 'teams:19:abc@thread.tacv2']);
    expect(chatOf('matrix:!room:fake.test/$root')).toBe('matrix:!room:fake.test');
    expect(chatOf('teams:19:abc@thread.tacv2;messageid=1699999999999')).toBe('teams:19:abc@thread.tacv2');
    expect(chatOf('matrix:!room:fake.tester')).toBeUndefined();
  });

  it('carries no allow-list or input policy in channel settings: access and profiles say those', async () => {
    const byId = new Map((await createChannels(withWebhooks, deps)).map((p) => [p.id, p.settings]));
    expect(byId.get('webhook:crm')).toEqual({ admins: ['a'] });
    expect(byId.get('telegram')).toEqual({ admins: [] });
    const moved = { ...withWebhooks, channels: { webhooks: { crm: { ...loadWebhook(), allowedSenders: ['a'] } } } };
    await expect(createChannels(moved, deps)).rejects.toThrow(/access\.channels\.webhook:crm\.users/);
  });

  it('refuses a bad webhook name with ConfigError naming it', async () => {
    await expect(createChannels({ channels: { webhooks: { 'Bad Name': loadWebhook() } } }, deps)).rejects.toThrow(ConfigError);
  });
});
