/**
 * `ask_user` end to end on the team chat apps, each through its real client
 * library against its fake, the channel host, Redis, BullMQ and a runner
 * with the local agent (real OpenAI-compatible provider, fake model), in one
 * conversation per channel (ask-user-flow.ts): the question shows as the
 * platform's own buttons carrying `/choose <id> <n>`, a click on option 2
 * through the platform's click path is the answer, and a message written
 * instead of choosing the second question joins the run as the answer.
 *
 * - Discord: a row of buttons; a click is an INTERACTION_CREATE, answered by
 *   updating the message (type 7) to the choice. Bob's click in the DM gets
 *   an ephemeral refusal.
 * - Slack: Block Kit buttons; a click is a `block_actions` payload over the
 *   socket; the question is edited to the choice, "Chosen: …" is ephemeral.
 *   Bob's click gets an ephemeral refusal.
 * - Teams: Adaptive Card `Action.Submit` buttons; a click is a message
 *   activity with the button's data as `value`; the card is updated and
 *   "Chosen: …" is a message of its own.
 * - Feishu: interactive card buttons; a click is a card action over the long
 *   connection, answered with a toast and the card replaced.
 */
import { describe, expect, it } from 'vitest';
import { FakeDiscord, type RestCall } from '../../testing/fakes/discord-server.js';
import { FEISHU_ANN, FEISHU_DM, feishuCardAction, feishuMessageEvent } from '../../testing/fakes/feishu-events.js';
import { type FakeFeishu, startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import { blockActions, eventCallback, type FakeSlack, type SlackPostedMessage, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { type FakeTeams, startFakeTeams, TEAMS_BOB, type TeamsSentActivity } from '../../testing/fakes/teams-server.js';
import { alice, bob, discordOnHarness, TOKEN } from '../channels/discord-harness.js';
import { startFeishuSystem } from '../channels/feishu-harness.js';
import { startSlackSystem } from '../channels/slack-harness.js';
import { runnerFor } from '../channels/system.js';
import { startTeamsSystem } from '../channels/teams-harness.js';
import { waitFor } from '../runner/harness.js';
import * as flow from './ask-user-flow.js';

const w = flow.askUserWorld({ harness: true });

describe('ask_user on the team chat apps', () => {
  it('Discord: buttons; Bob’s click is refused, the asker’s click on option 2 is the answer; a message written instead is the next answer', async () => {
    const DM = '520000000000000077';
    const discord = await FakeDiscord.start({ token: TOKEN });
    w.closers.push(() => discord.close());
    const { plugin, host } = discordOnHarness(w.h, discord.apiBase);
    await plugin.start(host);
    w.closers.push(() => plugin.stop());
    await runnerFor(w.h, w.agent(), plugin);
    const posted = (): RestCall[] => discord.callsTo('POST', new RegExp(`^/channels/${DM}/messages$`)).filter((c) => c.status === 200);
    const nth = async (n: number, what: string) => (await waitFor(() => posted().length >= n && posted(), 15_000, what))[n - 1]!.body;
    const say = (content: string) => discord.messageCreate({ channelId: DM, author: alice, content });

    say('book me a plan');
    const q = await nth(1, 'the first question');
    expect(q.content).toBe(flow.questionText(flow.PLAN));
    const buttons = q.components[0].components as Array<{ label: string; custom_id: string }>;
    const id = flow.questionIdIn(buttons[0]!.custom_id);
    expect(buttons.map((b) => [b.label, b.custom_id])).toEqual(flow.PLAN.options.map((o, i) => [o, flow.chooseCommands(id, flow.PLAN)[i]]));
    const messageId = [...discord.messages.values()].find((m) => m.channel_id === DM)!.id;

    discord.buttonClick({ messageId, customId: buttons[1]!.custom_id, user: bob });
    await waitFor(() => discord.interactionResponses.length >= 1, 15_000, 'the refusal');
    expect(discord.interactionResponses[0]).toMatchObject({
      type: 4,
      data: { content: 'Only the person the question was asked of may choose. Nothing changed.', flags: 64 | 4 },
    });
    discord.buttonClick({ messageId, customId: buttons[1]!.custom_id, user: alice });
    expect((await nth(2, 'the first answer')).content).toBe(flow.BOOKED);
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: 'Alice' });
    expect(discord.interactionResponses[1]).toMatchObject({ type: 7, data: { components: [] } });
    expect(discord.messages.get(messageId)!.content).toContain('Pro (chosen by Alice).');
    await w.h.idle(15_000, `discord:${DM}`);

    say('when does it start?');
    const q2 = await nth(3, 'the second question');
    expect(q2.content).toBe(flow.questionText(flow.START));
    expect(q2.components[0].components.map((b: { label: string }) => b.label)).toEqual(flow.START.options);
    say(flow.TYPED);
    expect((await nth(4, 'the final answer')).content).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, `discord:${DM}`);
    expect(posted()).toHaveLength(4);
    expect(discord.interactionResponses).toHaveLength(2);
    expect(w.ai.requests).toHaveLength(4);
  });

  it('Slack: Block Kit buttons; Bob’s click is refused, the asker’s click on option 2 is the answer; a message written instead is the next answer', async () => {
    const DM = 'D0000ASK1';
    const [ANN, BOB] = ['U0000ANN', 'U0000BOB'];
    const slack: FakeSlack = await startFakeSlack();
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
    const buttonsOf = (m: SlackPostedMessage) =>
      (m.blocks ?? [])
        .filter((b) => b.type === 'actions')
        .flatMap((b) => b.elements.map((e: { text: { text: string }; value: string }) => [e.text.text, e.value]));

    say('book me a plan');
    const q = await nth(1, 'the first question');
    const id = flow.questionIdIn(JSON.stringify(q.blocks));
    expect(buttonsOf(q)).toEqual(flow.PLAN.options.map((o, i) => [o, flow.chooseCommands(id, flow.PLAN)[i]]));

    slack.deliver('interactive', blockActions(q, flow.chooseCommands(id, flow.PLAN)[1]!, BOB, '1800000100.000001'));
    await waitFor(() => slack.ephemerals.length >= 1, 15_000, 'the refusal');
    expect(slack.ephemerals[0]).toMatchObject({ user: BOB, text: 'Only the person the question was asked of may choose. Nothing changed.' });
    slack.deliver('interactive', blockActions(q, flow.chooseCommands(id, flow.PLAN)[1]!, ANN, '1800000100.000002'));
    expect((await nth(2, 'the first answer')).text).toBe(flow.BOOKED);
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: 'u0000ann' });
    expect(slack.ephemerals[1]).toMatchObject({ user: ANN, text: 'Chosen: Pro' });
    expect(q.text).toContain('Pro (chosen by');
    expect(buttonsOf(q)).toEqual([]);
    await w.h.idle(15_000, `slack:${DM}`);

    say('when does it start?');
    const q2 = await nth(3, 'the second question');
    expect(buttonsOf(q2).map(([label]) => label)).toEqual(flow.START.options);
    say(flow.TYPED);
    expect((await nth(4, 'the final answer')).text).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, `slack:${DM}`);
    expect(inDm()).toHaveLength(4);
    expect(slack.ephemerals).toHaveLength(2);
    expect(w.ai.requests).toHaveLength(4);
  });

  it('Teams: Adaptive Card buttons; the click on option 2 is the answer and updates the card; a message written instead is the next answer', async () => {
    const CHAT = 'a:1alice-ask-chat';
    const teams: FakeTeams = await startFakeTeams();
    w.closers.push(() => teams.close());
    const { http, plugin, deliver } = await startTeamsSystem({ h: w.h, teams, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    const say = async (text: string) => expect(await deliver(teams.message({ conversationId: CHAT, text }))).toBe(200);
    const texts = () => teams.texts(CHAT);
    const nth = async (k: number, what: string) => (await teams.waitUntil(() => texts().length >= k && texts(), 15_000, what))[k - 1]!;
    const card = (k: number): TeamsSentActivity => teams.sent.filter((s) => s.type === 'message')[k - 1]!;
    const commandOf = (b: TeamsSentActivity['buttons'][number]) => (b.data as { steerbot: string }).steerbot;
    const click = (c: TeamsSentActivity, command: string, from?: { id: string; name: string }) => {
      const button = c.buttons.find((b) => commandOf(b) === command);
      if (!button) throw new Error(`no button ${command}`);
      return deliver(teams.message({ conversationId: CHAT, value: button.data, replyToId: c.id, ...(from && { from }) }));
    };

    await say('book me a plan');
    await nth(1, 'the first question');
    const q = card(1);
    expect(q.activity.attachments[0].contentType).toBe('application/vnd.microsoft.card.adaptive');
    const id = flow.questionIdIn(commandOf(q.buttons[0]!));
    expect(q.buttons.map((b) => [b.title, commandOf(b)])).toEqual(flow.PLAN.options.map((o, i) => [o, flow.chooseCommands(id, flow.PLAN)[i]]));

    expect(await click(q, flow.chooseCommands(id, flow.PLAN)[1]!, TEAMS_BOB)).toBe(200);
    expect(await nth(2, 'the refusal')).toBe('Only the person the question was asked of may choose. Nothing changed.');
    expect(q.buttons).toHaveLength(3);
    expect(await click(q, flow.chooseCommands(id, flow.PLAN)[1]!)).toBe(200);
    await teams.waitUntil(() => texts().includes(flow.BOOKED), 15_000, 'the first answer');
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: 'Alice Liddell' });
    expect(q.text).toContain('Pro (chosen by');
    expect(q.buttons).toEqual([]);
    await w.h.idle(15_000, `teams:${CHAT}`);
    flow.expectChosenAndBooked(texts().slice(2));

    await say('when does it start?');
    await nth(5, 'the second question');
    expect(card(5).buttons.map((b) => b.title)).toEqual(flow.START.options);
    await say(flow.TYPED);
    expect(await nth(6, 'the final answer')).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, `teams:${CHAT}`);
    expect(texts()).toHaveLength(6);
    expect(w.ai.requests).toHaveLength(4);
  });

  it('Feishu: card buttons; the click on option 2 over the long connection is the answer and replaces the card; a message written instead is the next answer', async () => {
    const feishu: FakeFeishu = await startFakeFeishu();
    w.closers.push(() => feishu.close());
    const { http, plugin } = await startFeishuSystem({ h: w.h, feishu, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    await feishu.connected();
    const nth = async (k: number, what: string) => feishu.waitUntil(() => feishu.sent[k - 1], 15_000, what);
    const say = async (text: string) => feishu.push(feishuMessageEvent({ text }));

    await say('book me a plan');
    const q = (await nth(1, 'the first question'))!;
    expect(q.msgType).toBe('interactive');
    const id = flow.questionIdIn(q.buttons[0]!.value.command);
    expect(q.buttons.map((b) => [b.label, b.value.command])).toEqual(flow.PLAN.options.map((o, i) => [o, flow.chooseCommands(id, flow.PLAN)[i]]));

    const ack = await feishu.push(feishuCardAction({ messageId: q.id, chatId: FEISHU_DM, operator: FEISHU_ANN, value: q.buttons[1]!.value }));
    expect(ack.data.toast.content).toBe('Chosen: Pro');
    expect(JSON.stringify(ack.data.card)).toContain('Pro (chosen by');
    expect((await nth(2, 'the first answer'))!.text).toBe(flow.BOOKED);
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: FEISHU_ANN });
    await w.h.idle(15_000, `feishu:${FEISHU_DM}`);

    await say('when does it start?');
    const q2 = (await nth(3, 'the second question'))!;
    expect(q2.buttons.map((b) => b.label)).toEqual(flow.START.options);
    await say(flow.TYPED);
    expect((await nth(4, 'the final answer'))!.text).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, `feishu:${FEISHU_DM}`);
    expect(feishu.sent).toHaveLength(4);
    expect(w.ai.requests).toHaveLength(4);
  });
});
