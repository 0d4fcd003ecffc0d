/**
 * Tools of the local agent: registered by name, description and zod input
 * schema, each with a timeout. A tool that throws or times out yields an
 * error result the model sees; it never throws through the loop.
 */
import { type ToolSet, tool } from 'ai';
import { z } from 'steerbot/plugin';
import { type AgentTool, activeContext, traceToolCall } from 'steerbot/runner';

export type { AgentTool } from 'steerbot/runner';

/** Current date and time (built in, on by default). */
export const currentTimeTool: AgentTool<{ timeZone?: string | undefined }> = {
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
