/**
 * The approval gate of one run attempt: asks in the chat (a message through
 * the run's delivery, naming the tool and its arguments) and waits for the
 * first decision in the conversation's `approvals` hash, or the timeout,
 * which the runner records itself (atomically: a click racing it either wins
 * or changes nothing). The wait is durable: an attempt taking the run over
 * finds the earlier attempt's request for the same call (tool and input
 * digest) and resumes that wait, re-sending the same message under the same
 * delivery key (its own, named by the approval id, so the outbox skips it); a decision
 * made while no runner was attached is found there. A decision appends
 * `approval.decided` to the record: the wait blocks on the record (XREAD, on a
 * connection of its own while it waits) and looks at the request again when
 * an entry arrives, so a click is seen at once without polling.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { blockingConnection } from '../../src/http/stream-readers.js';
import { type ApprovalRecord, decideApproval, readApproval } from '../../src/protocol/approvals.js';
import { answerQuestion, type QuestionRecord, readQuestion } from '../../src/protocol/questions.js';
import type { RunRef } from '../../src/protocol/runs.js';
import { readSeqs } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type RedisClient, runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import type { DeliverySink } from '../plugin.js';
import type { ApprovalGate, ApprovalOutcome, ApprovalRequest, QuestionOutcome, QuestionRequest } from './contract.js';
import { type EarlierRequest, toolInputHash } from './journal.js';

/** How long the approval hash lives after its last request, in seconds (7 days). */
const APPROVALS_TTL_SECONDS = 7 * 86_400;

/** Longest single blocked read while waiting, in ms: the wait looks at the request at least this often. */
const MAX_BLOCK_MS = 30_000;

/** Options of the gate. */
export interface RunApprovalsOptions {
  client: RedisClient;
  prefix: string;
  run: RunRef;
  /** The run's delivery: the request is a message of the run. */
  delivery: DeliverySink;
  /** Platform id of the user who started the run (may always decide). */
  starter: string | undefined;
  logger: Logger;
  /**
   * Approvals calls of this run already ran under (from the record, on a
   * takeover): never resumed for another call. The gate adds the ones it
   * waits on, so a set shared by an attempt's invocations covers them all.
   */
  usedApprovals?: Set<string>;
  /** Approval requests earlier attempts of the run made (from the record, on a takeover), oldest first: resumed, not asked again. */
  earlierRequests?: readonly EarlierRequest[];
}

/** Approvals of one run attempt in Redis. */
export class RunApprovals implements ApprovalGate {
  // Requests the run has waited on: a second identical call asks again.
  private readonly used: Set<string>;

  constructor(private readonly o: RunApprovalsOptions) {
    this.used = o.usedApprovals ?? new Set();
  }

  async request(req: ApprovalRequest, signal: AbortSignal): Promise<ApprovalOutcome> {
    const o = this.o;
    const inputHash = toolInputHash(req.input);
    const found = this.earlier(req.tool, inputHash);
    const earlier = found && (await readApproval(o.client, o.prefix, o.run.conversationId, found.approval));
    let id: string;
    let text: string;
    if (found && earlier) {
      [id, text] = [found.approval, earlier.text];
      o.logger.info({ approval: id, status: earlier.status }, 'resuming the wait for an approval an earlier attempt asked for');
    } else {
      id = `ap_${randomBytes(12).toString('hex')}`;
      text = req.text;
      const deciders = this.deciders(req.approvers);
      const expiresAt = Date.now() + req.timeoutMs;
      const record: ApprovalRecord = { run: o.run.runId, call: req.callId, tool: req.tool, inputHash, text, deciders, expiresAt, status: 'pending' };
      await this.store(id, record, { kind: 'approval.requested', approval: id, call: req.callId, tool: req.tool, inputHash, deciders, expiresAt });
      o.logger.info({ approval: id, tool: req.tool, deciders: deciders.length }, 'approval requested');
    }
    this.used.add(id);
    // Buttons where the channel has them; the text says what to send everywhere else. Keyed by the
    // approval id: a takeover resending it is skipped, and it never shifts the keys of the run's answer.
    await o.delivery.message(`${text}\nReply /approve ${id} or /deny ${id}.`, {
      key: id,
      buttons: [
        { label: 'Approve', command: `/approve ${id}` },
        { label: 'Deny', command: `/deny ${id}` },
      ],
    });
    return this.wait(id, signal);
  }

  async ask(req: QuestionRequest, signal: AbortSignal): Promise<QuestionOutcome> {
    const o = this.o;
    const inputHash = toolInputHash(req.input);
    const found = this.earlier(req.tool, inputHash);
    const earlier = found && (await readQuestion(o.client, o.prefix, o.run.conversationId, found.approval));
    let id: string;
    let rec: QuestionRecord;
    let askedSeq: number;
    if (found && earlier) {
      [id, rec, askedSeq] = [found.approval, earlier, found.seq];
      o.logger.info({ question: id, status: earlier.status }, 'resuming the wait for a question an earlier attempt asked');
    } else {
      id = `qu_${randomBytes(12).toString('hex')}`;
      const deciders = this.deciders(req.deciders);
      const expiresAt = Date.now() + req.timeoutMs;
      const text = questionText(req.question, req.options);
      rec = { run: o.run.runId, call: req.callId, inputHash, text, options: [...req.options], deciders, expiresAt, status: 'pending' };
      askedSeq = await this.store(id, rec, { kind: 'question.asked', question: id, call: req.callId, tool: req.tool, inputHash, deciders, expiresAt });
      o.logger.info({ question: id, options: req.options.length, deciders: deciders.length }, 'question asked');
    }
    this.used.add(id);
    // Keyed by the question id, like an approval request: a takeover resending it is skipped.
    await o.delivery.message(rec.text, { key: id, buttons: rec.options.map((label, i) => ({ label, command: `/choose ${id} ${i + 1}` })) });
    return this.waitAnswer(id, askedSeq, signal);
  }

  /** An earlier attempt's request for the same call, taken before any await: two identical calls never share one. */
  private earlier(tool: string, inputHash: string): EarlierRequest | undefined {
    const found = this.o.earlierRequests?.find((r) => r.tool === tool && r.inputHash === inputHash && !this.used.has(r.approval));
    if (found) this.used.add(found.approval);
    return found;
  }

  /** Who may decide: the user who started the run, and `others`. */
  private deciders(others: readonly string[]): string[] {
    return [...new Set([...(this.o.starter ? [this.o.starter] : []), ...others])];
  }

  /** Stores a request and appends its entry, fenced; returns the entry's seq. */
  private async store(id: string, record: ApprovalRecord | QuestionRecord, entry: Record<string, unknown>): Promise<number> {
    const o = this.o;
    const k = conversationKeys(o.prefix, o.run.conversationId);
    const full = { v: 1, at: Date.now(), run: o.run.runId, token: o.run.token, ...entry };
    const r = checkReply(
      'approval-request',
      await runScript(
        o.client,
        'approval-request',
        [k.run(o.run.runId), k.approvals, k.log, k.meta],
        [o.run.token, id, JSON.stringify(record), JSON.stringify(full), APPROVALS_TTL_SECONDS],
      ),
      o.run.runId,
    );
    return r[0] === 'requested' ? Number(r[1]) : 0;
  }

  /**
   * Waits for a question's answer: a click (recorded by the host), a message
   * one of its deciders wrote after the question (steered into the run, or
   * pending for the next one: recorded as `typed`), or the timeout. Anyone
   * else's message follows the input policy and the question keeps waiting.
   */
  private waitAnswer(id: string, askedSeq: number, signal: AbortSignal): Promise<QuestionOutcome> {
    const o = this.o;
    const k = conversationKeys(o.prefix, o.run.conversationId);
    // Messages after the question whose sender was looked at already (a wait reads each once).
    const seen = new Set<number>();
    return this.waitFor<QuestionOutcome>(signal, async () => {
      const [rec, steering, pending] = await Promise.all([
        readQuestion(o.client, o.prefix, o.run.conversationId, id),
        o.client.lrange(k.steer(o.run.runId), 0, -1),
        o.client.lrange(k.pending, 0, -1),
      ]);
      if (!rec) return { done: { kind: 'aborted' } };
      const steered = steering.map(Number).filter((seq) => seq > askedSeq);
      const typed = await this.deciderWrote(rec, [...steered, ...pending.map(Number).filter((seq) => seq > askedSeq)], seen);
      const isSteered = typed !== undefined ? steered.includes(typed) : steered.length > 0;
      if (rec.status !== 'pending') return { done: questionOutcome(rec, isSteered) };
      if (typed !== undefined || Date.now() >= rec.expiresAt) {
        // Recorded by one script: a click racing it either wins (and is the answer) or changes nothing.
        const r = await answerQuestion(o.client, o.prefix, o.run.conversationId, id, { answer: typed !== undefined ? 'typed' : 'timeout' });
        return { done: r.kind === 'answered' || r.kind === 'already' ? questionOutcome(r.record, isSteered) : { kind: 'aborted' } };
      }
      if (signal.aborted) return { done: { kind: 'aborted' } };
      return { blockMs: rec.expiresAt - Date.now() };
    });
  }

  /** The seq of the first of `seqs` (not in `seen`) a decider of `rec` wrote, or undefined; adds the ones read to `seen`. */
  private async deciderWrote(rec: QuestionRecord, seqs: readonly number[], seen: Set<number>): Promise<number | undefined> {
    const fresh = seqs.filter((seq) => !seen.has(seq));
    const entries = await readSeqs(this.o.client, conversationKeys(this.o.prefix, this.o.run.conversationId).log, fresh);
    for (const seq of fresh) seen.add(seq);
    return entries.find((e) => e.kind === 'message.received' && rec.deciders.includes(e.sender.id))?.seq;
  }

  private wait(id: string, signal: AbortSignal): Promise<ApprovalOutcome> {
    const o = this.o;
    return this.waitFor(signal, async () => {
      const rec = await readApproval(o.client, o.prefix, o.run.conversationId, id);
      if (!rec) return { done: { decision: 'denied', id } };
      if (rec.status !== 'pending') return { done: outcome(rec, id) };
      if (Date.now() >= rec.expiresAt) {
        const r = await decideApproval(o.client, o.prefix, o.run.conversationId, id, { decision: 'timeout' });
        return { done: r.kind === 'decided' || r.kind === 'already' ? outcome(r.record, id) : { decision: 'denied', id } };
      }
      if (signal.aborted) return { done: { decision: 'aborted', id } };
      return { blockMs: rec.expiresAt - Date.now() };
    });
  }

  /**
   * Looks with `look` until it is done: after each look that is not, blocks on
   * the record (at most `blockMs`) and looks again when an entry arrives. The
   * record's last entry is read with each look (one connection runs them in
   * order): whatever changed after the look is an entry after it.
   */
  private async waitFor<T>(signal: AbortSignal, look: () => Promise<{ done: T } | { blockMs: number }>): Promise<T> {
    const o = this.o;
    const log = conversationKeys(o.prefix, o.run.conversationId).log;
    let conn: RedisClient | undefined;
    const stop = () => conn?.disconnect(); // ends a blocked read at once
    signal.addEventListener('abort', stop, { once: true });
    try {
      for (;;) {
        const [tail, step] = await Promise.all([o.client.xrevrange(log, '+', '-', 'COUNT', 1), look()]);
        if ('done' in step) return step.done;
        const last = tail[0]?.[0] ?? '0-0';
        conn ??= blockingConnection(o.client);
        try {
          await conn.xread('COUNT', 1, 'BLOCK', Math.min(MAX_BLOCK_MS, Math.max(1, step.blockMs)), 'STREAMS', log, last);
        } catch (err) {
          if (!signal.aborted) throw err;
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      conn?.disconnect();
    }
  }
}

/** A question's text as shown: the question, then its options numbered (what to send where there are no buttons). */
function questionText(question: string, options: readonly string[]): string {
  return `${question}\n${options.map((opt, i) => `${i + 1}. ${opt}`).join('\n')}\nChoose one, or reply in your own words.`;
}

/** How a decided question ended (`steered`: a typed answer joins the run). */
function questionOutcome(r: QuestionRecord, steered: boolean): QuestionOutcome {
  if (r.status === 'typed') return { kind: 'typed', steered };
  if (r.status !== 'answered') return { kind: 'timeout' };
  const answer = r.answer ?? 0;
  const by = r.byName ?? r.by;
  return { kind: 'answered', answer, option: r.options[answer] ?? '', ...(by !== undefined && { by }) };
}

function outcome(r: ApprovalRecord, id: string): ApprovalOutcome {
  const decision = r.status === 'pending' ? 'denied' : r.status;
  return { decision, id, ...(r.by !== undefined && { by: r.byName ?? r.by }) };
}
