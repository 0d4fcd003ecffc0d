/**
 * End to end through the whole system: a MESSAGE_CREATE on the fake Discord
 * gateway → the real discord.js client → the real host receive → Redis →
 * BullMQ → a runner with the local agent on the real OpenAI-compatible
 * provider (against the fake chat-completions server) → delivery → the
 * Discord outbound → the fake Discord REST.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { ChannelHost, ChannelPlugin } from '../../src/channel.js';
import { FakeDiscord, type RestCall } from '../../testing/fakes/discord-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, gatedTool, RunnerHarness, waitFor } from '../runner/harness.js';
import { alice, discordOnHarness, RecordingHost, TOKEN } from './discord-harness.js';

/** The DM whose replies go through a streaming Discord outbound. */
const STREAM_DM = '510000000000000009';
/** A streamed answer: word by word, 120 ms apart (about 2.6 s, more than one edit interval). */
const STREAMED = 'Streaming this answer word by word so that the message is edited in place while the model is still writing it out.';

/** A second streamed DM: a message is steered in while its reply streams. */
const STEER_STREAM_DM = '510000000000000010';
/** Its first step: streamed slowly (more than one edit interval), then a `lookup` call. */
const CHECKING = 'Let me check the opening hours of every museum on your list before I put the whole day together for you.';
/** Its final answer, streamed after the tool batch. */
const FINAL = 'Here is your day: the science museum at ten, lunch by the river, and the art museum until six, with the children in mind.';

/** A reply of about 4 600 characters in paragraphs: Discord needs three messages for it. */
const LONG_REPLY = Array.from({ length: 12 }, (_, i) => `Paragraph ${i + 1}. ${'All work and no play makes a long answer. '.repeat(9).trim()}`).join('\n\n');

/** An answer that streams slowly enough to be stopped in the middle. */
const SLOW_STORY = 'ALPHA BRAVO charlie delta echo foxtrot golf hotel india juliet kilo lima';

/** The `lookup` tool, shared by the tests of this file (`reset()` arms it for the next one). */
const lookup = gatedTool();

let discord: FakeDiscord;
let model: FakeOpenAIServer;
let h: RunnerHarness;
let plugin: ChannelPlugin;
let host: RecordingHost;
let channelHost: ChannelHost;
const extraPlugins: ChannelPlugin[] = [];

beforeAll(async () => {
  model = await startFakeOpenAI();
  model.script((req) => {
    const all = JSON.stringify(req.messages);
    const last = JSON.stringify(req.messages.at(-1)?.content ?? '');
    if (all.includes('plan a museum day')) {
      return req.messages.some((m: { role: string }) => m.role === 'tool')
        ? { text: FINAL, chunkDelayMs: 60 }
        : { text: CHECKING, chunkDelayMs: 120, toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] };
    }
    if (all.includes('look up the schedule')) {
      return req.messages.some((m: { role: string }) => m.role === 'tool')
        ? { text: 'Here is the schedule, weekend included.' }
        : { toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] };
    }
    if (last.includes('long story')) return { text: SLOW_STORY, delayMs: 60_000 };
    if (last.includes('my name is')) return { text: 'Noted.' };
    if (last.includes('what is my name')) return { text: 'I do not know your name yet.' };
    if (last.includes('stream')) return { text: STREAMED, chunkDelayMs: 120 };
    return { text: last.includes('long') ? LONG_REPLY : `You said: ${last.includes('hello') ? 'hello' : 'something'}.` };
  });
  discord = await FakeDiscord.start({ token: TOKEN });
  h = await RunnerHarness.start();
  const { ctx } = h;
  ({ plugin, host: channelHost } = discordOnHarness(h, discord.apiBase));
  host = new RecordingHost((m) => channelHost.receive('discord', m));
  await plugin.start(host.asHost(ctx.logger));
  // Runners only use outbound sides: this one is never started.
  const streaming = createDiscordPlugin(
    { token: TOKEN, apiBase: discord.apiBase, streaming: true },
    { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix },
  );
  const runner = await startRunner(ctx, {
    // Deltas reach only outbound sides that stream (STREAM_DM's); the others get whole messages.
    plugin: createLocalAgentPlugin({ model: fakeModel(model.url), streaming: true, tools: [lookup.tool], builtins: { currentTime: false } }),
    resolveOutbound: (cid) =>
      cid === `discord:${STREAM_DM}` || cid === `discord:${STEER_STREAM_DM}` ? streaming.outbound : cid.startsWith('discord:') ? plugin.outbound : undefined,
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
});

afterAll(async () => {
  await Promise.all(extraPlugins.map((p) => p.stop()));
  await plugin?.stop();
  await h?.close();
  await discord?.close();
  await model?.close();
});

/** User texts of every model request whose messages mention `marker`, in order. */
const userTextsOf = (marker: string): unknown[][] =>
  model.requests
    .filter((r) => JSON.stringify(r.body.messages).includes(marker))
    .map((r) => r.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content));
const runsIn = async (dm: string) => (await h.entries('run.started', `discord:${dm}`)).map((e) => e.run);

const sentTo = (channel: string): RestCall[] => discord.callsTo('POST', new RegExp(`^/channels/${channel}/messages$`)).filter((c) => c.status === 200);

describe('discord end to end', () => {
  it('a DM gets a reply from the agent', async () => {
    const dm = '510000000000000001';
    discord.messageCreate({ channelId: dm, author: alice, content: 'hello bot' });
    const [reply] = await discord.waitForCalls('POST', new RegExp(`^/channels/${dm}/messages$`));
    expect(reply?.body.content).toBe('You said: hello.');
    expect(model.requests.some((r) => JSON.stringify(r.body.messages).includes('hello bot'))).toBe(true);
    await h.idle(10_000, `discord:${dm}`);
    expect(sentTo(dm)).toHaveLength(1);
  });

  it('a reply over 2000 characters arrives split into messages Discord accepts, complete and in order', async () => {
    const dm = '510000000000000002';
    discord.messageCreate({ channelId: dm, author: alice, content: 'write something long' });
    const squash = (s: string) => s.replace(/\s+/g, '');
    const chunks = await waitFor(
      () => {
        const texts = sentTo(dm).map((c) => c.body.content as string);
        return squash(texts.join('')) === squash(LONG_REPLY) && texts;
      },
      10_000,
      'the whole long reply',
    );
    expect(LONG_REPLY.length).toBeGreaterThan(4000);
    expect(chunks.length).toBe(3);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(2000);
    // Cut at paragraph boundaries: every chunk starts a paragraph.
    for (const c of chunks) expect(c).toMatch(/^Paragraph \d+\./);
    await h.idle(10_000, `discord:${dm}`);
    expect(sentTo(dm)).toHaveLength(3);
  });

  it('a message two hosts receive from the gateway gets one run and one reply', async () => {
    const dm = '510000000000000003';
    const second = new RecordingHost((m) => channelHost.receive('discord', m));
    const other = createDiscordPlugin({ token: TOKEN, apiBase: discord.apiBase }, { logger: h.ctx.logger, redis: h.ctx.redis, prefix: h.prefix });
    extraPlugins.push(other);
    await other.start(second.asHost(h.ctx.logger));
    discord.messageCreate({ channelId: dm, author: alice, content: 'hello from two gateways' });
    await discord.waitForCalls('POST', new RegExp(`^/channels/${dm}/messages$`));
    await h.idle(10_000, `discord:${dm}`);
    const handed = [...host.withText('hello from two gateways'), ...second.withText('hello from two gateways')];
    const results = handed.map((r) => (r.result?.kind === 'ingested' ? r.result.result.kind : r.result?.kind));
    expect(results.sort()).toEqual(['duplicate', 'new-run']);
    expect(await h.entries('run.started', `discord:${dm}`)).toHaveLength(1);
    expect(sentTo(dm)).toHaveLength(1);
  });

  it('with streaming on, a reply is posted once and edited in place to the full answer', async () => {
    discord.messageCreate({ channelId: STREAM_DM, author: alice, content: 'please stream' });
    await host.waitForText('please stream');
    await h.idle(15_000, `discord:${STREAM_DM}`);
    const posts = sentTo(STREAM_DM);
    expect(posts).toHaveLength(1);
    const preview = posts[0]!.body.content as string;
    expect(STREAMED.startsWith(preview)).toBe(true);
    expect(preview.length).toBeLessThan(STREAMED.length);
    const messageId = [...discord.messages.values()].find((m) => m.channel_id === STREAM_DM)!.id;
    const edits = discord.callsTo('PATCH', new RegExp(`^/channels/${STREAM_DM}/messages/${messageId}$`));
    expect(edits.length).toBeGreaterThanOrEqual(1);
    expect(edits.at(-1)?.body.content).toBe(STREAMED);
    expect(discord.messages.get(messageId)?.content).toBe(STREAMED);
  });

  it('with streaming on, a message steered in while the reply streams joins at the turn boundary; the reply is edited in place and ends complete, once', async () => {
    const cid = `discord:${STEER_STREAM_DM}`;
    lookup.reset();
    discord.messageCreate({ channelId: STEER_STREAM_DM, author: alice, content: 'plan a museum day' });
    // The draft is out and the first step is still streaming: steer now.
    await waitFor(() => sentTo(STEER_STREAM_DM).length >= 1, 10_000, 'the draft');
    discord.messageCreate({ channelId: STEER_STREAM_DM, author: alice, content: 'we have two small children' });
    const [queued] = await waitFor(
      async () => {
        const q = await h.entries('steering.queued', cid);
        return q.length === 1 && q;
      },
      10_000,
      'the message steered',
    );
    await lookup.started;
    lookup.release('open 10-18');
    await h.idle(15_000, cid);

    // It arrived while the first step streamed (before that step was recorded), and was pulled after the tool batch.
    const [firstStep] = await h.entries('model.step', cid);
    expect(queued!.seq).toBeLessThan(firstStep!.seq);
    const [injected] = await h.entries('steering.injected', cid);
    expect(injected).toMatchObject({ run: queued!.run });
    expect(injected!.seq).toBeGreaterThan(firstStep!.seq);
    const requests = userTextsOf('plan a museum day');
    expect(requests).toEqual([['plan a museum day'], ['plan a museum day', 'we have two small children']]);
    expect(await runsIn(STEER_STREAM_DM)).toEqual([queued!.run]);

    // One message, edited in place to the complete final answer.
    expect(sentTo(STEER_STREAM_DM)).toHaveLength(1);
    const messageId = [...discord.messages.values()].find((m) => m.channel_id === STEER_STREAM_DM)!.id;
    const edits = discord.callsTo('PATCH', new RegExp(`^/channels/${STEER_STREAM_DM}/messages/`));
    expect(edits.length).toBeGreaterThanOrEqual(2);
    for (const e of edits) expect(e.path).toBe(`/channels/${STEER_STREAM_DM}/messages/${messageId}`);
    expect(discord.messages.get(messageId)?.content).toBe(FINAL);
  });

  it('steers a message sent while the agent runs a tool into the same run, and the reply answers it', async () => {
    const dm = '510000000000000004';
    lookup.reset();
    discord.messageCreate({ channelId: dm, author: alice, content: 'look up the schedule' });
    await lookup.started;
    discord.messageCreate({ channelId: dm, author: alice, content: 'also the weekend please' });
    await waitFor(async () => (await h.entries('steering.queued', `discord:${dm}`)).length === 1, 10_000, 'the message steered');
    lookup.release('SCHEDULE');

    await waitFor(() => sentTo(dm).length >= 1, 10_000, 'the reply');
    await h.idle(10_000, `discord:${dm}`);
    expect(sentTo(dm).map((c) => c.body.content)).toEqual(['Here is the schedule, weekend included.']);
    const requests = userTextsOf('look up the schedule');
    expect(requests).toHaveLength(2);
    expect(requests[1]).toEqual(['look up the schedule', 'also the weekend please']);
    expect(await runsIn(dm)).toHaveLength(1);
  });

  it('/stop cuts off a running answer', async () => {
    const dm = '510000000000000005';
    discord.messageCreate({ channelId: dm, author: alice, content: 'tell me a long story' });
    const [run] = await waitFor(
      async () => {
        const r = await runsIn(dm);
        return r.length === 1 && r;
      },
      10_000,
      'the run started',
    );
    // That DM's channel does not stream: the answer is asked whole, and held until the stop aborts the call.
    await waitFor(() => model.requests.some((r) => JSON.stringify(r.body.messages.at(-1)).includes('long story')), 10_000, 'the story asked');
    discord.messageCreate({ channelId: dm, author: alice, content: '/stop' });
    expect((await h.runEnded(run!, 10_000, `discord:${dm}`)).outcome).toBe('stopped');
    await h.idle(10_000, `discord:${dm}`);
    expect(sentTo(dm).map((c) => c.body.content)).toEqual(['Stopping the current run.']);
  });

  it('/new starts a fresh context', async () => {
    const dm = '510000000000000006';
    discord.messageCreate({ channelId: dm, author: alice, content: 'my name is Alice' });
    await waitFor(() => sentTo(dm).length >= 1, 10_000, 'the first reply');
    await h.idle(10_000, `discord:${dm}`);
    discord.messageCreate({ channelId: dm, author: alice, content: '/new' });
    await waitFor(() => sentTo(dm).length >= 2, 10_000, 'the /new reply');
    discord.messageCreate({ channelId: dm, author: alice, content: 'what is my name?' });
    await waitFor(() => sentTo(dm).length >= 3, 10_000, 'the second reply');
    await h.idle(10_000, `discord:${dm}`);

    expect(sentTo(dm).map((c) => c.body.content)).toEqual(['Noted.', expect.stringMatching(/^Started a new conversation/), 'I do not know your name yet.']);
    expect(userTextsOf('what is my name')).toEqual([['what is my name?']]);
  });
});
