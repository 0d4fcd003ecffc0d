/**
 * The wire protocol between the http-agent runner plugin and an external
 * agent service (`steerbot.agent/1`, documented in docs/external-agents.md
 * with a JSON Schema in docs/external-agent.schema.json): what the runner
 * POSTs, the NDJSON events the agent answers with (validated here: they are
 * a trust boundary), and the body of a steering pull.
 */
import type { ModelMessage } from 'ai';
import type { MessageReceived, SeqEntry, StopKind } from 'steerbot/plugin';
import { z } from 'zod';

/** Protocol name and version, sent in every request body. */
export const PROTOCOL = 'steerbot.agent/1';
/** Content type of the event stream (one JSON object per line). */
export const NDJSON = 'application/x-ndjson';

/** A user message as the agent sees it (an input, or a steered message it pulled). */
export interface AgentMessage {
  /** Its seq in the conversation record. */
  seq: number;
  text: string;
  sender: { id: string; name?: string };
  /** When steerbot received it, ms since the epoch. */
  at: number;
  attachments?: Array<{ kind: string; ref: string; name?: string; mime?: string; size?: number }>;
  replyTo?: { messageId: string; text?: string };
}

/** The run capability: where and with what token the agent calls the run endpoints of this invocation. */
export interface RunCapability {
  /** Base URL of the run endpoints: `POST <url>/steering`. */
  url: string;
  /** Bearer token, valid for this invocation only. */
  token: string;
}

/** Body of a run request (`type: run`). */
export interface RunRequest {
  protocol: typeof PROTOCOL;
  type: 'run';
  run: { id: string; conversationId: string; attempt: number };
  /** The user messages this invocation answers. */
  inputs: AgentMessage[];
  /** The prompt so far (AI SDK model messages): checkpoint summary, earlier turns, these inputs, steps already recorded. */
  history: ModelMessage[];
  /** The agent's conversation state (what its `state` events wrote), `{}` when none. */
  state: Record<string, unknown>;
  /** Absent when this runner serves no run endpoints (no steering). */
  capability?: RunCapability;
  limits: { maxEventBytes: number; maxMessageChars: number; maxStateBytes: number };
}

/** Body of a cancel request (`type: cancel`). */
export interface CancelRequest {
  protocol: typeof PROTOCOL;
  type: 'cancel';
  run: { id: string; conversationId: string; attempt: number };
  /** Why: a user's stop (`interrupt`, `supersede`, `stop`), runner `shutdown`, or the run was `lost` to another worker. */
  reason: StopKind | 'shutdown' | 'lost';
}

/** The agent-facing form of a recorded user message. */
export function agentMessage(m: SeqEntry<MessageReceived>): AgentMessage {
  return {
    seq: m.seq,
    text: m.text,
    sender: { id: m.sender.id, ...(m.sender.name !== undefined && { name: m.sender.name }) },
    at: m.at,
    ...(m.attachments && { attachments: m.attachments.map(agentAttachment) }),
    ...(m.replyTo && { replyTo: { messageId: m.replyTo.messageId, ...(m.replyTo.text !== undefined && { text: m.replyTo.text }) } }),
  };
}

type AgentAttachment = NonNullable<AgentMessage['attachments']>[number];

function agentAttachment(a: NonNullable<MessageReceived['attachments']>[number]): AgentAttachment {
  return {
    kind: a.kind,
    ref: a.ref,
    ...(a.name !== undefined && { name: a.name }),
    ...(a.mime !== undefined && { mime: a.mime }),
    ...(a.size !== undefined && { size: a.size }),
  };
}

const id = z.string().min(1).max(256);
const textPart = z.strictObject({ type: z.literal('text'), text: z.string() });
const toolCallPart = z.strictObject({ type: z.literal('tool-call'), toolCallId: id, toolName: id, input: z.json() });
const toolResultOutput = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text'), value: z.string() }),
  z.strictObject({ type: z.literal('json'), value: z.json() }),
  z.strictObject({ type: z.literal('error-text'), value: z.string() }),
  z.strictObject({ type: z.literal('error-json'), value: z.json() }),
]);
const toolResultPart = z.strictObject({ type: z.literal('tool-result'), toolCallId: id, toolName: id, output: toolResultOutput });

/** A message of a `step` event: an assistant message (text, tool calls) or a tool message (results). */
export const stepMessageSchema = z.discriminatedUnion('role', [
  z.strictObject({ role: z.literal('assistant'), content: z.union([z.string(), z.array(z.discriminatedUnion('type', [textPart, toolCallPart])).min(1)]) }),
  z.strictObject({ role: z.literal('tool'), content: z.array(toolResultPart).min(1) }),
]);

const usage = z
  .strictObject({
    inputTokens: z.number().int().nonnegative().optional(),
    outputTokens: z.number().int().nonnegative().optional(),
    totalTokens: z.number().int().nonnegative().optional(),
  })
  .optional();

/** Longest `reason` of a failed result kept, in characters (it lands in the record and the logs). */
const MAX_REASON_CHARS = 200;

/** One event of the stream, by type. Unknown types and unknown fields are refused. */
export const agentEventSchemas = {
  'text-delta': z.strictObject({ type: z.literal('text-delta'), text: z.string() }),
  message: z.strictObject({ type: z.literal('message'), text: z.string().min(1, { error: 'expected non-empty text' }), usage }),
  step: z.strictObject({ type: z.literal('step'), messages: z.array(stepMessageSchema).min(1), usage }),
  state: z.strictObject({
    type: z.literal('state'),
    key: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'expected a key of 1-64 characters A-Z a-z 0-9 _ . -' }),
    value: z.json(),
  }),
  typing: z.strictObject({ type: z.literal('typing') }),
  result: z.discriminatedUnion('outcome', [
    z.strictObject({ type: z.literal('result'), outcome: z.literal('completed') }),
    z.strictObject({
      type: z.literal('result'),
      outcome: z.literal('failed'),
      reason: z.string().min(1).max(MAX_REASON_CHARS),
      message: z.string().min(1).optional(),
    }),
  ]),
} as const;

/** An event type the protocol knows. */
export type AgentEventType = keyof typeof agentEventSchemas;
/** One parsed event. */
export type AgentEvent = { [K in AgentEventType]: z.output<(typeof agentEventSchemas)[K]> }[AgentEventType];

/** Body of `POST <capability url>/steering`. */
export const pullBodySchema = z.strictObject({
  /** Take every waiting message, or the oldest one. */
  mode: z.enum(['all', 'one'], { error: 'expected "all" or "one"' }).default('all'),
  /** How many events the agent has written to its stream so far: the pull happens after the runner applied them. */
  eventsSent: z.number({ error: 'expected the number of events written so far' }).int().nonnegative(),
});
