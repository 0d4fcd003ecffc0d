/** How the runner finds a conversation's channel: its id, its outbound side and its settings. */
import { type ChannelOutbound, type ChannelPlugin, type ChannelSettings, channelResolver, outboundResolver } from '../src/channel.js';

/** A conversation's channel as runs see it. */
export interface RunChannels {
  /** The ids of the runner's channels; undefined when it was given none (only a way to find outbound sides). */
  readonly ids: readonly string[] | undefined;
  /** The outbound side of the conversation's channel; undefined: replies are only recorded. */
  readonly outbound: (conversationId: string) => ChannelOutbound | undefined;
  /** The channel id of the conversation: the longest configured channel id it starts with, else the conversation id up to its first `:`. */
  readonly channelOf: (conversationId: string) => string;
  /** The settings of the conversation's channel (its `admins`, policy); undefined when no configured channel serves it. */
  readonly settings: (conversationId: string) => ChannelSettings | undefined;
}

/** The channels of `given` (undefined: none given); `outbound` replaces how a conversation's outbound side is found (default: by channel id among `plugins`). */
export function runChannels(given: readonly ChannelPlugin[] | undefined, outbound?: (conversationId: string) => ChannelOutbound | undefined): RunChannels {
  const plugins = given ?? [];
  const resolve = channelResolver(plugins.map((c) => c.id));
  const settings = new Map(plugins.map((c) => [c.id, c.settings]));
  return {
    ids: given?.map((c) => c.id),
    outbound: outbound ?? outboundResolver(plugins),
    channelOf: (conversationId) => resolve(conversationId) ?? conversationId.split(':', 1)[0]!,
    settings: (conversationId) => settings.get(resolve(conversationId) ?? ''),
  };
}
