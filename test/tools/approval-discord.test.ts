/**
 * Approval over Discord, end to end: a DM on the fake gateway → the real
 * discord.js client → host → runner with the local agent → the approval
 * request posted with Approve / Deny buttons → a button click (an
 * INTERACTION_CREATE) → the message updated to the decision and who made it
 * → the tool runs once → the answer. Someone else's click gets an ephemeral
 * "not allowed" and changes nothing.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { FakeDiscord, type RestCall } from '../../testing/fakes/discord-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { alice, bob, discordOnHarness, TOKEN } from '../channels/discord-harness.js';
import { fakeModel, RunnerHarness, refundTool, waitFor } from '../runner/harness.js';

const DM = '520000000000000001';
const runs: number[] = [];
const refund = refundTool((amount) => runs.push(amount));

let discord: FakeDiscord;
let model: FakeOpenAIServer;
let h: RunnerHarness;
let plugin: ChannelPlugin;

beforeAll(async () => {
  model = await startFakeOpenAI();
  model.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 25 } }] }, { text: 'Refunded 25.' }]);
  discord = await FakeDiscord.start({ token: TOKEN });
  h = await RunnerHarness.start();
  const { ctx } = h;
  const wired = discordOnHarness(h, discord.apiBase);
  plugin = wired.plugin;
  await plugin.start(wired.host);
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({
      model: fakeModel(model.url),
      tools: [refund],
      builtins: { currentTime: false },
      toolbox: { policy: { tools: { refund: 'require_approval' } } },
    }),
    resolveOutbound: (cid) => (cid.startsWith('discord:') ? plugin.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
});

afterAll(async () => {
  await plugin?.stop();
  await h?.close();
  await discord?.close();
  await model?.close();
});

const posted = (): RestCall[] => discord.callsTo('POST', new RegExp(`^/channels/${DM}/messages$`)).filter((c) => c.status === 200);

describe('approval over Discord', () => {
  it('posts Approve / Deny buttons; a click by the user who asked updates the message and runs the tool once', async () => {
    discord.messageCreate({ channelId: DM, author: alice, content: 'refund my 25' });
    const [request] = await waitFor(() => posted().length >= 1 && posted(), 15_000, 'the approval request');
    const buttons = request!.body.components[0].components as Array<{ label: string; custom_id: string }>;
    expect(buttons.map((b) => b.label)).toEqual(['Approve', 'Deny']);
    const approve = buttons[0]!.custom_id;
    expect(approve).toMatch(/^\/approve ap_[0-9a-f]{24}$/);
    const messageId = [...discord.messages.values()].find((m) => m.channel_id === DM)!.id;

    // Bob may not decide: an ephemeral answer, the message and its buttons stay.
    discord.buttonClick({ messageId, customId: approve, user: bob });
    await waitFor(() => discord.interactionResponses.length >= 1, 15_000, 'the answer to bob');
    expect(discord.interactionResponses[0]).toMatchObject({
      type: 4,
      data: { content: 'You are not allowed to decide this request. Nothing changed.', flags: 64 | 4 },
    });
    expect(runs).toEqual([]);

    discord.buttonClick({ messageId, customId: approve, user: alice });
    await waitFor(() => posted().length >= 2, 15_000, 'the answer');
    expect(posted()[1]!.body.content).toBe('Refunded 25.');
    expect(runs).toEqual([25]);
    const update = discord.interactionResponses[1]!;
    expect(update.type).toBe(7);
    expect(update.data.content).toContain('Approved by Alice.');
    expect(update.data.components).toEqual([]);
    expect(discord.messages.get(messageId)!.components).toEqual([]);

    // A second click changes nothing.
    await h.idle(10_000, `discord:${DM}`);
    discord.buttonClick({ messageId, customId: buttons[1]!.custom_id, user: alice });
    await waitFor(() => discord.interactionResponses.length >= 3, 15_000, 'the third answer');
    expect(discord.interactionResponses[2]!.data.content).toBe('Already decided: approved by Alice. Nothing changed.');
    expect(runs).toEqual([25]);
  });
});
