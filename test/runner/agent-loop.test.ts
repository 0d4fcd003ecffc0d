/**
 * The local agent's loop with the AI SDK mock model and a hand-made
 * RunContext (no Redis): steering at turn boundaries, tool failures as data.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4Content, LanguageModelV4GenerateResult, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runAgentLoop } from '../../plugins/local-agent/loop.js';
import { RUN_REASON, STEP_LIMIT_MESSAGE } from '../../plugins/local-agent/outcomes.js';
import { type AgentTool, toToolSet } from '../../plugins/local-agent/tools.js';
import type { RunContext, StepRecord } from '../../runner/plugin.js';
import type { SteeringMode } from '../../src/protocol/types.js';
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';
import { deferred, waitFor } from './harness.js';

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** One scripted model step: text, or tool calls (then the step ends with `tool-calls`). */
interface Step {
  text?: string;
  calls?: Array<{ name: string; input?: unknown }>;
}

function parts(step: Step, index: number): LanguageModelV4StreamPart[] {
  const out: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }];
  if (step.text) {
    out.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: step.text }, { type: 'text-end', id: 't' });
  }
  for (const [i, c] of (step.calls ?? []).entries()) {
    out.push({ type: 'tool-call', toolCallId: `call-${index}-${i}`, toolName: c.name, input: JSON.stringify(c.input ?? {}) });
  }
  const calls = (step.calls ?? []).length > 0;
  out.push({ type: 'finish', finishReason: calls ? { unified: 'tool-calls', raw: 'tool_calls' } : { unified: 'stop', raw: 'stop' }, usage: USAGE });
  return out;
}

/** The same step as a whole answer (a call that is not streamed). */
function whole(step: Step, index: number): LanguageModelV4GenerateResult {
  const streamed = parts(step, index);
  const content: LanguageModelV4Content[] = [];
  if (step.text) content.push({ type: 'text', text: step.text });
  for (const p of streamed) if (p.type === 'tool-call') content.push(p);
  const finish = streamed.at(-1) as Extract<LanguageModelV4StreamPart, { type: 'finish' }>;
  return { content, finishReason: finish.finishReason, usage: finish.usage, warnings: [] };
}

/** A mock model that answers the scripted steps in order (then `done`), streamed or whole. */
function scriptedModel(steps: Step[]): MockLanguageModelV4 {
  let i = 0;
  return new MockLanguageModelV4({
    doStream: async () => {
      const index = i++;
      return { stream: convertArrayToReadableStream(parts(steps[index] ?? { text: 'done' }, index)) };
    },
    doGenerate: async () => {
      const index = i++;
      return whole(steps[index] ?? { text: 'done' }, index);
    },
  });
}

type Prompt = LanguageModelV4CallOptions['prompt'];

/** The texts of a request's user messages. */
function userTexts(prompt: Prompt): string[] {
  return prompt.filter((m) => m.role === 'user').map((m) => (m.content as Array<{ type: string; text?: string }>).map((p) => p.text ?? '').join(''));
}

/** Roles of a request, user messages shown by their text. */
function shape(prompt: Prompt): string[] {
  return prompt.map((m) => (m.role === 'user' ? `user:${userTexts([m])[0]}` : m.role));
}

/** The tool results of a request, by tool name. */
function toolOutputs(prompt: Prompt): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const p of m.content) if (p.type === 'tool-result') out[p.toolName] = p.output;
  }
  return out;
}

let seq = 100;
function message(text: string): SeqEntry<MessageReceived> {
  return { v: 1, kind: 'message.received', at: 0, updateKey: `t:${seq}`, sender: { id: 'u1' }, text, seq: seq++ };
}

/** A RunContext whose steering queue is `waiting`; `log` sees every pull. */
function fakeContext(waiting: Array<SeqEntry<MessageReceived>>, log: string[] = []) {
  const pulls: SteeringMode[] = [];
  const steps: StepRecord[] = [];
  const delivered: string[] = [];
  const ctx: RunContext = {
    run: { id: 'run-test', conversationId: 'telegram:1', attempt: 1 },
    history: [{ role: 'user', content: 'hi' }],
    inputs: [],
    steering: {
      async pull(mode = 'all') {
        pulls.push(mode);
        log.push('pull');
        return mode === 'one' ? waiting.splice(0, 1) : waiting.splice(0);
      },
    },
    state: { get: async () => undefined, set: async () => undefined },
    compaction: { atBoundary: async () => undefined, onOverflow: async () => undefined, observe: () => undefined },
    record: { step: async (step) => steps.push(step) },
    delivery: {
      message: async (text) => void delivered.push(text),
      delta: () => undefined,
      typing: () => undefined,
    },
    stop: { signal: new AbortController().signal, requested: () => undefined },
    logger: pino({ level: 'silent' }),
    agent: { model: { provider: 'openai-compatible', name: 'm', contextWindow: 128_000, outputReserve: 4096 } },
    features: {},
  };
  return { ctx, pulls, steps, delivered };
}

const noop: AgentTool = { name: 'noop', description: 'does nothing', inputSchema: z.object({}), execute: async () => ({ ok: true }) };

/** Lets pending callbacks, I/O and timers of 0 ms run (no wall-clock wait). */
async function flush(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

describe('runAgentLoop', () => {
  describe('steering at turn boundaries', () => {
    it('in one-at-a-time mode injects exactly one waiting message per boundary, in order', async () => {
      const model = scriptedModel([{ calls: [{ name: 'noop' }] }, { calls: [{ name: 'noop' }] }, { calls: [{ name: 'noop' }] }, { text: 'final' }]);
      const { ctx, pulls, delivered } = fakeContext([message('steer A'), message('steer B'), message('steer C')]);

      const result = await runAgentLoop(ctx, { model, tools: toToolSet([noop]), steeringMode: 'one' });

      expect(result).toEqual({ outcome: 'completed' });
      expect(pulls).toEqual(['one', 'one', 'one']);
      const requests = model.doGenerateCalls.map((c) => userTexts(c.prompt));
      expect(requests).toEqual([['hi'], ['hi', 'steer A'], ['hi', 'steer A', 'steer B'], ['hi', 'steer A', 'steer B', 'steer C']]);
      // Each injected message follows the tool result of the step before it.
      expect(shape(model.doGenerateCalls[1]!.prompt)).toEqual(['user:hi', 'assistant', 'tool', 'user:steer A']);
      expect(delivered).toEqual(['final']);
    });

    it('in all mode injects every waiting message at the first boundary', async () => {
      const model = scriptedModel([{ calls: [{ name: 'noop' }] }, { text: 'final' }]);
      const { ctx, pulls } = fakeContext([message('steer A'), message('steer B'), message('steer C')]);

      await runAgentLoop(ctx, { model, tools: toToolSet([noop]), steeringMode: 'all' });

      expect(pulls).toEqual(['all']);
      expect(userTexts(model.doGenerateCalls[1]!.prompt)).toEqual(['hi', 'steer A', 'steer B', 'steer C']);
    });

    it('pulls only after the whole tool batch has finished', async () => {
      const log: string[] = [];
      const slowGate = deferred();
      const fast: AgentTool = {
        name: 'fast',
        description: 'returns at once',
        inputSchema: z.object({}),
        async execute() {
          log.push('fast:start');
          log.push('fast:end');
          return { fast: true };
        },
      };
      const slow: AgentTool = {
        name: 'slow',
        description: 'returns when the test says so',
        inputSchema: z.object({}),
        async execute() {
          log.push('slow:start');
          await slowGate.promise;
          log.push('slow:end');
          return { slow: 'full value' };
        },
      };
      const model = scriptedModel([{ calls: [{ name: 'slow' }, { name: 'fast' }] }, { text: 'final' }]);
      const { ctx, pulls } = fakeContext([message('arrived during the batch')], log);

      const running = runAgentLoop(ctx, { model, tools: toToolSet([slow, fast]) });
      await waitFor(() => log.includes('fast:end') && log.includes('slow:start'), 5000, 'both tools started, fast done');
      await flush();
      expect(pulls).toEqual([]); // one tool of the batch still runs: no boundary yet
      slowGate.resolve();
      expect(await running).toEqual({ outcome: 'completed' });

      expect(log.indexOf('pull')).toBeGreaterThan(log.indexOf('slow:end'));
      expect(pulls).toEqual(['all']);
      const second = model.doGenerateCalls[1]!.prompt;
      expect(shape(second)).toEqual(['user:hi', 'assistant', 'tool', 'user:arrived during the batch']);
      expect(toolOutputs(second)).toEqual({
        slow: { type: 'json', value: { slow: 'full value' } },
        fast: { type: 'json', value: { fast: true } },
      });
    });
  });

  describe('durable tool calls', () => {
    it("records the step's tool calls, inputs included, before any of them runs", async () => {
      const log: string[] = [];
      const calls: StepRecord[] = [];
      const tool = (name: string): AgentTool => ({
        name,
        description: name,
        inputSchema: z.object({ amount: z.number() }),
        execute: async ({ amount }) => {
          log.push(`${name}:run`);
          return { amount };
        },
      });
      const model = scriptedModel([
        {
          text: 'On it. ',
          calls: [
            { name: 'refund', input: { amount: 30 } },
            { name: 'note', input: { amount: 1 } },
          ],
        },
        { text: 'done' },
      ]);
      const { ctx, steps } = fakeContext([], log);
      ctx.record.toolCalls = async (step) => {
        log.push('calls recorded');
        return calls.push(step);
      };

      expect(await runAgentLoop(ctx, { model, tools: toToolSet([tool('refund'), tool('note')]) })).toEqual({ outcome: 'completed' });

      expect(log.slice(0, 2)).toEqual(['calls recorded', 'refund:run']);
      expect(log).toContain('note:run');
      expect(calls).toHaveLength(1);
      expect(calls[0]!.finishReason).toBe('tool-calls');
      expect(calls[0]!.messages).toEqual([
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'On it. ' },
            { type: 'tool-call', toolCallId: 'call-0-0', toolName: 'refund', input: { amount: 30 } },
            { type: 'tool-call', toolCallId: 'call-0-1', toolName: 'note', input: { amount: 1 } },
          ],
        },
      ]);
      // The recorded step is the recorded calls followed by their results, in call order.
      expect(steps[0]!.messages[0]).toEqual(calls[0]!.messages[0]);
      expect(steps[0]!.messages[1]).toEqual({
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'call-0-0', toolName: 'refund', output: { type: 'json', value: { amount: 30 } } },
          { type: 'tool-result', toolCallId: 'call-0-1', toolName: 'note', output: { type: 'json', value: { amount: 1 } } },
        ],
      });
    });

    it('finishes an unfinished step from its recorded calls: runs them, records the step, asks the model only for the next one', async () => {
      const ran: unknown[] = [];
      const refund: AgentTool = {
        name: 'refund',
        description: 'refunds',
        inputSchema: z.object({ amount: z.number() }),
        execute: async (input) => {
          ran.push(input);
          return 'refunded';
        },
      };
      // The model's one request is for the step after the recorded one (which it already decided).
      const model = scriptedModel([{ text: 'done' }]);
      const { ctx, steps, delivered, pulls } = fakeContext([message('arrived meanwhile')]);
      let recordedAgain = false;
      ctx.record.toolCalls = async () => {
        recordedAgain = true;
        return 0;
      };
      ctx.record.unfinished = {
        finishReason: 'tool-calls',
        messages: [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'refund', input: { amount: 30 } }] }],
      };

      expect(await runAgentLoop(ctx, { model, tools: toToolSet([refund]) })).toEqual({ outcome: 'completed' });

      expect(ran).toEqual([{ amount: 30 }]);
      expect(recordedAgain).toBe(false);
      expect(model.doGenerateCalls).toHaveLength(1);
      // The step, then steering at its boundary, then the model's next step.
      expect(shape(model.doGenerateCalls[0]!.prompt)).toEqual(['user:hi', 'assistant', 'tool', 'user:arrived meanwhile']);
      expect(toolOutputs(model.doGenerateCalls[0]!.prompt)).toEqual({ refund: { type: 'text', value: 'refunded' } });
      expect(pulls).toEqual(['all']);
      expect(steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
      expect(delivered).toEqual(['done']);
    });
  });

  describe('tool failures', () => {
    it('turns a throwing tool and a timed-out tool into error results and goes on to a final answer', async () => {
      let hangSignal: AbortSignal | undefined;
      const boom: AgentTool = {
        name: 'boom',
        description: 'throws',
        inputSchema: z.object({}),
        async execute() {
          throw new Error('kaboom');
        },
      };
      const hang: AgentTool = {
        name: 'hang',
        description: 'never returns',
        inputSchema: z.object({}),
        timeoutMs: 50,
        execute: (_input, { signal }) => {
          hangSignal = signal;
          return new Promise(() => undefined);
        },
      };
      const model = scriptedModel([{ calls: [{ name: 'boom' }, { name: 'hang' }] }, { text: 'recovered' }]);
      const { ctx, steps, delivered } = fakeContext([]);

      const result = await runAgentLoop(ctx, { model, tools: toToolSet([boom, hang]) });

      expect(result).toEqual({ outcome: 'completed' });
      expect(model.doGenerateCalls).toHaveLength(2);
      expect(toolOutputs(model.doGenerateCalls[1]!.prompt)).toEqual({
        boom: { type: 'json', value: { error: 'tool boom failed: kaboom' } },
        hang: { type: 'json', value: { error: 'tool hang failed: timed out after 50 ms' } },
      });
      expect(hangSignal?.aborted).toBe(true);
      expect(steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
      expect(delivered).toEqual(['recovered']);
    });
  });
});

describe('the step limit (maxSteps)', () => {
  it('stops a model that keeps calling tools after maxSteps steps, failed with a notice and no answer', async () => {
    const model = scriptedModel(Array.from({ length: 10 }, () => ({ calls: [{ name: 'noop' }] })));
    const { ctx, steps, delivered } = fakeContext([]);

    const result = await runAgentLoop(ctx, { model, tools: toToolSet([noop]), maxSteps: 3 });

    expect(result).toEqual({ outcome: 'failed', reason: RUN_REASON.stepLimit, notice: STEP_LIMIT_MESSAGE, final: true });
    expect(model.doGenerateCalls).toHaveLength(3);
    expect(steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'tool-calls', 'tool-calls']);
    expect(delivered).toEqual([]);
  });

  it('lets an answer on the last allowed step through', async () => {
    const model = scriptedModel([{ calls: [{ name: 'noop' }] }, { calls: [{ name: 'noop' }] }, { text: 'just in time' }]);
    const { ctx, delivered } = fakeContext([]);

    expect(await runAgentLoop(ctx, { model, tools: toToolSet([noop]), maxSteps: 3 })).toEqual({ outcome: 'completed' });
    expect(delivered).toEqual(['just in time']);
  });
});
