/**
 * Tool approvals, host and runner side: a request stored in the
 * conversation's `approvals` hash (written by the runner through
 * `approval-request-4.lua`), decided once by `approval-decide-4.lua` — by a
 * person among the request's deciders, or as `timeout` by the runner. The
 * first decision wins; later clicks change nothing.
 */

import type { RedisClient } from 'steerbot/plugin';
import { z } from 'zod';
import { InvalidInputError, ScriptError } from '../errors.js';
import { conversationKeys } from '../redis/keys.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';

/** Approval ids: `ap_` and 24 hex digits. */
export const APPROVAL_ID_RE = /^ap_[0-9a-f]{24}$/;

/** A stored approval request (JSON in the `approvals` hash). */
export const approvalRecordSchema = z.object({
  run: z.string(),
  call: z.string(),
  tool: z.string(),
  inputHash: z.string(),
  text: z.string(),
  deciders: z.array(z.string()),
  expiresAt: z.number(),
  status: z.enum(['pending', 'approved', 'denied', 'timeout']),
  by: z.string().optional(),
  byName: z.string().optional(),
  decidedAt: z.number().optional(),
});
export type ApprovalRecord = z.infer<typeof approvalRecordSchema>;

/** What a decision did. */
export type DecideResult =
  | { kind: 'decided'; record: ApprovalRecord }
  /** Decided before (second click, or after the timeout): nothing changed; `record` says how. */
  | { kind: 'already'; record: ApprovalRecord }
  /** The user may not decide this request: nothing changed. */
  | { kind: 'not_allowed' }
  | { kind: 'not_found' }
  /** The command's update (`update`) was seen before: nothing changed, nothing is answered. */
  | { kind: 'duplicate' };

/**
 * Records a decision of approval `id` in `conversationId`; `update`: the chat
 * command's update, deduped in the same script. Throws InvalidInputError for a bad id.
 */
export async function decideApproval(
  client: RedisClient,
  prefix: string,
  conversationId: string,
  id: string,
  d: { decision: 'approved' | 'denied' | 'timeout'; by?: string; byName?: string; update?: { key: string; dedupeTtlSeconds: number } },
): Promise<DecideResult> {
  if (!APPROVAL_ID_RE.test(id)) throw new InvalidInputError('approval id must be ap_ and 24 hex digits');
  const k = conversationKeys(prefix, conversationId);
  const r = checkReply(
    'approval-decide',
    await runScript(
      client,
      'approval-decide',
      [k.approvals, k.log, k.meta, k.dedupe(d.update?.key ?? `approval:${id}`)],
      [id, d.decision, d.by ?? '', (d.byName ?? '').slice(0, 256), d.update?.dedupeTtlSeconds ?? 0],
    ),
  );
  switch (r[0]) {
    case 'decided':
    case 'already':
      return { kind: r[0], record: approvalRecordSchema.parse(JSON.parse(String(r[1]))) };
    case 'not_allowed':
      return { kind: 'not_allowed' };
    case 'not_found':
    case 'duplicate':
      return { kind: r[0] };
    default:
      throw new ScriptError('approval-decide', `unexpected reply ${JSON.stringify(r)}`);
  }
}

/** Reads approval `id`, or undefined. */
export async function readApproval(client: RedisClient, prefix: string, conversationId: string, id: string): Promise<ApprovalRecord | undefined> {
  const raw = await client.hget(conversationKeys(prefix, conversationId).approvals, id);
  return raw === null ? undefined : approvalRecordSchema.parse(JSON.parse(raw));
}
