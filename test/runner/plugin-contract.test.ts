/**
 * The runner plugin contract applied to the local agent (real
 * `@ai-sdk/openai-compatible` provider against the fake server) and to a
 * tiny echo plugin without the steering capability, which shows the suite is
 * generic: the host routes the echo plugin's conversations with `collect`.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { runnerPluginContract } from '../../testing/runner-contract.js';
import { redisUrl } from '../helpers/redis.js';

runnerPluginContract({
  name: 'local-agent',
  redisUrl: redisUrl(),
  makePlugin: ({ modelBaseURL }) =>
    createLocalAgentPlugin({
      model: createOpenAICompatible({ baseURL: modelBaseURL, name: 'contract', apiKey: 'k', includeUsage: true }).chatModel('m'),
      maxRetries: 0,
    }),
});

/** Replies `echo: <inputs>`; no model, no steering, no state. */
function createEchoPlugin(): RunnerPlugin {
  return {
    manifest: { name: 'echo', version: '1.0.0', capabilities: { steering: false, state: false } },
    async run(ctx) {
      // A stop before the plugin started leaves nothing to answer.
      if (ctx.stop.signal.aborted) return { outcome: 'completed' };
      await ctx.delivery.message(`echo: ${ctx.inputs.map((m) => m.text).join(' / ')}`);
      return { outcome: 'completed' };
    },
  };
}

runnerPluginContract({ name: 'echo (no steering)', redisUrl: redisUrl(), makePlugin: () => createEchoPlugin() });
