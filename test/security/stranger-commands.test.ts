/**
 * Strangers scripting `/pair` and `/link` to grow Redis, black-box through the
 * real grammY and discord.js clients against the local fakes (access policy
 * `pairing`): access commands run before the access policy, so each used to
 * leave its update's dedupe key for the whole dedupe window (a day) and,
 * taken for a handled message, a Discord catch-up cursor kept for ever.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cursorsKey } from '../../plugins/discord/catch-up.js';
import { user } from '../../testing/fakes/discord-server.js';
import { messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { type AccessSystem, DISCORD_ADMIN, startAccessSystem, TG_ADMIN } from '../people/access-system.js';

const PAIRING = { channels: { telegram: { policy: 'pairing' }, discord: { policy: 'pairing' } } };
/** The notice window (the default): the longest a stranger's command may be remembered. */
const NOTICE_WINDOW_SECONDS = 3600;
const COMMANDS = ['/pair ABCD-EFGH', '/link', '/link ABCD-EFGH', '/link', '/pair QQQQ-QQQQ', '/link QQQQ-QQQQ'];
const STRANGERS = 6;

const tgStranger = (i: number): TgUser => ({ id: 7000 + i, is_bot: false, first_name: `Stranger ${i}` });
const dcStranger = (i: number) => ({
  author: user(`41000000000000${String(i).padStart(4, '0')}`, `stranger${i}`),
  dm: `52000000000000${String(i).padStart(4, '0')}`,
});
const DC_ADMIN_DM = '520000000000009999';

let sys: AccessSystem | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

/** Seconds each key of conversation `cid` still lives (-1: no expiry). */
async function ttls(s: AccessSystem, cid: string): Promise<number[]> {
  const keys = await s.h.ctx.redis.keys(`${s.h.prefix}:{c:${cid}}:*`);
  return Promise.all(keys.map((k) => s.h.ctx.redis.ttl(k)));
}

const tgReplies = (s: AccessSystem, chatId: number) => s.tg.sent.filter((m) => m.chatId === chatId).length;
const dcReplies = (s: AccessSystem, channel: string) =>
  s.discord.callsTo('POST', new RegExp(`^/channels/${channel}/messages$`)).filter((c) => c.status === 200).length;

describe('strangers scripting /pair and /link', () => {
  it('leave no key past the notice window (no day-long update key, no Discord catch-up cursor), each told once per kind of answer', async () => {
    sys = await startAccessSystem(PAIRING);
    const s = sys;
    const tg = Array.from({ length: STRANGERS }, (_, i) => tgStranger(i));
    const dc = Array.from({ length: STRANGERS }, (_, i) => dcStranger(i));
    await Promise.all(tg.flatMap((from) => COMMANDS.map((text) => s.post(messageUpdate({ from, text })))));
    for (const { author, dm } of dc) for (const text of COMMANDS) s.discord.messageCreate({ channelId: dm, author, content: text });
    // Told once that they cannot, and once that the code is wrong; nothing more however often they ask.
    await waitFor(() => tg.every((u) => tgReplies(s, u.id) >= 2) || undefined, 10_000, 'every Telegram stranger answered');
    await waitFor(() => dc.every(({ dm }) => dcReplies(s, dm) >= 2) || undefined, 10_000, 'every Discord stranger answered');

    // People with access: the admin's /link is remembered the whole dedupe window, and its DM gets a cursor.
    await s.post(messageUpdate({ from: { id: TG_ADMIN, is_bot: false, first_name: 'Admin' }, text: '/link' }));
    s.discord.messageCreate({ channelId: DC_ADMIN_DM, author: user(DISCORD_ADMIN, 'admin'), content: 'hello' });
    const cursors = await waitFor(
      async () => {
        const all = await s.h.ctx.redis.hgetall(cursorsKey(s.h.prefix));
        return all[DC_ADMIN_DM] ? all : undefined;
      },
      10_000,
      "the admin's cursor",
    );

    for (const u of tg) expect(tgReplies(s, u.id), `telegram:${u.id}`).toBe(2);
    for (const { dm } of dc) expect(dcReplies(s, dm), dm).toBe(2);
    for (const cid of [...tg.map((u) => `telegram:${u.id}`), ...dc.map(({ dm }) => `discord:${dm}`)]) {
      const left = await ttls(s, cid);
      expect(left.length, cid).toBeGreaterThan(0);
      for (const ttl of left) expect(ttl, cid).toBeGreaterThan(0);
      for (const ttl of left) expect(ttl, cid).toBeLessThanOrEqual(NOTICE_WINDOW_SECONDS);
    }
    expect(Object.keys(cursors)).toEqual([DC_ADMIN_DM]);
    expect(Math.min(...(await ttls(s, `telegram:${TG_ADMIN}`)))).toBeGreaterThan(23 * 3600);
  });
});
