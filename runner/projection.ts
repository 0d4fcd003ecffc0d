/**
 * History projection: the conversation record → the `ModelMessage[]` the
 * model sees. Pure; the record itself is never rewritten.
 *
 * - Nothing at or before the last `conversation.reset` is projected.
 * - `message.received` becomes a user message, placed where the model first
 *   saw it: at its `steering.injected` entry when it was steered into a run,
 *   else at the `run.started` entry of the run that took it as input, else at
 *   its own seq.
 * - `message.sent` (sent through the messages API) is an assistant message at its own seq.
 * - `model.step` messages are replayed as recorded, except: steps of a
 *   `superseded` run are left out. A `failed` run's steps stay: what it
 *   answered before failing, the person got, and the tool calls it made (with
 *   their results) happened, so the follow-up run that takes its messages
 *   continues from them instead of answering or calling them again. The last
 *   assistant message of an `interrupted` or `stopped` run, and of a `partial`
 *   step, ends with the cut-off marker.
 * - Every tool call keeps exactly one result in the tool messages right after
 *   it; a call without one (an interrupted tool batch) and a result without a
 *   call are dropped, because providers refuse either.
 */
import type { AssistantModelMessage, ModelMessage, ToolModelMessage, UserModelMessage } from 'ai';
import type { Attachment, InputOrigin, MessageReceived, SeqEntry } from 'steerbot/plugin';
import { escapeAttribute, escapeData } from '../src/data-block.js';
import { RecordError } from '../src/errors.js';
import type { ModelStep, RunOutcome } from '../src/record/entries.js';

/** The marker appended to an answer the user interrupted, unless configured. */
export const DEFAULT_CUT_OFF_MARKER = '[cut off: the user interrupted this answer]';

/** Options of `projectHistory`. */
export interface ProjectionOptions {
  /** Marker appended to an interrupted partial answer. Default `DEFAULT_CUT_OFF_MARKER`. */
  cutOffMarker?: string;
  /**
   * Frame every user message with its sender (as a message recorded in a
   * group chat always is): `<message from="name" id="id">`, escaped. Default false.
   */
  senderNames?: boolean;
  /**
   * What to do with a message no run has taken yet (waiting in a steering list
   * or in pending): `inline` projects it at its own seq; `exclude` leaves it out,
   * because the run will pull it (or a successor will take it) and must not see
   * it twice. The runtime uses `exclude`. Default `inline`.
   */
  unclaimed?: 'inline' | 'exclude';
}

/** What `projectHistory` returns. */
export interface Projection {
  /** The messages to send, oldest first. */
  messages: ModelMessage[];
  /**
   * Seq of the last entry projected: the last entry given, whether or not it
   * produced a message (0 when none). The projection covers the record up to
   * and including it, so a caller continues reading after it.
   */
  lastSeq: number;
  /** Seqs of the `message.received` entries included, in the order they appear in `messages`. */
  userSeqs: number[];
}

/** A projected message and where it came from, for the marking pass. */
interface Item {
  message: ModelMessage;
  /** Run id, for model-step messages. */
  run?: string;
  /** Seq of the model step, for model-step messages. */
  stepSeq?: number;
}

/** A content part as the pairing pass sees it. */
interface Part {
  type: string;
  toolCallId?: string;
  approvalId?: string;
  text?: string;
}

/**
 * Projects `entries` (in seq order, as read from the record) into model
 * messages. Pure: the entries are not modified. Throws RecordError when a
 * `model.step` holds a message that is not an AI SDK response message.
 */
export function projectHistory(entries: SeqEntry[], opts: ProjectionOptions = {}): Projection {
  const marker = opts.cutOffMarker ?? DEFAULT_CUT_OFF_MARKER;
  const lastSeq = entries.at(-1)?.seq ?? 0;
  const live = entries.slice(lastResetIndex(entries) + 1);

  const outcomes = new Map<string, RunOutcome>();
  for (const e of live) if (e.kind === 'run.ended') outcomes.set(e.run, e.outcome);
  const placedAt = placements(live);

  const items: Item[] = [];
  const userSeqs: number[] = [];
  const deferred = new Map<number, SeqEntry<MessageReceived>[]>();
  const emitUser = (m: SeqEntry<MessageReceived>) => {
    items.push({ message: userMessage(m, opts.senderNames) });
    userSeqs.push(m.seq);
  };

  for (const e of live) {
    switch (e.kind) {
      case 'message.received': {
        const target = placedAt.get(e.seq);
        if (target === undefined && opts.unclaimed === 'exclude') break;
        if (target === undefined) emitUser(e);
        else deferred.set(target, [...(deferred.get(target) ?? []), e]);
        break;
      }
      case 'steering.injected':
      case 'run.started':
        for (const m of deferred.get(e.seq) ?? []) emitUser(m);
        break;
      case 'message.sent':
        // Sent by the bot from outside a run (the messages API): the agent said it, as far as the user knows.
        items.push({ message: { role: 'assistant', content: e.text } });
        break;
      case 'model.step': {
        if (outcomes.get(e.run) === 'superseded') break;
        for (const m of e.messages) items.push({ message: stepMessage(e, m), run: e.run, stepSeq: e.seq });
        break;
      }
      default:
        break;
    }
  }

  const paired = pairToolCalls(items);
  markCutOff(paired, live, outcomes, marker);
  return { messages: paired.map((i) => i.message), lastSeq, userSeqs };
}

function lastResetIndex(entries: SeqEntry[]): number {
  for (let i = entries.length - 1; i >= 0; i--) if (entries[i]!.kind === 'conversation.reset') return i;
  return -1;
}

/**
 * Where each moved user message goes: message seq → seq of the entry at which
 * the model first saw it. A steering injection wins over a run's inputs.
 */
export function placements(live: readonly SeqEntry[]): Map<number, number> {
  const received = new Set<number>();
  for (const e of live) if (e.kind === 'message.received') received.add(e.seq);
  const placedAt = new Map<number, number>();
  const place = (seqs: number[] | undefined, at: number) => {
    for (const s of seqs ?? []) if (received.has(s) && s < at && !placedAt.has(s)) placedAt.set(s, at);
  };
  for (const e of live) if (e.kind === 'steering.injected') place(e.seqs, e.seq);
  for (const e of live) if (e.kind === 'run.started') place(e.inputs, e.seq);
  return placedAt;
}

/**
 * The user turn the model sees for a received message (the runtime renders
 * pulled steering the same way). An input with an `origin` (an event, a
 * schedule's fire, a heartbeat) is framed as such, never as the user's words.
 * A message sent in a group chat (or any, with `senderNames`) is framed with
 * its own sender, so the model sees who said what (`senderFrame`).
 */
export function userMessage(m: MessageReceived, senderNames = false): UserModelMessage {
  const lines = m.text === '' ? [] : [m.text];
  for (const a of m.attachments ?? []) lines.push(attachmentLine(a));
  if (m.origin) return { role: 'user', content: originFrame(m.origin, lines.join('\n')) };
  const body = lines.length > 0 ? lines.join('\n') : '[empty message]';
  return { role: 'user', content: senderNames || m.group === true ? senderFrame(m.sender, body) : body };
}

/**
 * A message framed with its sender: `<message from="name" id="id">`, the
 * text, `</message>`. Name and id are escaped attribute values and the text
 * is escaped too, so no sender can close the frame, open another one or
 * pass for someone else, with their name or with their words.
 */
function senderFrame(sender: MessageReceived['sender'], body: string): string {
  const from = sender.name ? ` from="${escapeAttribute(sender.name)}"` : '';
  return `<message${from} id="${escapeAttribute(sender.id)}">\n${escapeData(body)}\n</message>`;
}

/** How each kind of non-user input introduces itself to the model. */
const ORIGIN_HEADER: Record<InputOrigin['kind'], (source: string) => string> = {
  event: (source) => `[event from ${source}: not a message from the user]`,
  schedule: (source) => `[scheduled task ${source} is due: not a message from the user]`,
  heartbeat: (source) =>
    `[heartbeat ${source}: not a message from the user. Reply only if there is something worth telling the user; otherwise answer with an empty message]`,
};

/**
 * A non-user input as the model sees it: a header naming its origin, the
 * text, and its data as JSON. Text and data are escaped (`escapeData`), and
 * the data's brackets too, so neither can close a frame, open another
 * sender's message or forge a header.
 */
function originFrame(origin: InputOrigin, body: string): string {
  const lines = [ORIGIN_HEADER[origin.kind](origin.source)];
  if (body) lines.push(escapeData(body));
  if (origin.data !== undefined) lines.push(`[data: ${escapeData(JSON.stringify(origin.data)).replaceAll('[', '&#x5B;').replaceAll(']', '&#x5D;')}]`);
  return lines.join('\n');
}

function attachmentLine(a: Attachment): string {
  const label = a.name || a.mime;
  return label ? `[attachment: ${a.kind} ${label}]` : `[attachment: ${a.kind}]`;
}

/** Copies one recorded response message (parts copied too, so marking never touches the record). */
function stepMessage(e: SeqEntry<ModelStep>, m: ModelStep['messages'][number]): ModelMessage {
  const { content } = m;
  if (m.role === 'assistant' && typeof content === 'string') return { ...m, content } as AssistantModelMessage;
  if (Array.isArray(content) && content.every(isPart)) {
    return { ...m, content: content.map((p) => ({ ...p })) } as AssistantModelMessage | ToolModelMessage;
  }
  throw new RecordError(`record entry ${e.seq} (model.step) holds a ${m.role} message this build cannot project`);
}

function isPart(p: unknown): p is Part {
  if (typeof p !== 'object' || p === null || typeof (p as Part).type !== 'string') return false;
  const { type, toolCallId } = p as Part;
  return (type !== 'tool-call' && type !== 'tool-result') || typeof toolCallId === 'string';
}

const partsOf = (m: ModelMessage): Part[] => (typeof m.content === 'string' ? [] : (m.content as Part[]));

/**
 * Keeps a tool call only with a result after it, in the same assistant message
 * (provider-executed tools) or in the tool messages directly following; each
 * result answers one call. Unpaired calls and results are dropped, with the
 * approval parts that refer to them, and messages left empty are dropped.
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one pass pairing tool calls with their results across adjacent messages; splitting it would pass the pairing state between functions
function pairToolCalls(items: Item[]): Item[] {
  const dropped = new Set<Part>();
  for (let i = 0; i < items.length; ) {
    const message = items[i]!.message;
    if (message.role !== 'assistant') {
      // A tool message reached here does not follow an assistant message: nothing it answers is open.
      for (const p of partsOf(message)) if (p.type === 'tool-result') dropped.add(p);
      i++;
      continue;
    }
    const open = new Map<string, Part[]>();
    const answer = (p: Part) => {
      const calls = open.get(p.toolCallId!);
      if (calls && calls.length > 0) calls.shift();
      else dropped.add(p);
    };
    for (const p of partsOf(message)) {
      if (p.type === 'tool-call') open.set(p.toolCallId!, [...(open.get(p.toolCallId!) ?? []), p]);
      else if (p.type === 'tool-result') answer(p);
    }
    let j = i + 1;
    for (; j < items.length && items[j]!.message.role === 'tool'; j++) {
      for (const p of partsOf(items[j]!.message)) if (p.type === 'tool-result') answer(p);
    }
    for (const calls of open.values()) for (const c of calls) dropped.add(c);
    i = j;
  }

  const approvals = new Set<string>();
  const out: Item[] = [];
  for (const item of items) {
    const { message } = item;
    if (typeof message.content === 'string') {
      if (message.content !== '') out.push(item);
      continue;
    }
    const parts = message.content as Part[];
    const keptCalls = new Set(parts.filter((p) => p.type === 'tool-call' && !dropped.has(p)).map((p) => p.toolCallId));
    const kept = parts.filter((p) => {
      if (dropped.has(p)) return false;
      if (p.type === 'tool-approval-request') {
        if (!keptCalls.has(p.toolCallId)) return false;
        approvals.add(p.approvalId!);
      }
      if (p.type === 'tool-approval-response') return approvals.has(p.approvalId!);
      return true;
    });
    if (kept.length > 0) out.push({ ...item, message: { ...message, content: kept } as ModelMessage });
  }
  return out;
}

/** Appends the marker to the last assistant message of each interrupted or stopped run and each partial step. */
function markCutOff(items: Item[], live: SeqEntry[], outcomes: Map<string, RunOutcome>, marker: string): void {
  const lastOf = (pick: (i: Item) => boolean) => items.findLastIndex((i) => i.message.role === 'assistant' && pick(i));
  const targets = new Set<number>();
  for (const [run, outcome] of outcomes) {
    if (outcome === 'interrupted' || outcome === 'stopped') targets.add(lastOf((i) => i.run === run));
  }
  for (const e of live) if (e.kind === 'model.step' && e.partial === true) targets.add(lastOf((i) => i.stepSeq === e.seq));
  targets.delete(-1);
  for (const t of targets) items[t]!.message = withMarker(items[t]!.message as AssistantModelMessage, marker);
}

function withMarker(message: AssistantModelMessage, marker: string): AssistantModelMessage {
  const append = (text: string) => (text === '' ? marker : /\s$/.test(text) ? text + marker : `${text} ${marker}`);
  if (typeof message.content === 'string') return { ...message, content: append(message.content) };
  const content = [...message.content];
  const t = content.findLastIndex((p) => p.type === 'text');
  const last = content[t];
  if (last?.type === 'text') content[t] = { ...last, text: append(last.text) };
  else content.push({ type: 'text', text: marker });
  return { ...message, content };
}

/**
 * The answer text of a model step's messages: the text parts of its
 * assistant messages, joined (what the AI SDK reports as the step's `text`).
 * The agent loop delivers exactly this, so a takeover that finds the step
 * recorded delivers the same text under the same delivery keys.
 */
export function answerText(messages: ReadonlyArray<{ role: string; content: unknown }>): string {
  let text = '';
  for (const m of messages) {
    if (m.role !== 'assistant') continue;
    if (typeof m.content === 'string') text += m.content;
    else if (Array.isArray(m.content)) for (const p of m.content as Part[]) if (p.type === 'text' && typeof p.text === 'string') text += p.text;
  }
  return text;
}

/**
 * Whether a recorded step ends its turn with an answer: not cut off by a stop
 * (`partial`), and not a tool-call step (`finishReason` `tool-calls`, or, when
 * a plugin recorded no finish reason, a tool call in its messages).
 */
export function isFinalStep(step: Pick<ModelStep, 'finishReason' | 'partial' | 'messages'>): boolean {
  if (step.partial === true || step.finishReason === 'tool-calls') return false;
  if (step.finishReason !== undefined) return true;
  return !step.messages.some((m) => Array.isArray(m.content) && (m.content as Part[]).some((p) => p?.type === 'tool-call'));
}
