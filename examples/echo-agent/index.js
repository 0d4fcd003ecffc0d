// @ts-check
/**
 * A custom runner plugin: answers every message with its own text behind a
 * configurable prefix. No model, no tools, no build step: the smallest
 * plugin that goes through the whole runtime (manifest, run, delivery).
 *
 * steerbot.json:
 *   { "runner": { "plugin": "./echo-agent/index.js" },
 *     "agents": { "echo-agent": { "prefix": "echo: " } } }
 */

import { z } from 'steerbot/plugin';
import { defineRunnerPlugin } from 'steerbot/runner';

const plugin = defineRunnerPlugin({
  id: 'echo-agent',
  kind: 'runner',
  description: 'Answers every message with its own text.',
  configSchema: z.strictObject({ prefix: z.string().default('echo: ') }),
  env: [{ env: 'ECHO_PREFIX', path: 'prefix', kind: 'string' }],
  create: (config) => ({
    // No steering: messages sent while a run is active wait and are answered together by the next run.
    manifest: { name: 'echo-agent', version: '1.0.0', capabilities: { steering: false } },
    async run(ctx) {
      // A stop that came before the run started leaves nothing to answer.
      if (ctx.stop.signal.aborted) return { outcome: 'completed' };
      await ctx.delivery.message(config.prefix + ctx.inputs.map((m) => m.text).join('\n'));
      return { outcome: 'completed' };
    },
  }),
});

export default plugin;
