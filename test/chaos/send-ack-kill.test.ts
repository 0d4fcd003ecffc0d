/**
 * Chaos: a runner process is killed (`kill -9`) exactly between a platform's
 * send and the outbox's acknowledgement, on each channel with a platform
 * (Telegram, Discord, Slack, WhatsApp), and a new runner takes the runs over
 * after the lease. Not by luck: each fake platform stores the reply and holds
 * its answer back (`holdAnswer`), the test checks that the outbox still says
 * `possibly-dispatched`, and kills the runner then. What the platform stores
 * is counted per delivery:
 * - Discord and Slack show the reply once: Discord returns the message its
 *   `nonce` + `enforce_nonce` already created; Slack finds the message
 *   carrying the delivery key in its metadata before posting again;
 * - Telegram and WhatsApp offer nothing to find a sent message by, so a kill
 *   exactly in that window shows the reply twice: one duplicate per kill, as
 *   docs/architecture.md#delivery-and-the-outbox says.
 * One runner process at a time (it holds every round's four runs); two rounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationKeys } from '../../src/redis/keys.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import type { HeldAnswer } from '../../testing/fakes/held-answers.js';
import { type FakeSlack, SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { type FakeWhatsApp, startFakeWhatsApp, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { redisUrl } from '../helpers/redis.js';
import { type SteerbotProcess, startSteerbot, writeConfig } from './harness/processes.js';

const ROUNDS = 2;
const LEASE_MS = 1000;
const DISCORD_TOKEN = 'fake-discord-token-send-ack-0123456789';
const CHANNELS = ['telegram', 'discord', 'slack', 'whatsapp'] as const;
type Channel = (typeof CHANNELS)[number];

/** The four fake platforms. */
interface Platforms {
  telegram: FakeTelegram;
  discord: FakeDiscord;
  slack: FakeSlack;
  whatsapp: FakeWhatsApp;
}

/** The conversation of `channel` in round `r`: a fresh one each round (Slack: a DM, then a channel thread). */
function conversationOf(channel: Channel, r: number): string {
  switch (channel) {
    case 'telegram':
      return `telegram:${1000 + r}`;
    case 'discord':
      return `discord:55500011122233344${r}`;
    case 'slack':
      return r % 2 === 0 ? `slack:D0000DM${r}` : `slack:C0000CH${r}:${Math.floor(Date.now() / 1000) - 60}.000100`;
    case 'whatsapp':
      return `whatsapp:1555000111${r}`;
  }
}

/** Holds the answer of the next reply each platform stores. */
function holdReplies(p: Platforms): Record<Channel, HeldAnswer> {
  return {
    telegram: p.telegram.holdAnswer('sendMessage'),
    discord: p.discord.holdAnswer('POST', /^\/channels\/\d+\/messages$/),
    slack: p.slack.holdAnswer('chat.postMessage'),
    whatsapp: p.whatsapp.holdAnswer('send'),
  };
}

/** Platform ids of the messages `channel`'s platform stored with `text`, oldest first. */
function storedIds(p: Platforms, channel: Channel, text: string): string[] {
  switch (channel) {
    case 'telegram':
      return p.telegram.sent.filter((m) => m.text === text).map((m) => String(m.messageId));
    case 'discord':
      return [...p.discord.messages.values()].filter((m) => m.content === text).map((m) => m.id);
    case 'slack':
      return p.slack.messages.filter((m) => m.text === text).map((m) => m.ts);
    case 'whatsapp':
      return p.whatsapp.sent.filter((m) => m.text === text).map((m) => m.id);
  }
}

/** The config file's channels: every platform's fake. */
function channelsConfig(p: Platforms): Record<string, unknown> {
  return {
    telegram: { token: FAKE_TOKEN, apiRoot: p.telegram.apiRoot },
    discord: { token: DISCORD_TOKEN, apiBase: p.discord.apiBase },
    slack: { botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: p.slack.apiUrl },
    whatsapp: { ...WHATSAPP_TEST, graphApiUrl: p.whatsapp.graphUrl },
  };
}

/** One delivery of a round: the run answering it, and the one outbox record of that run. */
interface Delivery {
  channel: Channel;
  conversationId: string;
  runId: string;
  text: string;
}

// The package built once for the lane (the processes start from its dist/); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

describe('chaos: kill -9 between the platform send and the acknowledgement', () => {
  let platforms: Platforms;
  let h: RunnerHarness;
  let config: Awaited<ReturnType<typeof writeConfig>>;
  const procs: SteerbotProcess[] = [];
  const held: HeldAnswer[] = [];

  const startRunner = async (n: number) => {
    const proc = await startSteerbot({
      name: `runner-${n}`,
      role: 'runner',
      redisUrl: redisUrl(),
      prefix: h.prefix,
      configFile: config.file,
      env: { STEERBOT_LEASE_MS: String(LEASE_MS), STEERBOT_HEARTBEAT_MS: '250', STEERBOT_RUNNER_CONCURRENCY: '4', STEERBOT_WEB: 'false' },
    });
    procs.push(proc);
    return proc;
  };

  beforeAll(async () => {
    const [telegram, discord, slack, whatsapp] = await Promise.all([
      startFakeTelegram(),
      FakeDiscord.start({ token: DISCORD_TOKEN }),
      startFakeSlack(),
      startFakeWhatsApp(),
    ]);
    platforms = { telegram, discord, slack, whatsapp };
    h = await RunnerHarness.start({ redisUrl: redisUrl() });
    config = await writeConfig({ channels: channelsConfig(platforms) });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill9()));
    for (const answer of held) answer.release();
    await h?.close();
    await Promise.all(Object.values(platforms ?? {}).map((p) => p.close()));
    await config?.remove();
  }, 60_000);

  /** The outbox records of one run, by delivery key. */
  const outboxOf = async (d: Delivery) => {
    const all = await h.redis.hgetall(conversationKeys(h.prefix, d.conversationId).outbox);
    return Object.entries(all).filter(([key]) => key.startsWith(`${d.runId}:`));
  };

  /** Ingests one message per channel, waits until every platform stored its reply (answers held), and checks the kill lands in the window. */
  async function roundInFlight(r: number, runner: SteerbotProcess): Promise<Delivery[]> {
    const answers = holdReplies(platforms);
    held.push(...Object.values(answers));
    const deliveries = await Promise.all(
      CHANNELS.map(async (channel) => {
        const conversationId = conversationOf(channel, r);
        const token = `send-ack-${channel}-r${r}`;
        const ingested = await h.ingest(token, { conversationId });
        expect(ingested.kind).toBe('new-run');
        return { channel, conversationId, runId: (ingested as { runId: string }).runId, text: `part 1/1: ${token}` };
      }),
    );
    const stored = new Set<Channel>();
    for (const channel of CHANNELS) void answers[channel].done.then(() => stored.add(channel));
    await waitFor(() => stored.size === CHANNELS.length, 60_000, `every platform stored its reply (round ${r}: ${[...stored].join(', ')})`);
    for (const d of deliveries) {
      // The runner being killed holds the run, and the platform has the reply that its outbox has not acknowledged.
      const owner = await h.redis.hget(conversationKeys(h.prefix, d.conversationId).run(d.runId), 'owner');
      expect(Number(owner?.split(':').at(-2)), `${d.channel}: owner of the run`).toBe(runner.pid);
      expect(storedIds(platforms, d.channel, d.text), `${d.channel}: stored before the kill`).toHaveLength(1);
      expect(await outboxOf(d), `${d.channel}: outbox at the kill`).toEqual([[expect.any(String), JSON.stringify({ status: 'possibly-dispatched' })]]);
    }
    return deliveries;
  }

  /** After the takeover: the run completed in a second attempt, its reply acknowledged; returns how often the platform stored it. */
  async function afterTakeover(d: Delivery): Promise<{ stored: string[]; acknowledged: string | undefined }> {
    const ended = await h.runEnded(d.runId, 60_000, d.conversationId);
    expect(ended.outcome, `${d.channel}: outcome`).toBe('completed');
    expect((await h.entries('run.started', d.conversationId)).map((e) => e.attempt)).toEqual([1, 2]);
    const records = await outboxOf(d);
    expect(records, `${d.channel}: one delivery`).toHaveLength(1);
    const record = JSON.parse(records[0]![1]) as { status: string; messageId?: string };
    expect(record.status, `${d.channel}: outbox after the takeover`).toBe('acknowledged');
    return { stored: storedIds(platforms, d.channel, d.text), acknowledged: record.messageId };
  }

  it(`shows each reply once on Discord and Slack, and twice on Telegram and WhatsApp, over ${ROUNDS} kills`, async () => {
    const duplicates: Record<Channel, number> = { telegram: 0, discord: 0, slack: 0, whatsapp: 0 };
    let runner = await startRunner(0);
    for (let r = 0; r < ROUNDS; r++) {
      const deliveries = await roundInFlight(r, runner);
      await runner.kill9();
      // The next runner takes the four runs over once their lease (LEASE_MS) has run out.
      runner = await startRunner(r + 1);
      for (const d of deliveries) {
        const { stored, acknowledged } = await afterTakeover(d);
        duplicates[d.channel] += stored.length - 1;
        // What the outbox acknowledges is a message the platform shows: the first one where it was found again, else the resend.
        expect(acknowledged, `${d.channel}: acknowledged id`).toBe(d.channel === 'discord' || d.channel === 'slack' ? stored[0] : stored.at(-1));
      }
    }
    const lookups = platforms.slack.callsOf('conversations.history').length + platforms.slack.callsOf('conversations.replies').length;
    const discordPosts = platforms.discord.callsTo('POST', /^\/channels\/\d+\/messages$/).length;
    console.log(
      `[chaos] kill -9 between send and ack, ${ROUNDS} kills per channel, lease ${LEASE_MS} ms: duplicates per kill ` +
        CHANNELS.map((c) => `${c} ${duplicates[c] / ROUNDS}`).join(', ') +
        `; Slack lookups ${lookups}, Discord message POSTs ${discordPosts} (the resends answered by nonce)`,
    );
    expect(duplicates).toEqual({ telegram: ROUNDS, discord: 0, slack: 0, whatsapp: ROUNDS });
    // The takeover resent on Discord (answered by the nonce) and looked the reply up on Slack, once per kill.
    expect(discordPosts).toBe(2 * ROUNDS);
    expect(platforms.slack.callsOf('chat.postMessage')).toHaveLength(ROUNDS);
    expect(lookups).toBe(ROUNDS);
  }, 240_000);
});
