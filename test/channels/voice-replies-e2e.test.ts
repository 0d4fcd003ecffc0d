/**
 * Spoken replies end to end on the channels without a voice message of their
 * own: a person's message → the real platform client (discord.js on the fake
 * gateway, `@slack/socket-mode` on the fake socket) → the channel host →
 * Redis → BullMQ → the runner with the local agent (voice `always`) → the
 * answer as text, then the AI SDK's speech generation against the fake
 * OpenAI speech API → one OGG/Opus audio file on the fake platform.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import { createSpeechModel } from '../../runner/model.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { eventCallback, type FakeSlack, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { fakeModel, RunnerHarness, waitFor } from '../runner/harness.js';
import { alice, discordOnHarness, RecordingHost, TOKEN } from './discord-harness.js';
import { startSlackSystem } from './slack-harness.js';

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** The fake model answering `answer`, and a local agent that speaks every answer. */
async function speakingAgent(answer: string): Promise<{ ai: FakeOpenAIServer; agent: RunnerPlugin }> {
  const ai = await startFakeOpenAI();
  closers.push(() => ai.close());
  ai.script([{ text: answer }]);
  const settings = { provider: 'openai-compatible' as const, name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 };
  const model = createSpeechModel(settings, 'gpt-4o-mini-tts', 'agents.local-agent.voice.model');
  const agent = createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, voice: { model, voice: 'alloy', replies: 'always' } });
  return { ai, agent };
}

async function harness(): Promise<RunnerHarness> {
  const h = await RunnerHarness.start();
  closers.push(() => h.close());
  return h;
}

describe('spoken replies as audio files', () => {
  it('Discord: the answer as text, then once as an OGG audio attachment reading it', async () => {
    const { ai, agent } = await speakingAgent('The train leaves at nine.');
    const discord = await FakeDiscord.start({ token: TOKEN });
    closers.push(() => discord.close());
    const h = await harness();
    const { plugin, host } = discordOnHarness(h, discord.apiBase);
    await plugin.start(new RecordingHost((m) => host.receive('discord', m)).asHost(h.ctx.logger));
    closers.push(() => plugin.stop());
    h.runners.push(
      await startRunner(h.ctx, {
        plugin: agent,
        resolveOutbound: (cid) => (cid.startsWith('discord:') ? plugin.outbound : undefined),
        features: runnerFeatures(),
      }),
    );
    const dm = '510000000000000077';
    discord.messageCreate({ channelId: dm, author: alice, content: 'when does the train leave?' });
    await waitFor(() => [...discord.messages.values()].some((m) => m.files?.length), 15_000, 'an attachment');
    await h.idle(15_000, `discord:${dm}`);

    const posted = discord.callsTo('POST', new RegExp(`^/channels/${dm}/messages$`)).filter((c) => c.status === 200);
    expect(posted.map((c) => c.body.content ?? '')).toEqual(['The train leaves at nine.', '']);
    const files = [...discord.messages.values()].flatMap((m) => m.files ?? []);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatchObject({ filename: 'reply.ogg', contentType: 'audio/ogg' });
    expect(files[0]!.data.toString()).toBe('OggSThe train leaves at nine.');
    expect(ai.speeches).toEqual([expect.objectContaining({ input: 'The train leaves at nine.', response_format: 'opus' })]);
  });

  it('Slack: the answer as text, then once as an uploaded OGG audio file in the same DM', async () => {
    const { ai, agent } = await speakingAgent('Your table is booked.');
    const slack: FakeSlack = await startFakeSlack();
    closers.push(() => slack.close());
    const h = await harness();
    const { http, plugin } = await startSlackSystem({ h, slack, agent });
    closers.push(() => http.close());
    closers.push(() => plugin.stop());
    slack.deliver('events_api', eventCallback({ channel: 'D0000DM1', ts: '1800000001.000100', user: 'U0000ANN', text: 'book me a table' }));
    await waitFor(() => slack.uploads.length > 0, 15_000, 'an uploaded file');
    await h.idle(15_000, 'slack:D0000DM1');

    expect(slack.messages.filter((m) => m.channel === 'D0000DM1').map((m) => m.text)).toEqual(['Your table is booked.']);
    expect(slack.uploads).toHaveLength(1);
    expect(slack.uploads[0]).toMatchObject({ channel: 'D0000DM1', filename: 'reply.ogg' });
    expect(slack.uploads[0]!.bytes.toString()).toBe('OggSYour table is booked.');
    expect(ai.speeches).toHaveLength(1);
  });
});
