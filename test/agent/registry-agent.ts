/** The local agent as the plugin registry builds it from its settings, its model the fake at `modelUrl`. */
import localAgent, { type LocalAgentSettings } from '../../plugins/local-agent/index.js';
import { createModel } from '../../runner/model.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { RunnerHarness } from '../runner/harness.js';

/** Builds it on `h`'s config (its profiles too), pointing the config's model at `modelUrl`. */
export async function agentFrom(h: RunnerHarness, modelUrl: string, settings: LocalAgentSettings): Promise<RunnerPlugin> {
  h.ctx.config.model.baseURL = modelUrl;
  const model = h.ctx.config.model;
  return localAgent.create(localAgent.configSchema.parse({ currentTime: false, ...settings }), {
    logger: h.ctx.logger,
    model,
    createModel: (s = model) => createModel(s),
    profiles: h.ctx.config.profiles,
  });
}
