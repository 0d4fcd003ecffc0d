/**
 * Tools of the local agent: registered by name, description and zod input
 * schema, each with a timeout. A tool that throws or times out yields an
 * error result the model sees; it never throws through the loop.
 */
import { type FlexibleSchema, type ToolSet, tool } from 'ai';
import { z } from 'zod';
import { activeContext, traceToolCall } from '../../src/telemetry/agent-spans.js';
import type { ToolMode } from './policy.js';

/** A tool the local agent can call. */
// biome-ignore lint/suspicious/noExplicitAny: `unknown` would refuse AgentTool<{ url: string }> (a tool's input is contravariant).
export interface AgentTool<I = any> {
  /** Name the model calls it by (`[a-zA-Z0-9_-]`, at most 64 characters). */
  name: string;
  /** What it does, for the model. */
  description: string;
  /** zod schema of its input (validated before `execute`); MCP tools bring a JSON schema (`jsonSchema()` of the AI SDK). */
  inputSchema: z.ZodType<I> | FlexibleSchema<I>;
  /** Does the work; may throw (becomes an error result). `signal` fires on stop requests and timeouts; `call` is given by the local agent's runtime. */
  execute(input: I, opts: { signal: AbortSignal; call?: ToolCallContext }): Promise<unknown>;
  /** Time limit of one call, in ms. Default 30000. */
  timeoutMs?: number;
  /** Running a call twice is harmless: after a takeover a call started without a recorded result runs again. Default false (its outcome is reported unknown). */
  idempotent?: boolean;
  /** Mode when no `toolPolicy` entry names the tool; a scope's `default` only makes it stricter (MCP tools: from their annotations or server). Default `allow`. */
  defaultMode?: ToolMode;
  /** The tool may delete or overwrite data (MCP `destructiveHint`): its approval request says so. Default false. */
  destructive?: boolean;
}

/** What a tool call knows about where it runs (docs/tools.md). */
export interface ToolCallContext {
  runId: string;
  conversationId: string;
  /** The model's id of this call. */
  callId: string;
  /** Attempt of the run (more than 1 after a takeover). */
  attempt: number;
  /** The attempt's fencing token (higher after a takeover): an external system can refuse writes of a superseded attempt. Absent in hand-made contexts. */
  fencingToken?: number;
  /** Same for a re-run of the same call after a takeover: pass it to APIs that deduplicate. */
  idempotencyKey: string;
  /** True when an earlier attempt started this call and died before recording its result. */
  rerun: boolean;
}

/** Current date and time (built in, on by default). */
export const currentTimeTool: AgentTool<{ timeZone?: string }> = {
  name: 'current_time',
  description: 'Returns the current date and time, optionally in an IANA time zone such as Europe/Paris.',
  inputSchema: z.object({ timeZone: z.string().max(64).optional() }),
  async execute({ timeZone }) {
    const now = new Date();
    return {
      iso: now.toISOString(),
      local: now.toLocaleString('en-GB', { timeZone: timeZone ?? 'UTC', dateStyle: 'full', timeStyle: 'long' }),
    };
  },
  timeoutMs: 1000,
};

/** Runs `fn` with a timeout and a parent signal; resolves to its value or rejects with a short reason. */
async function withTimeout<T>(fn: (signal: AbortSignal) => Promise<T>, timeoutMs: number, parent: AbortSignal | undefined): Promise<T> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(parent?.reason);
  parent?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(ac.signal),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          ac.abort('timeout');
          reject(new Error(`timed out after ${timeoutMs} ms`));
        }, timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    parent?.removeEventListener('abort', onAbort);
  }
}

/** Builds the AI SDK tool set; failures become `{ error }` results the model can read. */
export function toToolSet(tools: AgentTool[], onError?: (name: string, err: unknown) => void): ToolSet {
  const set: ToolSet = {};
  // `tool.call` spans are children of the run (the context the set is built in), not of the model call streaming them.
  const parent = activeContext();
  for (const t of tools) {
    set[t.name] = tool({
      description: t.description,
      inputSchema: t.inputSchema,
      execute: (input: unknown, opts: { abortSignal?: AbortSignal }) =>
        traceToolCall(t.name, parent, input, async (failed) => {
          try {
            return await withTimeout((signal) => t.execute(input, { signal }), t.timeoutMs ?? 30_000, opts.abortSignal);
          } catch (err) {
            failed();
            onError?.(t.name, err);
            return { error: `tool ${t.name} failed: ${err instanceof Error ? err.message : String(err)}`.slice(0, 500) };
          }
        }),
    } as unknown as Parameters<typeof tool>[0]) as ToolSet[string];
  }
  return set;
}
