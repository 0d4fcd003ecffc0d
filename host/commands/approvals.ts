/**
 * `/approve <id>` and `/deny <id>`: a person decides a tool call waiting for
 * approval (the runner asked in the chat, naming the id). Only the request's
 * deciders (the user who started the run, configured approvers) may decide;
 * anyone else is told so and nothing changes. The first decision wins: a
 * second one (or one after the timeout) changes nothing and says how it was
 * decided. A redelivered command update gets no second reply.
 */

import { APPROVAL_ID_RE, type ApprovalRecord, decideApproval } from '../../src/protocol/approvals.js';
import type { CommandSource, Dispatch } from '../../src/protocol/dispatch.js';
import type { CommandTable } from './table.js';

/** What the command needs (the host's dispatch: its Redis, prefix and dedupe TTL). */
interface Deps {
  dispatch: Dispatch;
}

const STATUS: Record<ApprovalRecord['status'], string> = { pending: 'pending', approved: 'approved', denied: 'denied', timeout: 'timed out (denied)' };

/** `/approve <id>` and `/deny <id>`: who may decide is the request's rule (its deciders), not the chat's admins. */
export const approvalCommands = {
  approve: { run: (deps, args, source) => approvalCommand(deps, 'approved', args, source) },
  deny: { run: (deps, args, source) => approvalCommand(deps, 'denied', args, source) },
} satisfies CommandTable;

/** Runs `/approve` or `/deny` for `source`. */
export async function approvalCommand(
  deps: Deps,
  decision: 'approved' | 'denied',
  args: string,
  source: CommandSource,
): Promise<{ reply: string; duplicate: boolean; edit?: string }> {
  const o = deps.dispatch.options;
  const id = args.split(/\s+/)[0] ?? '';
  if (!APPROVAL_ID_RE.test(id))
    return { reply: `Usage: /${decision === 'approved' ? 'approve' : 'deny'} <approval id> (the id is in the approval request).`, duplicate: false };
  // The decision and the command's dedupe key are one script: a redelivery is silent, and never finds the
  // decision made without its update remembered (or the other way round).
  const r = await decideApproval(o.client, o.prefix, source.conversationId, id, {
    decision,
    by: source.sender.id,
    ...(source.sender.name !== undefined && { byName: source.sender.name }),
    update: { key: source.updateKey, dedupeTtlSeconds: o.dedupeTtlSeconds },
  });
  switch (r.kind) {
    case 'duplicate':
      return { reply: '', duplicate: true };
    case 'decided': {
      const who = r.record.byName ?? r.record.by ?? '';
      // The request as shown, with the decision and who made it in place of the buttons.
      const edit = `${r.record.text}\n\n${decision === 'approved' ? 'Approved' : 'Denied'} by ${who}.`;
      return { reply: decision === 'approved' ? `Approved: ${r.record.tool} will run.` : `Denied: ${r.record.tool} will not run.`, duplicate: false, edit };
    }
    case 'already':
      return {
        reply: `Already decided: ${STATUS[r.record.status]}${(r.record.byName ?? r.record.by) ? ` by ${r.record.byName ?? r.record.by}` : ''}. Nothing changed.`,
        duplicate: false,
      };
    case 'not_allowed':
      return { reply: 'You are not allowed to decide this request. Nothing changed.', duplicate: false };
    case 'not_found':
      return { reply: `No approval request ${id} in this conversation.`, duplicate: false };
  }
}
