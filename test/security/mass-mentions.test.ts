/**
 * Mass mentions written by the model: injected text (a fetched page, a
 * group member's message) tells it to "remind everyone", and it writes
 * Slack's `<!channel>` / `<!here>` / `<!everyone>` or `<@U…>`, Matrix's
 * `@room`, Discord's `@everyone` or `<@id>` into a reply, an option's label
 * or a caption. The platform would notify every member of the chat (or the
 * person named). Every message the bot sends mentions nobody: on Slack all
 * its text is escaped (`&`, `<`, `>`), plain text and click answers too; on
 * Matrix every event carries `m.mentions: {}`; on Discord every send, edit
 * and click answer carries `allowed_mentions` that parse nothing. Each
 * channel's real client talks to its fake, which reads mentions as the
 * platform does.
 */
import { describe, expect, it } from 'vitest';
import { createMatrixPlugin } from '../../plugins/matrix/channel.js';
import { MATRIX_ALICE, MATRIX_TEST, notifiesRoom, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { blockActions, eventCallback, type SlackPostedMessage, slackPingsIn, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { waitFor } from '../../testing/wait.js';
import { startSlackSystem } from '../channels/slack-harness.js';
import { deliverEveryKind, discordConversation, optionWith, questionIdIn, scriptInjected, useInjectedWorld } from './injected-replies.js';

const w = useInjectedWorld();
/** Slack's escaped text as people read it. */
const shown = (text: string) => text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

describe('mass mentions in the bot’s messages', () => {
  it('Slack: a reply, a click’s edit and ephemeral answer, a typed command’s answer and a caption notify no one, showing the mentions as written', async () => {
    const BAIT = '<!channel> <!here> <!everyone> <@U0000BOB>';
    const DM = 'D0000MNT1';
    const ANN = 'U0000ANN';
    const slack = await startFakeSlack();
    w.closers.push(() => slack.close());
    const { http, plugin } = await startSlackSystem({ h: w.h, slack, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    let n = 0;
    const say = (text: string) => slack.deliver('events_api', eventCallback({ channel: DM, ts: `${1_800_000_000 + ++n}.000100`, user: ANN, text }));
    const inDm = () => slack.messages.filter((m) => m.channel === DM);
    const nth = (k: number, what: string) => waitFor(() => inDm()[k - 1], 15_000, what) as Promise<SlackPostedMessage>;

    scriptInjected(w.ai, BAIT);
    say('remind the team about my notes');
    const question = await nth(1, 'the question');
    const id = questionIdIn(JSON.stringify(question.blocks));
    slack.deliver('interactive', blockActions(question, `/choose ${id} 2`, ANN, '1800000100.000001'));
    await nth(2, 'the answer');
    await waitFor(() => slack.ephemerals.length >= 1, 15_000, 'the click’s answer');
    await w.h.idle(15_000, `slack:${DM}`);
    say(`/choose ${id} 2`);
    await nth(3, "the command's answer");
    await deliverEveryKind(
      { outbound: plugin.outbound, redis: w.h.ctx.redis, prefix: w.h.prefix, conversationId: `slack:${DM}`, logger: w.h.ctx.logger },
      BAIT,
    );

    expect(shown(slack.ephemerals[0]!.text)).toBe(`Chosen: ${optionWith(BAIT)}`);
    expect(shown(question.text)).toContain(`${optionWith(BAIT)} (chosen by`);
    expect(shown(inDm()[2]!.text)).toContain(`Already answered: ${optionWith(BAIT)} was chosen`);
    expect(shown(slack.uploads[0]!.initialComment ?? '')).toBe(BAIT);
    const texts = [
      ...slack.messages.flatMap((m) => [m.text, ...m.edits, ...(m.blocks ?? []).map((b) => b.text?.text ?? '')]),
      ...slack.ephemerals.map((e) => e.text),
      ...slack.uploads.map((u) => u.initialComment ?? ''),
    ];
    expect(texts.filter((t) => shown(t).includes('<!channel>')).length).toBeGreaterThanOrEqual(8);
    expect(texts.flatMap(slackPingsIn)).toEqual([]);
  });

  it('Matrix: every event the bot sends — a reply, its streamed edits, a poll, a caption, a command’s answer — carries empty m.mentions: @room notifies no one', async () => {
    const matrix = await startFakeMatrix();
    w.closers.push(() => matrix.close());
    const room = matrix.createRoom([MATRIX_TEST.userId, MATRIX_ALICE]);
    const plugin = createMatrixPlugin(
      { ...MATRIX_TEST, homeserverUrl: matrix.url, streaming: true },
      { logger: w.h.ctx.logger, redis: w.h.ctx.redis, prefix: w.h.prefix },
    );
    await deliverEveryKind(
      { outbound: plugin.outbound, redis: w.h.ctx.redis, prefix: w.h.prefix, conversationId: `matrix:${room}`, logger: w.h.ctx.logger },
      '@room',
    );

    const sent = matrix.sent.filter((e) => e.roomId === room);
    expect(new Set(sent.map((e) => e.type)).size).toBeGreaterThanOrEqual(2);
    expect(sent.filter((e) => e.content['m.new_content']).length).toBeGreaterThanOrEqual(1);
    for (const e of sent) {
      expect(JSON.stringify(e.content)).toContain('@room');
      expect(e.content['m.mentions'], JSON.stringify(e.content)).toEqual({});
      expect(notifiesRoom(e.content)).toBe(false);
      if (e.content['m.new_content']) expect(e.content['m.new_content']['m.mentions']).toEqual({});
    }
  });

  it('Discord: a streamed edit, a click’s update and its ephemeral answer ping no one, as its sends do', async () => {
    const bait = '@everyone @here <@400000000000000002>';
    const discord = await discordConversation({ h: w.h, ai: w.ai, agent: w.agent(), bait, closers: w.closers });

    expect(discord.interactionResponses.map((r) => r.data.allowed_mentions)).toEqual([{ parse: [] }, { parse: [] }]);
    const edits = discord.calls.filter((c) => c.method === 'PATCH' && c.status === 200);
    expect(edits.length).toBeGreaterThanOrEqual(1);
    for (const c of edits) expect(c.body.allowed_mentions, c.body.content).toEqual({ parse: [], replied_user: true });
    const stored = [...discord.messages.values()];
    expect(stored.filter((m) => m.content.includes('@everyone')).length).toBeGreaterThanOrEqual(5);
    expect(stored.flatMap((m) => m.mentions)).toEqual([]);
  });
});
