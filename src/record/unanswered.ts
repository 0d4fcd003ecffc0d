/**
 * Messages a run took and then did not answer (it failed, after its
 * follow-ups, or was stopped first), as conversation state keeps them:
 * written by the runner when such a run ends, shown by the host's
 * `/status`, cleared when a later run completes. One schema and one wording
 * for both sides.
 */
import { z } from 'zod';
import { conversationKeys } from '../redis/keys.js';
import type { RedisClient } from '../scripts/index.js';

/** State key of the note (runner namespace). */
export const UNANSWERED_KEY = 'runner.unanswered';

/** Most messages a note lists; the rest are counted. */
export const MAX_UNANSWERED_LISTED = 5;
/** Longest quote of one message, in characters. */
const MAX_QUOTE_CHARS = 80;

const noteSchema = z.object({
  schema_version: z.literal(1),
  run: z.string(),
  outcome: z.enum(['failed', 'stopped']),
  /** ms since the epoch. */
  at: z.number().int().nonnegative(),
  /** Quotes of the first `MAX_UNANSWERED_LISTED` messages, oldest first. */
  messages: z.array(z.object({ seq: z.number().int().positive(), text: z.string() })).min(1),
  /** How many messages were left unanswered in all (at least `messages.length`). */
  total: z.number().int().positive(),
});

/** The note as stored. */
export type UnansweredNote = z.infer<typeof noteSchema>;

/** The note for `messages` (oldest first; must not be empty) left by `run`. */
export function unansweredNote(
  run: string,
  outcome: UnansweredNote['outcome'],
  messages: ReadonlyArray<{ seq: number; text: string }>,
  at: number,
): UnansweredNote {
  return {
    schema_version: 1,
    run,
    outcome,
    at,
    messages: messages.slice(0, MAX_UNANSWERED_LISTED).map((m) => ({ seq: m.seq, text: quote(m.text) })),
    total: messages.length,
  };
}

/** A stored note; undefined when absent or unreadable (a note is advice, never a reason to fail). */
export function parseUnanswered(raw: string | null | undefined): UnansweredNote | undefined {
  if (!raw) return undefined;
  try {
    const parsed = noteSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Reads a conversation's note (one HGET). */
export async function readUnanswered(client: RedisClient, prefix: string, conversationId: string): Promise<UnansweredNote | undefined> {
  return parseUnanswered(await client.hget(conversationKeys(prefix, conversationId).state, UNANSWERED_KEY));
}

/** The quoted messages of a note, e.g. `“also this”, “and that” and 2 more`. */
export function listUnanswered(note: Pick<UnansweredNote, 'messages' | 'total'>): string {
  const quoted = note.messages.map((m) => `“${m.text}”`).join(', ');
  const more = note.total - note.messages.length;
  return more > 0 ? `${quoted} and ${more} more` : quoted;
}

/**
 * The line appended to the message the user gets when the run failed or was
 * stopped; `tries`: failed runs in a row on these messages (follow-ups
 * included), said when more than one.
 */
export function unansweredNotice(note: UnansweredNote, tries = 1): string {
  const what = note.outcome === 'failed' ? (tries > 1 ? `failed ${tries} times in a row` : 'failed') : 'was stopped';
  const these = note.total === 1 ? 'this message' : 'these messages';
  return `The run ${what} before answering ${these}: ${listUnanswered(note)}. Please send again what still needs an answer.`;
}

/** The `/status` line of a note. */
export function unansweredStatusLine(note: UnansweredNote): string {
  return `Not answered (the run ${note.outcome === 'failed' ? 'failed' : 'was stopped'}): ${listUnanswered(note)}`;
}

function quote(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim() || '[empty message]';
  return flat.length <= MAX_QUOTE_CHARS ? flat : `${flat.slice(0, MAX_QUOTE_CHARS - 1)}…`;
}
