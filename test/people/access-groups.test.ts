/**
 * The access gate in groups and on allow-lists, through the real channel
 * host on real Redis: a group not listed is refused; with `members`, each
 * member is checked too; a refused message is answered once per window,
 * writes nothing to the conversation, and `open` channels are untouched.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ACCESS_NOTICES, AccessGate } from '../../host/access/gate.js';
import { accessAdmission } from '../../host/access/step.js';
import { AccessStore } from '../../host/access/store.js';
import { createChannelHost } from '../../host/receive.js';
import type { ChannelHost, ChannelOutbound, InboundMessage } from '../../src/channel.js';
import { accessSchema } from '../../src/config/schema.js';
import { createLogger } from '../../src/logger.js';
import { IdentityStore } from '../../src/people/identity.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
afterAll(() => redis.quit());
let prefix: string;
let sent: Array<[string, string]>;
let updates = 0;

const outbound: ChannelOutbound = {
  channelId: 'chan',
  maxMessageChars: 4096,
  async send(conversationId, text) {
    sent.push([conversationId, text]);
    return { messageId: String(sent.length) };
  },
};

function hostWith(access: unknown): { host: ChannelHost; store: AccessStore } {
  const logger = createLogger({ level: 'silent' });
  const dispatch = new Dispatch({ client: redis, prefix });
  const store = new AccessStore(redis, prefix, accessSchema.parse(access), new IdentityStore({ redis, prefix }));
  const host = createChannelHost({
    routes: undefined as never,
    redis,
    prefix,
    logger,
    dispatch,
    ingest: dispatch,
    enqueue: async () => undefined,
    settings: () => ({ admins: ['boss'] }),
    outbound: () => outbound,
    features: [accessAdmission(new AccessGate(accessSchema.parse(access), store, logger))],
  });
  return { host, store };
}

/** A message from `user` in chat `chat` (a group when `group`). */
const msg = (user: string, chat: string, text: string, group = false): InboundMessage => ({
  conversationId: `chan:${chat}`,
  chatId: chat,
  updateKey: `chan:${++updates}`,
  sender: { id: user },
  text,
  ...(group && { group: true }),
});

/** The current value of a counter with exactly these labels (0 when never counted). */
async function metricValue(name: string, labels: Record<string, string>): Promise<number> {
  const m = (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x));
  return m?.value ?? 0;
}

const keysOf = (chat: string) => redis.keys(`${prefix}:{c:chan:${chat}}:*`);

beforeEach(() => {
  prefix = testPrefix();
  sent = [];
});
afterEach(() => cleanupPrefix(redis, prefix));

describe('access in groups', () => {
  it('refuses a group not listed, answering each member once per window and recording nothing', async () => {
    const { host, store } = hostWith({ channels: { chan: { policy: 'pairing', groups: ['-100'] } } });
    const before = await metricValue('steerbot_access_refused_total', { channel: 'chan', reason: 'group-not-allowed' });
    expect(await host.receive('chan', msg('u1', '-200', 'hi all', true))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(await host.receive('chan', msg('u1', '-200', 'hello?', true))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(await host.receive('chan', msg('u2', '-200', 'me too', true))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(sent).toEqual([
      ['chan:-200', ACCESS_NOTICES.groupNotAllowed],
      ['chan:-200', ACCESS_NOTICES.groupNotAllowed],
    ]);
    expect(await keysOf('-200')).toEqual([]);
    expect((await store.refusals()).map((r) => r.reason)).toEqual(['group-not-allowed', 'group-not-allowed', 'group-not-allowed']);
    expect(await metricValue('steerbot_access_refused_total', { channel: 'chan', reason: 'group-not-allowed' })).toBe(before + 3);
    // No pairing code is handed out in a group.
    expect(await store.waitingCodes()).toEqual([]);
  });

  it('lets every member of a listed group talk, unless `members` checks them too', async () => {
    const open = hostWith({ channels: { chan: { policy: 'pairing', groups: ['-100'] } } });
    expect((await open.host.receive('chan', msg('stranger', '-100', 'hi', true))).kind).toBe('ingested');

    await cleanupPrefix(redis, prefix);
    const strict = hostWith({ channels: { chan: { policy: 'pairing', groups: ['-100'], members: true, users: ['friend'] } } });
    expect(await strict.host.receive('chan', msg('stranger', '-100', 'hi', true))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(sent.at(-1)).toEqual(['chan:-100', ACCESS_NOTICES.memberNotPaired]);
    expect((await strict.host.receive('chan', msg('friend', '-100', 'hi', true))).kind).toBe('ingested');
    await strict.store.pair('chan:stranger');
    expect((await strict.host.receive('chan', msg('stranger', '-100', 'paired now', true))).kind).toBe('ingested');
  });
});

describe("a listed group's threads", () => {
  /** A message in a thread of `chat`: the conversation id continues after `sep`, the chat id is the group's (Teams names the chain in both). */
  const inThread = (chat: string, sep: string, thread: string, chatId = chat): InboundMessage => ({
    ...msg('member', chat, 'hi', true),
    conversationId: `chan:${chat}${sep}${thread}`,
    chatId,
  });

  it("are answered as the group is, by the rule a schedule's fire asks: topics, threads and reply chains", async () => {
    const { host } = hostWith({ channels: { chan: { policy: 'allowlist', groups: ['-100', '19:x@thread.tacv2'] } } });
    expect((await host.receive('chan', inThread('-100', ':', '7'))).kind).toBe('ingested');
    expect((await host.receive('chan', inThread('-100', '/', '$root'))).kind).toBe('ingested');
    const chain = '19:x@thread.tacv2;messageid=17';
    expect((await host.receive('chan', { ...inThread('19:x@thread.tacv2', ';', 'messageid=17'), chatId: chain })).kind).toBe('ingested');
  });

  it('never covers a chat whose id only starts the same', async () => {
    const { host } = hostWith({ channels: { chan: { policy: 'allowlist', groups: ['-100'] } } });
    expect(await host.receive('chan', msg('member', '-1001', 'hi', true))).toEqual({ kind: 'ignored', reason: 'refused' });
  });
});

describe('allowlist', () => {
  it('refuses users not listed (no code), lets listed users and admins through', async () => {
    const { host, store } = hostWith({ channels: { chan: { policy: 'allowlist', users: ['ann'] } } });
    expect(await host.receive('chan', msg('eve', 'eve', 'hi'))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(sent).toEqual([['chan:eve', ACCESS_NOTICES.notAllowed]]);
    expect(await store.waitingCodes()).toEqual([]);
    expect(await keysOf('eve')).toEqual([]);
    // A refused user's control commands are refused too: nothing written.
    expect(await host.receive('chan', msg('eve', 'eve', '/new'))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(await keysOf('eve')).toEqual([]);
    expect((await host.receive('chan', msg('ann', 'ann', 'hi'))).kind).toBe('ingested');
    expect((await host.receive('chan', msg('boss', 'boss', 'hi'))).kind).toBe('ingested');
  });

  it('refuses a sender id that cannot name an account, silently', async () => {
    const { host } = hostWith({ channels: { chan: { policy: 'allowlist' } } });
    expect(await host.receive('chan', msg('a{b}', 'x', 'hi'))).toEqual({ kind: 'ignored', reason: 'refused' });
    expect(sent).toEqual([]);
  });
});

describe('open channels', () => {
  it('are untouched: no access reads or writes', async () => {
    const { host } = hostWith({});
    expect((await host.receive('chan', msg('anyone', 'c1', 'hi'))).kind).toBe('ingested');
    expect(await redis.keys(`${prefix}:{people}:*`)).toEqual([]);
  });

  it('a redelivered /link is answered once', async () => {
    const { host } = hostWith({});
    const m = msg('ann', 'ann', '/link');
    const first = await host.receive('chan', m);
    const again = await host.receive('chan', m);
    expect(first).toMatchObject({ kind: 'command', command: 'link', duplicate: false });
    expect(again).toEqual({ kind: 'command', command: 'link', reply: '', duplicate: true });
    expect(sent).toHaveLength(1);
  });
});
