/**
 * `model.api: responses`: the `openai` provider calls OpenAI's Responses API
 * (`POST /v1/responses`) instead of chat completions. End to end through the
 * real provider against the fake OpenAI server: streamed answers, a tool call
 * and its result sent back as Responses input, usage in the record, a
 * non-streamed call; and the setting where a model's settings change, refused
 * on any other provider.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateText } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readConfig } from '../../app/config.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { toToolSet } from '../../plugins/local-agent/tools.js';
import { createModel } from '../../runner/model.js';
import type { ModelSettings } from '../../runner/plugin.js';
import { ConfigError } from '../../src/errors.js';
import { loadProfiles } from '../../src/people/profiles.js';
import { CID, onStreamingChannel, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();

const weather: AgentTool<{ city: string }> = {
  name: 'weather',
  description: 'the weather in a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, celsius: 21 }),
};

/** A harness whose runner's model is `openai` on the Responses API at the fake; `streamed`: on a channel that streams, the agent streaming. */
async function responsesRunner(streamed = false): Promise<RunnerHarness> {
  const h = await RunnerHarness.start();
  t.h = h;
  h.ctx.config.model = { ...h.ctx.config.model, provider: 'openai', api: 'responses', baseURL: t.fake.url };
  const agent = createLocalAgentPlugin({ builtins: { currentTime: false }, tools: [weather as AgentTool], maxRetries: 0, streaming: streamed });
  await h.startRunner(streamed ? onStreamingChannel(agent) : agent);
  return h;
}

async function ask(h: RunnerHarness, text: string) {
  const r = (await h.ingest(text)) as { runId: string };
  return h.runEnded(r.runId);
}

describe('model.api responses', () => {
  it('streams the answer from /v1/responses and records the usage of the step', async () => {
    t.fake.script([{ text: 'Hello from the Responses API.', usage: { prompt_tokens: 42, completion_tokens: 7 } }]);
    const h = await responsesRunner(true);

    expect(await ask(h, 'hi')).toMatchObject({ outcome: 'completed' });
    expect(h.outbound.texts).toEqual(['Hello from the Responses API.']);
    expect(t.fake.requests.map((r) => r.api)).toEqual(['responses']);
    const [req] = t.fake.requests;
    expect(req!.body).toMatchObject({ stream: true, model: h.ctx.config.model.name });
    expect(req!.body.input.at(-1)).toMatchObject({ role: 'user' });
    expect(JSON.stringify(req!.body.input.at(-1))).toContain('hi');
    const [step] = await h.entries('model.step');
    expect(step!.usage).toMatchObject({ inputTokens: 42, outputTokens: 7, totalTokens: 49 });
  });

  it('runs a tool call, sends its result back as Responses input, then answers', async () => {
    t.fake.script([
      { toolCalls: [{ id: 'call_w1', name: 'weather', args: { city: 'Oslo' } }], usage: { prompt_tokens: 30, completion_tokens: 5 } },
      { text: 'It is 21 °C in Oslo.', usage: { prompt_tokens: 60, completion_tokens: 9 } },
    ]);
    const h = await responsesRunner();

    expect(await ask(h, 'weather in Oslo?')).toMatchObject({ outcome: 'completed' });
    expect(h.outbound.texts).toEqual(['It is 21 °C in Oslo.']);
    expect(t.fake.requests.map((r) => r.api)).toEqual(['responses', 'responses']);
    expect(t.fake.requests[0]!.body.tools).toContainEqual(expect.objectContaining({ type: 'function', name: 'weather' }));
    const input: any[] = t.fake.requests[1]!.body.input;
    expect(input).toContainEqual(expect.objectContaining({ type: 'function_call', call_id: 'call_w1', name: 'weather', arguments: '{"city":"Oslo"}' }));
    const output = input.find((i) => i.type === 'function_call_output');
    expect(output).toMatchObject({ call_id: 'call_w1' });
    expect(JSON.stringify(output.output)).toContain('21');
    const steps = await h.entries('model.step');
    expect(steps.map((s) => s.usage)).toEqual([
      expect.objectContaining({ inputTokens: 30, outputTokens: 5 }),
      expect.objectContaining({ inputTokens: 60, outputTokens: 9 }),
    ]);
  });

  it('answers a non-streamed call from the response object, tool calls and usage included', async () => {
    t.fake.script([
      { toolCalls: [{ id: 'call_n1', name: 'weather', args: { city: 'Rome' } }], usage: { prompt_tokens: 11, completion_tokens: 3 } },
      { text: 'Sunny.' },
    ]);
    const settings: ModelSettings = {
      provider: 'openai',
      api: 'responses',
      name: 'gpt-4o',
      apiKey: 'k',
      baseURL: t.fake.url,
      contextWindow: 128_000,
      outputReserve: 4096,
    };
    const model = createModel(settings);

    const first = await generateText({ model, prompt: 'weather in Rome?', tools: toToolSet([weather as AgentTool]) });
    expect(first.toolCalls).toEqual([expect.objectContaining({ toolCallId: 'call_n1', toolName: 'weather', input: { city: 'Rome' } })]);
    expect(first.usage).toMatchObject({ inputTokens: 11, outputTokens: 3 });
    expect((await generateText({ model, prompt: 'and now?' })).text).toBe('Sunny.');
    expect(t.fake.requests.map((r) => [r.api, r.body.stream])).toEqual([
      ['responses', undefined],
      ['responses', undefined],
    ]);
  });

  it('is not the default: the openai provider calls chat completions', async () => {
    const model = createModel({ provider: 'openai', name: 'gpt-4o', apiKey: 'k', baseURL: t.fake.url, contextWindow: 128_000, outputReserve: 4096 });
    expect((await generateText({ model, prompt: 'hi' })).text).toBe('ok');
    expect(t.fake.requests.map((r) => r.api)).toEqual(['chat']);
  });
});

describe('model.api in the settings', () => {
  it('is read from STEERBOT_MODEL_API; a fallback on the same provider inherits it, one on another does not', () => {
    expect(readConfig({ env: { OPENAI_API_KEY: 'k', STEERBOT_MODEL_API: 'responses' } }).model.api).toBe('responses');
    const config = readConfigWith({
      model: {
        api: 'responses',
        fallbacks: [{ name: 'gpt-4o' }, { name: 'gpt-4.1', api: 'chat' }, { provider: 'anthropic', name: 'claude-sonnet-4-5', apiKey: 'a' }],
      },
    });
    expect(config.model.fallbacks!.map((f) => f.api)).toEqual(['responses', 'chat', undefined]);
  });

  it('is refused on another provider than openai, naming the field', () => {
    for (const [json, path] of [
      [{ model: { provider: 'openai-compatible', baseURL: 'http://localhost:11434/v1', name: 'llama', contextWindow: 8192, api: 'responses' } }, 'model.api'],
      [{ model: { fallbacks: [{ provider: 'anthropic', name: 'claude-sonnet-4-5', apiKey: 'a', api: 'responses' }] } }, 'model.fallbacks.0.api'],
    ] as const) {
      expect(issuesOf(() => readConfigWith(json))).toContainEqual({ path, message: expect.stringMatching(/needs provider openai/) });
    }
    expect(() => readConfigWith({ model: { api: 'messages' } })).toThrow(ConfigError);
    expect(() =>
      createModel({ provider: 'anthropic', api: 'responses', name: 'claude-sonnet-4-5', apiKey: 'a', contextWindow: 200_000, outputReserve: 4096 }),
    ).toThrow(ConfigError);
  });

  it("is a profile's and a /model choice's to change, and refused there on another provider", async () => {
    const base = readConfigWith({}).model;
    const profiles = await loadProfiles(base, { fast: { model: { api: 'responses' } } }, [{ profile: 'fast', chat: CID }], {
      big: { name: 'gpt-4.1', api: 'responses' },
    });
    expect(profiles.resolve(CID).model.api).toBe('responses');
    expect(profiles.resolve('telegram:other').models?.big?.api).toBe('responses');

    const refused = await loadProfiles(base, { claude: { model: { provider: 'anthropic', apiKey: 'a', name: 'claude-sonnet-4-5', api: 'responses' } } }, [], {
      gemini: { provider: 'google', apiKey: 'g', name: 'gemini-2.5-pro', api: 'responses' },
    }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).issues.map((i) => i.path).sort()).toEqual(['models.gemini.api', 'profiles.claude.model.api']);
  });
});

const dir = mkdtempSync(join(tmpdir(), 'steerbot-responses-'));

/** The configuration of a config file holding `json`, with the OpenAI key in the environment. */
function readConfigWith(json: unknown) {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(json));
  return readConfig({ file, env: { OPENAI_API_KEY: 'k' } });
}

/** The issues of the ConfigError `read` throws. */
function issuesOf(read: () => unknown) {
  try {
    read();
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  throw new Error('expected a ConfigError');
}
