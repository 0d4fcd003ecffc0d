/**
 * Group chats and limits at the channel host: control commands that affect
 * everyone are for chat admins (asked of the fake Telegram and Discord
 * through the real grammY and discord.js REST clients) or configured ids;
 * a message over a rate limit is answered once with a notice.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { createAdminCheck } from '../../host/admins.js';
import { dispatchFromConfig } from '../../host/main.js';
import { createChannelHost } from '../../host/receive.js';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { normalizeMessage } from '../../plugins/discord/normalize.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { normalizeUpdate } from '../../plugins/telegram/normalize.js';
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import type { ChannelHost, ChannelOutbound, ChannelPlugin, ChannelSettings, InboundMessage } from '../../src/channel.js';
import type { HttpRoute } from '../../src/http/routes.js';
import { createLogger } from '../../src/logger.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import type { RateLimitOptions } from '../../src/protocol/index.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { FakeDiscord, user } from '../../testing/fakes/discord-server.js';
import { FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const GROUP = -1001234;
const GROUP_CID = `telegram:${GROUP}`;
const MEMBER = '2001';
const ADMIN = '2002';

let redis: Redis;
let prefix: string;
let n = 0;

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = testPrefix();
});
afterEach(async () => {
  await cleanupPrefix(redis, prefix);
});

/** A channel host over a real Dispatch; `outbound` answers commands and notices. */
function hostFor(
  outbound: ChannelOutbound,
  settings: ChannelSettings = {},
  rateLimit?: RateLimitOptions,
  routes: HttpRoute[] = [],
): { host: ChannelHost; dispatch: Dispatch } {
  const dispatch = new Dispatch({ client: redis, prefix, ...(rateLimit && { rateLimit }) });
  const host = createChannelHost({
    routes: { add: (route) => void routes.push(route) },
    redis,
    prefix,
    logger,
    dispatch,
    ingest: dispatch,
    enqueue: async () => undefined,
    settings: () => settings,
    outbound: (id) => (id === outbound.channelId ? outbound : undefined),
    admins: createAdminCheck(),
    features: [],
  });
  return { host, dispatch };
}

const message = (conversationId: string, chatId: string, senderId: string, text: string, over: Partial<InboundMessage> = {}): InboundMessage => ({
  conversationId,
  updateKey: `${conversationId.split(':')[0]}:${++n}`,
  chatId,
  sender: { id: senderId },
  text,
  messageId: String(9000 + n),
  ...over,
});

describe('control commands in a Telegram group', () => {
  let tg: FakeTelegram;
  let outbound: ChannelOutbound;
  beforeEach(async () => {
    tg = await startFakeTelegram();
    tg.chatMembers.set(`${GROUP}:${ADMIN}`, 'administrator');
    outbound = createTelegramPlugin({ token: FAKE_TOKEN, apiRoot: tg.apiRoot }, { logger, redis, prefix }).outbound;
  });
  afterEach(async () => {
    await tg.close();
  });
  const groupMessage = (sender: string, text: string, over: Partial<InboundMessage> = {}) =>
    message(GROUP_CID, String(GROUP), sender, text, { group: true, ...over });

  it('refuses /stop from a member, once, and leaves the run alone', async () => {
    const { host, dispatch } = hostFor(outbound);
    await host.receive('telegram', groupMessage(MEMBER, 'hello'));
    const stop = groupMessage(MEMBER, '/stop');
    const results = await Promise.all([host.receive('telegram', stop), host.receive('telegram', stop), host.receive('telegram', stop)]);
    expect(results.filter((r) => r.kind === 'command' && !r.duplicate)).toHaveLength(1);
    expect(tg.sent.map((m) => m.text)).toEqual(['Only admins can use /stop here.']);
    expect(tg.sent[0]!.chatId).toBe(GROUP);
    expect((await dispatch.status(GROUP_CID)).stop).toBeUndefined();
  });

  it('lets a chat admin /stop, asking Telegram once per user within the cache time', async () => {
    const { host, dispatch } = hostFor(outbound);
    await host.receive('telegram', groupMessage(MEMBER, 'hello'));
    await host.receive('telegram', groupMessage(ADMIN, '/stop'));
    expect((await dispatch.status(GROUP_CID)).stop).toBe('stop');
    await host.receive('telegram', groupMessage(ADMIN, '/queue followup'));
    expect((await dispatch.status(GROUP_CID)).policyOverride).toBe('followup');
    const asked = tg.callsOf('getChatMember');
    expect(asked).toHaveLength(1);
    expect(asked[0]!.payload).toMatchObject({ chat_id: GROUP, user_id: Number(ADMIN) });
  });

  it('lets a configured admin /new without asking Telegram', async () => {
    const { host } = hostFor(outbound, { admins: [MEMBER] });
    const r = await host.receive('telegram', groupMessage(MEMBER, '/new'));
    expect(r).toMatchObject({ kind: 'command', command: 'new', duplicate: false });
    expect(tg.sent[0]!.text).toMatch(/^Started a new conversation/);
    expect(tg.callsOf('getChatMember')).toHaveLength(0);
  });

  it('lets anyone read /status', async () => {
    const { host } = hostFor(outbound);
    await host.receive('telegram', groupMessage(MEMBER, '/status'));
    expect(tg.sent[0]!.text).toMatch(/^No active run/);
    expect(tg.callsOf('getChatMember')).toHaveLength(0);
  });

  it('refuses /compact and /queue from a member', async () => {
    const { host, dispatch } = hostFor(outbound);
    await host.receive('telegram', groupMessage(MEMBER, '/compact'));
    await host.receive('telegram', groupMessage(MEMBER, '/queue interrupt'));
    expect(tg.sent.map((m) => m.text)).toEqual(['Only admins can use /compact here.', 'Only admins can use /queue here.']);
    const status = await dispatch.status(GROUP_CID);
    expect(status.policyOverride).toBeUndefined();
    expect(status.compactionRequestedSeq).toBe(0);
  });

  it('says it could not check when Telegram fails, and does nothing', async () => {
    tg.failNext('getChatMember', { error_code: 500, description: 'Internal Server Error' });
    const { host, dispatch } = hostFor(outbound);
    await host.receive('telegram', groupMessage(MEMBER, 'hello'));
    await host.receive('telegram', groupMessage(ADMIN, '/stop'));
    expect(tg.sent.map((m) => m.text)).toEqual(['Could not check whether you are an admin of this chat; try /stop again later.']);
    expect((await dispatch.status(GROUP_CID)).stop).toBeUndefined();
  });

  it('lets the user of a private chat /stop without asking anyone', async () => {
    const { host, dispatch } = hostFor(outbound);
    const cid = `telegram:${MEMBER}`;
    await host.receive('telegram', message(cid, MEMBER, MEMBER, 'hello'));
    await host.receive('telegram', message(cid, MEMBER, MEMBER, '/stop'));
    expect((await dispatch.status(cid)).stop).toBe('stop');
    expect(tg.callsOf('getChatMember')).toHaveLength(0);
  });

  it('marks group messages as group messages when normalizing updates', () => {
    const bot = { id: 7012345678, username: 'steer_test_bot' };
    const inGroup = normalizeUpdate(messageUpdate({ chatId: GROUP, text: '/stop' }) as never, { channelId: 'telegram', bot, groups: 'mention' });
    const inPrivate = normalizeUpdate(messageUpdate({ text: '/stop' }) as never, { channelId: 'telegram', bot, groups: 'mention' });
    expect(inGroup).toMatchObject({ kind: 'message', message: { group: true } });
    expect(inPrivate.kind === 'message' && inPrivate.message.group).toBeUndefined();
  });
});

describe('control commands in a Discord guild', () => {
  const GUILD = '300000000000000001';
  const CHANNEL = '300000000000000002';
  const THREAD = '300000000000000003';
  const MODS = '300000000000000010';
  const OWNER = '400000000000000001';
  const MOD = '400000000000000002';
  const ADMIN_ROLE_MEMBER = '400000000000000003';
  const PLAIN = '400000000000000004';
  const STRANGER = '400000000000000005';
  const ADMINS_ROLE = '300000000000000011';
  const TOKEN = 'discord-test-token-for-group-controls';
  let discord: FakeDiscord;
  let outbound: ChannelOutbound;

  beforeEach(async () => {
    discord = await FakeDiscord.start({ token: TOKEN });
    discord.addGuild({
      id: GUILD,
      ownerId: OWNER,
      channels: [{ id: CHANNEL }],
      threads: [{ id: THREAD, parentId: CHANNEL }],
      roles: [
        { id: MODS, permissions: String(1n << 13n) }, // Manage Messages
        { id: ADMINS_ROLE, permissions: String(1n << 3n) }, // Administrator
      ],
      members: { [OWNER]: [], [MOD]: [MODS], [ADMIN_ROLE_MEMBER]: [ADMINS_ROLE], [PLAIN]: [] },
    });
    outbound = createDiscordPlugin({ token: TOKEN, apiBase: discord.apiBase }, { logger, redis, prefix }).outbound;
  });
  afterEach(async () => {
    await discord.close();
  });

  it.each([
    ['the owner', OWNER, true],
    ['a member whose role grants Manage Messages', MOD, true],
    ['a member whose role grants Administrator', ADMIN_ROLE_MEMBER, true],
    ['a member without such a role', PLAIN, false],
    ['a user who is not in the guild', STRANGER, false],
  ])('decides for %s', async (_who, userId, admin) => {
    expect(await outbound.isAdmin!(`discord:${CHANNEL}`, userId)).toBe(admin);
  });

  it('asks about the guild of a thread', async () => {
    expect(await outbound.isAdmin!(`discord:${THREAD}`, MOD)).toBe(true);
    expect(await outbound.isAdmin!(`discord:${THREAD}`, PLAIN)).toBe(false);
  });

  it('runs /stop for a moderator and refuses it for a plain member', async () => {
    const { host, dispatch } = hostFor(outbound);
    const cid = `discord:${CHANNEL}`;
    await host.receive('discord', message(cid, CHANNEL, PLAIN, 'hello', { group: true }));
    await host.receive('discord', message(cid, CHANNEL, PLAIN, '/stop', { group: true }));
    expect((await dispatch.status(cid)).stop).toBeUndefined();
    await host.receive('discord', message(cid, CHANNEL, MOD, '/stop', { group: true }));
    expect((await dispatch.status(cid)).stop).toBe('stop');
    const posted = discord.callsTo('POST', new RegExp(`^/channels/${CHANNEL}/messages$`)).map((c) => c.body.content);
    expect(posted).toEqual(['Only admins can use /stop here.', 'Cancelled the run before it started.']);
  });

  it('marks guild messages, not DMs, as group messages', () => {
    const fake = (guildId: string | null) =>
      ({
        author: user(PLAIN, 'plain'),
        webhookId: null,
        type: 0,
        channel: { isThread: () => false },
        channelId: CHANNEL,
        guildId,
        guild: null,
        id: String(++n),
        content: 'hi',
        mentions: { users: new Map([['100000000000000001', {}]]), roles: new Map(), repliedUser: null },
        reference: null,
        attachments: new Map(),
        stickers: new Map(),
      }) as never;
    const cfg = { alwaysChannels: [CHANNEL], allowedUsers: [], allowedChats: [], answerBots: false };
    expect(normalizeMessage(fake(GUILD), 'discord', '100000000000000001', cfg)).toMatchObject({ kind: 'message', message: { group: true } });
    const dm = normalizeMessage(fake(null), 'discord', '100000000000000001', cfg);
    expect(dm.kind === 'message' && dm.message.group).toBeUndefined();
  });
});

describe('control commands in a webhook conversation', () => {
  const sent: string[] = [];
  const outbound: ChannelOutbound = {
    channelId: 'webhook:crm',
    maxMessageChars: 16_000,
    async send(_c, text) {
      sent.push(text);
      return { messageId: String(sent.length) };
    },
  };
  beforeEach(() => {
    sent.length = 0;
  });
  const cid = 'webhook:crm:ticket-1';

  it('lets the sender of a 1:1 conversation /stop', async () => {
    const { host, dispatch } = hostFor(outbound);
    await host.receive('webhook:crm', message(cid, 'ticket-1', 'agent-7', 'hello'));
    await host.receive('webhook:crm', message(cid, 'ticket-1', 'agent-7', '/stop'));
    expect((await dispatch.status(cid)).stop).toBe('stop');
  });

  it('in a group conversation, lets only the configured admins /stop', async () => {
    const { host, dispatch } = hostFor(outbound, { admins: ['lead-1'] });
    await host.receive('webhook:crm', message(cid, 'ticket-1', 'agent-7', 'hello', { group: true }));
    await host.receive('webhook:crm', message(cid, 'ticket-1', 'agent-7', '/stop', { group: true }));
    expect(sent).toEqual(['Only admins can use /stop here.']);
    expect((await dispatch.status(cid)).stop).toBeUndefined();
    await host.receive('webhook:crm', message(cid, 'ticket-1', 'lead-1', '/stop', { group: true }));
    expect((await dispatch.status(cid)).stop).toBe('stop');
  });
});

describe('the webhook channel, through its route', () => {
  const SECRET = 'group-controls-webhook-secret-0001';
  let routes: HttpRoute[];
  let plugin: ChannelPlugin;
  beforeEach(async () => {
    routes = [];
    plugin = createWebhookPlugin('crm', { secret: SECRET, admins: ['lead-1'] }, { logger, redis, prefix });
    const { host } = hostFor(plugin.outbound, plugin.settings, { user: { capacity: 1, refillPerMinute: 0.001 } }, routes);
    await plugin.start(host);
  });
  afterEach(async () => {
    await plugin.stop();
  });
  const post = async (body: Record<string, unknown>) => {
    const raw = JSON.stringify(body);
    const route = routes.find((r) => r.method === 'POST')!;
    const res = await route.handle({
      method: 'POST',
      path: route.path,
      params: {},
      query: {},
      headers: signedHeaders(SECRET, raw),
      body: Buffer.from(raw),
      signal: new AbortController().signal,
    });
    return res as { status: number; json: Record<string, unknown> };
  };
  /** Texts stored for the event stream and callbacks of `conversation`. */
  const replies = async (conversation: string) =>
    (await redis.xrange(replyStreamKey(prefix, `webhook:crm:${conversation}`), '-', '+')).map(
      ([, fields]) => JSON.parse(fields[fields.indexOf('data') + 1]!).text as string,
    );

  it('answers a message over the rate limit 202 refused, and a redelivery 200 duplicate', async () => {
    expect((await post({ id: 'a1', conversation: 't1', sender: { id: 'ann' }, text: 'one' })).status).toBe(202);
    const refused = await post({ id: 'a2', conversation: 't1', sender: { id: 'ann' }, text: 'two' });
    expect(refused).toMatchObject({ status: 202, json: { result: 'refused', limit: 'user' } });
    expect(await post({ id: 'a2', conversation: 't1', sender: { id: 'ann' }, text: 'two' })).toMatchObject({
      status: 200,
      json: { result: 'duplicate', seq: refused.json.seq },
    });
    const stored = await replies('t1');
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatch(/^You are sending messages faster than this bot answers them/);
  });

  it('refuses /stop from a non-admin in a group conversation, and runs it for an admin', async () => {
    await post({ id: 'b1', conversation: 't2', sender: { id: 'ann' }, text: 'hello', group: true });
    expect(await post({ id: 'b2', conversation: 't2', sender: { id: 'bob' }, text: '/stop', group: true })).toMatchObject({
      status: 202,
      json: { result: 'command', command: 'stop', reply: 'Only admins can use /stop here.' },
    });
    expect(await post({ id: 'b3', conversation: 't2', sender: { id: 'lead-1' }, text: '/stop', group: true })).toMatchObject({
      status: 202,
      json: { result: 'command', command: 'stop', reply: 'Cancelled the run before it started.' },
    });
  });
});

describe('rate limit settings', () => {
  it("come from the environment into the host's dispatch; off when unset", () => {
    const config = readConfig({ env: { STEERBOT_RATE_LIMIT_USER_CAPACITY: '5', STEERBOT_RATE_LIMIT_USER_PER_MINUTE: '2.5' } });
    expect(config.dispatch.rateLimit).toEqual({ user: { capacity: 5, refillPerMinute: 2.5 } });
    expect(dispatchFromConfig(config, redis, true).options.rateLimit).toEqual({ user: { capacity: 5, refillPerMinute: 2.5 } });
    expect(readConfig({ env: {} }).dispatch.rateLimit).toEqual({});
  });

  it('name a bucket without its refill', () => {
    expect(() => readConfig({ env: { STEERBOT_RATE_LIMIT_CONVERSATION_CAPACITY: '5' } })).toThrow(/dispatch\.rateLimit\.conversation\.refillPerMinute/);
  });
});

describe('a message over a rate limit', () => {
  let tg: FakeTelegram;
  let outbound: ChannelOutbound;
  beforeEach(async () => {
    tg = await startFakeTelegram();
    outbound = createTelegramPlugin({ token: FAKE_TOKEN, apiRoot: tg.apiRoot }, { logger, redis, prefix }).outbound;
  });
  afterEach(async () => {
    await tg.close();
  });

  it('is answered with one notice, however often the update is delivered', async () => {
    const { host } = hostFor(outbound, {}, { user: { capacity: 2, refillPerMinute: 0.001 } });
    const cid = `telegram:${MEMBER}`;
    await host.receive('telegram', message(cid, MEMBER, MEMBER, 'one'));
    await host.receive('telegram', message(cid, MEMBER, MEMBER, 'two'));
    const third = message(cid, MEMBER, MEMBER, 'three');
    const results = await Promise.all(Array.from({ length: 8 }, () => host.receive('telegram', third)));
    const kinds = results.map((r) => (r.kind === 'ingested' ? r.result.kind : r.kind)).sort();
    expect(kinds).toEqual(['duplicate', 'duplicate', 'duplicate', 'duplicate', 'duplicate', 'duplicate', 'duplicate', 'refused']);
    expect(tg.sent).toHaveLength(1);
    expect(tg.sent[0]!.text).toMatch(/^You are sending messages faster than this bot answers them; this one was not answered\. Try again in \d+ s\.$/);
    expect(tg.sent[0]!.replyTo).toBe(Number(third.messageId));
  });

  it('is answered for each refused message, naming the conversation limit', async () => {
    const { host } = hostFor(outbound, {}, { conversation: { capacity: 1, refillPerMinute: 0.001 } });
    await host.receive('telegram', message(GROUP_CID, String(GROUP), MEMBER, 'one', { group: true }));
    await host.receive('telegram', message(GROUP_CID, String(GROUP), ADMIN, 'two', { group: true }));
    await host.receive('telegram', message(GROUP_CID, String(GROUP), MEMBER, 'three', { group: true }));
    expect(tg.sent.map((m) => m.text.split(';')[0])).toEqual([
      'This chat is sending messages faster than this bot answers them',
      'This chat is sending messages faster than this bot answers them',
    ]);
  });
});
