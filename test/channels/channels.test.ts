import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { channelIdOf, channelIds, channelSettings, createChannels, outboundResolver } from '../../host/channels.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { redisUrl } from '../helpers/redis.js';

const redis = new Redis(redisUrl(), { lazyConnect: true });
const deps = { logger: createLogger({ level: 'silent' }), redis, prefix: 'tchannels' };
afterAll(() => redis.disconnect());

const config = loadConfig({ env: { TELEGRAM_BOT_TOKEN: '123456:abcdef', DISCORD_BOT_TOKEN: 'discord-token' } });
const withWebhooks = {
  channels: {
    ...config.channels,
    webhooks: {
      crm: { ...loadWebhook(), policy: 'collect' as const, allowedSenders: ['a'] },
      shop: loadWebhook(),
    },
  },
};
function loadWebhook() {
  return webhookChannelConfigSchema.parse({ secret: '0123456789abcdef' });
}

describe('channels from config', () => {
  it('creates one plugin per configured channel, none when none is configured', () => {
    expect(createChannels(loadConfig({ env: {} }), deps)).toEqual([]);
    const plugins = createChannels(withWebhooks, deps);
    expect(plugins.map((p) => p.id)).toEqual(['telegram', 'discord', 'webhook:crm', 'webhook:shop']);
    expect(channelIds(withWebhooks)).toEqual(['telegram', 'discord', 'webhook:crm', 'webhook:shop']);
  });

  it('finds a conversation\'s outbound side by its channel id', () => {
    const resolve = outboundResolver(createChannels(withWebhooks, deps));
    expect(resolve('telegram:42')?.channelId).toBe('telegram');
    expect(resolve('telegram:-100:7')?.channelId).toBe('telegram');
    expect(resolve('discord:9:10')?.channelId).toBe('discord');
    expect(resolve('webhook:crm:ticket:1')?.channelId).toBe('webhook:crm');
    expect(resolve('webhook:other:1')).toBeUndefined();
    expect(resolve('nope:1')).toBeUndefined();
  });

  it('derives the channel id from a conversation id', () => {
    expect(channelIdOf('telegram:42:7')).toBe('telegram');
    expect(channelIdOf('webhook:crm:a:b')).toBe('webhook:crm');
    expect(channelIdOf('webhook')).toBe('webhook');
  });

  it('maps each channel\'s policy and allow-lists to host settings', () => {
    const s = channelSettings(withWebhooks);
    expect(s.get('webhook:crm')).toEqual({ policy: 'collect', allowedUsers: ['a'] });
    expect(s.get('telegram')).toEqual({ allowedUsers: [], allowedChats: [] });
  });

  it('refuses a bad webhook name with ConfigError naming it', () => {
    expect(() => createChannels({ channels: { webhooks: { 'Bad Name': loadWebhook() } } }, deps)).toThrow(ConfigError);
  });
});
