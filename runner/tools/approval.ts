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
import type { RunRef } from '../../src/protocol/runs.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type RedisClient, runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import type { DeliverySink } from '../plugin.js';
import type { ApprovalGate, ApprovalOutcome, ApprovalRequest } from './contract.js';
import { toolInputHash } from './journal.js';

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
  earlierRequests?: ReadonlyArray<{ approval: string; tool: string; inputHash: string }>;
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
    // An earlier attempt's request for the same call, taken before any await: two identical calls never share one.
    const earlierId = o.earlierRequests?.find((r) => r.tool === req.tool && r.inputHash === inputHash && !this.used.has(r.approval))?.approval;
    if (earlierId !== undefined) this.used.add(earlierId);
    const earlier = earlierId === undefined ? undefined : await readApproval(o.client, o.prefix, o.run.conversationId, earlierId);
    let id: string;
    let text: string;
    if (earlierId !== undefined && earlier) {
      [id, text] = [earlierId, earlier.text];
      o.logger.info({ approval: id, status: earlier.status }, 'resuming the wait for an approval an earlier attempt asked for');
    } else {
      id = `ap_${randomBytes(12).toString('hex')}`;
      text = req.text;
      const deciders = [...new Set([...(o.starter ? [o.starter] : []), ...req.approvers])];
      const expiresAt = Date.now() + req.timeoutMs;
      const record: ApprovalRecord = { run: o.run.runId, call: req.callId, tool: req.tool, inputHash, text, deciders, expiresAt, status: 'pending' };
      const entry = {
        v: 1,
        kind: 'approval.requested',
        at: Date.now(),
        run: o.run.runId,
        token: o.run.token,
        approval: id,
        call: req.callId,
        tool: req.tool,
        inputHash,
        deciders,
        expiresAt,
      };
      const k = conversationKeys(o.prefix, o.run.conversationId);
      checkReply(
        'approval-request',
        await runScript(
          o.client,
          'approval-request',
          [k.run(o.run.runId), k.approvals, k.log, k.meta],
          [o.run.token, id, JSON.stringify(record), JSON.stringify(entry), APPROVALS_TTL_SECONDS],
        ),
        o.run.runId,
      );
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

  private async wait(id: string, signal: AbortSignal): Promise<ApprovalOutcome> {
    const o = this.o;
    const log = conversationKeys(o.prefix, o.run.conversationId).log;
    let conn: RedisClient | undefined;
    const stop = () => conn?.disconnect(); // ends a blocked read at once
    signal.addEventListener('abort', stop, { once: true });
    try {
      for (;;) {
        // The record's last entry, then the request, sent together (one connection runs them in order): a decision
        // made after the first read is an entry after `last`.
        const [tail, rec] = await Promise.all([o.client.xrevrange(log, '+', '-', 'COUNT', 1), readApproval(o.client, o.prefix, o.run.conversationId, id)]);
        const last = tail[0]?.[0] ?? '0-0';
        if (!rec) return { decision: 'denied', id };
        if (rec.status !== 'pending') return outcome(rec, id);
        if (Date.now() >= rec.expiresAt) {
          const r = await decideApproval(o.client, o.prefix, o.run.conversationId, id, { decision: 'timeout' });
          if (r.kind === 'decided' || r.kind === 'already') return outcome(r.record, id);
          return { decision: 'denied', id };
        }
        if (signal.aborted) return { decision: 'aborted', id };
        conn ??= blockingConnection(o.client);
        const ms = Math.min(MAX_BLOCK_MS, Math.max(1, rec.expiresAt - Date.now()));
        try {
          await conn.xread('COUNT', 1, 'BLOCK', ms, 'STREAMS', log, last);
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

function outcome(r: ApprovalRecord, id: string): ApprovalOutcome {
  const decision = r.status === 'pending' ? 'denied' : r.status;
  return { decision, id, ...(r.by !== undefined && { by: r.byName ?? r.by }) };
}
