/**
 * The configured channel instances: plugins created from `config.channels`,
 * the per-channel settings the host applies, and the lookup from a
 * conversation id to its channel's outbound side (what runners deliver through).
 */
import { createDiscordPlugin } from '../plugins/discord/index.js';
import { createTelegramPlugin } from '../plugins/telegram/index.js';
import { createWebhookPlugin } from '../plugins/webhook/index.js';
import type { ChannelDeps, ChannelOutbound, ChannelPlugin } from '../src/channel.js';
import type { SteerbotConfig } from '../src/config.js';
import type { ChannelSettings } from './receive.js';

/** Creates one plugin per configured channel (not started). Throws ConfigError on a bad channel config. */
export function createChannels(config: Pick<SteerbotConfig, 'channels'>, deps: ChannelDeps): ChannelPlugin[] {
  const c = config.channels;
  const plugins: ChannelPlugin[] = [];
  if (c.telegram) plugins.push(createTelegramPlugin(c.telegram, deps));
  if (c.discord) plugins.push(createDiscordPlugin(c.discord, deps));
  for (const [name, cfg] of Object.entries(c.webhooks)) plugins.push(createWebhookPlugin(name, cfg, deps));
  return plugins;
}

/** Ids of the configured channels, e.g. `['telegram', 'webhook:crm']`. */
export function channelIds(config: Pick<SteerbotConfig, 'channels'>): string[] {
  const c = config.channels;
  return [...(c.telegram ? ['telegram'] : []), ...(c.discord ? ['discord'] : []), ...Object.keys(c.webhooks).map((n) => `webhook:${n}`)];
}

/** What the host applies per channel: policy and allow-lists, by channel id. */
export function channelSettings(config: Pick<SteerbotConfig, 'channels'>): Map<string, ChannelSettings> {
  const c = config.channels;
  const out = new Map<string, ChannelSettings>();
  const put = (id: string, s: { policy?: ChannelSettings['policy']; allowedUsers?: readonly string[]; allowedChats?: readonly string[] }) =>
    out.set(id, {
      ...(s.policy !== undefined && { policy: s.policy }),
      ...(s.allowedUsers !== undefined && { allowedUsers: s.allowedUsers }),
      ...(s.allowedChats !== undefined && { allowedChats: s.allowedChats }),
    });
  if (c.telegram) put('telegram', c.telegram);
  if (c.discord) put('discord', c.discord);
  for (const [name, w] of Object.entries(c.webhooks)) put(`webhook:${name}`, { ...(w.policy && { policy: w.policy }), allowedUsers: w.allowedSenders });
  return out;
}

/**
 * The channel id of a conversation id: everything before the first `:`,
 * except `webhook:<name>`, which is the first two segments.
 */
export function channelIdOf(conversationId: string): string {
  const first = conversationId.indexOf(':');
  if (first === -1) return conversationId;
  const head = conversationId.slice(0, first);
  if (head !== 'webhook') return head;
  const second = conversationId.indexOf(':', first + 1);
  return second === -1 ? conversationId : conversationId.slice(0, second);
}

/** Finds a conversation's outbound side among `plugins` (by its channel id). */
export function outboundResolver(plugins: readonly ChannelPlugin[]): (conversationId: string) => ChannelOutbound | undefined {
  const byId = new Map(plugins.map((p) => [p.id, p.outbound]));
  return (conversationId) => byId.get(channelIdOf(conversationId));
}
