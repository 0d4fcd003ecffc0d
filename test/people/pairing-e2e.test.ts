/**
 * Pairing end to end on the Telegram and Discord fakes (real grammY and
 * discord.js clients): an unknown user's first DM gets a code and nothing
 * else; nothing is recorded or run until an admin sends `/pair <code>`;
 * guessed codes are rate-limited; codes expire; `/link` carries an approval
 * across channels.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { APPROVED_NOTICE } from '../../host/access/commands.js';
import { user } from '../../testing/fakes/discord-server.js';
import { ALICE, messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { alice as discordAlice } from '../channels/discord-harness.js';
import { type AccessSystem, DISCORD_ADMIN, startAccessSystem, TG_ADMIN } from './access-system.js';

const ADMIN: TgUser = { id: TG_ADMIN, is_bot: false, first_name: 'Admin' };
const MALLORY: TgUser = { id: 1666, is_bot: false, first_name: 'Mallory' };
const ALICE_CID = `telegram:${ALICE.id}`;
const CODE_RE = /pairing code is ([A-Z2-9]{4}-[A-Z2-9]{4})/;
/** A DM channel of Alice's on Discord, and of the Discord admin. */
const ALICE_DM = '510000000000000101';
const ADMIN_DM = '510000000000000102';
const discordAdmin = user(DISCORD_ADMIN, 'admin');

let sys: AccessSystem | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

const PAIRING = { channels: { telegram: { policy: 'pairing' }, discord: { policy: 'pairing' } } };

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

/** Keys of conversation `cid` (its whole cluster slot). */
const conversationKeysOf = (s: AccessSystem, cid: string) => s.h.ctx.redis.keys(`${s.h.prefix}:{c:${cid}}:*`);

/** Sends a Telegram DM from `from` and waits until the host has answered the webhook. */
async function tgSay(s: AccessSystem, from: TgUser, text: string): Promise<void> {
  expect(await s.post(messageUpdate({ from, text }))).toBe(200);
}

describe('pairing on Telegram', () => {
  it('an unknown user gets a code and nothing reaches the agent until an admin pairs it', async () => {
    sys = await startAccessSystem(PAIRING);
    await tgSay(sys, ALICE, 'hello bot');
    const [first] = await tgReplies(sys, ALICE.id, 1);
    const code = CODE_RE.exec(first!)?.[1];
    expect(code).toBeDefined();
    // Nothing recorded, no run: the conversation has no key at all.
    expect(await conversationKeysOf(sys, ALICE_CID)).toEqual([]);

    // Within the notice window a second message gets no answer, and is not recorded either.
    await tgSay(sys, ALICE, 'are you there?');
    await tgSay(sys, ADMIN, `/pair ${code}`);
    const adminReplies = await tgReplies(sys, ADMIN.id, 1);
    expect(adminReplies[0]).toBe(`Approved Alice Liddell (telegram:${ALICE.id}).`);
    const aliceNow = await tgReplies(sys, ALICE.id, 2);
    expect(aliceNow).toEqual([first, APPROVED_NOTICE]);
    expect(await conversationKeysOf(sys, ALICE_CID)).toEqual([]);

    await tgSay(sys, ALICE, 'hello again');
    expect((await tgReplies(sys, ALICE.id, 3))[2]).toBe('echo: hello again');
    const received = (await sys.h.record(ALICE_CID)).filter((e) => e.kind === 'message.received');
    expect(received.map((e) => (e as { text: string }).text)).toEqual(['hello again']);
    // The refusals were noted for the console, without their text.
    const refusals = await sys.store.refusals();
    expect(refusals.map((r) => [r.channel, r.userId, r.reason])).toEqual([
      ['telegram', String(ALICE.id), 'not-paired'],
      ['telegram', String(ALICE.id), 'not-paired'],
    ]);
    expect(JSON.stringify(refusals)).not.toContain('hello');
  });

  it('only an admin can pair: a user pairing themselves is refused and stays unpaired', async () => {
    sys = await startAccessSystem({ channels: { telegram: { policy: 'pairing', users: [String(MALLORY.id)] } } });
    await tgSay(sys, ALICE, 'hi');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)?.[1];
    // Mallory is on the allow-list (may talk) but is no admin.
    await tgSay(sys, MALLORY, `/pair ${code}`);
    expect((await tgReplies(sys, MALLORY.id, 1))[0]).toBe("Only this bot's admins can use /pair.");
    await tgSay(sys, ALICE, `/pair ${code}`);
    expect((await tgReplies(sys, ALICE.id, 2))[1]).toBe("Only this bot's admins can use /pair.");
    expect((await sys.store.approved('telegram', String(ALICE.id))).approved).toBe(false);
    // A listed user talks without pairing.
    await tgSay(sys, MALLORY, 'listed');
    expect((await tgReplies(sys, MALLORY.id, 2))[1]).toBe('echo: listed');
  });

  it('guessed codes are rate-limited: after 5 wrong codes even the right one is refused', async () => {
    sys = await startAccessSystem(PAIRING);
    await tgSay(sys, ALICE, 'hi');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;
    const wrong = code.startsWith('A') ? 'BBBB-BBBB' : 'AAAA-AAAA';
    for (let i = 0; i < 5; i++) await tgSay(sys, ADMIN, `/pair ${wrong}`);
    await tgSay(sys, ADMIN, `/pair ${code}`);
    const replies = await tgReplies(sys, ADMIN.id, 6);
    expect(replies.slice(0, 5)).toEqual(Array(5).fill('No such pairing code, or it expired.'));
    expect(replies[5]).toMatch(/^Too many wrong codes; try again in \d+ min\.$/);
    expect((await sys.store.approved('telegram', String(ALICE.id))).approved).toBe(false);
    // The code itself still works from the operator (console, CLI), which is not rate-limited.
    expect((await sys.store.approve(code)).kind).toBe('ok');
  });

  it('parallel guesses cannot slip past the limit', async () => {
    sys = await startAccessSystem(PAIRING);
    await tgSay(sys, ALICE, 'hi');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;
    const guesses = await Promise.all(Array.from({ length: 20 }, () => sys!.store.approve('ZZZZ-ZZZZ', 'telegram:1666')));
    expect(guesses.filter((g) => g.kind === 'unknown')).toHaveLength(5);
    expect(guesses.filter((g) => g.kind === 'rate-limited')).toHaveLength(15);
    expect((await sys.store.approve(code, 'telegram:1666')).kind).toBe('rate-limited');
  });

  it('codes expire: an expired code pairs nobody and the user gets a new one', async () => {
    sys = await startAccessSystem(PAIRING, { codeTtlSeconds: 1, noticeWindowSeconds: 1 });
    await tgSay(sys, ALICE, 'hi');
    const code = CODE_RE.exec((await tgReplies(sys, ALICE.id, 1))[0]!)![1]!;
    const s = sys;
    await waitFor(
      async () => (await s.store.waitingCodes()).length === 0 && (await s.h.ctx.redis.exists(s.store.keys.pending(ALICE_CID))) === 0,
      5000,
      'the code to expire',
    );
    await tgSay(sys, ADMIN, `/pair ${code}`);
    expect((await tgReplies(sys, ADMIN.id, 1))[0]).toBe('No such pairing code, or it expired.');
    await waitFor(async () => (await s.h.ctx.redis.exists(s.store.keys.notice(ALICE_CID))) === 0, 5000, 'the notice window to pass');
    await tgSay(sys, ALICE, 'hi again');
    const fresh = CODE_RE.exec((await tgReplies(sys, ALICE.id, 2))[1]!)?.[1];
    expect(fresh).toBeDefined();
    expect(fresh).not.toBe(code);
    expect(await conversationKeysOf(sys, ALICE_CID)).toEqual([]);
  });
});

describe('pairing on Discord', () => {
  it('a DM gets a code; the admin pairs it from their DM; then the agent answers', async () => {
    sys = await startAccessSystem(PAIRING);
    sys.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: 'hello from discord' });
    const [first] = await dcReplies(sys, ALICE_DM, 1);
    const code = CODE_RE.exec(first!)![1]!;
    expect(await conversationKeysOf(sys, `discord:${ALICE_DM}`)).toEqual([]);

    // A non-admin cannot pair, even with the right code.
    sys.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: `/pair ${code}` });
    expect((await dcReplies(sys, ALICE_DM, 2))[1]).toBe("Only this bot's admins can use /pair.");

    sys.discord.messageCreate({ channelId: ADMIN_DM, author: discordAdmin, content: `/pair ${code.toLowerCase()}` });
    expect((await dcReplies(sys, ADMIN_DM, 1))[0]).toBe(`Approved Alice (discord:${discordAlice.id}).`);
    expect((await dcReplies(sys, ALICE_DM, 3))[2]).toBe(APPROVED_NOTICE);

    sys.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: 'now?' });
    expect((await dcReplies(sys, ALICE_DM, 4))[3]).toBe('echo: now?');
  });
});

describe('linking across channels', () => {
  it('`/link` on Telegram and `/link <code>` on Discord make one identity, and the approval follows it', async () => {
    sys = await startAccessSystem(PAIRING);
    await sys.store.pair(`telegram:${ALICE.id}`);
    await tgSay(sys, ALICE, '/link');
    const linkReply = (await tgReplies(sys, ALICE.id, 1))[0]!;
    const code = /\/link ([A-Z2-9]{4}-[A-Z2-9]{4})/.exec(linkReply)![1]!;

    // A wrong code links nothing.
    sys.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: '/link QQQQ-QQQQ' });
    expect((await dcReplies(sys, ALICE_DM, 1))[0]).toBe('No such link code, or it expired.');
    expect(await sys.identities.resolve('discord', discordAlice.id)).toBe(`discord:${discordAlice.id}`);

    sys.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: `/link ${code}` });
    expect((await dcReplies(sys, ALICE_DM, 2))[1]).toMatch(/^Linked: this account and telegram:1001 are now one person/);
    expect(await sys.identities.resolve('discord', discordAlice.id)).toBe(`telegram:${ALICE.id}`);

    // Discord Alice was never paired herself: the linked identity's approval lets her talk.
    sys.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: 'hi from the other side' });
    expect((await dcReplies(sys, ALICE_DM, 3))[2]).toBe('echo: hi from the other side');

    // The code was used up (asked from an account not yet told of a wrong code this notice window).
    await tgSay(sys, MALLORY, `/link ${code}`);
    expect(await tgReplies(sys, MALLORY.id, 1)).toEqual(['No such link code, or it expired.']);
  });

  it('purging the identity removes its links and its approval', async () => {
    sys = await startAccessSystem(PAIRING);
    await sys.identities.link(`discord:${discordAlice.id}`, `telegram:${ALICE.id}`);
    await sys.store.pair(`telegram:${ALICE.id}`);
    expect((await sys.store.approved('discord', discordAlice.id)).approved).toBe(true);
    expect(await sys.identities.purge(`telegram:${ALICE.id}`)).toEqual(expect.arrayContaining([`discord:${discordAlice.id}`, `telegram:${ALICE.id}`]));
    expect(await sys.identities.resolve('discord', discordAlice.id)).toBe(`discord:${discordAlice.id}`);
    expect((await sys.store.approved('telegram', String(ALICE.id))).approved).toBe(false);
  });
});
