/**
 * A runner in its own process that kills itself (SIGKILL: no cleanup, like a
 * crash) at one named point between "the final answer is recorded" and "the
 * run is finished", for the exactly-once tests of a recorded answer. It runs
 * the local agent against `FAKE_OPENAI_URL` and delivers through the real
 * Discord outbound against a fake Discord (`FAKE_DISCORD_API`), whose nonce
 * dedupe stands for a platform that honours delivery keys.
 *
 * CRASH_AT (unset: never crashes):
 * - `step-recorded`  the final `model.step` is in the record; nothing claimed in the outbox
 * - `claimed`        the outbox says `possibly-dispatched`; the platform was not called
 * - `sent`           the platform accepted the message; the acknowledgement is not recorded
 * - `acknowledged`   the outbox says `acknowledged`; the run is not finished
 * - `second-claimed` a reply split in chunks: the first is acknowledged, the second claimed but not sent
 *
 * Env: REDIS_URL, STEERBOT_PREFIX, FAKE_OPENAI_URL, FAKE_DISCORD_API, FAKE_DISCORD_TOKEN, CRASH_AT.
 * Prints `ready <owner>` once it takes jobs.
 */

import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { runnerFeatures } from '../../app/features/index.js';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createTestContext } from '../../testing/runner-context.js';

type CrashPoint = 'step-recorded' | 'claimed' | 'sent' | 'acknowledged' | 'second-claimed';

const env = process.env;
const need = (name: string): string => {
  const v = env[name];
  if (!v) throw new Error(`crash-worker: ${name} is not set`);
  return v;
};
const crashAt = env.CRASH_AT as CrashPoint | undefined;
const crash = (point: CrashPoint): void => {
  if (crashAt === point) process.kill(process.pid, 'SIGKILL');
};

const ctx = createTestContext({ redisUrl: need('REDIS_URL'), prefix: need('STEERBOT_PREFIX') });
const discord = createDiscordPlugin(
  { token: need('FAKE_DISCORD_TOKEN'), apiBase: need('FAKE_DISCORD_API') },
  { logger: ctx.logger, redis: ctx.redis, prefix: ctx.config.redis.prefix },
);
const real = discord.outbound;
let sends = 0;
const outbound: ChannelOutbound = {
  channelId: real.channelId,
  maxMessageChars: real.maxMessageChars,
  ...(real.typing && { typing: (c: string) => real.typing!(c) }),
  async send(conversationId, text, opts) {
    if (++sends === 2) crash('second-claimed');
    crash('claimed');
    const sent = await real.send(conversationId, text, opts);
    crash('sent');
    return sent;
  },
};

const model = createOpenAICompatible({ baseURL: need('FAKE_OPENAI_URL'), name: 'fake', apiKey: 'k', includeUsage: true }).chatModel('m');
const agent = createLocalAgentPlugin({ model, maxRetries: 0 });
const plugin: RunnerPlugin = {
  manifest: agent.manifest,
  async run(runCtx) {
    const result = await agent.run({
      ...runCtx,
      record: {
        ...runCtx.record,
        step: async (step) => {
          const seq = await runCtx.record.step(step);
          if (step.finishReason !== 'tool-calls') crash('step-recorded');
          return seq;
        },
      },
    });
    crash('acknowledged');
    return result;
  },
};

const runner = await startRunner(ctx, {
  plugin,
  resolveOutbound: (conversationId) => (conversationId.startsWith('discord:') ? outbound : undefined),
  lockDurationMs: 2000,
  stalledIntervalMs: 500,
  features: runnerFeatures(),
});
process.stdout.write(`ready ${runner.owner}\n`);
// Stays alive until the test kills it, or it kills itself.
setInterval(() => undefined, 1 << 30);
