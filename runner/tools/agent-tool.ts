/**
 * The tools of the local agent, as a tool author writes one (`steerbot/runner`,
 * where the `z` of its input schema comes from; docs/tools.md): a tool's shape,
 * what a call knows about where it runs, and the failure a tool reports on purpose.
 */
import type { FlexibleSchema } from 'ai';
import type { z } from 'zod';

/** How a tool call is let through: run it, ask a person in the chat first, or refuse it (docs/tools.md). */
export type ToolMode = 'allow' | 'require_approval' | 'deny';

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

/** Categories of a tool failure. */
export type ToolFailureCategory =
  | 'timeout'
  | 'aborted'
  | 'forbidden'
  | 'not_found'
  | 'invalid_input'
  | 'unavailable'
  | 'too_many_redirects'
  | 'tool_error'
  | 'outcome_unknown'
  | 'denied'
  | 'approval_timeout'
  | 'internal';

/** A failure a tool reports on purpose: its message is meant for the model. */
export class ToolFailure extends Error {
  override readonly name = 'ToolFailure';
  constructor(
    readonly category: ToolFailureCategory,
    message: string,
  ) {
    super(message);
  }
}
