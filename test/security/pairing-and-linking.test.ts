/**
 * Attacks on pairing and linking, black-box through the real grammY and
 * discord.js clients against the local fakes: a stranger approving their own
 * code from a group or server they own, a link code shown to a whole group,
 * a link code confirmed by two accounts at once, an approved person talked
 * into confirming a stranger's code, and codes kept in clear in Redis.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ACCESS_COMMAND_REPLIES, APPROVED_NOTICE } from '../../host/access/commands.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { peopleKeys } from '../../src/redis/keys.js';
import { user } from '../../testing/fakes/discord-server.js';
import { ALICE, callbackQueryUpdate, messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { type AccessSystem, DISCORD_ADMIN, startAccessSystem, TG_ADMIN } from '../people/access-system.js';

const ADMIN: TgUser = { id: TG_ADMIN, is_bot: false, first_name: 'Admin' };
const MALLORY: TgUser = { id: 1666, is_bot: false, first_name: 'Mallory' };
/** A group Mallory created and added the bot to: Telegram calls her its creator. */
const MALLORY_GROUP = -100500;
/** A group Alice and Mallory are both in. */
const SHARED_GROUP = -100600;
const ALICE_ID = `telegram:${ALICE.id}`;
const MALLORY_ID = `telegram:${MALLORY.id}`;
const CODE_RE = /([A-Z2-9]{4}-[A-Z2-9]{4})/;
const PAIR_CODE_RE = /pairing code is ([A-Z2-9]{4}-[A-Z2-9]{4})/;

/** Discord: Mallory owns a server with one text channel, and has a DM with the bot. */
const MALLORY_DC = user('400000000000000666', 'mallory');
const MALLORY_GUILD = '200000000000000666';
const MALLORY_GUILD_CHANNEL = '300000000000000666';
const MALLORY_DC_DM = '510000000000000666';

const PAIRING = { channels: { telegram: { policy: 'pairing' }, discord: { policy: 'pairing' } } };
const REFUSED_PAIR = "Only this bot's admins can use /pair.";
const LINK_IN_DM = 'Send /link to me in a direct message: link codes are only shown there.';
const LINK_NOT_ALLOWED = ACCESS_COMMAND_REPLIES.linkNotAllowed;

let sys: AccessSystem | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

/** Texts the bot sent to Telegram chat `chatId`. */
const tgTexts = (s: AccessSystem, chatId: number) => s.tg.sent.filter((m) => m.chatId === chatId).map((m) => m.text);
/** Waits until chat `chatId` has `n` messages from the bot; returns them. */
const tgReplies = (s: AccessSystem, chatId: number, n: number) =>
  waitFor(() => tgTexts(s, chatId).length >= n && tgTexts(s, chatId), 10_000, `${n} replies in chat ${chatId}`);
/** Texts the bot posted to Discord channel `channel`. */
const dcTexts = (s: AccessSystem, channel: string) =>
  s.discord
    .callsTo('POST', new RegExp(`^/channels/${channel}/messages$`))
    .filter((c) => c.status === 200)
    .map((c) => String(c.body.content));
const dcReplies = (s: AccessSystem, channel: string, n: number) =>
  waitFor(() => dcTexts(s, channel).length >= n && dcTexts(s, channel), 10_000, `${n} replies in Discord channel ${channel}`);

/** Sends a Telegram message from `from` (in their DM, or in `chatId`) and waits until the host answered the webhook. */
async function tgSay(s: AccessSystem, from: TgUser, text: string, chatId?: number): Promise<void> {
  expect(await s.post(messageUpdate({ from, text, ...(chatId !== undefined && { chatId }) }))).toBe(200);
}

/** Keys of conversation `cid` (its whole cluster slot). */
const conversationKeysOf = (s: AccessSystem, cid: string) => s.h.ctx.redis.keys(`${s.h.prefix}:{c:${cid}}:*`);
/** The `message.received` entries of conversation `cid`. */
const received = async (s: AccessSystem, cid: string) => (await s.h.record(cid)).filter((e) => e.kind === 'message.received');

/** Nothing reached the agent: the echo runner answered no one. */
const agentNeverRan = (s: AccessSystem) => expect(s.tg.sent.filter((m) => m.text.startsWith('echo:'))).toEqual([]);

/** Every key under `prefix` and every value in it, as text: what an attacker reading Redis would see. */
async function everythingUnder(redis: RedisClient, prefix: string): Promise<string> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`);
    cursor = next;
    for (const key of keys) {
      out.push(key);
      const type = await redis.type(key);
      if (type === 'string') out.push((await redis.get(key)) ?? '');
      else if (type === 'hash') out.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'list') out.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else if (type === 'set') out.push(JSON.stringify(await redis.smembers(key)));
      else if (type === 'zset') out.push(JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES')));
      else if (type === 'stream') out.push(JSON.stringify(await redis.xrange(key, '-', '+')));
    }
  } while (cursor !== '0');
  return out.join('\n');
}

/** Asks for a pairing code from Mallory's DM; returns it. */
async function mallorysCode(s: AccessSystem): Promise<string> {
  await tgSay(s, MALLORY, 'hello');
  return PAIR_CODE_RE.exec((await tgReplies(s, MALLORY.id, 1))[0]!)![1]!;
}

describe('approving pairing codes', () => {
  it('a stranger who created a Telegram group cannot approve their own code there; the code stays valid for a configured admin', async () => {
    sys = await startAccessSystem(PAIRING);
    const code = await mallorysCode(sys);
    sys.tg.chatMembers.set(`${MALLORY_GROUP}:${MALLORY.id}`, 'creator');

    await tgSay(sys, MALLORY, `/pair ${code}`, MALLORY_GROUP);
    expect(await tgReplies(sys, MALLORY_GROUP, 1)).toEqual([REFUSED_PAIR]);
    // As an anonymous admin of her group (Telegram: the chat itself speaks) she is refused too.
    const anonymous = messageUpdate({ chatId: MALLORY_GROUP, text: `/pair ${code}` });
    delete anonymous.message.from;
    anonymous.message.sender_chat = { id: MALLORY_GROUP, type: 'supergroup', title: 'Test group' };
    expect(await sys.post(anonymous)).toBe(200);
    expect(await tgReplies(sys, MALLORY_GROUP, 2)).toEqual([REFUSED_PAIR, REFUSED_PAIR]);
    expect((await sys.store.approved('telegram', String(MALLORY.id))).approved).toBe(false);
    // Nothing was written to the group's conversation, and her DM still reaches nobody.
    expect(await received(sys, `telegram:${MALLORY_GROUP}`)).toEqual([]);
    await tgSay(sys, MALLORY, 'let me in');
    expect(await received(sys, MALLORY_ID)).toEqual([]);
    agentNeverRan(sys);

    // The code was not used up: the configured admin approves it.
    await tgSay(sys, ADMIN, `/pair ${code}`);
    expect(await tgReplies(sys, ADMIN.id, 1)).toEqual([`Approved Mallory (${MALLORY_ID}).`]);
    expect((await sys.store.approved('telegram', String(MALLORY.id))).approved).toBe(true);
  });

  it('a stranger who owns a Discord server cannot approve their own code there', async () => {
    sys = await startAccessSystem(PAIRING);
    sys.discord.addGuild({
      id: MALLORY_GUILD,
      ownerId: MALLORY_DC.id,
      channels: [{ id: MALLORY_GUILD_CHANNEL }],
      members: { [MALLORY_DC.id]: [] },
    });
    sys.discord.messageCreate({ channelId: MALLORY_DC_DM, author: MALLORY_DC, content: 'hello' });
    const code = PAIR_CODE_RE.exec((await dcReplies(sys, MALLORY_DC_DM, 1))[0]!)![1]!;

    const bot = sys.discord.bot;
    sys.discord.messageCreate({
      channelId: MALLORY_GUILD_CHANNEL,
      guildId: MALLORY_GUILD,
      author: MALLORY_DC,
      content: `<@${bot.id}> /pair ${code}`,
      mentions: [bot],
    });
    expect(await dcReplies(sys, MALLORY_GUILD_CHANNEL, 1)).toEqual([REFUSED_PAIR]);
    expect((await sys.store.approved('discord', MALLORY_DC.id)).approved).toBe(false);
    expect(await received(sys, `discord:${MALLORY_GUILD_CHANNEL}`)).toEqual([]);
    expect(dcTexts(sys, MALLORY_GUILD_CHANNEL).filter((t) => t.startsWith('echo:'))).toEqual([]);
    expect((await sys.store.waitingCodes()).map((w) => w.account)).toEqual([`discord:${MALLORY_DC.id}`]);
  });

  it("a configured admin's click on a button carrying /pair approves nobody", async () => {
    sys = await startAccessSystem(PAIRING);
    const code = await mallorysCode(sys);
    // A message in the admin's chat carries a button whose command is /pair <code>; the admin clicks it.
    expect(
      await sys.post(
        callbackQueryUpdate({ from: ADMIN, data: `/pair ${code}`, message: { chatId: ADMIN.id, messageId: 77, threadId: undefined, text: 'Weekly report' } }),
      ),
    ).toBe(200);
    expect(
      await sys.post(
        callbackQueryUpdate({ from: ADMIN, data: `/link ${code}`, message: { chatId: ADMIN.id, messageId: 77, threadId: undefined, text: 'Weekly report' } }),
      ),
    ).toBe(200);
    expect((await sys.store.approved('telegram', String(MALLORY.id))).approved).toBe(false);
    expect(tgTexts(sys, ADMIN.id)).toEqual([]);
    // The code still works when the admin types it.
    await tgSay(sys, ADMIN, `/pair ${code}`);
    expect(await tgReplies(sys, ADMIN.id, 1)).toEqual([`Approved Mallory (${MALLORY_ID}).`]);
  });

  it("an admin of one channel cannot approve another channel's code; that channel's admin still can", async () => {
    sys = await startAccessSystem(PAIRING);
    const code = await mallorysCode(sys);
    sys.discord.messageCreate({ channelId: '510000000000000009', author: user(DISCORD_ADMIN, 'dcadmin'), content: `/pair ${code}` });
    expect(await dcReplies(sys, '510000000000000009', 1)).toEqual([ACCESS_COMMAND_REPLIES.pairElsewhere('telegram')]);
    expect((await sys.store.approved('telegram', String(MALLORY.id))).approved).toBe(false);
    await tgSay(sys, ADMIN, `/pair ${code}`);
    expect(await tgReplies(sys, ADMIN.id, 1)).toEqual([`Approved Mallory (${MALLORY_ID}).`]);
  });

  it('a configured admin approves a code from any chat, a group included', async () => {
    sys = await startAccessSystem(PAIRING);
    const code = await mallorysCode(sys);
    await tgSay(sys, ADMIN, `/pair ${code}`, SHARED_GROUP);
    expect(await tgReplies(sys, SHARED_GROUP, 1)).toEqual([`Approved Mallory (${MALLORY_ID}).`]);
    expect(await tgReplies(sys, MALLORY.id, 2)).toEqual([expect.stringContaining(code), APPROVED_NOTICE]);
  });
});

describe('codes at rest', () => {
  it('no pairing or link code is kept in clear in Redis, and a repeat request does not repeat the code', async () => {
    sys = await startAccessSystem(PAIRING, { noticeWindowSeconds: 1 });
    const code = await mallorysCode(sys);
    await sys.store.pair(ALICE_ID);
    await tgSay(sys, ALICE, '/link');
    const linkCode = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;

    const seen = await everythingUnder(sys.h.ctx.redis, sys.h.prefix);
    for (const c of [code, linkCode]) {
      expect(seen).not.toContain(c);
      expect(seen).not.toContain(c.replace('-', ''));
    }

    // After the notice window Mallory is told her code is still waiting, without the code (it is not kept).
    const s = sys;
    await waitFor(async () => (await s.h.ctx.redis.exists(s.store.keys.notice(MALLORY_ID))) === 0, 5000, 'the notice window to pass');
    await tgSay(sys, MALLORY, 'hello again');
    const again = (await tgReplies(sys, MALLORY.id, 2))[1]!;
    expect(again).toMatch(/^Your pairing code, sent earlier, is still waiting for an admin/);
    expect(again).not.toMatch(CODE_RE);
    // The code she passed on still works.
    expect((await sys.store.approve(code)).kind).toBe('ok');
  });
});

describe('link codes', () => {
  it('`/link` in a group shows no code and asks for a direct message; a group member cannot join the identity', async () => {
    sys = await startAccessSystem(PAIRING);
    await sys.store.pair(ALICE_ID);
    await tgSay(sys, ALICE, '/link', SHARED_GROUP);
    const [reply] = await tgReplies(sys, SHARED_GROUP, 1);
    expect(reply).toBe(LINK_IN_DM);
    expect(reply).not.toMatch(CODE_RE);

    // What Mallory would do with a code she saw in the group: nothing she can see works.
    const code = CODE_RE.exec(reply!)?.[1] ?? 'QQQQ-QQQQ';
    await tgSay(sys, MALLORY, `/link ${code}`);
    expect(await tgReplies(sys, MALLORY.id, 1)).toEqual(['No such link code, or it expired.']);
    expect(await sys.identities.resolve('telegram', String(MALLORY.id))).toBe(MALLORY_ID);
    expect((await sys.store.approved('telegram', String(MALLORY.id))).approved).toBe(false);
    expect(await received(sys, `telegram:${SHARED_GROUP}`)).toEqual([]);
    agentNeverRan(sys);
  });

  it('a link code posted in a group is burned: nobody can use it afterwards', async () => {
    sys = await startAccessSystem(PAIRING);
    await sys.store.pair(ALICE_ID);
    await tgSay(sys, ALICE, '/link');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;
    // Alice pastes it in the shared group by mistake.
    await tgSay(sys, ALICE, `/link ${code}`, SHARED_GROUP);
    expect((await tgReplies(sys, SHARED_GROUP, 1))[0]).toMatch(/^That code was posted where others can see it, so it no longer works\./);
    await tgSay(sys, MALLORY, `/link ${code}`);
    expect(await tgReplies(sys, MALLORY.id, 1)).toEqual(['No such link code, or it expired.']);
    expect(await sys.identities.resolve('telegram', String(MALLORY.id))).toBe(MALLORY_ID);
  });

  it("an approved person confirming an unapproved stranger's code is refused: approval only flows from the account that made the code", async () => {
    // Telegram asks for pairing; Discord is open, so Mallory may talk there and make a code.
    sys = await startAccessSystem({ channels: { telegram: { policy: 'pairing' } } });
    await sys.store.pair(ALICE_ID);
    sys.discord.messageCreate({ channelId: MALLORY_DC_DM, author: MALLORY_DC, content: '/link' });
    const code = CODE_RE.exec((await dcReplies(sys, MALLORY_DC_DM, 1))[0]!)![1]!;
    // Mallory talks Alice into sending her code to the bot.
    await tgSay(sys, ALICE, `/link ${code}`);
    expect((await tgReplies(sys, ALICE.id, 1))[0]).toMatch(/^This account has access to this bot and the one that made that code does not/);
    expect(await sys.identities.resolve('discord', MALLORY_DC.id)).toBe(`discord:${MALLORY_DC.id}`);
    expect(await sys.identities.resolve('telegram', String(ALICE.id))).toBe(ALICE_ID);
    expect(await received(sys, ALICE_ID)).toEqual([]);
    agentNeverRan(sys);
  });

  it("a listed person confirming an open channel's stranger's code is refused too: being listed is access given", async () => {
    sys = await startAccessSystem({ channels: { telegram: { policy: 'allowlist', users: [ALICE.id] } } });
    sys.discord.messageCreate({ channelId: MALLORY_DC_DM, author: MALLORY_DC, content: '/link' });
    const code = CODE_RE.exec((await dcReplies(sys, MALLORY_DC_DM, 1))[0]!)![1]!;
    await tgSay(sys, ALICE, `/link ${code}`);
    expect((await tgReplies(sys, ALICE.id, 1))[0]).toMatch(/^This account has access to this bot and the one that made that code does not/);
    expect(await sys.identities.resolve('telegram', String(ALICE.id))).toBe(ALICE_ID);
  });

  it('a stranger the bot does not answer cannot make link codes, and is told so once however often they ask', async () => {
    sys = await startAccessSystem(PAIRING);
    for (let i = 0; i < 10; i++) await tgSay(sys, MALLORY, '/link');
    for (let i = 0; i < 10; i++) await tgSay(sys, MALLORY, '/pair ABCD-EFGH');
    expect(await tgReplies(sys, MALLORY.id, 1)).toEqual([LINK_NOT_ALLOWED]);
    // Every one of the twenty updates was answered by the webhook; the bot spoke once.
    expect(tgTexts(sys, MALLORY.id)).toEqual([LINK_NOT_ALLOWED]);
    expect(await everythingUnder(sys.h.ctx.redis, sys.h.prefix)).not.toMatch(/link_code:/);
    expect(await conversationKeysOf(sys, MALLORY_ID)).not.toContainEqual(expect.stringMatching(/:log$/));
    agentNeverRan(sys);
  });

  it('twenty `/link` in a group the bot is not enabled in get one answer', async () => {
    sys = await startAccessSystem(PAIRING);
    // Mallory added the bot to her own group and scripts /link there, with and without a made-up code.
    for (let i = 0; i < 10; i++) await tgSay(sys, MALLORY, '/link', MALLORY_GROUP);
    for (let i = 0; i < 10; i++) await tgSay(sys, MALLORY, '/link QQQQ-QQQQ', MALLORY_GROUP);
    expect(await tgReplies(sys, MALLORY_GROUP, 1)).toEqual([LINK_IN_DM]);
    expect(tgTexts(sys, MALLORY_GROUP)).toEqual([LINK_IN_DM]);
    expect(await received(sys, `telegram:${MALLORY_GROUP}`)).toEqual([]);
    agentNeverRan(sys);
  });

  it('twenty wrong link codes in a direct chat are answered once, and the guess limit once; past the limit the right code is refused too', async () => {
    sys = await startAccessSystem(PAIRING);
    await sys.store.pair(ALICE_ID);
    await tgSay(sys, ALICE, '/link');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;
    const wrongCode = code.startsWith('Q') ? 'ZZZZ-ZZZZ' : 'QQQQ-QQQQ';
    for (let i = 0; i < 20; i++) await tgSay(sys, MALLORY, `/link ${wrongCode}`);
    const answers = await tgReplies(sys, MALLORY.id, 2);
    expect(answers[0]).toBe('No such link code, or it expired.');
    expect(answers[1]).toMatch(/^Too many wrong codes; try again in \d+ min\.$/);
    // Past the guess limit even the right code is refused, as that answer said; it is not repeated.
    await tgSay(sys, MALLORY, `/link ${code}`);
    expect(tgTexts(sys, MALLORY.id)).toHaveLength(2);
    expect(await sys.identities.resolve('telegram', String(MALLORY.id))).toBe(MALLORY_ID);
  });

  it('twenty wrong link codes within the guess limit are answered once; the right code still links', async () => {
    sys = await startAccessSystem(PAIRING, { maxGuesses: 50 });
    await sys.store.pair(ALICE_ID);
    await tgSay(sys, ALICE, '/link');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;
    const wrongCode = code.startsWith('Q') ? 'ZZZZ-ZZZZ' : 'QQQQ-QQQQ';
    for (let i = 0; i < 20; i++) await tgSay(sys, MALLORY, `/link ${wrongCode}`);
    expect(await tgReplies(sys, MALLORY.id, 1)).toEqual(['No such link code, or it expired.']);
    await tgSay(sys, MALLORY, `/link ${code}`);
    expect((await tgReplies(sys, MALLORY.id, 2))[1]).toMatch(/^Linked: this account and telegram:1001 are now one person/);
    expect(tgTexts(sys, MALLORY.id)).toHaveLength(2);
    expect(await sys.identities.resolve('telegram', String(MALLORY.id))).toBe(ALICE_ID);
  });

  it("a stranger's /link that linked them, redelivered after the notice window, is a duplicate: nothing is sent and no guess is counted", async () => {
    sys = await startAccessSystem(PAIRING, { noticeWindowSeconds: 1, maxGuesses: 1 });
    const s = sys;
    await s.store.pair(ALICE_ID);
    await tgSay(s, ALICE, '/link');
    const code = CODE_RE.exec((await tgReplies(s, ALICE.id, 1))[0]!)![1]!;
    const link = messageUpdate({ from: MALLORY, text: `/link ${code}` });
    expect(await s.post(link)).toBe(200);
    expect((await tgReplies(s, MALLORY.id, 1))[0]).toMatch(/^Linked: /);
    // A stranger's command claimed after the link lives the notice window: once it is gone, so would the link's claim be.
    const bob: TgUser = { id: 1777, is_bot: false, first_name: 'Bob' };
    await tgSay(s, bob, '/link QQQQ-QQQQ');
    await waitFor(async () => (await conversationKeysOf(s, `telegram:${bob.id}`)).length === 0 || undefined, 10_000, "the stranger's keys to expire");
    expect(await s.post(link)).toBe(200);
    await tgSay(s, ALICE, 'after');
    await waitFor(() => tgTexts(s, ALICE.id).includes('echo: after') || undefined, 10_000, "alice's answer");
    expect(tgTexts(s, MALLORY.id)).toHaveLength(1);
    // The spent code was not tried again: with one guess allowed, a wrong one would have used it up.
    expect(await s.h.ctx.redis.get(peopleKeys(s.h.prefix).guesses(MALLORY_ID))).toBe('0');
    expect(await s.identities.resolve('telegram', String(MALLORY.id))).toBe(ALICE_ID);
  });

  it('two accounts racing to confirm one link code: exactly one links, in each of 6 tries', async () => {
    sys = await startAccessSystem(PAIRING);
    await sys.store.pair(ALICE_ID);
    const merged: Array<{ from: string; into: string }> = [];
    sys.identities.onChange({ linked: (change) => void merged.push(change) });
    for (let i = 0; i < 6; i++) {
      await tgSay(sys, ALICE, '/link');
      const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, i + 1))[i]!)![1]!;
      const racers: TgUser[] = [0, 1].map((k) => ({ id: 3000 + 2 * i + k, is_bot: false, first_name: `Racer${k}` }));
      await Promise.all(racers.map((r) => sys!.post(messageUpdate({ from: r, text: `/link ${code}` }))));
      const answers = await Promise.all(racers.map(async (r) => (await tgReplies(sys!, r.id, 1))[0]!));
      expect(
        answers.filter((a) => a.startsWith('Linked:')),
        `try ${i}: ${answers.join(' | ')}`,
      ).toHaveLength(1);
      expect(answers.filter((a) => a === 'No such link code, or it expired.')).toHaveLength(1);
      const joined = await Promise.all(racers.map((r) => sys!.identities.resolve('telegram', String(r.id))));
      expect(joined.filter((id) => id === ALICE_ID)).toHaveLength(1);
    }
    // The identity hooks (memory, usage) were told once per link.
    expect(merged).toHaveLength(6);
    expect(merged.every((m) => m.into === ALICE_ID && m.from.startsWith('telegram:30'))).toBe(true);
  });
});
