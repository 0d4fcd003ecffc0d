/**
 * A runner with subagents on, the local agent on the real provider against
 * the fake model, over the runner harness: what the subagent tests share.
 */
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { CoreConfig } from '../../src/config/load.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

/** A chat completions request as the fake model sees it. */
export type Req = { messages: Array<{ role: string; content: unknown }>; tools?: Array<{ function: { name: string } }> };
/** Whether the request offers the model `tool`. */
export const offers = (req: Req, tool: string) => (req.tools ?? []).some((t) => t.function.name === tool);
/** Whether `text` is anywhere in the request's messages. */
export const says = (req: Req, text: string) => JSON.stringify(req.messages).includes(text);

/** The fake model and a harness whose runner delegates to at most `maxPerRun` children a run; `retention`: the runner's, else the defaults. */
export async function startSubagentWorld(
  maxPerRun: number,
  retention?: Partial<CoreConfig['retention']>,
): Promise<{ ai: FakeOpenAIServer; h: RunnerHarness; close(): Promise<void> }> {
  const ai = await startFakeOpenAI();
  const h = await RunnerHarness.start();
  const config: CoreConfig = {
    ...h.ctx.config,
    subagents: { enabled: true, maxPerRun, timeoutSeconds: 60 },
    retention: { ...h.ctx.config.retention, ...retention },
  };
  h.runners.push(
    await startRunner(
      { ...h.ctx, config },
      {
        plugin: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: true }, maxRetries: 0 }),
        resolveOutbound: (cid) => (cid.startsWith('telegram:') ? h.outbound : undefined),
        lockDurationMs: 2000,
        stalledIntervalMs: 500,
        features: runnerFeatures(),
      },
    ),
  );
  return {
    ai,
    h,
    close: async () => {
      await h.close();
      await ai.close();
    },
  };
}
