/**
 * The messages a run took and has not answered yet: its own inputs until a
 * final answer, and the steered messages it took (pulled at a boundary, or
 * handed back by finish) since its last final answer. A failed run hands
 * them to a follow-up run (`seqs`), or names them in the message the user
 * gets and keeps them in conversation state for `/status` (`settle`).
 */
import type { Logger } from 'pino';
import { CasConflictError } from '../../src/errors.js';
import type { RunRef } from '../../src/protocol/runs.js';
import type { ConversationState } from '../../src/protocol/state.js';
import type { MessageReceived, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import { UNANSWERED_KEY, unansweredNote, unansweredNotice } from '../../src/record/unanswered.js';
import type { StatusReactions } from '../delivery/reactions.js';
import type { DeliverySink } from '../plugin.js';

type Messages = Array<SeqEntry<MessageReceived>>;

/** The unanswered messages of one attempt. */
export class UnansweredMessages {
  private inputs: Messages;
  private steered: Messages = [];
  /** Answered since the last `settle`: their reactions turn to answered once the invocation has delivered. */
  private done: Messages = [];

  /**
   * `stored`: the note in conversation state when the attempt started (raw);
   * `inputs`: the run's own input messages.
   */
  constructor(
    private readonly state: ConversationState,
    private readonly ref: RunRef,
    private readonly logger: Logger,
    private stored: string | undefined,
    inputs: Messages,
    private readonly reactions: StatusReactions,
  ) {
    this.inputs = [...inputs];
  }

  /** The run took steered `messages` (pulled, or handed back by finish). */
  add(messages: Messages): void {
    this.steered.push(...messages);
    this.reactions.mark(messages, 'taken');
  }

  /** Shows every message taken and not answered as taken (once the attempt knows what a takeover left). */
  showTaken(): void {
    this.reactions.mark(this.failedOn(), 'taken');
  }

  /** Shows the messages answered since the last call as answered (the invocation has delivered their answer). */
  showAnswered(): void {
    this.reactions.mark(this.done, 'answered');
    this.done = [];
  }

  /** A final answer was recorded: everything taken so far is answered. */
  answered(): void {
    this.done.push(...this.failedOn());
    this.inputs = [];
    this.steered = [];
  }

  /** What earlier attempts left (a takeover): whether they answered the inputs, and the steering they took after. */
  takenOver(inputsAnswered: boolean, steered: Messages): void {
    if (inputsAnswered) this.answered();
    this.add(steered);
  }

  /** Seqs of every message taken and not answered, oldest first: what a failed run hands to a follow-up run. */
  seqs(): number[] {
    return this.failedOn().map((m) => m.seq);
  }

  /**
   * At the end of one invocation: a failed or stopped one sends the plugin's
   * notice and names the messages it took and did not answer (kept in state
   * for `/status`; `listInMessage: false` keeps them out of the message, when
   * the notice already says what happened to them; `tries`: failed runs in a
   * row on them, when more than one); a completed one clears a note an
   * earlier run left. A stopped run names only the steering it took: its
   * own inputs are what the person asked to stop.
   */
  async settle(delivery: DeliverySink, outcome: RunOutcome, notice: string | undefined, opts: { listInMessage?: boolean; tries?: number } = {}): Promise<void> {
    this.showAnswered();
    if (outcome === 'failed') this.reactions.mark(this.failedOn(), 'failed');
    if (outcome === 'completed') {
      if (notice) await delivery.message(notice);
      await this.clearStored();
      return;
    }
    const unanswered = outcome === 'failed' ? this.failedOn() : outcome === 'stopped' ? this.steered : [];
    const note =
      (outcome === 'failed' || outcome === 'stopped') && unanswered.length > 0 ? unansweredNote(this.ref.runId, outcome, unanswered, Date.now()) : undefined;
    const text = [notice, opts.listInMessage !== false && note && unansweredNotice(note, opts.tries)].filter((t): t is string => !!t).join('\n\n');
    if (note) this.logger.warn({ seqs: unanswered.map((m) => m.seq), outcome }, 'run ended without answering messages it took');
    if (text) await delivery.message(text);
    if (!note) return;
    await this.state.set(this.ref, UNANSWERED_KEY, note);
    this.stored = JSON.stringify(note);
  }

  /** The inputs (unless answered), then the steering taken since, oldest first. */
  private failedOn(): Messages {
    return [...this.inputs, ...this.steered];
  }

  /** Deletes the stored note, unless it changed since it was read (another run's). */
  private async clearStored(): Promise<void> {
    if (this.stored === undefined) return;
    try {
      await this.state.delete(this.ref, UNANSWERED_KEY, { kind: 'equals', raw: this.stored });
    } catch (err) {
      if (!(err instanceof CasConflictError)) throw err;
    }
    this.stored = undefined;
  }
}
