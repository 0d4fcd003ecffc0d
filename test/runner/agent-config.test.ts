/**
 * The runner's default agent is built from its `agents.local-agent` config section (what
 * `npm start` runs): system prompt, built-in tools, streaming to channels that
 * stream. Through the real provider against the fake OpenAI server.
 */

import { describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { runnerFeatures } from '../../app/features/index.js';
import { WEB_CONTENT_RULES } from '../../plugins/local-agent/external-content.js';
import localAgent from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import { createModel } from '../../runner/model.js';
import type { AppContext } from '../../src/app-context.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { CID, perTestModel, RunnerHarness } from './harness.js';

const t = perTestModel();

/** A Telegram-like outbound that can edit, streaming every 10 ms; records sends and edits. */
class StreamingOutbound implements ChannelOutbound {
  readonly channelId = 'telegram';
  readonly maxMessageChars = 4096;
  readonly sent: string[] = [];
  readonly edits: string[] = [];
  async send(_cid: string, text: string) {
    this.sent.push(text);
    return { messageId: `m${this.sent.length}` };
  }
  async edit(_cid: string, _messageId: string, text: string) {
    this.edits.push(text);
  }
  streamEditIntervalMs() {
    return 10;
  }
}

/** Starts a runner with the local agent built by its definition from a config whose agent settings come from `env`. */
async function runnerFromConfig(env: Record<string, string>, outbound: ChannelOutbound): Promise<RunnerHarness> {
  const harness = await RunnerHarness.start();
  const config = readConfig({ env });
  const model = { ...harness.ctx.config.model, baseURL: t.fake.url };
  const ctx: AppContext = { ...harness.ctx, config: { ...harness.ctx.config, model } };
  const plugin = await localAgent.create(localAgent.configSchema.parse(config.agents['local-agent']), {
    logger: harness.ctx.logger,
    model,
    createModel: (s = model) => createModel(s),
  });
  harness.runners.push(
    await startRunner(ctx, { plugin, resolveOutbound: () => outbound, lockDurationMs: 2000, stalledIntervalMs: 500, features: runnerFeatures() }),
  );
  return harness;
}

/** The agent's schedule tools, on by default (`schedules.enabled`). */
const SCHEDULE_TOOLS = ['schedule_cancel', 'schedule_create', 'schedule_list'];
const toolNames = (i: number): string[] => (t.fake.requests[i]!.body.tools ?? []).map((t: { function: { name: string } }) => t.function.name).sort();
const systemPrompt = (i: number): unknown => t.fake.requests[i]!.body.messages.find((m: { role: string }) => m.role === 'system')?.content;

describe('the default agent from config', () => {
  it('uses the configured system prompt and built-in tools', async () => {
    const out = new StreamingOutbound();
    t.h = await runnerFromConfig(
      { STEERBOT_SYSTEM_PROMPT: 'You are Zed, terse.', STEERBOT_AGENT_HTTP_FETCH: 'true', STEERBOT_AGENT_CURRENT_TIME: 'false' },
      out,
    );
    t.fake.script([{ text: 'Hi.' }]);
    await t.h.ingest('hello');
    await t.h.idle(10_000, CID);
    // http_fetch brings web content: the prompt says once that it is data, and that answers cite its URLs.
    expect(systemPrompt(0)).toBe(`You are Zed, terse.\n\n${WEB_CONTENT_RULES}`);
    expect(toolNames(0)).toEqual(['http_fetch', ...SCHEDULE_TOOLS]);
  });

  it('has the clock and no network tool, and streams into channels that stream, by default', async () => {
    const out = new StreamingOutbound();
    t.h = await runnerFromConfig({}, out);
    const answer = 'one two three four five six seven eight';
    t.fake.script([{ text: answer, chunkDelayMs: 30 }]);
    await t.h.ingest('count please');
    await t.h.idle(10_000, CID);
    expect(toolNames(0)).toEqual(['current_time', ...SCHEDULE_TOOLS]);
    expect(systemPrompt(0)).toEqual(expect.stringContaining('helpful assistant'));
    // One message, shown early and edited up to the full answer.
    expect(out.sent).toHaveLength(1);
    expect(out.sent[0]!.length).toBeLessThan(answer.length);
    expect(out.edits.at(-1)).toBe(answer);
  });

  it('sends whole messages only when agent.streaming is false', async () => {
    const out = new StreamingOutbound();
    t.h = await runnerFromConfig({ STEERBOT_AGENT_STREAMING: 'false' }, out);
    const answer = 'one two three four five six seven eight';
    t.fake.script([{ text: answer, chunkDelayMs: 30 }]);
    await t.h.ingest('count please');
    await t.h.idle(10_000, CID);
    expect(out.sent).toEqual([answer]);
    expect(out.edits).toEqual([]);
  });
});
