/**
 * Shared pieces of the Discord channel tests: ids of the fake guild, the
 * real host `receive` (allow-lists, commands, `Dispatch.ingest` on real
 * Redis) behind a recorder, and a logger whose lines the test can read.
 */
import { Writable } from 'node:stream';
import { type ChannelSettings, createChannelHost } from '../../host/receive.js';
import { createDiscordPlugin, type DiscordConfigInput } from '../../plugins/discord/channel.js';
import type { ChannelHost, ChannelOutbound, ChannelPlugin, InboundMessage, ReceiveResult } from '../../src/channel.js';
import { createLogger, type Logger } from '../../src/logger.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type FakeDiscord, type FakeUser, user } from '../../testing/fakes/discord-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';

/** A token in Discord's format (base64 user id . timestamp . HMAC). Never to appear in errors or logs. */
export const TOKEN = 'MTAwMDAwMDAwMDAwMDAwMDAx.GkQ7xZ.Vq3nT9sLwPzR8yHcJ2mA5bE1uK4oXfDgNiW6';

export const GUILD = '200000000000000001';
/** A guild text channel where the bot answers only when mentioned. */
export const CHANNEL = '300000000000000001';
/** A guild text channel listed in `alwaysChannels`. */
export const ALWAYS_CHANNEL = '300000000000000002';
/** A public thread under CHANNEL. */
export const THREAD = '300000000000000003';
/** A DM channel (never in the cache before its first message). */
export const DM = '500000000000000001';

export const alice = user('400000000000000001', 'alice', { globalName: 'Alice' });
export const bob = user('400000000000000002', 'bob');
export const otherBot = user('400000000000000003', 'helperbot', { bot: true });

/** Makes `fake` deliver a guild message in `channelId` (CHANNEL, THREAD, …) that mentions the bot. */
export function mentionBot(fake: FakeDiscord, channelId: string, content: string, author: FakeUser = alice) {
  return fake.messageCreate({
    channelId,
    guildId: GUILD,
    author,
    content: `<@${fake.bot.id}> ${content}`,
    mentions: [fake.bot],
    channelType: channelId === THREAD ? 11 : 0,
  });
}

/** The bot's managed role in GUILD. */
export const BOT_ROLE = '600000000000000001';

/** The guild the fake serves. */
export const guild = {
  id: GUILD,
  botRoleId: BOT_ROLE,
  name: 'test guild',
  channels: [
    { id: CHANNEL, name: 'general' },
    { id: ALWAYS_CHANNEL, name: 'ask-the-bot' },
  ],
  threads: [{ id: THREAD, parentId: CHANNEL, name: 'a thread' }],
};

/** One `receive` call the host got. */
export interface Received {
  message: InboundMessage;
  result?: ReceiveResult;
  error?: unknown;
}

/** A ChannelHost whose `receive` runs `handle` and records every call. */
export class RecordingHost {
  readonly received: Received[] = [];
  private waiters: Array<() => void> = [];

  constructor(private readonly handle: (message: InboundMessage) => Promise<ReceiveResult>) {}

  /** The host as a plugin sees it (only `receive` and `logger` are used by the Discord channel). */
  asHost(logger: Logger): ChannelHost {
    return {
      receive: async (_channelId, message) => {
        const entry: Received = { message };
        this.received.push(entry);
        try {
          entry.result = await this.handle(message);
          return entry.result;
        } catch (err) {
          entry.error = err;
          throw err;
        } finally {
          for (const w of this.waiters.splice(0)) w();
        }
      },
      logger,
      redis: undefined as never,
      prefix: 'unused',
      routes: undefined as never,
    };
  }

  /** Calls whose message has `text`. */
  withText(text: string): Received[] {
    return this.received.filter((r) => r.message.text === text);
  }

  /** Resolves once `check` finds something among the calls settled so far; rejects after `timeoutMs`. */
  async waitFor<T>(check: (received: Received[]) => T | undefined, timeoutMs = 10_000, what = 'a received message'): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const settled = this.received.filter((r) => r.result !== undefined || r.error !== undefined);
      const found = check(settled);
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what} not received within ${timeoutMs} ms; got ${JSON.stringify(this.received.map((r) => r.message.text))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits for the settled call whose text is `text`. */
  waitForText(text: string, timeoutMs?: number): Promise<Received> {
    return this.waitFor((rs) => rs.find((r) => r.message.text === text), timeoutMs, `message ${JSON.stringify(text)}`);
  }
}

/** A logger at `debug` whose JSON lines are kept in `lines`. */
export function captureLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), lines };
}

/** Options of `realHost`. */
export interface RealHostOptions {
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** The channel's settings (policy, allow-lists) as the host applies them. Default none. */
  settings?: ChannelSettings;
  /** The Discord outbound side, for command replies (resolved when a command runs). */
  outbound: () => ChannelOutbound | undefined;
}

/** The real host `receive` (`createChannelHost`) with a real Dispatch; runs are ingested but not enqueued. */
export function realHost(o: RealHostOptions): { receive: (m: InboundMessage) => Promise<ReceiveResult>; dispatch: Dispatch } {
  const { host, dispatch } = ingestOnlyHost({
    redis: o.redis,
    prefix: o.prefix,
    logger: o.logger,
    settings: () => o.settings,
    outbound: (id) => (id === 'discord' ? o.outbound() : undefined),
  });
  return { receive: (m) => host.receive('discord', m), dispatch };
}

/**
 * The real Discord plugin against the fake at `apiBase`, on `h`'s Redis, and
 * the real channel host that enqueues its messages as runs on `h`'s queue (no
 * HTTP routes: Discord comes in over the gateway), with `config` over the
 * defaults. The caller starts the plugin.
 */
export function discordOnHarness(h: RunnerHarness, apiBase: string, config: Partial<DiscordConfigInput> = {}): { plugin: ChannelPlugin; host: ChannelHost } {
  const { ctx } = h;
  const plugin = createDiscordPlugin({ token: TOKEN, apiBase, ...config }, { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix });
  const host = createChannelHost({
    routes: undefined as never,
    redis: ctx.redis,
    prefix: h.prefix,
    logger: ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: (id) => (id === 'discord' ? plugin.outbound : undefined),
    features: [],
  });
  return { plugin, host };
}
