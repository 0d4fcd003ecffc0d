/**
 * The Telegram channel's implementation (grammY): updates arrive by webhook or by long
 * polling (one polling host across all hosts, by a Redis lease), are
 * normalized and handed to the host; replies go out through `outbound`.
 */

import { Api } from 'grammy';
import type { ChannelDeps, ChannelPlugin } from 'steerbot/channel';
import { parseSection, refuseMovedSettings } from 'steerbot/plugin';
import { type TelegramConfig, type TelegramConfigInput, telegramConfigSchema } from './config.js';
import { TelegramInbound } from './inbound.js';
import { createTelegramOutbound } from './outbound.js';

export type { TelegramConfigInput } from './config.js';

const CHANNEL_ID = 'telegram';

function parseConfig(config: TelegramConfigInput): TelegramConfig {
  return parseSection(telegramConfigSchema, config, ['channels', CHANNEL_ID]);
}

/**
 * Creates the Telegram channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createTelegramPlugin(config: TelegramConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  refuseMovedSettings(cfg, ['channels', 'telegram'], {
    allowedUsers: 'access.channels.telegram.users',
    allowedChats: 'access.channels.telegram.groups',
    policy: 'profiles.<name>.inputPolicy bound to telegram',
  });
  const logger = deps.logger.child({ channel: CHANNEL_ID });
  const api = new Api(cfg.token, { apiRoot: cfg.apiRoot, ...(deps.fetch && { fetch: withNativeSignal(deps.fetch) }) });
  const outbound = createTelegramOutbound({
    channelId: CHANNEL_ID,
    api,
    token: cfg.token,
    streaming: cfg.streaming,
    reactions: cfg.reactions,
    linkPreviews: cfg.linkPreviews,
    logger,
    apiRoot: cfg.apiRoot,
    ...(deps.fetch && { fetch: deps.fetch }),
  });
  // The inbound side's state (poller, webhook readiness) lives in one object.
  const inbound = new TelegramInbound(CHANNEL_ID, cfg, api, deps, logger);
  return {
    id: CHANNEL_ID,
    // Who may talk is the access gate's, the input policy a profile's; `admins` here only for a plugin built in code.
    settings: { admins: cfg.admins },
    outbound,
    start: (host) => inbound.start(host),
    stop: () => inbound.stop(),
    ready: () => inbound.ready(),
  };
}

/**
 * A `fetch` given to grammY, taking the abort signal grammY makes (from the
 * `abort-controller` package, not the platform's) as a native one: Node 24's
 * fetch refuses any other ("Expected signal to be an instance of AbortSignal").
 */
function withNativeSignal(f: typeof fetch): typeof fetch {
  return (input, init) => {
    if (!init?.signal || init.signal instanceof AbortSignal) return f(input, init);
    // Typed as AbortSignal, but another implementation: only what every one has is used.
    const signal = init.signal as Pick<AbortSignal, 'aborted' | 'reason' | 'addEventListener'>;
    const native = new AbortController();
    if (signal.aborted) native.abort(signal.reason);
    else signal.addEventListener('abort', () => native.abort(signal.reason), { once: true });
    return f(input, { ...init, signal: native.signal });
  };
}
