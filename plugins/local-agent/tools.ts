/**
 * Tools of the local agent: registered by name, description and zod input
 * schema, each with a timeout. A tool that throws or times out yields an
 * error result the model sees; it never throws through the loop.
 */
import { tool, type ToolSet } from 'ai';
import { z } from 'zod';
import { activeContext, traceToolCall } from '../../src/telemetry/agent-spans.js';

/** A tool the local agent can call. */
export interface AgentTool<I = any> {
  /** Name the model calls it by (`[a-zA-Z0-9_-]`, at most 64 characters). */
  name: string;
  /** What it does, for the model. */
  description: string;
  /** zod schema of its input (validated before `execute`). */
  inputSchema: z.ZodType<I>;
  /** Does the work; may throw (becomes an error result). `signal` fires on stop requests and timeouts. */
  execute(input: I, opts: { signal: AbortSignal }): Promise<unknown>;
  /** Time limit of one call, in ms. Default 30000. */
  timeoutMs?: number;
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

/** Options of the HTTP fetch tool. */
export interface HttpFetchToolOptions {
  /** Largest response body returned to the model, in characters. Default 20000. */
  maxChars?: number;
  /** `fetch` to use (injectable for tests). */
  fetch?: typeof fetch;
  /** Time limit, in ms. Default 15000. */
  timeoutMs?: number;
}

/** Fetches a URL with GET (built in, off by default: it lets the model reach the network). */
export function httpFetchTool(o: HttpFetchToolOptions = {}): AgentTool<{ url: string }> {
  const maxChars = o.maxChars ?? 20_000;
  return {
    name: 'http_fetch',
    description: 'Fetches a web page or API with HTTP GET and returns status and body text (truncated).',
    inputSchema: z.object({ url: z.string().url().refine((u) => /^https?:\/\//.test(u), 'http(s) URLs only') }),
    async execute({ url }, { signal }) {
      const res = await (o.fetch ?? fetch)(url, { signal, redirect: 'follow' });
      const body = await res.text();
      return { status: res.status, body: body.length > maxChars ? `${body.slice(0, maxChars)}…[truncated]` : body };
    },
    timeoutMs: o.timeoutMs ?? 15_000,
  };
}

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
