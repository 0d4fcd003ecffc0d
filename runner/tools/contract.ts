/**
 * What the runtime offers a runner plugin's tools: a journal that makes tool
 * calls durable across takeovers, and an artifact store for results too
 * large for the prompt. Both are optional members of `RunContext.features` (a
 * hand-made context in a test may leave them out).
 */

/** One tool call the model made, as the journal sees it. */
export interface ToolCallRef {
  /** The model's id of the call. */
  callId: string;
  /** Tool name. */
  tool: string;
  /** The call's input (hashed, never stored). */
  input: unknown;
  /** True when running the call twice is harmless (it may then run again after a takeover). */
  idempotent: boolean;
  /** The approval the call runs under, if it needed one. */
  approval?: string;
}

/** What to do with a call, decided from what earlier attempts of the run recorded. */
export type ToolCallClaim =
  /** Execute it (recorded as started). `idempotencyKey` is the same for a re-run of a call an earlier attempt started. */
  | { kind: 'run'; idempotencyKey: string; rerun: boolean }
  /** An earlier attempt completed this call: its recorded result, not executed again. */
  | { kind: 'replay'; output: unknown; status: 'ok' | 'error' }
  /** An earlier attempt started this call and died before its result was recorded; the tool is not idempotent, so it is not run again. */
  | { kind: 'unknown' };

/** Records tool calls when they start and complete; fenced by the run's token. */
export interface ToolCallJournal {
  /**
   * Decides whether the call runs, replays an earlier attempt's result or is
   * unknown, and records the decision (`tool.started` before a run, or
   * `tool.completed` of the replay / unknown outcome). Throws StaleRunError
   * when the run was lost.
   */
  claim(call: ToolCallRef): Promise<ToolCallClaim>;
  /** Records the result the model sees (bounded by the caller). Throws StaleRunError when the run was lost. */
  completed(call: ToolCallRef, result: { status: 'ok' | 'error'; output: unknown }): Promise<void>;
  /** What an earlier attempt recorded of this call (without claiming it): an approval is not asked again for a call that already started. */
  recorded?(call: ToolCallRef): 'started' | 'completed' | undefined;
}

/** A stored artifact's reference. */
export interface ArtifactRef {
  /** Id to read it back with. */
  id: string;
  /** Its length, in characters. */
  chars: number;
}

/** Large tool results of the conversation, kept in Redis with a TTL (gone on reset and purge). */
export interface ArtifactStore {
  /** Stores `text`; it lives `ttlSeconds` after the conversation's last artifact write. Fenced by the run. */
  put(text: string, ttlSeconds: number): Promise<ArtifactRef>;
  /** Reads `length` characters from `offset`; undefined when the artifact does not exist (expired, reset, or never). */
  read(id: string, offset: number, length: number): Promise<{ text: string; chars: number } | undefined>;
}

/** A tool call that needs a person's approval. */
export interface ApprovalRequest {
  callId: string;
  tool: string;
  /** The call's input (shown bounded, secrets redacted, by the caller; hashed for the record). */
  input: unknown;
  /** The text shown in the chat: names the tool and shows its (bounded, redacted) arguments. */
  text: string;
  /** Who may decide besides the user who started the run (platform user ids). */
  approvers: readonly string[];
  /** How long to wait for a decision, in ms. */
  timeoutMs: number;
}

/** How an approval ended (`id`: the request's). `aborted`: the run was stopped (or lost) while waiting. */
export type ApprovalOutcome = { decision: 'approved' | 'denied' | 'timeout' | 'aborted'; by?: string; id?: string };

/** A question with options for the people in the chat (`ask_user`). */
export interface QuestionRequest {
  callId: string;
  /** The tool asking (hashed with `input`: a takeover resumes the same question). */
  tool: string;
  input: unknown;
  question: string;
  /** 2 to 5 options, each shown as a button. */
  options: readonly string[];
  /** Whose click counts besides the user who started the run (platform user ids). */
  deciders: readonly string[];
  timeoutMs: number;
}

/**
 * How a question ended: an option chosen (`answer`, from 0, and who chose);
 * `typed`: someone wrote a message instead (`steered`: it joins the run at its
 * next turn boundary; else it waits for the next run); `timeout`; `aborted`.
 */
export type QuestionOutcome =
  | { kind: 'answered'; answer: number; option: string; by?: string }
  | { kind: 'typed'; steered: boolean }
  | { kind: 'timeout' | 'aborted' };

/** Asks in the chat and waits, durably: the request and the decision are record entries; a takeover resumes the same wait. */
export interface ApprovalGate {
  /** Resolves once decided, timed out or aborted (`signal`). Throws StaleRunError when the run was lost. */
  request(req: ApprovalRequest, signal: AbortSignal): Promise<ApprovalOutcome>;
  /** Asks a question with options and waits for a click or a typed message. Throws StaleRunError when the run was lost. */
  ask(req: QuestionRequest, signal: AbortSignal): Promise<QuestionOutcome>;
}
