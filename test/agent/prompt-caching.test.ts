/**
 * Prompt caching through the real providers: OpenAI requests carry one stable
 * prompt cache key per conversation (and summary requests none); Anthropic
 * requests carry cache breakpoints on the system prompt, the last tool, the
 * checkpoint summary and the last message.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import type { ModelMessage } from 'ai';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { promptCacheKey } from '../../plugins/local-agent/caching.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { runAgentLoop } from '../../plugins/local-agent/loop.js';
import { toToolSet } from '../../plugins/local-agent/tools.js';
import { SUMMARY_HEADER } from '../../runner/compaction/checkpoint.js';
import type { RunContext } from '../../runner/plugin.js';
import { startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { CID, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();

const isSummarizer = (body: any): boolean => String(body?.messages?.[0]?.content ?? '').startsWith('You maintain the running summary');

describe('OpenAI prompt caching', () => {
  it('sends one stable cache key per conversation, never the conversation id, and none on summary requests', async () => {
    const fake = await startFakeOpenAI({ promptCache: true });
    try {
      const h = await RunnerHarness.start();
      t.h = h;
      h.ctx.config.model.baseURL = fake.url; // provider openai: the agent and the summarizer come from the runner's model factory
      await h.startRunner(createLocalAgentPlugin({ builtins: { currentTime: false } }));
      const say = async (text: string, conversationId = CID) => {
        const r = (await h.ingest(text, { conversationId })) as { runId: string };
        await h.runEnded(r.runId, 10_000, conversationId);
        await h.idle(10_000, conversationId);
      };
      for (let i = 1; i <= 5; i++) await say(`message ${i}: ${'a long question about the nightly import and its batch sizes '.repeat(40)}`);
      await say('hello from elsewhere', 'telegram:7');
      const r = await h.dispatch.requestCompaction(h.source());
      if (r.kind !== 'new-run') throw new Error(`expected a compaction run, got ${r.kind}`);
      await h.queue.enqueue(CID, r.runId);
      await h.runEnded(r.runId);

      const agent = fake.requests.filter((q) => !isSummarizer(q.body));
      const summaries = fake.requests.filter((q) => isSummarizer(q.body));
      expect(agent).toHaveLength(6);
      expect(summaries).toHaveLength(1);
      const keys = agent.map((q) => q.body.prompt_cache_key);
      expect(new Set(keys.slice(0, 5))).toEqual(new Set([promptCacheKey(CID)]));
      expect(keys[5]).toBe(promptCacheKey('telegram:7'));
      expect(keys[5]).not.toBe(keys[0]);
      expect(keys.join()).not.toContain('42');
      expect(summaries[0]!.body.prompt_cache_key).toBeUndefined();

      // The fake reports cached prefixes as OpenAI does, and the record keeps them with the step's usage.
      const cached = (await h.entries('model.step')).map((s) => s.usage?.cachedInputTokens ?? 0);
      expect(cached[0]).toBe(0);
      expect(cached[4]).toBeGreaterThan(1024);
    } finally {
      await fake.close();
    }
  });
});

/** A minimal Anthropic Messages stream answering `text`. */
const anthropicStream = (text: string): Response => anthropicMessage('msg_1', 'end_turn', { type: 'text', text: '' }, { type: 'text_delta', text });

/** A minimal Anthropic Messages stream calling tool `name` with no input. */
const anthropicToolCall = (name: string): Response =>
  anthropicMessage('msg_2', 'tool_use', { type: 'tool_use', id: 'toolu_1', name, input: {} }, { type: 'input_json_delta', partial_json: '{}' });

/** One Anthropic Messages stream with a single content block: its start, one delta, and the stop reason. */
function anthropicMessage(id: string, stopReason: string, block: Record<string, unknown>, delta: Record<string, unknown>): Response {
  const events = [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model: 'claude-sonnet-4-5',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 1 },
        },
      },
    ],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: block }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta }],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 2 } }],
    ['message_stop', { type: 'message_stop' }],
  ] as const;
  const body = events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

const tool = (name: string): AgentTool => ({ name, description: `the ${name} tool`, inputSchema: z.object({}), execute: async () => ({ ok: true }) });

function loopContext(history: ModelMessage[], delivered: string[]): RunContext {
  return {
    run: { id: 'run-cache', conversationId: 'telegram:1', attempt: 1 },
    history,
    inputs: [],
    steering: { pull: async () => [] },
    state: { get: async () => undefined, set: async () => undefined },
    compaction: { atBoundary: async () => undefined, onOverflow: async () => undefined, observe: () => undefined },
    record: { step: async () => 1 },
    delivery: { message: async (text) => void delivered.push(text), delta: () => undefined, typing: () => undefined },
    stop: { signal: new AbortController().signal, requested: () => undefined },
    logger: pino({ level: 'silent' }),
    agent: { model: { provider: 'anthropic', name: 'claude-sonnet-4-5', contextWindow: 200_000, outputReserve: 64_000 } },
    features: {},
  };
}

describe('Anthropic prompt caching', () => {
  it('puts breakpoints on the system prompt, the last tool, the checkpoint summary and the last message (four in all)', async () => {
    const bodies: any[] = [];
    const fetchStub: typeof fetch = async (_url, init) => {
      bodies.push(JSON.parse(String(init?.body)));
      return anthropicStream('Noted.');
    };
    const model = createAnthropic({ apiKey: 'k', fetch: fetchStub })('claude-sonnet-4-5');
    const history: ModelMessage[] = [
      { role: 'user', content: `${SUMMARY_HEADER}\nThe user asked about imports.` },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: [{ type: 'text', text: 'first answer' }] },
      { role: 'user', content: 'second question' },
    ];
    const delivered: string[] = [];

    // Streamed: the stub answers with Anthropic's event stream.
    await runAgentLoop(loopContext(history, delivered), {
      model,
      tools: toToolSet([tool('alpha'), tool('beta')]),
      system: 'You are terse.',
      maxRetries: 0,
      streaming: true,
    });

    expect(delivered).toEqual(['Noted.']);
    const [body] = bodies;
    const ephemeral = { type: 'ephemeral' };
    expect(body.system).toEqual([{ type: 'text', text: 'You are terse.', cache_control: ephemeral }]);
    expect(body.tools.map((x: any) => [x.name, x.cache_control])).toEqual([
      ['alpha', undefined],
      ['beta', ephemeral],
    ]);
    const lastPart = (m: any) => m.content.at(-1);
    // Anthropic merges adjacent user messages: the summary is the first block of the first message.
    expect(body.messages[0].content[0].text.startsWith(SUMMARY_HEADER)).toBe(true);
    expect(body.messages[0].content[0].cache_control).toEqual(ephemeral);
    expect(lastPart(body.messages.at(-1)).text).toBe('second question');
    expect(lastPart(body.messages.at(-1)).cache_control).toEqual(ephemeral);
    expect(JSON.stringify(body).split('"cache_control"').length - 1).toBe(4);
    // The loop's own history is left as it was: breakpoints are per request.
    expect(history.some((m) => m.providerOptions !== undefined)).toBe(false);
  });
});

describe('Anthropic prompt caching with a tool set that grows mid-run', () => {
  it('offers the tool that joined (as read_artifact joins after a large result) on the next request, with the breakpoint on it', async () => {
    const bodies: any[] = [];
    const fetchStub: typeof fetch = async (_url, init) => {
      bodies.push(JSON.parse(String(init?.body)));
      return bodies.length === 1 ? anthropicToolCall('alpha') : anthropicStream('Done.');
    };
    const model = createAnthropic({ apiKey: 'k', fetch: fetchStub })('claude-sonnet-4-5');
    const grows: AgentTool = {
      ...tool('alpha'),
      execute: async () => {
        Object.assign(tools, toToolSet([tool('gamma')]));
        return { ok: true };
      },
    };
    const tools = toToolSet([grows, tool('beta')]);
    const delivered: string[] = [];

    await runAgentLoop(loopContext([{ role: 'user', content: 'go' }], delivered), { model, tools, system: 'You are terse.', maxRetries: 0, streaming: true });

    expect(delivered).toEqual(['Done.']);
    expect(bodies).toHaveLength(2);
    const ephemeral = { type: 'ephemeral' };
    expect(bodies[0].tools.map((x: any) => [x.name, x.cache_control])).toEqual([
      ['alpha', undefined],
      ['beta', ephemeral],
    ]);
    expect(bodies[1].tools.map((x: any) => [x.name, x.cache_control])).toEqual([
      ['alpha', undefined],
      ['beta', undefined],
      ['gamma', ephemeral],
    ]);
  });
});
