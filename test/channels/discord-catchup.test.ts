/**
 * Catch-up after downtime: messages sent while no host had a gateway session
 * are read back over REST when a host starts, with the real discord.js client
 * against the fake Discord and the real host `receive` on real Redis.
 */

import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { countSent } from '../../bench/private-redis.js';
import { advanceCursor, CursorBuffer, cursorsKey } from '../../plugins/discord/catch-up.js';
import { createDiscordPlugin, type DiscordConfigInput } from '../../plugins/discord/channel.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { Logger } from '../../src/logger.js';
import { readRange } from '../../src/record/read.js';
import { closeRedis, createRedis, type RedisClient } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { deferred } from '../runner/harness.js';
import { alice, captureLogger, DM, RecordingHost, realHost, TOKEN } from './discord-harness.js';

const DISCORD_EPOCH = 1_420_070_400_000n;
/** A snowflake made `ageMs` ago. */
const snowflakeAgo = (ageMs: number, n = 1) => (((BigInt(Date.now() - ageMs) - DISCORD_EPOCH) << 22n) | BigInt(n)).toString();

let fake: FakeDiscord;
let redis: RedisClient;
let prefix: string;
let logs: string[];
let logger: Logger;
let receive: ReturnType<typeof realHost>['receive'];
const plugins: ChannelPlugin[] = [];

beforeEach(async () => {
  redis = createRedis({ url: redisUrl() });
  prefix = testPrefix();
  // Heartbeats every 50 ms tell the test which events the client has received.
  fake = await FakeDiscord.start({ token: TOKEN, heartbeatIntervalMs: 50 });
  const captured = captureLogger();
  logs = captured.lines;
  logger = captured.logger;
  receive = realHost({ redis, prefix, logger, outbound: () => undefined as never }).receive;
});

afterEach(async () => {
  await Promise.all(plugins.splice(0).map((p) => p.stop()));
  await fake.close();
  await cleanupPrefix(redis, prefix);
  await closeRedis(redis);
});

/** Starts a Discord channel (a host coming up) whose received messages are recorded. */
async function startHost(config: Partial<DiscordConfigInput> = {}, handle = receive): Promise<{ plugin: ChannelPlugin; host: RecordingHost }> {
  const host = new RecordingHost(handle);
  const plugin = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase, ...config }, { logger, redis, prefix });
  plugins.push(plugin);
  await plugin.start(host.asHost(logger));
  return { plugin, host };
}

async function stopHost(plugin: ChannelPlugin): Promise<void> {
  plugins.splice(plugins.indexOf(plugin), 1);
  await plugin.stop();
}

const recordedTexts = async () =>
  (await readRange(redis, conversationKeys(prefix, `discord:${DM}`).log)).flatMap((e) => (e.kind === 'message.received' ? [e.text] : []));
const texts = (host: RecordingHost) => host.received.map((r) => r.message.text);

describe('discord catch-up', () => {
  it('hands the messages sent while no host was connected to the next host, in order, once', async () => {
    const first = await startHost();
    const { message: seen } = fake.messageCreate({ channelId: DM, author: alice, content: 'before the restart' });
    await first.host.waitForText('before the restart');
    // The cursor follows what the host took.
    await waitFor(async () => (await redis.hget(cursorsKey(prefix), DM)) === seen.id || undefined, 5000, 'the cursor');
    await stopHost(first.plugin);

    fake.messageCreate({ channelId: DM, author: alice, content: 'while down 1' });
    fake.messageCreate({ channelId: DM, author: alice, content: 'while down 2' });

    const second = await startHost();
    await second.host.waitForText('while down 2');
    expect(texts(second.host)).toEqual(['while down 1', 'while down 2']);
    expect(await recordedTexts()).toEqual(['before the restart', 'while down 1', 'while down 2']);

    // Another restart finds nothing new: the cursor moved past what catch-up handed over.
    await stopHost(second.plugin);
    const third = await startHost();
    fake.messageCreate({ channelId: DM, author: alice, content: 'after the second restart' });
    await third.host.waitForText('after the second restart');
    expect(texts(third.host)).toEqual(['after the second restart']);
    expect(await recordedTexts()).toHaveLength(4);
  });

  it("keeps no cursor for a channel whose messages the host ignored (a refused stranger's DM), so strangers cannot grow the cursors", async () => {
    const { plugin, host } = await startHost({}, async () => ({ kind: 'ignored', reason: 'refused' }));
    fake.messageCreate({ channelId: 'stranger-dm', author: alice, content: 'let me in' });
    await host.waitForText('let me in');
    await stopHost(plugin);
    expect(await redis.hgetall(cursorsKey(prefix))).toEqual({});
  });

  it('catches up when Discord refuses to resume the session and the client starts a new one', async () => {
    const { host } = await startHost();
    fake.messageCreate({ channelId: DM, author: alice, content: 'before the drop' });
    await host.waitForText('before the drop');
    await waitFor(async () => (await redis.hget(cursorsKey(prefix), DM)) !== null || undefined, 5000, 'the cursor');
    const identifies = fake.identifies.length;

    fake.expireSessions();
    // No session exists now: this message is not sent over the gateway to anyone.
    fake.messageCreate({ channelId: DM, author: alice, content: 'in the gap' });

    await host.waitForText('in the gap', 15_000);
    expect(fake.identifies.length).toBe(identifies + 1);
    expect(texts(host)).toEqual(['before the drop', 'in the gap']);
  });

  it('keeps the cursor before a message dropped on a full backlog, so the next start catches up on it', async () => {
    await advanceCursor(redis, prefix, DM, snowflakeAgo(60_000));
    const gate = deferred();
    const first = await startHost({ ingestRetryBacklog: 1 }, async (m) => {
      if (m.text === 'slow') await gate.promise;
      return receive(m);
    });
    fake.messageCreate({ channelId: DM, author: alice, content: 'slow' });
    await waitFor(() => first.host.received.some((r) => r.message.text === 'slow') || undefined, 5000, 'the slow message in flight');
    // The backlog (1) is full while the first message is in flight: this one is dropped.
    const { seq } = fake.messageCreate({ channelId: DM, author: alice, content: 'dropped' });
    await waitFor(() => fake.heartbeats.some((s) => s !== null && s >= seq) || undefined, 5000, 'the dropped message received');
    gate.resolve();
    await first.host.waitForText('slow');
    fake.messageCreate({ channelId: DM, author: alice, content: 'after the drop' });
    await first.host.waitForText('after the drop');
    expect(texts(first.host)).toEqual(['slow', 'after the drop']);
    await stopHost(first.plugin);

    const second = await startHost();
    await second.host.waitForText('dropped');
    expect((await recordedTexts()).sort()).toEqual(['after the drop', 'dropped', 'slow']);
  });

  it('hands gateway messages that arrive during catch-up after the missed ones', async () => {
    await advanceCursor(redis, prefix, DM, snowflakeAgo(60_000));
    fake.messageCreate({ channelId: DM, author: alice, content: 'missed' });
    const held = fake.hold('GET', new RegExp(`^/channels/${DM}/messages$`));
    const started = startHost();
    await held.arrived;
    const { host } = await started;
    const { seq } = fake.messageCreate({ channelId: DM, author: alice, content: 'live' });
    // The client has the live message (its heartbeat says so) while catch-up still waits for its read.
    await waitFor(() => fake.heartbeats.some((s) => s !== null && s >= seq) || undefined, 5000, 'the live message received');
    expect(host.received).toEqual([]);
    held.release();
    await host.waitForText('live');
    expect(texts(host)).toEqual(['missed', 'live']);
  });

  it('leaves messages older than catchUpMaxAgeSeconds alone, and reads nothing when it is 0', async () => {
    await advanceCursor(redis, prefix, DM, snowflakeAgo(3 * 3600_000));
    fake.messageCreate({ id: snowflakeAgo(2 * 3600_000), channelId: DM, author: alice, content: 'two hours ago' });
    fake.messageCreate({ channelId: DM, author: alice, content: 'just now' });

    const off = await startHost({ catchUpMaxAgeSeconds: 0 });
    fake.messageCreate({ channelId: DM, author: alice, content: 'live while off' });
    await off.host.waitForText('live while off');
    expect(texts(off.host)).toEqual(['live while off']);
    expect(fake.callsTo('GET', new RegExp(`^/channels/${DM}/messages$`))).toHaveLength(0);
    await stopHost(off.plugin);

    await redis.hset(cursorsKey(prefix), DM, snowflakeAgo(3 * 3600_000));
    const { host } = await startHost({ catchUpMaxAgeSeconds: 3600 });
    await host.waitForText('just now');
    expect(texts(host)).not.toContain('two hours ago');
  });

  it('logs and skips a channel it cannot read, and still catches up on the others', async () => {
    const OTHER_DM = '500000000000000077';
    await advanceCursor(redis, prefix, DM, snowflakeAgo(60_000, 1));
    await advanceCursor(redis, prefix, OTHER_DM, snowflakeAgo(60_000, 2));
    fake.messageCreate({ channelId: DM, author: alice, content: 'in the broken channel' });
    fake.messageCreate({ channelId: OTHER_DM, author: alice, content: 'in the good channel' });
    fake.fail('GET', new RegExp(`^/channels/${DM}/messages$`), { status: 403, body: { message: 'Missing Access', code: 50001 } });

    const { host } = await startHost();
    await host.waitForText('in the good channel');
    expect(texts(host)).toEqual(['in the good channel']);
    await waitFor(() => logs.some((l) => l.includes('could not read missed messages')) || undefined, 5000, 'the warning');
    expect(logs.join('\n')).not.toContain(TOKEN);
  });
});

describe('the catch-up cursor', () => {
  it('only moves forward, comparing ids as numbers', async () => {
    await advanceCursor(redis, prefix, DM, '999');
    await advanceCursor(redis, prefix, DM, '1000');
    await advanceCursor(redis, prefix, DM, '999');
    await advanceCursor(redis, prefix, DM, '0998');
    expect(await redis.hget(cursorsKey(prefix), DM)).toBe('1000');
    await advanceCursor(redis, prefix, DM, '1001');
    expect(await redis.hget(cursorsKey(prefix), DM)).toBe('1001');
  });

  it('is written from memory, newest per channel, every channel in one call', async () => {
    const client = createRedis({ url: redisUrl() });
    try {
      await client.ping(); // connected: the handshake's commands are not counted
      const sent = countSent(client as Redis);
      const buffer = new CursorBuffer({ redis: client, prefix, logger: captureLogger().logger, describe: String });
      await advanceCursor(redis, prefix, 'elsewhere', '500');
      for (const id of ['1000', '1002', '1001']) buffer.note(DM, id);
      buffer.note('elsewhere', '400'); // behind what Redis has: stays at 500
      buffer.note('third', '7');
      expect(sent.count()).toBe(0);

      await buffer.flush();
      expect(sent.count()).toBe(1);
      expect(await redis.hgetall(cursorsKey(prefix))).toEqual({ [DM]: '1002', elsewhere: '500', third: '7' });
      await buffer.flush(); // nothing new: no call
      expect(sent.count()).toBe(1);
    } finally {
      await closeRedis(client);
    }
  });
});
