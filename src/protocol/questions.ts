/**
 * Questions a run asks the people in the chat (the agent's `ask_user`), host
 * and runner side: a request stored in the conversation's `approvals` hash
 * beside tool approvals (written by the runner through
 * `approval-request-4.lua`), answered once by `question-answer-4.lua` — by a
 * click of one of its deciders, or as `timeout` by the runner. The first
 * answer wins; later clicks change nothing.
 */

import type { RedisClient } from 'steerbot/plugin';
import { z } from 'zod';
import { InvalidInputError, ScriptError } from '../errors.js';
import { conversationKeys } from '../redis/keys.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';

/** Question ids: `qu_` and 24 hex digits. */
export const QUESTION_ID_RE = /^qu_[0-9a-f]{24}$/;

/** Most options of one question (Discord shows five buttons in a row). */
export const MAX_QUESTION_OPTIONS = 5;

/** A stored question (JSON in the `approvals` hash). */
export const questionRecordSchema = z.object({
  run: z.string(),
  call: z.string(),
  inputHash: z.string(),
  /** The question as shown, with its options numbered. */
  text: z.string(),
  options: z.array(z.string()).min(2).max(MAX_QUESTION_OPTIONS),
  deciders: z.array(z.string()),
  expiresAt: z.number(),
  /** `typed`: someone wrote a message instead of choosing (recorded by the runner). */
  status: z.enum(['pending', 'answered', 'timeout', 'typed']),
  /** The chosen option, from 0. */
  answer: z.number().int().nonnegative().optional(),
  by: z.string().optional(),
  byName: z.string().optional(),
  decidedAt: z.number().optional(),
});
export type QuestionRecord = z.infer<typeof questionRecordSchema>;

/** What an answer did (as a decision of an approval: `decided` the first time, `already` after). */
export type AnswerResult =
  | { kind: 'answered'; record: QuestionRecord }
  | { kind: 'already'; record: QuestionRecord }
  | { kind: 'not_allowed' }
  /** No such question, or no such option. */
  | { kind: 'not_found' }
  | { kind: 'duplicate' };

/**
 * Records the answer to question `id` in `conversationId`: option `answer`
 * (from 0) chosen by `by`; or, by the runner, `timeout` or `typed`. `update`: the click's update,
 * deduped in the same script. Throws InvalidInputError for a bad id or option.
 */
export async function answerQuestion(
  client: RedisClient,
  prefix: string,
  conversationId: string,
  id: string,
  a: { answer: number | 'timeout' | 'typed'; by?: string; byName?: string; update?: { key: string; dedupeTtlSeconds: number } },
): Promise<AnswerResult> {
  if (!QUESTION_ID_RE.test(id)) throw new InvalidInputError('question id must be qu_ and 24 hex digits');
  if (typeof a.answer === 'number' && !(Number.isInteger(a.answer) && a.answer >= 0 && a.answer < MAX_QUESTION_OPTIONS))
    throw new InvalidInputError(`answer must be an option number from 1 to ${MAX_QUESTION_OPTIONS}`);
  const k = conversationKeys(prefix, conversationId);
  const r = checkReply(
    'question-answer',
    await runScript(
      client,
      'question-answer',
      [k.approvals, k.log, k.meta, k.dedupe(a.update?.key ?? `question:${id}`)],
      [id, String(a.answer), a.by ?? '', (a.byName ?? '').slice(0, 256), a.update?.dedupeTtlSeconds ?? 0],
    ),
  );
  switch (r[0]) {
    case 'answered':
    case 'already':
      return { kind: r[0], record: questionRecordSchema.parse(JSON.parse(String(r[1]))) };
    case 'not_allowed':
    case 'not_found':
    case 'duplicate':
      return { kind: r[0] };
    default:
      throw new ScriptError('question-answer', `unexpected reply ${JSON.stringify(r)}`);
  }
}

/** Reads question `id`, or undefined (also when `id` names an approval). */
export async function readQuestion(client: RedisClient, prefix: string, conversationId: string, id: string): Promise<QuestionRecord | undefined> {
  const raw = await client.hget(conversationKeys(prefix, conversationId).approvals, id);
  return raw === null ? undefined : questionRecordSchema.parse(JSON.parse(raw));
}
