/**
 * End to end, exactly once: a runner process records the final answer and
 * is killed (`SIGKILL`, no cleanup) at each point before the run is
 * finished. The runner that takes the run over delivers the recorded
 * answer, once, through the real Discord outbound to a fake Discord (whose
 * nonce dedupe honours delivery keys), and does not ask the model again.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it, type OnTestFinishedHandler } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { DISCORD_MAX_MESSAGE_CHARS } from '../../plugins/discord/outbound.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { type StartedRunner, startRunner } from '../../runner/main.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { splitMessage } from '../../src/split-message.js';
import { type FakeDiscord, startFakeDiscord } from '../../testing/fakes/discord-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { contextEnv } from '../../testing/runner-context.js';
import { BUILD_WAIT_MS, builtNodeArgs, packageBuilt } from '../helpers/built-package.js';
import { readyLine } from '../helpers/child-ready.js';
import { redisUrl } from '../helpers/redis.js';
import { fakeModel, RunnerHarness } from './harness.js';

const WORKER = fileURLToPath(new URL('./crash-worker.ts', import.meta.url));
const TOKEN = 'fake-discord-token-0123456789';
const CHANNEL = '555000111222333444';
/** A Discord DM conversation: the crash worker delivers it through the Discord outbound. */
const DCID = `discord:${CHANNEL}`;

/** Where `crash-worker.ts` kills itself (see there). */
const CRASH_POINTS = ['step-recorded', 'claimed', 'sent', 'acknowledged'] as const;
type CrashPoint = (typeof CRASH_POINTS)[number] | 'second-claimed';

/** One test's world: fake model, fake Discord, host parts on a private prefix, and the runner processes it started. */
interface World {
  fake: FakeOpenAIServer;
  discord: FakeDiscord;
  h: RunnerHarness;
  /** Starts `crash-worker.ts` on the harness's prefix and queue; resolves once it takes jobs. */
  startWorker(crashAt: CrashPoint): Promise<Worker>;
  /** Starts a runner in this process, delivering through the real Discord outbound (the one that takes the run over). */
  startSurvivor(): Promise<StartedRunner>;
  /** Texts of the messages the bot created in the fake Discord channel, in order. */
  discordTexts(): string[];
  /** The conversation's outbox: delivery key → status. */
  outbox(): Promise<Record<string, string>>;
}

interface Worker {
  proc: ChildProcess;
  owner: string;
  /** Resolves with the signal that ended the process (null for a normal exit). */
  exited: Promise<NodeJS.Signals | null>;
}

/**
 * Starts a world for the running test; everything in it is closed when the test finishes (`onTestFinished`:
 * the test's own, from its context, as the tests run at once).
 */
async function world(onTestFinished: (fn: OnTestFinishedHandler) => void): Promise<World> {
  const fake = await startFakeOpenAI();
  const discord = await startFakeDiscord({ token: TOKEN });
  const h = await RunnerHarness.start();
  const children: ChildProcess[] = [];
  onTestFinished(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await h.close();
    await discord.close();
    await fake.close();
  });

  const startWorker = async (crashAt: CrashPoint): Promise<Worker> => {
    const proc = spawn(process.execPath, await builtNodeArgs(WORKER), {
      env: {
        ...process.env,
        ...contextEnv({ redisUrl: redisUrl(), prefix: h.prefix }),
        FAKE_OPENAI_URL: fake.url,
        FAKE_DISCORD_API: discord.apiBase,
        FAKE_DISCORD_TOKEN: TOKEN,
        CRASH_AT: crashAt,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(proc);
    const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.once('exit', (_code, signal) => resolve(signal)));
    const owner = await readyLine(proc, 'crash worker');
    return { proc, owner, exited };
  };

  const startSurvivor = async (): Promise<StartedRunner> => {
    const outbound = createDiscordPlugin({ token: TOKEN, apiBase: discord.apiBase }, { logger: h.ctx.logger, redis: h.ctx.redis, prefix: h.prefix }).outbound;
    const runner = await startRunner(h.ctx, {
      plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), maxRetries: 0 }),
      resolveOutbound: (conversationId) => (conversationId.startsWith('discord:') ? outbound : undefined),
      lockDurationMs: 2000,
      stalledIntervalMs: 500,
      features: runnerFeatures(),
    });
    h.runners.push(runner);
    return runner;
  };

  return {
    fake,
    discord,
    h,
    startWorker,
    startSurvivor,
    discordTexts: () => [...discord.messages.values()].filter((m) => m.channel_id === CHANNEL).map((m) => m.content),
    outbox: async () => {
      const raw = await h.ctx.redis.hgetall(conversationKeys(h.prefix, DCID).outbox);
      return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, (JSON.parse(v) as { status: string }).status]));
    },
  };
}

/** What the outbox and the platform hold right after the kill at `point`. */
const AT_CRASH: Record<(typeof CRASH_POINTS)[number], { outbox: string | undefined; onPlatform: string[] }> = {
  'step-recorded': { outbox: undefined, onPlatform: [] },
  claimed: { outbox: 'possibly-dispatched', onPlatform: [] },
  sent: { outbox: 'possibly-dispatched', onPlatform: ['The real answer.'] },
  acknowledged: { outbox: 'acknowledged', onPlatform: ['The real answer.'] },
};

// The child processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

// Each test has its own world (model, Discord, prefix, processes): they run at once.
describe.concurrent('a final answer recorded by an attempt that died before the run finished', () => {
  for (const point of CRASH_POINTS) {
    it(`is delivered exactly once by the attempt that takes the run over, which does not call the model (killed: ${point})`, async ({ onTestFinished }) => {
      const w = await world(onTestFinished);
      const { h } = w;
      // Any second model call would answer "Nothing new." (the prompt already ends with the answer).
      w.fake.script((_req, index) => (index === 0 ? { text: 'The real answer.' } : { text: 'Nothing new.' }));
      const doomed = await w.startWorker(point);
      const first = await h.ingest('what is the answer?', { conversationId: DCID });
      expect(first.kind).toBe('new-run');
      const { runId, seq } = first as { runId: string; seq: number };

      expect(await doomed.exited).toBe('SIGKILL');
      const steps = (await h.entries('model.step', DCID)).filter((s) => s.run === runId);
      expect(steps.map((s) => s.finishReason)).toEqual(['stop']);
      expect(await h.entries('run.ended', DCID)).toEqual([]);
      const key = `${runId}:${seq}:0`;
      expect((await w.outbox())[key]).toBe(AT_CRASH[point].outbox);
      expect(w.discordTexts()).toEqual(AT_CRASH[point].onPlatform);

      const survivor = await w.startSurvivor();
      expect((await h.runEnded(runId, 30_000, DCID)).outcome).toBe('completed');
      await h.idle(10_000, DCID);

      expect(w.discordTexts()).toEqual(['The real answer.']);
      expect(w.fake.requests).toHaveLength(1);
      expect(await w.outbox()).toEqual({ [key]: 'acknowledged' });
      expect((await h.entries('run.started', DCID)).map((e) => [e.attempt, e.owner])).toEqual([
        [1, doomed.owner],
        [2, survivor.owner],
      ]);
      expect((await h.entries('model.step', DCID)).map((s) => s.seq)).toEqual(steps.map((s) => s.seq));
    });
  }

  it('then answers a message steered in while the runner was dead, as a continuation of the run', async ({ onTestFinished }) => {
    const w = await world(onTestFinished);
    const { h } = w;
    w.fake.script((_req, index) => (index === 0 ? { text: 'The real answer.' } : { text: 'And the answer to the second.' }));
    const doomed = await w.startWorker('step-recorded');
    const first = await h.ingest('what is the answer?', { conversationId: DCID });
    const runId = (first as { runId: string }).runId;
    expect(await doomed.exited).toBe('SIGKILL');
    expect(await h.ingest('and one more thing', { conversationId: DCID })).toMatchObject({ kind: 'steered', runId });

    await w.startSurvivor();
    expect((await h.runEnded(runId, 30_000, DCID)).outcome).toBe('completed');
    await h.idle(10_000, DCID);

    expect(w.discordTexts()).toEqual(['The real answer.', 'And the answer to the second.']);
    // One model call for the steered message, whose prompt holds the recorded answer once, before it.
    expect(w.fake.requests).toHaveLength(2);
    const chat = (w.fake.requests[1]!.body.messages as Array<{ role: string; content: unknown }>).filter((m) => m.role !== 'system');
    expect(chat.map((m) => [m.role, m.content])).toEqual([
      ['user', 'what is the answer?'],
      ['assistant', 'The real answer.'],
      ['user', 'and one more thing'],
    ]);
    expect(await h.entries('steering.injected', DCID)).toMatchObject([{ run: runId, follow_up: true }]);
  });

  it('sends only the chunks of a long answer that were not acknowledged, under the keys the dead attempt used', async ({ onTestFinished }) => {
    const w = await world(onTestFinished);
    const { h } = w;
    const long = `${'First paragraph, long enough. '.repeat(50).trim()}\n\n${'Second paragraph, also long. '.repeat(50).trim()}`;
    const chunks = splitMessage(long, DISCORD_MAX_MESSAGE_CHARS);
    expect(chunks).toHaveLength(2);
    w.fake.script((_req, index) => (index === 0 ? { text: long } : { text: 'Nothing new.' }));
    const doomed = await w.startWorker('second-claimed');
    const { runId, seq } = (await h.ingest('tell me a lot', { conversationId: DCID })) as { runId: string; seq: number };
    expect(await doomed.exited).toBe('SIGKILL');
    expect(w.discordTexts()).toEqual([chunks[0]]);
    expect(await w.outbox()).toEqual({ [`${runId}:${seq}:0`]: 'acknowledged', [`${runId}:${seq}:1`]: 'possibly-dispatched' });

    await w.startSurvivor();
    expect((await h.runEnded(runId, 30_000, DCID)).outcome).toBe('completed');
    await h.idle(10_000, DCID);
    expect(w.discordTexts()).toEqual(chunks);
    expect(w.fake.requests).toHaveLength(1);
    expect(await w.outbox()).toEqual({ [`${runId}:${seq}:0`]: 'acknowledged', [`${runId}:${seq}:1`]: 'acknowledged' });
  });
});
