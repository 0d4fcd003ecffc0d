/**
 * The Discord channel when things go wrong or are restricted: the host
 * cannot reach Redis, the host refuses a message, allow-lists, other bots, a
 * rejected token, a bad config. Real discord.js client against the fake
 * Discord; the host is a stub where the test is about what the plugin does
 * with the host's answers (errors), the real one where they must agree.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordPlugin, type DiscordConfigInput } from '../../plugins/discord/channel.js';
import type { ChannelPlugin, InboundMessage, ReceiveResult } from '../../src/channel.js';
import { ChannelApiError, ConfigError, InvalidInputError, RedisUnavailableError } from '../../src/errors.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { alice, captureLogger, DM, GUILD, guild, mentionBot, otherBot, RecordingHost, TOKEN } from './discord-harness.js';

const OK: ReceiveResult = { kind: 'ignored', reason: 'empty' };
let fake: FakeDiscord;
const started: ChannelPlugin[] = [];

beforeAll(async () => {
  fake = await FakeDiscord.start({ token: TOKEN });
  fake.addGuild(guild);
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
});

afterAll(async () => {
  await fake?.close();
});

/** Starts a plugin on the fake whose host answers with `handle`. */
async function start(config: Partial<DiscordConfigInput>, handle: (m: InboundMessage) => Promise<ReceiveResult> = async () => OK) {
  const { logger, lines } = captureLogger();
  const host = new RecordingHost(handle);
  const plugin = createDiscordPlugin(
    { token: TOKEN, apiBase: fake.apiBase, ingestRetryDelayMs: 5, ...config },
    { logger, redis: undefined as never, prefix: 'unused' },
  );
  await plugin.start(host.asHost(logger));
  started.push(plugin);
  return { plugin, host, lines };
}

const _mention = (channelId: string, content: string, author = alice) => mentionBot(fake, channelId, content, author);

describe('discord inbound when the host cannot take a message', () => {
  it('retries while Redis is unreachable, keeps the conversation in order, and hands the message over once', async () => {
    let failures = 2;
    const { host, lines } = await start({}, async (m) => {
      if (m.text === 'first' && failures-- > 0) throw new RedisUnavailableError('redis: connection refused');
      return OK;
    });
    fake.messageCreate({ channelId: DM, author: alice, content: 'first' });
    fake.messageCreate({ channelId: DM, author: alice, content: 'second' });
    await host.waitForText('second');
    expect(host.received.map((r) => [r.message.text, r.error ? 'failed' : 'ok'])).toEqual([
      ['first', 'failed'],
      ['first', 'failed'],
      ['first', 'ok'],
      ['second', 'ok'],
    ]);
    const errors = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 50);
    expect(errors.map((l) => l.msg)).toEqual([expect.stringContaining('Redis unreachable')]);
  });

  it('does not retry a message the host refuses as bad input, and goes on', async () => {
    const { host } = await start({}, async (m) => {
      if (m.text === 'refused') throw new InvalidInputError('bad message');
      return OK;
    });
    fake.messageCreate({ channelId: DM, author: alice, content: 'refused' });
    fake.messageCreate({ channelId: DM, author: alice, content: 'accepted' });
    await host.waitForText('accepted');
    expect(host.withText('refused')).toHaveLength(1);
  });

  it('gives up on waiting messages at stop and says how many', async () => {
    const { plugin, host, lines } = await start({}, async () => {
      throw new RedisUnavailableError('redis: connection refused');
    });
    fake.messageCreate({ channelId: DM, author: alice, content: 'never handed over' });
    await host.waitFor((rs) => (rs.length > 0 ? rs : undefined));
    await plugin.stop();
    const stopLine = lines.map((l) => JSON.parse(l) as { level: number; dropped?: number }).find((l) => l.dropped !== undefined);
    expect(stopLine).toMatchObject({ level: 50, dropped: 1 });
  });
});

describe('discord allow-lists and bots', () => {
  it('refuses allow-lists given to the plugin in code, naming where they moved (access decides who may talk)', () => {
    const deps = { logger: captureLogger().logger, redis: undefined as never, prefix: 'unused' };
    let err: unknown;
    try {
      createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase, allowedUsers: [alice.id], allowedChats: [GUILD] }, deps);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => [i.path, i.message.includes('access.channels.discord')])).toEqual([
      ['channels.discord.allowedUsers', true],
      ['channels.discord.allowedChats', true],
    ]);
  });

  it('passes other bots with answerBots, never its own messages', async () => {
    const { host } = await start({ answerBots: true });
    fake.messageCreate({ channelId: DM, author: fake.bot, content: 'own message' });
    fake.messageCreate({ channelId: DM, author: otherBot, content: 'from another bot' });
    const got = await host.waitForText('from another bot');
    expect(got.message.sender).toEqual({ id: otherBot.id, name: 'helperbot', isBot: true });
    expect(host.withText('own message')).toEqual([]);
  });
});

describe('discord start and config', () => {
  it('fails start on a rejected token with ChannelApiError that does not contain the token', async () => {
    const wrong = TOKEN.replace(/.$/, 'Q');
    const { logger, lines } = captureLogger();
    const plugin = createDiscordPlugin({ token: wrong, apiBase: fake.apiBase }, { logger, redis: undefined as never, prefix: 'unused' });
    const err = await plugin.start(new RecordingHost(async () => OK).asHost(logger)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelApiError);
    expect(`${(err as Error).message}\n${(err as Error).stack}\n${lines.join('\n')}`).not.toContain(wrong);
    await plugin.stop();
  });

  it('refuses a bad config naming each bad field', () => {
    const deps = { logger: captureLogger().logger, redis: undefined as never, prefix: 'unused' };
    let err: unknown;
    try {
      createDiscordPlugin({ token: '', apiBase: 'ftp://x', alwaysChannels: ['general'] } as DiscordConfigInput, deps);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.path).sort()).toEqual([
      'channels.discord.alwaysChannels.0',
      'channels.discord.apiBase',
      'channels.discord.token',
    ]);
  });
});
