/**
 * Model calls whose deltas reach nobody are asked whole, end to end through
 * the real OpenAI-compatible provider against the fake server: with the
 * agent's streaming off, or on a channel that does not stream, the request
 * has no `stream: true`, and the run records the same step a streamed call
 * records; tool calls are still run by the agent's own loop.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { askAndSettle, fakeModel, onStreamingChannel, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();

/** How the run's answer can reach the person: the agent's `streaming`, and whether the channel streams. */
type Setup = { streaming: boolean; channelStreams: boolean };

async function start(s: Setup, tools: AgentTool[] = []): Promise<RunnerHarness> {
  const plugin = createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false }, maxRetries: 0, streaming: s.streaming, tools });
  t.h = await RunnerHarness.start({ plugin: s.channelStreams ? onStreamingChannel(plugin) : plugin });
  return t.h;
}

/** The recorded steps, without what differs between runs. */
async function steps(h: RunnerHarness) {
  return (await h.entries('model.step')).map((s) => ({ messages: s.messages, finishReason: s.finishReason, usage: s.usage }));
}

const lookup: AgentTool<{ city: string }> = {
  name: 'lookup',
  description: 'the weather in a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, celsius: 21 }),
};

describe('a model call nobody sees stream', () => {
  for (const s of [
    { streaming: false, channelStreams: true },
    { streaming: true, channelStreams: false },
  ])
    it(`is asked whole (agent streaming ${s.streaming}, channel streams ${s.channelStreams}) and records the step a streamed call records`, async () => {
      t.fake.script(() => ({ text: 'The whole answer.', usage: { prompt_tokens: 30, completion_tokens: 4 } }));
      const h = await start(s);
      expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'completed' });
      expect(t.fake.requests.map((r) => r.body.stream === true)).toEqual([false]);
      expect(h.outbound.texts).toEqual(['The whole answer.']);
      const whole = await steps(h);
      await h.close();
      t.h = undefined;

      const streamed = await start({ streaming: true, channelStreams: true });
      expect(await askAndSettle(streamed, 'hello?')).toMatchObject({ outcome: 'completed' });
      expect(t.fake.requests.map((r) => r.body.stream === true)).toEqual([false, true]);
      expect(await steps(streamed)).toEqual(whole);
      expect(whole).toEqual([
        {
          messages: [{ role: 'assistant', content: [{ type: 'text', text: 'The whole answer.' }] }],
          finishReason: 'stop',
          usage: { inputTokens: 30, outputTokens: 4, totalTokens: 34, cachedInputTokens: 0 },
        },
      ]);
    });

  it("leaves the tool calls of a whole answer to the agent's loop, which runs them and asks again", async () => {
    t.fake.script([{ toolCalls: [{ name: 'lookup', args: { city: 'Oslo' } }] }, { text: 'It is 21 degrees in Oslo.' }]);
    const h = await start({ streaming: false, channelStreams: false }, [lookup as AgentTool]);

    expect(await askAndSettle(h, 'weather in Oslo?')).toMatchObject({ outcome: 'completed' });
    expect(t.fake.requests.map((r) => r.body.stream === true)).toEqual([false, false]);
    expect(h.outbound.texts).toEqual(['It is 21 degrees in Oslo.']);
    // The tool ran once, between the calls: its result is in the second request.
    const result = t.fake.requests[1]!.body.messages.find((m: { role: string }) => m.role === 'tool');
    expect(JSON.parse(result.content)).toEqual({ city: 'Oslo', celsius: 21 });
    const [first] = await h.entries('model.step');
    expect(first!.finishReason).toBe('tool-calls');
    expect(first!.messages.map((m) => m.role)).toEqual(['assistant', 'tool']);
  });
});
