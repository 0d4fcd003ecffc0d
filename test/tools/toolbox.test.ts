/**
 * The toolbox's call wrapper with a hand-made RunContext (no Redis): time
 * limits, stop requests, failures as envelopes, results bounded without an
 * artifact store, and the journal's decisions applied.
 */
import type { Schema, ToolSet } from 'ai';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { memoryTools } from '../../plugins/local-agent/memory-tools.js';
import { ToolFailure } from '../../plugins/local-agent/tool-errors.js';
import { Toolbox } from '../../plugins/local-agent/toolbox.js';
import type { AgentTool } from '../../plugins/local-agent/tools.js';
import type { RunContext, RunMemory, ToolCallClaim, ToolCallJournal } from '../../runner/plugin.js';

function context(extra: Partial<RunContext> = {}, signal = new AbortController().signal): RunContext {
  return {
    run: { id: 'run-test', conversationId: 'telegram:1', attempt: 1 },
    history: [],
    inputs: [],
    steering: { pull: async () => [] },
    state: { get: async () => undefined, set: async () => undefined },
    compaction: { atBoundary: async () => undefined, onOverflow: async () => undefined, observe: () => undefined },
    record: { step: async () => 1 },
    delivery: { message: async () => undefined, delta: () => undefined, typing: () => undefined },
    stop: { signal, requested: () => undefined },
    logger: pino({ level: 'silent' }),
    agent: { model: { provider: 'openai-compatible', name: 'm', contextWindow: 128_000, outputReserve: 4096 } },
    features: {},
    ...extra,
  };
}

/** Another run of the same conversation. */
const RUN_2 = { id: 'run-2', conversationId: 'telegram:1', attempt: 1 };

const exec = (set: ToolSet, name: string, input: unknown = {}, toolCallId = 'c1') =>
  (set[name]!.execute as unknown as (i: unknown, o: { toolCallId: string; messages: [] }) => Promise<unknown>)(input, { toolCallId, messages: [] });

const tool = (name: string, execute: AgentTool['execute'], extra: Partial<AgentTool> = {}): AgentTool => ({
  name,
  description: name,
  inputSchema: z.object({}).passthrough(),
  execute,
  ...extra,
});

describe('Toolbox', () => {
  it('hands the SDK one schema per tool input schema across runs, converted to JSON Schema once, that still validates', async () => {
    const input = z.object({ city: z.string().describe('A city') });
    const t = tool('weather', async () => 'sunny', { inputSchema: input });
    const [a, b] = [await new Toolbox().toolSet(context(), [t]), await new Toolbox().toolSet(context({ run: RUN_2 }), [t])];
    const schema = a.weather!.inputSchema as unknown as Schema<unknown>;
    expect(b.weather!.inputSchema).toBe(schema);
    expect(schema.jsonSchema).toMatchObject({ type: 'object', properties: { city: { type: 'string', description: 'A city' } }, required: ['city'] });
    expect(await schema.jsonSchema).toBe(await schema.jsonSchema);
    expect(await schema.validate!({ city: 'Oslo' })).toEqual({ success: true, value: { city: 'Oslo' } });
    expect(await schema.validate!({ city: 3 })).toMatchObject({ success: false });
  });

  it('offers the memory tools with the same input schemas on every run (one per note size limit), so their JSON Schemas are made once', async () => {
    const memory = (maxNoteChars: number): RunMemory => ({
      maxNoteChars,
      save: async () => Promise.reject(new Error('not called')),
      search: async () => [],
      delete: async () => false,
      promptNotes: async () => ({ notes: [], total: 0 }),
    });
    const [a, b] = [memoryTools(context({ features: { memory: memory(300) } })), memoryTools(context({ run: RUN_2, features: { memory: memory(300) } }))];
    expect(a.map((t) => t.name)).toEqual(['memory_save', 'memory_search', 'memory_delete']);
    expect(b.map((t) => t.inputSchema)).toEqual(a.map((t) => t.inputSchema));
    for (const [i, t] of a.entries()) expect(b[i]!.inputSchema).toBe(t.inputSchema);
    const [sa, sb] = [await new Toolbox().toolSet(context(), a), await new Toolbox().toolSet(context({ run: RUN_2 }), b)];
    for (const name of ['memory_save', 'memory_search', 'memory_delete']) expect(sb[name]!.inputSchema).toBe(sa[name]!.inputSchema);
    // Another size limit is another save schema, with its own bound.
    const other = memoryTools(context({ features: { memory: memory(20) } }))[0]!.inputSchema as z.ZodType;
    expect(other).not.toBe(a[0]!.inputSchema);
    expect(other.safeParse({ text: 'x'.repeat(21) }).success).toBe(false);
    expect((a[0]!.inputSchema as z.ZodType).safeParse({ text: 'x'.repeat(21) }).success).toBe(true);
  });

  it('ends a call at its time limit with a timeout envelope, aborting the tool', async () => {
    let seen: AbortSignal | undefined;
    const slow = tool(
      'slow',
      (_i, { signal }) => {
        seen = signal;
        return new Promise(() => undefined);
      },
      { timeoutMs: 30 },
    );
    const set = await new Toolbox().toolSet(context(), [slow]);
    expect(await exec(set, 'slow')).toEqual({ error: { tool: 'slow', category: 'timeout', message: 'the tool did not finish in time' } });
    expect(seen?.aborted).toBe(true);
  });

  it('ends a call on a stop request with an aborted envelope', async () => {
    const ac = new AbortController();
    const hang = tool('hang', () => new Promise(() => undefined));
    const set = await new Toolbox().toolSet(context({}, ac.signal), [hang]);
    const p = exec(set, 'hang');
    ac.abort('stop');
    expect(await p).toMatchObject({ error: { tool: 'hang', category: 'aborted' } });
  });

  it("passes a ToolFailure's own message to the model, secrets redacted", async () => {
    const t = tool('lookup', async () => {
      throw new ToolFailure('not_found', 'no customer 42, token=abcdef123456');
    });
    const set = await new Toolbox().toolSet(context(), [t]);
    expect(await exec(set, 'lookup')).toEqual({ error: { tool: 'lookup', category: 'not_found', message: 'no customer 42, token=[redacted]' } });
  });

  it('cuts a large result to a preview when no artifact store is given, and offers no read_artifact', async () => {
    const set = await new Toolbox({ maxResultChars: 1000 }).toolSet(context(), [tool('big', async () => 'z'.repeat(5000))]);
    expect(Object.keys(set)).toEqual(['big']);
    expect(await exec(set, 'big')).toEqual({ truncated: true, chars: 5000, preview: 'z'.repeat(1000) });
  });

  it('follows the journal: a replay returns the recorded result and an unknown outcome is reported, both without executing', async () => {
    let runs = 0;
    const claims: ToolCallClaim[] = [
      { kind: 'replay', output: { v: 'recorded' }, status: 'ok' },
      { kind: 'unknown' },
      { kind: 'run', idempotencyKey: 'k-1', rerun: true },
    ];
    const completed: unknown[] = [];
    const journal: ToolCallJournal = { claim: async () => claims.shift()!, completed: async (_c, r) => void completed.push(r) };
    let key: string | undefined;
    const t = tool('pay', async (_i, { call }) => {
      key = call?.idempotencyKey;
      return ++runs;
    });
    const set = await new Toolbox().toolSet(context({ features: { toolCalls: journal } }), [t]);
    expect(await exec(set, 'pay')).toEqual({ v: 'recorded' });
    expect(await exec(set, 'pay')).toMatchObject({ error: { tool: 'pay', category: 'outcome_unknown' } });
    expect(runs).toBe(0);
    expect(await exec(set, 'pay')).toBe(1);
    expect(key).toBe('k-1');
    expect(completed).toEqual([{ status: 'ok', output: 1 }]);
  });

  it('offers read_artifact when the history already references an artifact', async () => {
    const history = [
      {
        role: 'tool' as const,
        content: [
          {
            type: 'tool-result' as const,
            toolCallId: 'x',
            toolName: 'big',
            output: { type: 'json' as const, value: { artifact: { id: 'a_0123456789abcdef', chars: 9 }, preview: 'p' } },
          },
        ],
      },
    ];
    const store = { put: async () => ({ id: 'a_1', chars: 1 }), read: async () => ({ text: 'abc', chars: 9 }) };
    const set = await new Toolbox().toolSet(context({ history, features: { artifacts: store } }), []);
    expect(Object.keys(set)).toEqual(['read_artifact']);
    expect(await exec(set, 'read_artifact', { id: 'a_0123456789abcdef', offset: 3 })).toEqual({
      id: 'a_0123456789abcdef',
      offset: 3,
      chars: 9,
      text: 'abc',
      nextOffset: 6,
    });
  });
});
