/**
 * Inputs that do not come from a chat user: an external event, a schedule's
 * fire, a heartbeat. Each enters its conversation exactly as a user message
 * does (`ingestInput`: deduped by its own id, recorded, routed by the
 * conversation's input policy), with an `origin` that marks it as an event in
 * the record and in the prompt.
 */
import { type IngestDeps, type IngestOptions, ingestInput } from './ingest.js';
import type { IngestResult } from './protocol/types.js';
import type { InputOrigin, MessageReceived } from './record/entries.js';

/** One non-user input. */
export interface EventInput {
  /** The conversation it goes to (`<channel id>:<chat id>[:<thread id>]`). */
  conversationId: string;
  /** What sent it; `kind`, `source` and `id` together are its dedupe identity. */
  origin: InputOrigin;
  /** What the agent is told (1 to `dispatch.maxMessageChars` characters). */
  text: string;
  /** Goes to a group chat (a schedule made there): recorded as a group input. Default false. */
  group?: boolean;
  /**
   * The name of the API token that sent it: its dedupe identity is then that
   * token's alone, so another token's event with the same source and id is
   * not taken for it. Absent: the process's own (schedules, subagents).
   */
  token?: string;
}

/**
 * The update key (dedupe identity, per conversation) of a non-user input:
 * `<kind>:<source>:<id>`, or `<kind>@<token>:<source>:<id>` for an API
 * token's (neither a source nor a token name holds `@` or `:`).
 */
export function eventUpdateKey(origin: Pick<InputOrigin, 'kind' | 'source' | 'id'>, token?: string): string {
  return `${origin.kind}${token === undefined ? '' : `@${token}`}:${origin.source}:${origin.id}`;
}

/**
 * Ingests a non-user input through the same path and input policy as a user
 * message: `duplicate` when its id was seen in this conversation before
 * (within the dedupe TTL), steered into an active run, parked for a successor,
 * or `new-run` (already enqueued). Never a second run beside an active one.
 * Throws InvalidInputError, writing nothing, on a bad origin or text, and
 * RedisUnavailableError-like connection errors as `Dispatch.ingest` does.
 */
export function ingestEvent(deps: IngestDeps, input: EventInput, opts: IngestOptions = {}): Promise<IngestResult> {
  const { origin } = input;
  return ingestInput(
    deps,
    {
      conversationId: input.conversationId,
      updateKey: eventUpdateKey(origin, input.token),
      // The source stands where a user would: who said it, for logs and the console; the prompt shows the origin.
      sender: { id: `${origin.kind}:${origin.source}`, name: origin.source, isBot: true },
      text: input.text,
      origin,
      ...(input.group === true && { group: true }),
    },
    opts,
  );
}

/**
 * Whether a run answering `inputs` may end without a message: only when every
 * one is a heartbeat ("say nothing unless there is something to say"). Such
 * a run ends as a silent turn, not as an empty-answer failure.
 */
export function silenceAllowed(inputs: ReadonlyArray<Pick<MessageReceived, 'origin'>>): boolean {
  return inputs.length > 0 && inputs.every((m) => m.origin?.kind === 'heartbeat');
}
