/**
 * The steered messages a run took (pulled at a boundary, or handed back by
 * finish) and has not answered yet. A final answer step clears them; an
 * invocation that ends failed or stopped names them in the message the user
 * gets and keeps them in conversation state for `/status`.
 */
import type { Logger } from 'pino';
import { CasConflictError } from '../../src/errors.js';
import type { RunRef } from '../../src/protocol/runs.js';
import type { ConversationState } from '../../src/protocol/state.js';
import type { MessageReceived, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import { UNANSWERED_KEY, unansweredNote, unansweredNotice } from '../../src/record/unanswered.js';
import type { DeliverySink } from '../plugin.js';

/** The unanswered steering of one attempt. */
export class UnansweredSteering {
  private taken: Array<SeqEntry<MessageReceived>>;

  /**
   * `stored`: the note in conversation state when the attempt started (raw);
   * `taken`: what earlier attempts took and did not answer (a takeover).
   */
  constructor(
    private readonly state: ConversationState,
    private readonly ref: RunRef,
    private readonly logger: Logger,
    private stored: string | undefined,
    taken: Array<SeqEntry<MessageReceived>> = [],
  ) {
    this.taken = taken;
  }

  /** The run took `messages` (pulled, or handed back by finish). */
  add(messages: Array<SeqEntry<MessageReceived>>): void {
    this.taken.push(...messages);
  }

  /** A final answer was recorded: everything taken so far is answered. */
  answered(): void {
    this.taken = [];
  }

  /**
   * At the end of one invocation: a failed or stopped one sends the plugin's
   * notice and names the steered messages it took and did not answer (kept in
   * state for `/status`; `listInMessage: false` keeps them out of the message,
   * when the notice already says what happened to them); a completed one
   * clears a note an earlier run left.
   */
  async settle(delivery: DeliverySink, outcome: RunOutcome, notice: string | undefined, opts: { listInMessage?: boolean } = {}): Promise<void> {
    if (outcome === 'completed') {
      if (notice) await delivery.message(notice);
      await this.clearStored();
      return;
    }
    const unanswered = this.taken;
    const note =
      (outcome === 'failed' || outcome === 'stopped') && unanswered.length > 0 ? unansweredNote(this.ref.runId, outcome, unanswered, Date.now()) : undefined;
    const text = [notice, opts.listInMessage !== false && note && unansweredNotice(note)].filter((t): t is string => !!t).join('\n\n');
    if (note) this.logger.warn({ seqs: unanswered.map((m) => m.seq), outcome }, 'run ended without answering steered messages it took');
    if (text) await delivery.message(text);
    if (!note) return;
    await this.state.set(this.ref, UNANSWERED_KEY, note);
    this.stored = JSON.stringify(note);
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
