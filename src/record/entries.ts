/**
 * The conversation record: typed, versioned entries, validated with zod when
 * read back from Redis. Each kind has its own version (`v`): an older one is
 * upcast, a kind or version from a newer release is kept and skipped
 * (src/redis/stored.ts); an entry that claims a known kind and version and
 * does not match it is a RecordError, never silently skipped.
 */
import { z } from 'zod';
import { type StoredShape, storedShape } from '../redis/stored.js';

const seqs = z.array(z.number().int().positive()).min(1);
const base = { v: z.literal(1), at: z.number().int().nonnegative() };

/** A user as the platform names them. */
export const senderSchema = z.object({
  id: z.string().min(1).max(128),
  name: z.string().max(256).optional(),
  isBot: z.boolean().optional(),
});

/** An attachment kept on the platform, referenced not copied. */
export const attachmentSchema = z.object({
  kind: z.enum(['image', 'audio', 'video', 'file', 'sticker', 'other']),
  ref: z.string().min(1).max(2048),
  name: z.string().max(512).optional(),
  mime: z.string().max(128).optional(),
  size: z.number().int().nonnegative().optional(),
});

/** Kinds of input that do not come from a chat user. */
export const INPUT_ORIGIN_KINDS = ['event', 'schedule', 'heartbeat'] as const;

/**
 * Where an input that is not a user's message came from: an external event,
 * a schedule's fire or a heartbeat. The prompt shows such an input as an
 * event, never as something the user said.
 */
export const inputOriginSchema = z.object({
  kind: z.enum(INPUT_ORIGIN_KINDS),
  /** What sent it: `ci`, `monitoring`, a schedule's or heartbeat's name. 1–64 of `[A-Za-z0-9_.-]`. */
  source: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected 1-64 characters of [A-Za-z0-9_.-]'),
  /** The input's own id at its source (a CI run, a fire time): the dedupe identity, with kind and source. 1–256 characters without whitespace or braces. */
  id: z.string().regex(/^[^\s{}\p{Cc}]{1,256}$/u, 'expected 1-256 characters without whitespace or braces'),
  /** Structured details the prompt shows with the text (JSON, at most `MAX_METADATA_BYTES` serialized). */
  data: z.record(z.string(), z.unknown()).optional(),
  /**
   * The identity the run answering it is charged to (budgets, memory): a
   * schedule's or heartbeat's owner. Never shown to the model. Absent: the
   * operator (no person's budget or memory applies).
   */
  owner: z.string().min(1).max(257).optional(),
});

export const messageReceivedSchema = z.object({
  ...base,
  kind: z.literal('message.received'),
  updateKey: z.string(),
  sender: senderSchema,
  text: z.string(),
  messageId: z.string().max(128).optional(),
  replyTo: z.object({ messageId: z.string().max(128), text: z.string().optional() }).optional(),
  attachments: z.array(attachmentSchema).max(32).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  /** W3C `traceparent` of the host's ingest span, when tracing sampled it: the run answering the message continues that trace. */
  trace: z.string().max(64).optional(),
  /** Set when the input is not a user's message (an event, a schedule's fire, a heartbeat); the sender then names the source. */
  origin: inputOriginSchema.optional(),
  /** Sent in a group chat: the prompt names its sender (docs/people.md#in-groups). */
  group: z.literal(true).optional(),
});

/**
 * A message refused by a rate limit (`dispatch.rateLimit`): recorded with the
 * message inside, never answered by a run and never projected; the sender got a notice.
 */
export const messageRefusedSchema = z.object({
  ...base,
  kind: z.literal('message.refused'),
  /** Which bucket was empty. */
  limit: z.enum(['user', 'conversation']),
  /** When the bucket has a token again, in ms from `at`. */
  retryAfterMs: z.number().int().nonnegative(),
  message: messageReceivedSchema,
});

export const commandReceivedSchema = z.object({
  ...base,
  kind: z.literal('command.received'),
  updateKey: z.string(),
  sender: senderSchema,
  command: z.string(),
  args: z.string().optional(),
});

const audit = <K extends string>(kind: K) =>
  z.object({ ...base, kind: z.literal(kind), run: z.string(), seqs, follow_up: z.boolean().optional(), cap: z.number().optional() });

export const steeringQueuedSchema = audit('steering.queued');
export const steeringInjectedSchema = audit('steering.injected');
export const steeringRequeuedSchema = audit('steering.requeued');
export const steeringOverflowSchema = audit('steering.overflow');

export const runControlSchema = z.object({
  ...base,
  kind: z.literal('run.control'),
  run: z.string(),
  seqs,
  control: z.enum(['interrupt', 'supersede', 'stop']),
});

export const runStartedSchema = z.object({
  ...base,
  kind: z.literal('run.started'),
  run: z.string(),
  attempt: z.number().int().positive(),
  token: z.number().int().positive(),
  owner: z.string(),
  inputs: seqs.optional(),
});

/** How a run ended. */
export const runOutcomeSchema = z.enum(['completed', 'failed', 'interrupted', 'superseded', 'stopped']);
export type RunOutcome = z.infer<typeof runOutcomeSchema>;

export const runEndedSchema = z.object({
  ...base,
  kind: z.literal('run.ended'),
  run: z.string(),
  attempt: z.number().int().nonnegative(),
  token: z.number().int().nonnegative(),
  outcome: runOutcomeSchema,
  reason: z.string().optional(),
});

/** Provider-reported token usage of one request. */
export const usageSchema = z.object({
  inputTokens: z.number().int().nonnegative().optional(),
  outputTokens: z.number().int().nonnegative().optional(),
  totalTokens: z.number().int().nonnegative().optional(),
  cachedInputTokens: z.number().int().nonnegative().optional(),
});

/**
 * One model step: the response messages the next request must replay
 * (assistant content, tool calls and tool results), with provider usage.
 */
export const modelStepSchema = z.object({
  ...base,
  kind: z.literal('model.step'),
  run: z.string(),
  token: z.number().int().positive(),
  step: z.number().int().nonnegative(),
  messages: z.array(z.object({ role: z.enum(['assistant', 'tool']), content: z.unknown() }).passthrough()),
  finishReason: z.string().optional(),
  usage: usageSchema.optional(),
  /** True when the step was cut off by an interrupt (partial answer). */
  partial: z.boolean().optional(),
  /** The model that answered the step (its provider's model id). */
  model: z.string().max(256).optional(),
  /** True when that model is a fallback: the run's own model failed and the step was asked of the next one. */
  fallback: z.boolean().optional(),
});

/**
 * The tool calls of one model step, recorded before any of them runs: the
 * step's response messages (assistant text and tool calls with their inputs)
 * and its usage. The `model.step` written once the calls have results repeats
 * them; an attempt that takes the run over and finds this entry without that
 * step finishes the step from it instead of asking the model again (which
 * could phrase the calls differently and run a side effect twice).
 */
export const toolCallsSchema = modelStepSchema.omit({ partial: true }).extend({ kind: z.literal('tool.calls') });

/** Short digest of a tool call's input (never the input itself: it may hold secrets and be large). */
const inputHash = z.string().regex(/^[0-9a-f]{16,64}$/);

/** Fields every tool-journal entry carries: the run (fenced by its token) and the call it is about. */
const toolCall = {
  run: z.string(),
  token: z.number().int().positive(),
  call: z.string().min(1).max(256),
  tool: z.string().min(1).max(128),
  inputHash,
};

/**
 * A tool call is about to run (`plugins/local-agent` tools journal): written
 * before the tool executes, so an attempt taking the run over knows the call
 * may have had its effect. `supersedes`: the call of an earlier attempt this
 * one re-runs.
 */
export const toolStartedSchema = z.object({
  ...base,
  kind: z.literal('tool.started'),
  ...toolCall,
  /** Idempotency key handed to the tool: the same for a re-run of the same call. */
  key: z.string().min(1).max(128),
  idempotent: z.boolean().optional(),
  supersedes: z.string().min(1).max(256).optional(),
  /** The approval this call ran under (a takeover does not reuse it for another call). */
  approval: z.string().min(1).max(64).optional(),
});

/**
 * A tool call's result: `ok` / `error` (the value the model saw, bounded),
 * `replayed` (an earlier attempt's recorded result, `supersedes` names its
 * call) or `unknown` (an earlier attempt started it and died; not idempotent,
 * so not run again).
 */
export const toolCompletedSchema = z.object({
  ...base,
  kind: z.literal('tool.completed'),
  ...toolCall,
  status: z.enum(['ok', 'error', 'replayed', 'unknown']),
  output: z.unknown(),
  supersedes: z.string().min(1).max(256).optional(),
});

/** A tool call waits for a person's approval (the request is in the conversation's `approvals` hash). */
export const approvalRequestedSchema = z.object({
  ...base,
  kind: z.literal('approval.requested'),
  ...toolCall,
  approval: z.string().min(1).max(64),
  /** Who may decide (platform user ids). */
  deciders: z.array(z.string().max(128)).max(64),
  /** When the wait ends as `timeout`, in ms since the epoch. */
  expiresAt: z.number().int().nonnegative(),
});

/** The first decision of an approval (written by `approval-decide-4.lua`); `timeout` when nobody decided in time. */
export const approvalDecidedSchema = z.object({
  ...base,
  kind: z.literal('approval.decided'),
  run: z.string(),
  approval: z.string().min(1).max(64),
  decision: z.enum(['approved', 'denied', 'timeout']),
  by: z.string().max(128).optional(),
});

/** A tool call (`ask_user`) asks the people in the chat to choose (the question is in the conversation's `approvals` hash). */
export const questionAskedSchema = z.object({
  ...base,
  kind: z.literal('question.asked'),
  ...toolCall,
  question: z.string().min(1).max(64),
  /** Whose click counts (platform user ids). */
  deciders: z.array(z.string().max(128)).max(64),
  /** When the wait ends as `timeout`, in ms since the epoch. */
  expiresAt: z.number().int().nonnegative(),
});

/** How a question ended (written by `question-answer-4.lua`): an option chosen (`answer`, from 0), `timeout`, or `typed` (a message came instead). */
export const questionAnsweredSchema = z.object({
  ...base,
  kind: z.literal('question.answered'),
  run: z.string(),
  question: z.string().min(1).max(64),
  status: z.enum(['answered', 'timeout', 'typed']),
  answer: z.number().int().nonnegative().optional(),
  by: z.string().max(128).optional(),
});

export const compactionSchema = z.object({
  ...base,
  kind: z.literal('compaction'),
  run: z.string().optional(),
  covers_until: z.number().int().nonnegative(),
  tokens_before: z.number().int().nonnegative(),
  tokens_after: z.number().int().nonnegative(),
  summarizer: z.enum(['llm', 'fallback']),
});

export const conversationResetSchema = z.object({
  ...base,
  kind: z.literal('conversation.reset'),
  updateKey: z.string().optional(),
  sender: senderSchema.optional(),
});

/**
 * A message sent to the conversation from outside a run (the messages API,
 * `sendMessage`): the bot said it, so the prompt shows it as the assistant's.
 */
export const messageSentSchema = z.object({
  ...base,
  kind: z.literal('message.sent'),
  /** The caller's idempotency key: the message is delivered once per key. */
  key: z.string().min(1).max(256),
  text: z.string().min(1),
  buttons: z
    .array(z.object({ label: z.string(), command: z.string() }))
    .max(16)
    .optional(),
  /** Who sent it: `api` (HTTP) or `package` (`sendMessage`). */
  via: z.enum(['api', 'package']),
});

/** Every entry kind this build can read. */
export const recordEntrySchema = z.discriminatedUnion('kind', [
  messageReceivedSchema,
  messageRefusedSchema,
  messageSentSchema,
  commandReceivedSchema,
  steeringQueuedSchema,
  steeringInjectedSchema,
  steeringRequeuedSchema,
  steeringOverflowSchema,
  runControlSchema,
  runStartedSchema,
  runEndedSchema,
  modelStepSchema,
  toolCallsSchema,
  toolStartedSchema,
  toolCompletedSchema,
  approvalRequestedSchema,
  approvalDecidedSchema,
  questionAskedSchema,
  questionAnsweredSchema,
  compactionSchema,
  conversationResetSchema,
]);

export type RecordEntry = z.infer<typeof recordEntrySchema>;

/**
 * Entry kinds this build writes at a version above 1, with their upcasters
 * (none yet). Adding an optional field keeps a kind's version (older readers
 * ignore it); changing or removing one bumps it here, with the kind's schema
 * taking the new `v` and an upcaster from the old one.
 */
const BUMPED: Partial<Record<RecordEntry['kind'], Pick<StoredShape<RecordEntry>, 'version' | 'upcasters'>>> = {};

/** Each kind's stored shape: how `parseEntry` reads it. */
export const ENTRY_SHAPES: ReadonlyMap<string, StoredShape<RecordEntry>> = new Map(
  recordEntrySchema.options.map((o) => {
    const kind = o.shape.kind.value;
    return [kind, storedShape<RecordEntry>({ name: `kind ${kind}`, version: 1, ...BUMPED[kind], field: 'v', schema: o })];
  }),
);
export type MessageReceived = z.infer<typeof messageReceivedSchema>;
export type MessageRefused = z.infer<typeof messageRefusedSchema>;
export type MessageSent = z.infer<typeof messageSentSchema>;
export type ModelStep = z.infer<typeof modelStepSchema>;
export type ToolCalls = z.infer<typeof toolCallsSchema>;
export type ToolStarted = z.infer<typeof toolStartedSchema>;
export type ToolCompleted = z.infer<typeof toolCompletedSchema>;
export type Sender = z.infer<typeof senderSchema>;
export type InputOrigin = z.infer<typeof inputOriginSchema>;
export type Attachment = z.infer<typeof attachmentSchema>;

/** A record entry with the seq Redis gave it. */
export type SeqEntry<E extends RecordEntry = RecordEntry> = E & { seq: number };
