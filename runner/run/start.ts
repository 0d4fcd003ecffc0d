/**
 * What an attempt starts from, read by the acquire in its own call
 * (`RunAttempt.open`): the run's input messages, the unanswered-messages note
 * an earlier run left, the prompt's head (checkpoint and meta fields, so the
 * prompt load starts with the record); and — for an attempt taking the run
 * over, one more read — what earlier attempts left in the record
 * (runner/run/takeover.ts): a final answer to deliver, the turn's anchor, the
 * steered messages taken and not answered, a tool-call step to finish, and
 * the tool journal.
 */
import type { RunRef, Runs } from '../../src/protocol/runs.js';
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';
import { readSeqs } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type PromptHead, promptHeadOf } from '../compaction/load.js';
import type { StepRecord } from '../plugin.js';
import { earlierApprovalRequests, pendingToolCalls, RunToolJournal, usedApprovals } from '../tools/journal.js';
import type { RunAttempt } from './attempt.js';
import type { ExecutorOptions } from './options.js';
import { type RecordedAnswer, readRunEntries, runProgress } from './takeover.js';

/** What earlier attempts of the run left to do. */
export interface Takeover {
  /** The turn's anchor: keys of anything sent before a plugin runs are the earlier attempt's. */
  anchor: number;
  /** A final answer recorded and perhaps never delivered. */
  answer: RecordedAnswer | undefined;
  /** An earlier attempt recorded a final answer: the run's inputs are answered. */
  inputsAnswered: boolean;
  /** Steered messages taken since the last answer. */
  unanswered: Array<SeqEntry<MessageReceived>>;
  /** The tool-call step an earlier attempt died in. */
  unfinishedStep: StepRecord | undefined;
}

/** The tool journal of one attempt and the approvals its run's calls ran under (shared by every invocation of the attempt). */
export interface ToolState {
  journal: RunToolJournal;
  usedApprovals: Set<string>;
  earlierApprovals: ReturnType<typeof earlierApprovalRequests>;
}

/** What an attempt starts from. */
export interface AttemptStart {
  /** The run's input messages. */
  inputs: Array<SeqEntry<MessageReceived>>;
  /** The unanswered-messages note in conversation state (raw), if any. */
  note: string | undefined;
  /** Set when earlier attempts recorded progress. */
  takeover: Takeover | undefined;
  tools: ToolState;
  /** The checkpoint and meta fields as the attempt started (for its first prompt load). */
  head: PromptHead;
}

/** What `attempt` starts from: what its acquire read (`RunAttempt.open` asks for it), and a takeover's read of the record. */
export async function readAttemptStart(o: ExecutorOptions, attempt: RunAttempt): Promise<AttemptStart> {
  const { ref, acquired } = attempt;
  const { read } = acquired;
  const log = conversationKeys(o.prefix, ref.conversationId).log;
  const { state, ...head } = promptHeadOf(read.state, read.meta);
  // A run with more inputs than the acquire reads itself reads them here, beside a takeover's record read.
  const [inputs, runEntries] = await Promise.all([
    read.inputs ?? readSeqs(o.client, log, acquired.inputs),
    acquired.attempt > 1 ? readRunEntries(o.client, log, ref.runId, o.settings.historyTailEntries) : undefined,
  ]);
  // One read of the record serves the takeover's progress and its tool journal; both live for the whole attempt.
  const takeover = runEntries && (await progress(o, log, ref.runId, runEntries));
  return { inputs: inputs.filter(isMessage), note: state[0], takeover, tools: toolState(o.runs, ref, runEntries ?? []), head };
}

/**
 * What earlier attempts left in `entries` (a takeover's read of the record):
 * the turn's anchor, a recorded final answer, the steered messages taken
 * since the last answer, and the tool-call step an attempt died in.
 */
async function progress(o: ExecutorOptions, log: string, runId: string, entries: readonly SeqEntry[]): Promise<Takeover> {
  const p = runProgress(entries, runId);
  const unanswered = p.unansweredSteered.length > 0 ? (await readSeqs(o.client, log, p.unansweredSteered)).filter(isMessage) : [];
  const calls = p.unfinishedStep;
  const unfinishedStep: StepRecord | undefined = calls && {
    messages: calls.messages as StepRecord['messages'],
    ...(calls.finishReason !== undefined && { finishReason: calls.finishReason }),
    ...(calls.usage !== undefined && { usage: calls.usage }),
  };
  return { anchor: p.anchor, answer: p.answer, inputsAnswered: p.inputsAnswered, unanswered, unfinishedStep };
}

/**
 * The attempt's tool state from what earlier attempts recorded (`entries`,
 * empty on a first attempt): calls left unanswered, approvals already acted on.
 * Kept for the whole attempt, so a call a first invocation replayed is not
 * pending again in a continuation.
 */
function toolState(runs: Runs, ref: RunRef, entries: readonly SeqEntry[]): ToolState {
  return {
    journal: new RunToolJournal(runs, ref, pendingToolCalls(entries, ref.runId)),
    usedApprovals: usedApprovals(entries, ref.runId),
    earlierApprovals: earlierApprovalRequests(entries, ref.runId),
  };
}

/** True for a user message (a run's inputs may name other entries). */
export function isMessage(e: SeqEntry): e is SeqEntry<MessageReceived> {
  return e.kind === 'message.received';
}
