/**
 * `/approve <id>` and `/deny <id>`: a person decides a tool call waiting for
 * approval (the runner asked in the chat, naming the id). `/choose <id> <n>`:
 * a click on option `n` of a question the agent asked (`ask_user`), same rules. Only the request's
 * deciders (the user who started the run, configured approvers) may decide;
 * anyone else is told so and nothing changes. The first decision wins: a
 * second one (or one after the timeout) changes nothing and says how it was
 * decided. A redelivered command update gets no second reply.
 */

import { APPROVAL_ID_RE, type ApprovalRecord, decideApproval } from '../../src/protocol/approvals.js';
import type { CommandSource, Dispatch } from '../../src/protocol/dispatch.js';
import { answerQuestion, MAX_QUESTION_OPTIONS, QUESTION_ID_RE, type QuestionRecord } from '../../src/protocol/questions.js';
import type { CommandTable } from './table.js';

/** What the command needs (the host's dispatch: its Redis, prefix and dedupe TTL). */
interface Deps {
  dispatch: Dispatch;
}

/** Who decides, and the command's update (deduped in the same script as the decision). */
function decider(deps: Deps, source: CommandSource) {
  return {
    by: source.sender.id,
    ...(source.sender.name !== undefined && { byName: source.sender.name }),
    update: { key: source.updateKey, dedupeTtlSeconds: deps.dispatch.options.dedupeTtlSeconds },
  };
}

const STATUS: Record<ApprovalRecord['status'], string> = { pending: 'pending', approved: 'approved', denied: 'denied', timeout: 'timed out (denied)' };

/** `/approve <id>` and `/deny <id>`: who may decide is the request's rule (its deciders), not the chat's admins. */
export const approvalCommands = {
  approve: { run: (deps, args, source) => approvalCommand(deps, 'approved', args, source) },
  deny: { run: (deps, args, source) => approvalCommand(deps, 'denied', args, source) },
  choose: { run: (deps, args, source) => chooseCommand(deps, args, source) },
} satisfies CommandTable;

const QUESTION_STATUS: Record<Exclude<QuestionRecord['status'], 'answered'>, string> = {
  pending: 'pending',
  timeout: 'nobody answered in time',
  typed: 'answered by a message',
};

/** Runs `/choose <question id> <option number>` for `source` (a button click, or typed). */
export async function chooseCommand(deps: Deps, args: string, source: CommandSource): Promise<{ reply: string; duplicate: boolean; edit?: string }> {
  const o = deps.dispatch.options;
  const [id = '', n = ''] = args.split(/\s+/);
  const option = /^[1-9]$/.test(n) ? Number(n) : 0;
  if (!QUESTION_ID_RE.test(id) || option < 1 || option > MAX_QUESTION_OPTIONS)
    return { reply: `Usage: /choose <question id> <option number> (both are in the question; options 1 to ${MAX_QUESTION_OPTIONS}).`, duplicate: false };
  const r = await answerQuestion(o.client, o.prefix, source.conversationId, id, { answer: option - 1, ...decider(deps, source) });
  switch (r.kind) {
    case 'duplicate':
      return { reply: '', duplicate: true };
    case 'answered': {
      const chosen = r.record.options[option - 1] ?? '';
      // The question as shown, with the choice and who made it in place of the buttons.
      return { reply: `Chosen: ${chosen}`, duplicate: false, edit: `${r.record.text}\n\n${chosen} (chosen by ${r.record.byName ?? r.record.by ?? ''}).` };
    }
    case 'already': {
      const rec = r.record;
      const how =
        rec.status === 'answered'
          ? `${rec.options[rec.answer ?? 0]} was chosen${(rec.byName ?? rec.by) ? ` by ${rec.byName ?? rec.by}` : ''}`
          : QUESTION_STATUS[rec.status];
      return { reply: `Already answered: ${how}. Nothing changed.`, duplicate: false };
    }
    case 'not_allowed':
      return { reply: 'Only the person the question was asked of may choose. Nothing changed.', duplicate: false };
    case 'not_found':
      return { reply: `No question ${id} with an option ${option} in this conversation.`, duplicate: false };
  }
}

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
  const r = await decideApproval(o.client, o.prefix, source.conversationId, id, { decision, ...decider(deps, source) });
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
